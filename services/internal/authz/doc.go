package authz

import (
	"fmt"
	"slices"
	"strings"

	"github.com/no8s/no8s/libs/api/fence"
	"github.com/no8s/no8s/libs/sdk/identity"
)

// Table markers: the security guide holds the generated tables between
// them (make generate writes them, make generate-check keeps them current).
const (
	TableBegin     = "<!-- BEGIN generated: who may call each gRPC method (make generate) -->"
	RESTTableBegin = "<!-- BEGIN generated: reserved keys and REST service rights (make generate) -->"
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
	fmt.Fprintf(&b, "| `%s`, `%s` | request headers | `%s/%s` | a leader's fenced writes: the store refuses an epoch that is not the current one |\n",
		fence.HeaderLease, fence.HeaderEpoch, identity.Service, identity.RegistrySync)
	for _, k := range Reserved() {
		key := k.Prefix + "*"
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

// ReplaceTable returns doc with the text after TableBegin and after
// RESTTableBegin, each up to the next TableEnd, replaced by Table and
// RESTTable; an error when doc lacks a pair of markers.
func ReplaceTable(doc string) (string, error) {
	for _, s := range []struct {
		begin string
		table func() string
	}{{TableBegin, Table}, {RESTTableBegin, RESTTable}} {
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
