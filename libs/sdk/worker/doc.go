// Package worker is the reconciler runtime: it registers a reconciler in the
// live-reconciler registry, consumes its work items from JetStream and runs
// each under the store's reconcile lease.
//
// For every work item (stream NO8S_RECONCILE, subjects
// no8s.reconcile.<Type>.<version>, one durable pull consumer per reconciler
// shared by its replicas, AckWait = the lease): AcquireLease (holder
// <name>/<replica>) returns the fresh resource and its type's policy; the
// reconciler (normally an sdk.Engine) runs under the policy's timeout while
// the runtime sends InProgress and RenewLease every lease/3; the engine
// saves the outcome with CompleteReconcile, presenting the lease epoch; then
// one function, settle, maps the outcome onto the broker:
//
//	outcome                                  broker        why
//	success, requeue-after, error (saved)    Ack           the scheduler re-dispatches (requeue_at, backoff)
//	terminal error (saved)                   Term          not retried until the spec changes or a trigger
//	lease held by another worker             NakWithDelay  comes back once that attempt can be over
//	store unreachable (acquire)              NakWithDelay  1 s, then 2 s: prompt once the database returns
//	store unreachable (save, after retries)  NakWithDelay  likewise; the save itself is retried every
//	                                                       second for up to a lease first (saveRetry)
//	acquire failed otherwise                 NakWithDelay  growing with the delivery count
//	stale dispatch, resource gone, ignored   Term          the item is obsolete
//	save refused for a stale epoch           Term          a newer attempt owns the resource
//	undecodable item                         Term          it can never succeed
//	fetched but not started at shutdown      Nak           another replica takes it now
//	still running when shutdown gives up     Nak           likewise, once the lease expires
//	running                                  InProgress    every lease/3, with RenewLease
//
// The keepalive stops at the per-reconcile timeout: an attempt stuck past it
// loses its lease, the item is redelivered to another worker, and the stuck
// attempt's late write is refused for its stale epoch.
//
// The worker registers, and fetches work, only while the store's worker
// address answers (checked every second, WithLinkCheck): it waits for it at
// start, and stops refreshing its registration when it stops answering
// (the registration lapses after the registry TTL, 15 s), so that admission
// refuses creates of its types instead of accepting work nobody can do,
// while a store restart shorter than that refuses nothing. The change is logged once (WARN, then INFO when the address
// answers again) and /readyz names the address meanwhile.
//
// Cancelling Run's context (SIGTERM) stops fetching, lets in-flight attempts
// finish within the shutdown grace, then interrupts them (cause
// ErrInterrupted of the SDK's runtime contract: they save a requeue, not a failure) and naks whatever
// still has not finished.
//
// Each attempt's steps get the control plane's REST API client
// (Request.API, WithAPI) for the resources the reconciler manages: Main
// builds it from EnvAPIURL, as the reconciler with identity.EnvDir and an
// https URL, else with EnvToken (NewAPIClient).
//
// Worker.Handler serves /healthz and /readyz for the binary to mount; Main
// wires everything from environment variables for a one-line main, and
// serves the worker's Prometheus metrics (WithMetrics) at /metrics beside
// the probes.
//
// WithTracing traces the attempts: an "attempt" span continuing the trace
// the work item's traceparent header names (the scheduler's dispatch), a
// span per step and per action plugin call, and the attempt's store calls
// inside it. Build the Tracing with otlp.Start (module
// github.com/no8s/no8s/libs/platform/tracing/otlp) from the OTEL_* environment
// and pass it to RunMain; Main, which takes no options, traces nothing.
package worker
