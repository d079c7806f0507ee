package authz

import (
	"slices"
	"strings"

	"github.com/no8s/no8s/libs/api/subjects"
	"github.com/no8s/no8s/libs/platform/identity"
)

// NATSPermissions are what one NATS user may publish and subscribe to: the
// permissions of the user JWT issued with an identity's credentials
// (identityca). NATS refuses everything else with a permissions violation.
type NATSPermissions struct {
	// Publish are the subjects the user may publish on, JetStream API
	// requests included ($JS.API.…): that is how a stream is created,
	// changed, purged or deleted, and a consumer made.
	Publish []string
	// Subscribe are the subjects the user may subscribe to.
	Subscribe []string
	// Respond lets the user publish one reply to each request it receives
	// on a subject it may subscribe to (the gateway answering input
	// requests).
	Respond bool
}

// NATS returns the NATS permissions of id: the NATS half of the policy, as
// Policy is the gRPC half. Every user reads replies under its own inbox
// prefix (identity.NATSInboxPrefix) and may ask for JetStream's account
// information (readiness checks). Beyond that:
//
//   - the store publishes events and owns the event stream (it alone may
//     create, change, purge or delete it); it creates the reconciler
//     registry's bucket and reads it;
//   - admission reads the registry;
//   - the gateway reads the event stream (watch) and the registry (the
//     reconcilers endpoint), owns the input streams
//     and the idempotency keys' bucket, takes input requests and answers
//     them, consumes the input queue, writes outcomes and dead letters; it
//     owns the audit stream and publishes audit records (it may not purge
//     or delete that stream, nor read it through consumers: an audit
//     reader is a NATS admin);
//   - the scheduler reads the event stream and the registry, owns the work
//     queue and publishes work items;
//   - a reconciler consumes the work queue through its own consumer (named
//     after it; it may list and delete others', to replace the consumer of
//     a reconciler that no longer serves its types), writes the registry
//     keys of the types its credential claims and of its own replicas, and
//     reads the registry; registry-sync does the same as the reconciler
//     registry-sync of its built-in types;
//   - a publisher publishes input requests and queue messages and reads
//     outcomes; a reader reads the event stream;
//   - a NATS admin, an operator's short-lived break-glass user, may do
//     anything.
//
// Nobody else may create, change, purge or delete a stream.
func NATS(id identity.ID) NATSPermissions {
	p := NATSPermissions{
		Publish:   []string{jsAPI("INFO")},
		Subscribe: []string{identity.NATSInboxPrefix(id) + ".>"},
	}
	registry := subjects.KVStream(subjects.RegistryBucket)
	switch {
	case id.Is(identity.Service, identity.Store):
		p.add(streamOwner(subjects.EventsStream, true, true))
		p.add(streamOwner(registry, true, false))
		p.Publish = append(p.Publish, subjects.EventsAll, subjects.WakeSubject)
		p.Subscribe = append(p.Subscribe, subjects.WakeSubject)
	case id.Is(identity.Service, identity.Admission):
		p.add(streamReader(registry, true))
	case id.Is(identity.Service, identity.Gateway):
		p.add(streamReader(subjects.EventsStream, true))
		p.add(streamReader(registry, true))
		for _, s := range []string{subjects.InputStream, subjects.InputOutcomesStream, subjects.InputDeadStream, subjects.KVStream(subjects.InputKeysBucket)} {
			p.add(streamOwner(s, true, false))
		}
		p.add(durableConsumer(subjects.InputStream, subjects.InputConsumer))
		p.add(streamOwner(subjects.AuditStream, false, false))
		p.Publish = append(p.Publish, subjects.InputOutcomesAll, subjects.InputDead, subjects.KVKey(subjects.InputKeysBucket, ">"), subjects.AuditAll)
		p.Subscribe = append(p.Subscribe, subjects.InputRequestApply, subjects.InputRequestDelete)
		p.Respond = true
	case id.Is(identity.Service, identity.Scheduler):
		p.add(streamReader(subjects.EventsStream, true))
		p.add(streamOwner(subjects.ReconcileStream, false, false))
		p.add(streamReader(registry, true))
		p.Publish = append(p.Publish, subjects.ReconcileAll)
	case id.Kind == identity.Reconciler || id.Is(identity.Service, identity.RegistrySync):
		rec, _ := AtTheDoor(id)
		p.add(streamReader(registry, true))
		p.add(durableConsumer(subjects.ReconcileStream, rec.Name))
		// Listing and deleting others' consumers: a reconciler removes the
		// consumer of one that no longer serves its types (the work queue
		// takes one consumer per subject). Their items stay in the stream.
		p.Publish = append(p.Publish, jsAPI("STREAM.INFO", subjects.ReconcileStream), jsAPI("CONSUMER.LIST", subjects.ReconcileStream),
			jsAPI("CONSUMER.NAMES", subjects.ReconcileStream), jsAPI("CONSUMER.DELETE", subjects.ReconcileStream, "*"))
		for _, t := range rec.Types {
			name, version, _ := strings.Cut(t, "/")
			p.Publish = append(p.Publish, subjects.KVKey(subjects.RegistryBucket, subjects.TypeKey(name, version)))
		}
		p.Publish = append(p.Publish, subjects.KVKey(subjects.RegistryBucket, subjects.ReplicaKey(rec.Name, ">")))
	case id.Kind == identity.Publisher:
		p.Publish = append(p.Publish, subjects.InputRequestApply, subjects.InputRequestDelete, subjects.InputQueueAll)
		p.add(streamReader(subjects.InputOutcomesStream, false))
		p.Subscribe = append(p.Subscribe, subjects.InputOutcomesAll)
	case id.Kind == identity.Reader:
		p.add(streamReader(subjects.EventsStream, false))
		p.Subscribe = append(p.Subscribe, subjects.EventsAll)
	case id.Kind == identity.NATSAdmin:
		p.Publish, p.Subscribe, p.Respond = []string{">"}, []string{">"}, true
	}
	return p
}

