// Package printer writes what the no8s CLI shows: tables (kubectl's
// layout), JSON, YAML and names, for resources, namespaces, types, webhooks
// and reconcile history. Time is passed in, so output is reproducible (the
// golden-file tests rely on it).
package printer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/no8s/no8s/libs/client"
)

// Formats of -o.
const (
	FormatTable = ""
	FormatWide  = "wide"
	FormatJSON  = "json"
	FormatYAML  = "yaml"
	FormatName  = "name"
	// FormatJSONLine is compact JSON, one document per line (a watch's
	// -o json).
	FormatJSONLine = "json-line"
)

// CheckFormat refuses an -o value this command does not print.
func CheckFormat(f string) error {
	switch f {
	case FormatTable, FormatWide, FormatJSON, FormatYAML, FormatName:
		return nil
	}
	return fmt.Errorf("-o %q: the output format must be one of json, yaml, wide, name", f)
}

// Age is kubectl's age: 42s, 5m10s (under 10 minutes), 3h, 2d5h, 40d, 3y.
func Age(now, t time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	d := now.Sub(t)
	if d < 0 {
		d = 0
	}
	switch {
	case d < time.Minute:
		return strconv.Itoa(int(d.Seconds())) + "s"
	case d < 10*time.Minute:
		m, s := int(d.Minutes()), int(d.Seconds())%60
		if s == 0 {
			return strconv.Itoa(m) + "m"
		}
		return fmt.Sprintf("%dm%ds", m, s)
	case d < 3*time.Hour:
		return strconv.Itoa(int(d.Minutes())) + "m"
	case d < 48*time.Hour:
		h, m := int(d.Hours()), int(d.Minutes())%60
		if d < 8*time.Hour && m != 0 {
			return fmt.Sprintf("%dh%dm", h, m)
		}
		return strconv.Itoa(h) + "h"
	case d < 8*24*time.Hour:
		days, h := int(d.Hours())/24, int(d.Hours())%24
		if h == 0 {
			return strconv.Itoa(days) + "d"
		}
		return fmt.Sprintf("%dd%dh", days, h)
	case d < 2*365*24*time.Hour:
		return strconv.Itoa(int(d.Hours())/24) + "d"
	}
	return strconv.Itoa(int(d.Hours())/24/365) + "y"
}

// AgeOf is Age of a time that may be unknown ("-").
func AgeOf(now time.Time, t *time.Time) string {
	if t == nil {
		return "-"
	}
	return Age(now, *t)
}

// Ready is the status of the Ready condition (True, False, Unknown), or
// "-" when the resource has none yet.
func Ready(r *client.Resource) string {
	for _, c := range r.Conditions {
		if c.Type == "Ready" {
			return string(c.Status)
		}
	}
	return "-"
}

// Name is how -o name prints a resource: Type/version/name.
func Name(r *client.Resource) string {
	return r.ResourceTypeName + "/" + r.ResourceTypeVersion + "/" + r.Name
}

// table writes aligned columns as kubectl does.
type table struct{ tw *tabwriter.Writer }

func newTable(w io.Writer) *table { return &table{tw: tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)} }

func (t *table) row(cols ...string) {
	for i, c := range cols {
		if i > 0 {
			_, _ = io.WriteString(t.tw, "\t")
		}
		_, _ = io.WriteString(t.tw, cell(c))
	}
	_, _ = io.WriteString(t.tw, "\n")
}

func (t *table) flush() error { return t.tw.Flush() }

// cell is a table cell's text on one line: tabs and line breaks become
// spaces.
func cell(s string) string { return strings.NewReplacer("\t", " ", "\n", " ").Replace(s) }

// ResourceHeader is the table header of resources (wide: more columns).
func ResourceHeader(wide bool) []string {
	if wide {
		return []string{"NAMESPACE", "NAME", "TYPE", "STATUS", "READY", "PHASE", "GENERATION", "OBSERVED", "RESOURCE-VERSION", "AGE", "MESSAGE"}
	}
	return []string{"NAMESPACE", "NAME", "STATUS", "READY", "AGE"}
}

// ResourceRow is one resource's table row.
func ResourceRow(r *client.Resource, wide bool, now time.Time) []string {
	if wide {
		return []string{r.Namespace, r.Name, r.ResourceTypeName + "/" + r.ResourceTypeVersion, r.Status, Ready(r), r.Phase,
			strconv.FormatInt(r.Generation, 10), strconv.FormatInt(r.ObservedGeneration, 10), strconv.FormatInt(r.ResourceVersion, 10),
			Age(now, r.CreatedAt), r.StatusMessage}
	}
	return []string{r.Namespace, r.Name, r.Status, Ready(r), Age(now, r.CreatedAt)}
}

