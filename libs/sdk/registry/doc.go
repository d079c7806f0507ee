// Package registry is the live-reconciler registry: the JetStream KV bucket
// NO8S_RECONCILERS in which every worker replica announces its reconciler
// and the types it serves (docs/design/reconcile.md).
//
// Keys:
//
//	type.<Type>.<version>    = <reconciler name>   one reconciler per type
//	replica.<name>.<replica> = Replica as JSON      one per running replica
//
// A type key is claimed with KV Create, so a second reconciler for the same
// type is refused (ErrTypeTaken) while replicas of the same reconciler share
// it. Every replica refreshes its keys every HeartbeatInterval; the bucket's
// TTL drops the keys of a dead replica within TTL. Readers (admission's
// live-reconciler rule, GET /api/v1/reconcilers) use Holder and Live.
package registry
