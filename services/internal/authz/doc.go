package authz

import (
	"fmt"
	"slices"
	"strings"

	"github.com/no8s/no8s/libs/api/fence"
	"github.com/no8s/no8s/libs/api/subjects"
	"github.com/no8s/no8s/libs/platform/identity"
)

// Table markers: the security guide holds the generated tables between
// them (make generate writes them, make generate-check keeps them current).
const (
	TableBegin     = "<!-- BEGIN generated: who may call each gRPC method (make generate) -->"
	RESTTableBegin = "<!-- BEGIN generated: reserved keys and REST service rights (make generate) -->"
	NATSTableBegin = "<!-- BEGIN generated: NATS permissions (make generate) -->"
	TableEnd       = "<!-- END generated -->"
)

// Table renders the policy as the security guide's Markdown table, one row
// per method, ordered by service and method.
func Table() string {
	p := Policy()
	methods := make([]string, 0, len(p))
	for m := range p {
		methods = append(methods, m)
	}
	slices.Sort(methods)
	var b strings.Builder
	b.WriteString("| service | method | who may call it | what for |\n|---|---|---|---|\n")
	for _, m := range methods {
		svc, name, _ := strings.Cut(strings.TrimPrefix(m, "/"), "/")
		r := p[m]
		fmt.Fprintf(&b, "| `%s` | `%s` | %s | %s |\n", svc, name, r.Callers(), r.Why)
	}
	return b.String()
}

// RESTTable renders the REST rules as the security guide's Markdown
// table: the fence headers, then one row per reserved key prefix and kind
// (Reserved).
func RESTTable() string {
	var b strings.Builder
	b.WriteString("| what | on | who may write it | why |\n|---|---|---|---|\n")
	fmt.Fprintf(&b, "| `%s`, `%s` | request headers | `%s/%s`, `%s/%s` | a leader's fenced writes (registry-sync's, the garbage collector's): the store refuses an epoch that is not the current one |\n",
		fence.HeaderLease, fence.HeaderEpoch, identity.Service, identity.RegistrySync, identity.Service, identity.Scheduler)
	for _, k := range Reserved() {
		key := k.Prefix + "*"
		if k.Exact {
			key = k.Prefix
		}
		if k.Own {
			key = k.Prefix + "<name>"
		}
		kinds := make([]string, len(k.Kinds))
		for i, kind := range k.Kinds {
			kinds[i] = string(kind) + "s"
		}
		writers := strings.Split(k.Writers(key), ", ")
		fmt.Fprintf(&b, "| `%s` | %s | `%s` | %s |\n", key, strings.Join(kinds, ", "), strings.Join(writers, "`, `"), k.Why)
	}
	return b.String()
}

// NATSTable renders the NATS policy as the security guide's Markdown
// tables: who may publish and subscribe on each subject family
// (subjects.Families, for its example subject), then who may create,
// change, purge, delete and read each stream. The reconciler column is the
// reconciler example serving Example/v1: on the families per type or per
// reconciler it shows what a reconciler may do on its own.
func NATSTable() string {
	ids := NATSSamples()
	who := func(ok func(NATSPermissions) bool) string {
		var out []string
		for _, id := range ids {
			if ok(NATS(id)) {
				out = append(out, "`"+id.String()+"`")
			}
		}
		if len(out) == 0 {
			return "nobody"
		}
		return strings.Join(out, ", ")
	}
	var b strings.Builder
	b.WriteString("| subjects | pattern | who may publish | who may subscribe |\n|---|---|---|---|\n")
	for _, f := range subjects.Families() {
		fmt.Fprintf(&b, "| %s | `%s` | %s | %s |\n", f.Name, f.Pattern,
			who(func(p NATSPermissions) bool { return p.MayPublish(f.Example) }),
			who(func(p NATSPermissions) bool { return p.MaySubscribe(f.Example) }))
	}
	b.WriteString("\n| stream | who may create or change it | who may purge or delete it | who may read it (information, messages, consumers of its own) |\n|---|---|---|---|\n")
	for _, s := range subjects.Streams() {
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", s,
			who(func(p NATSPermissions) bool {
				return p.MayPublish(jsAPI("STREAM.CREATE", s)) && p.MayPublish(jsAPI("STREAM.UPDATE", s))
			}),
			who(func(p NATSPermissions) bool {
				return p.MayPublish(jsAPI("STREAM.PURGE", s)) && p.MayPublish(jsAPI("STREAM.DELETE", s))
			}),
			who(func(p NATSPermissions) bool { return p.MayPublish(jsAPI("STREAM.INFO", s)) }))
	}
	return b.String()
}

// NATSSamples are one identity of each kind the NATS policy tells apart,
// as its table and tests show them: the services, the reconciler example
// serving Example/v1, a publisher and a reader.
func NATSSamples() []identity.ID {
	ids := make([]identity.ID, 0, 8)
	for _, s := range identity.Services() {
		ids = append(ids, identity.ServiceID(s))
	}
	return append(ids,
		identity.ID{Kind: identity.Reconciler, Name: subjects.ExampleReconciler, Types: []string{subjects.ExampleType + "/" + subjects.ExampleVersion}},
		identity.ID{Kind: identity.Publisher, Name: "publisher"},
		identity.ID{Kind: identity.Reader, Name: "reader"})
}

// ReplaceTable returns doc with the text after TableBegin, RESTTableBegin
// and NATSTableBegin, each up to the next TableEnd, replaced by Table,
// RESTTable and NATSTable; an error when doc lacks a pair of markers.
func ReplaceTable(doc string) (string, error) {
	for _, s := range []struct {
		begin string
		table func() string
	}{{TableBegin, Table}, {RESTTableBegin, RESTTable}, {NATSTableBegin, NATSTable}} {
		i := strings.Index(doc, s.begin)
		if i < 0 {
			return "", fmt.Errorf("authz: the document has no %q … %q section", s.begin, TableEnd)
		}
		start := i + len(s.begin)
		j := strings.Index(doc[start:], TableEnd)
		if j < 0 {
			return "", fmt.Errorf("authz: the document has no %q after %q", TableEnd, s.begin)
		}
		doc = doc[:start] + "\n" + s.table() + doc[start+j:]
	}
	return doc, nil
}