// Resources prints resources in format.
func Resources(w io.Writer, items []client.Resource, format string, now time.Time) error {
	switch format {
	case FormatJSON, FormatYAML:
		if items == nil {
			items = []client.Resource{}
		}
		return Document(w, items, format)
	case FormatName:
		for i := range items {
			if _, err := fmt.Fprintln(w, Name(&items[i])); err != nil {
				return err
			}
		}
		return nil
	}
	t := newTable(w)
	t.row(ResourceHeader(format == FormatWide)...)
	for i := range items {
		t.row(ResourceRow(&items[i], format == FormatWide, now)...)
	}
	return t.flush()
}

// Types prints resource types in format.
func Types(w io.Writer, items []client.ResourceType, format string, now time.Time) error {
	switch format {
	case FormatJSON, FormatYAML:
		if items == nil {
			items = []client.ResourceType{}
		}
		return Document(w, items, format)
	case FormatName:
		for _, ty := range items {
			if _, err := fmt.Fprintln(w, ty.Name+"/"+ty.Version); err != nil {
				return err
			}
		}
		return nil
	}
	t := newTable(w)
	if format == FormatWide {
		t.row("NAME", "VERSION", "RESYNC", "TIMEOUT", "RESOURCE-VERSION", "AGE", "DESCRIPTION")
	} else {
		t.row("NAME", "VERSION", "AGE")
	}
	for _, ty := range items {
		if format == FormatWide {
			p := ty.ReconcilePolicy
			t.row(ty.Name, ty.Version, (time.Duration(p.ResyncSeconds) * time.Second).String(), (time.Duration(p.TimeoutSeconds) * time.Second).String(),
				strconv.FormatInt(ty.ResourceVersion, 10), Age(now, ty.CreatedAt), ty.Description)
		} else {
			t.row(ty.Name, ty.Version, Age(now, ty.CreatedAt))
		}
	}
	return t.flush()
}

// Namespaces prints namespaces in format: a table NAME STATUS AGE (wide:
// with RESOURCE-VERSION and UID), JSON, YAML, or their names.
func Namespaces(w io.Writer, items []client.Namespace, format string, now time.Time) error {
	switch format {
	case FormatJSON, FormatYAML:
		if items == nil {
			items = []client.Namespace{}
		}
		return Document(w, items, format)
	case FormatName:
		for _, n := range items {
			if _, err := fmt.Fprintln(w, n.Name); err != nil {
				return err
			}
		}
		return nil
	}
	t := newTable(w)
	if format == FormatWide {
		t.row("NAME", "STATUS", "RESOURCE-VERSION", "AGE", "UID")
	} else {
		t.row("NAME", "STATUS", "AGE")
	}
	for _, n := range items {
		if format == FormatWide {
			t.row(n.Name, n.Status, strconv.FormatInt(n.ResourceVersion, 10), Age(now, n.CreatedAt), n.UID)
		} else {
			t.row(n.Name, n.Status, Age(now, n.CreatedAt))
		}
	}
	return t.flush()
}

// Webhooks prints webhook registrations in format.
func Webhooks(w io.Writer, items []client.Webhook, format string, now time.Time) error {
	switch format {
	case FormatJSON, FormatYAML:
		if items == nil {
			items = []client.Webhook{}
		}
		return Document(w, items, format)
	case FormatName:
		for _, h := range items {
			if _, err := fmt.Fprintln(w, h.Name); err != nil {
				return err
			}
		}
		return nil
	}
	t := newTable(w)
	t.row("NAME", "TYPE", "OPERATIONS", "RESOURCE-TYPE", "FAILURE-POLICY", "AGE")
	for _, h := range items {
		rt := "*"
		if h.ResourceTypeName != nil {
			rt = *h.ResourceTypeName
			if h.ResourceTypeVersion != nil {
				rt += "/" + *h.ResourceTypeVersion
			}
		}
		t.row(h.Name, h.WebhookType, strings.Join(h.Operations, ","), rt, h.FailurePolicy, Age(now, h.CreatedAt))
	}
	return t.flush()
}

