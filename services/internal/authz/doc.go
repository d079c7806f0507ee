package authz

import (
	"fmt"
	"slices"
	"strings"
)

// Table markers: the security guide holds the generated table between
// them (make generate writes it, make generate-check keeps it current).
const (
	TableBegin = "<!-- BEGIN generated: who may call each gRPC method (make generate) -->"
	TableEnd   = "<!-- END generated -->"
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

// ReplaceTable returns doc with the text between TableBegin and TableEnd
// replaced by Table; an error when doc lacks the markers.
func ReplaceTable(doc string) (string, error) {
	i := strings.Index(doc, TableBegin)
	j := strings.Index(doc, TableEnd)
	if i < 0 || j < i {
		return "", fmt.Errorf("authz: the document has no %q … %q section", TableBegin, TableEnd)
	}
	return doc[:i+len(TableBegin)] + "\n" + Table() + doc[j:], nil
}