// add grants q's subjects too.
func (p *NATSPermissions) add(q NATSPermissions) {
	p.Publish = append(p.Publish, q.Publish...)
	p.Subscribe = append(p.Subscribe, q.Subscribe...)
}

// jsAPI is the JetStream API subject of verb on the tokens args.
func jsAPI(verb string, args ...string) string {
	return strings.Join(append([]string{"$JS.API." + verb}, args...), ".")
}

// streamReader may read stream: its information, single messages, and
// consumers of its own (streamConsumers).
func streamReader(stream string, deleteConsumers bool) NATSPermissions {
	p := streamInfo(stream)
	p.add(streamConsumers(stream, deleteConsumers))
	return p
}

// streamInfo may read stream's information and single messages.
func streamInfo(stream string) NATSPermissions {
	return NATSPermissions{Publish: []string{
		jsAPI("STREAM.INFO", stream),
		jsAPI("STREAM.MSG.GET", stream),
		jsAPI("DIRECT.GET", stream),
		jsAPI("DIRECT.GET", stream, ">"),
	}}
}

// streamConsumers may make consumers of stream (ephemeral or ordered, under
// names nobody else learns: it may not list the stream's consumers), read
// from them, acknowledge and answer flow control. deleteConsumers lets it
// remove the consumers it made (services tidying up; a reader's expire when
// unused).
func streamConsumers(stream string, deleteConsumers bool) NATSPermissions {
	p := NATSPermissions{Publish: []string{
		jsAPI("CONSUMER.CREATE", stream),
		jsAPI("CONSUMER.CREATE", stream, ">"),
		jsAPI("CONSUMER.INFO", stream, "*"),
		jsAPI("CONSUMER.MSG.NEXT", stream, "*"),
		"$JS.ACK." + stream + ".>",
		"$JS.FC." + stream + ".>",
	}}
	if deleteConsumers {
		p.Publish = append(p.Publish, jsAPI("CONSUMER.DELETE", stream, "*"))
	}
	return p
}

// streamOwner may create, change and read stream and list its consumers;
// consume adds consumers of its own (streamConsumers); destroy adds purging
// and deleting it (the event stream's rebuild). The gateway owns the input
// streams (consuming them) and the audit stream (neither consuming nor
// destroying it: what it wrote there, it cannot take back).
func streamOwner(stream string, consume, destroy bool) NATSPermissions {
	p := streamInfo(stream)
	if consume {
		p.add(streamConsumers(stream, true))
	}
	p.Publish = append(p.Publish,
		jsAPI("STREAM.CREATE", stream),
		jsAPI("STREAM.UPDATE", stream),
		jsAPI("CONSUMER.LIST", stream),
		jsAPI("CONSUMER.NAMES", stream))
	if destroy {
		p.Publish = append(p.Publish, jsAPI("STREAM.PURGE", stream), jsAPI("STREAM.DELETE", stream))
	}
	return p
}

// durableConsumer may make, read from and acknowledge the durable consumer
// name of stream, and no other consumer of it.
func durableConsumer(stream, name string) NATSPermissions {
	return NATSPermissions{Publish: []string{
		jsAPI("CONSUMER.CREATE", stream, name),
		jsAPI("CONSUMER.CREATE", stream, name, ">"),
		jsAPI("CONSUMER.DURABLE.CREATE", stream, name),
		jsAPI("CONSUMER.INFO", stream, name),
		jsAPI("CONSUMER.DELETE", stream, name),
		jsAPI("CONSUMER.MSG.NEXT", stream, name),
		"$JS.ACK." + stream + "." + name + ".>",
		"$JS.FC." + stream + "." + name + ".>",
	}}
}

// NATSMatch reports whether the NATS subject pattern (with the wildcards *
// for one token and > for the rest) matches subject, a subject or a
// pattern itself (a pattern matches a narrower one: no8s.> matches
// no8s.events.>).
func NATSMatch(pattern, subject string) bool {
	pt, st := strings.Split(pattern, "."), strings.Split(subject, ".")
	for i, p := range pt {
		switch {
		case p == ">":
			return len(st) > i
		case i >= len(st):
			return false
		case p == "*" && st[i] != ">":
		case p != st[i]:
			return false
		}
	}
	return len(pt) == len(st)
}

// MayPublish reports whether p lets its user publish on subject.
func (p NATSPermissions) MayPublish(subject string) bool {
	return slices.ContainsFunc(p.Publish, func(a string) bool { return NATSMatch(a, subject) })
}

// MaySubscribe reports whether p lets its user subscribe to subject.
func (p NATSPermissions) MaySubscribe(subject string) bool {
	return slices.ContainsFunc(p.Subscribe, func(a string) bool { return NATSMatch(a, subject) })
}