// History prints reconcile attempts, newest first.
func History(w io.Writer, items []client.HistoryEntry, format string, now time.Time) error {
	switch format {
	case FormatJSON, FormatYAML:
		if items == nil {
			items = []client.HistoryEntry{}
		}
		return Document(w, items, format)
	}
	t := newTable(w)
	t.row("ID", "GENERATION", "REASON", "RESULT", "PHASE", "DURATION", "AGE", "HOLDER", "ERROR")
	for _, h := range items {
		result := "success"
		if !h.Success {
			result = "failure"
		}
		msg := ""
		if h.ErrorMessage != nil {
			msg = *h.ErrorMessage
		}
		t.row(strconv.FormatInt(h.ID, 10), strconv.FormatInt(h.Generation, 10), h.Reason, result, h.Phase,
			(time.Duration(h.DurationMS) * time.Millisecond).String(), AgeOf(now, h.StartedAt), h.Holder, msg)
	}
	return t.flush()
}

// Document writes v as indented JSON or as YAML (keys in the JSON's order).
func Document(w io.Writer, v any, format string) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode: %w", err)
	}
	return Raw(w, data, format)
}

// Raw writes a JSON document as indented JSON or as YAML.
func Raw(w io.Writer, data []byte, format string) error {
	if format == FormatJSONLine {
		_, err := w.Write(append(bytes.TrimSpace(data), '\n'))
		return err
	}
	if format == FormatYAML {
		out, err := JSONToYAML(data)
		if err != nil {
			return err
		}
		_, err = w.Write(out)
		return err
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, data, "", "  "); err != nil {
		return fmt.Errorf("indent: %w", err)
	}
	buf.WriteByte('\n')
	_, err := w.Write(buf.Bytes())
	return err
}

// JSONToYAML converts a JSON document to YAML, keeping the order of keys
// and numbers as written.
func JSONToYAML(data []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	n, err := yamlNode(dec)
	if err != nil {
		return nil, fmt.Errorf("convert to YAML: %w", err)
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(n); err != nil {
		return nil, fmt.Errorf("encode YAML: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("encode YAML: %w", err)
	}
	return buf.Bytes(), nil
}

func yamlNode(dec *json.Decoder) (*yaml.Node, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch v := tok.(type) {
	case json.Delim:
		if v == '{' {
			n := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k, _ := kt.(string)
				val, err := yamlNode(dec)
				if err != nil {
					return nil, err
				}
				n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: k}, val)
			}
			_, err := dec.Token()
			return n, err
		}
		n := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
		for dec.More() {
			val, err := yamlNode(dec)
			if err != nil {
				return nil, err
			}
			n.Content = append(n.Content, val)
		}
		_, err := dec.Token()
		return n, err
	case string:
		n := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: v}
		switch strings.ToLower(v) {
		case "y", "yes", "n", "no", "on", "off":
			// Booleans to YAML 1.1 readers: quote them for those.
			n.Style = yaml.DoubleQuotedStyle
		}
		return n, nil
	case json.Number:
		tag := "!!int"
		if strings.ContainsAny(string(v), ".eE") {
			tag = "!!float"
		}
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: string(v)}, nil
	case bool:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: strconv.FormatBool(v)}, nil
	case nil:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null"}, nil
	}
	return nil, fmt.Errorf("unexpected token %v", tok)
}

// Tokens prints API tokens in format: a table ID NAME OWNER EXPIRES AGE
// (wide: with GROUPS, CREATED-BY and REVOKED), JSON, YAML, or their ids.
func Tokens(w io.Writer, items []client.Token, format string, now time.Time) error {
	switch format {
	case FormatJSON, FormatYAML:
		if items == nil {
			items = []client.Token{}
		}
		return Document(w, items, format)
	case FormatName:
		for _, tok := range items {
			if _, err := fmt.Fprintln(w, tok.ID); err != nil {
				return err
			}
		}
		return nil
	}
	t := newTable(w)
	if format == FormatWide {
		t.row("ID", "NAME", "OWNER", "EXPIRES", "AGE", "GROUPS", "CREATED-BY", "REVOKED")
	} else {
		t.row("ID", "NAME", "OWNER", "EXPIRES", "AGE")
	}
	for _, tok := range items {
		expires := "never"
		if tok.ExpiresAt != nil {
			expires = tok.ExpiresAt.UTC().Format(time.RFC3339)
		}
		if format == FormatWide {
			revoked := ""
			if tok.RevokedAt != nil {
				revoked = tok.RevokedAt.UTC().Format(time.RFC3339)
			}
			t.row(tok.ID, tok.Name, tok.Owner, expires, Age(now, tok.CreatedAt), strings.Join(tok.Groups, ","), tok.CreatedBy, revoked)
		} else {
			t.row(tok.ID, tok.Name, tok.Owner, expires, Age(now, tok.CreatedAt))
		}
	}
	return t.flush()
}
