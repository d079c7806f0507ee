package manifest

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

const sample = `# the seed README's flow
kind: ResourceType
metadata:
  name: DatabaseCluster
version: v1
schema:
  type: object
  required: [engine, storage_gb]
  properties:
    engine: {type: string, enum: [postgres, mysql]}
    storage_gb: {type: integer, minimum: 10}
---
kind: Resource
type: DatabaseCluster/v1
metadata:
  name: production-pg
  labels:
    tier: db
spec:
  engine: postgres
  storage_gb: 500
--- # a webhook
kind: AdmissionWebhook
metadata: {name: deny-small}
webhook_url: http://127.0.0.1:9000/validate
webhook_type: validating
operations: [CREATE, UPDATE]
---
{"kind": "Resource", "type": "DatabaseCluster/v1", "metadata": {"name": "other", "namespace": "team-a"}, "spec": {"storage_gb": 1e2}}
---
kind: Namespace
metadata:
  name: team-a
`

func TestParse(t *testing.T) {
	docs, err := Parse("sample.yaml", []byte(sample))
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) != 5 {
		t.Fatalf("%d documents", len(docs))
	}
	if ty := docs[0].Type; ty == nil || ty.Name != "DatabaseCluster" || ty.Version != "v1" || !bytes.Contains(ty.Schema, []byte(`"minimum":10`)) {
		t.Fatalf("type %+v %s", ty, ty.Schema)
	}
	r := docs[1].Resource
	if r == nil || r.Namespace != "" || r.Name != "production-pg" || r.TypeName != "DatabaseCluster" || r.Labels["tier"] != "db" || r.Annotations != nil || string(r.Spec) != `{"engine":"postgres","storage_gb":500}` {
		t.Fatalf("resource %+v %s", r, r.Spec)
	}
	if docs[1].Source.Line != 13 || docs[1].Source.Doc != 2 {
		t.Fatalf("source %v", docs[1].Source)
	}
	if w := docs[2].Webhook; w == nil || w.Name != "deny-small" || !bytes.Contains(w.Body, []byte(`"name":"deny-small"`)) || bytes.Contains(w.Body, []byte("kind")) {
		t.Fatalf("webhook %+v %s", w, w.Body)
	}
	// JSON is kept as written: numbers too.
	if r := docs[3].Resource; r.Namespace != "team-a" || string(r.Spec) != `{"storage_gb": 1e2}` {
		t.Fatalf("json resource %+v %s", r, r.Spec)
	}
	if got := docs[3].Key(); got != "DatabaseCluster/v1 team-a/other" {
		t.Fatal(got)
	}
	if got := docs[1].Key(); got != "DatabaseCluster/v1 default/production-pg" {
		t.Fatal(got)
	}
	if ns := docs[4].Namespace; ns == nil || ns.Name != "team-a" || docs[4].Key() != "Namespace team-a" {
		t.Fatalf("namespace %+v %s", ns, docs[4].Key())
	}
	// Namespaces first (the resources in them need them), then types,
	// webhooks, resources; otherwise as read.
	SortForApply(docs)
	var order []string
	for _, d := range docs {
		order = append(order, d.Key())
	}
	if want := []string{"Namespace team-a", "ResourceType DatabaseCluster/v1", "AdmissionWebhook deny-small", "DatabaseCluster/v1 default/production-pg", "DatabaseCluster/v1 team-a/other"}; !slices.Equal(order, want) {
		t.Fatalf("order %q, want %q", order, want)
	}
}

// Every problem of every document is reported with its file, document,
// line and JSON pointer; nothing is returned.
// A plain YAML number out of float64's range stays a number, not the
// string YAML resolves it to (issue 27); a quoted one stays a string.
func TestHugeNumbersStayNumbers(t *testing.T) {
	docs, err := Parse("n.yaml", []byte("kind: Resource\ntype: Widget/v1\nmetadata: {name: w}\nspec:\n  n: 1e400\n  m: -2E+999\n  s: \"1e400\"\n  t: !!str 1e400\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := string(docs[0].Resource.Spec); got != `{"m":-2E+999,"n":1e400,"s":"1e400","t":"1e400"}` {
		t.Fatalf("spec %s", got)
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"no kind", "metadata: {name: x}\n", "/kind"},
		{"unknown kind", "kind: Pod\n", `unknown kind "Pod"`},
		{"unknown field", "kind: Resource\ntype: A/v1\nmetadata: {name: a}\nstatus: ready\n", "/status: unknown field"},
		{"bad name", "kind: Resource\ntype: A/v1\nmetadata: {name: Not_OK}\n", "/metadata/name: \"Not_OK\" is not a DNS-1123 label"},
		{"bad type", "kind: Resource\ntype: DatabaseCluster\nmetadata: {name: a}\n", "/type: \"DatabaseCluster\" must be Name/version"},
		{"label number", "kind: Resource\ntype: A/v1\nmetadata: {name: a, labels: {n: 1}}\n", "/metadata/labels/n: must be a string"},
		{"spec list", "kind: Resource\ntype: A/v1\nmetadata: {name: a}\nspec: [1]\n", "/spec: must be a mapping"},
		{"type without schema", "kind: ResourceType\nmetadata: {name: A}\nversion: v1\n", "/schema: schema is required"},
		{"type bad version", "kind: ResourceType\nmetadata: {name: A}\nversion: 1\nschema: {}\n", "/version: must be a string"},
		{"webhook", "kind: AdmissionWebhook\nmetadata: {}\n", "/webhook_url: webhook_url is required"},
		{"duplicate yaml key", "kind: Resource\nkind: Resource\n", "line 3"},
		{"duplicate json key", "---\n{\"kind\": \"Resource\", \"spec\": {\"a\": 1, \"a\": 2}}\n", `/spec/a: the key "a" is given twice`},
		{"bad yaml", "---\n---\nkind: [\n", "f.yaml: document 1 (line 3): not valid YAML"},
		{"scalar", "just a string\n", "a document must be a mapping"},
		{"empty namespace", "kind: Resource\ntype: A/v1\nmetadata: {name: a, namespace: \"\"}\n", "/metadata/namespace: namespace must not be empty"},
		{"bad namespace", "kind: Resource\ntype: A/v1\nmetadata: {name: a, namespace: Team_A}\n", `/metadata/namespace: "Team_A" is not a valid namespace`},
		{"namespace without name", "kind: Namespace\nmetadata: {}\n", "/metadata/name: name is required"},
		{"namespace without metadata", "kind: Namespace\n", "/metadata/name: name is required"},
		{"namespace bad name", "kind: Namespace\nmetadata: {name: Team_A}\n", `/metadata/name: "Team_A" is not a valid namespace`},
		{"namespace extra field", "kind: Namespace\nmetadata: {name: a, labels: {x: y}}\nspec: {}\n", "/spec: unknown field (allowed: kind, metadata)\n  /metadata/labels: unknown field (allowed: name)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.in
			if tc.name == "duplicate yaml key" {
				in = "# c\n\n" + in
			}
			docs, err := Parse("f.yaml", []byte(in))
			var pe *Error
			if err == nil || !errors.As(err, &pe) || docs != nil {
				t.Fatalf("docs %v err %v", docs, err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not say %q", err, tc.want)
			}
		})
	}
	// Two bad documents: both reported.
	_, err := Parse("f.yaml", []byte("kind: X\n---\nkind: Y\n"))
	if err == nil || !strings.Contains(err.Error(), "document 1 (line 1)") || !strings.Contains(err.Error(), "document 2 (line 3)") {
		t.Fatalf("%v", err)
	}
}

func TestSplit(t *testing.T) {
	in := "a: 1\r\n---\r\n# only a comment\r\n---\n\n  \nb: 2\n--- {c: 3}\n...\nd: 4\n----\n---x\n"
	got := Split([]byte(in))
	want := []Chunk{{1, []byte("a: 1\r\n")}, {7, []byte("b: 2\n")}, {8, []byte("{c: 3}\n")}, {10, []byte("d: 4\n----\n---x\n")}}
	if len(got) != len(want) {
		t.Fatalf("%d chunks: %v", len(got), got)
	}
	for i := range want {
		if got[i].Line != want[i].Line || !bytes.Equal(got[i].Data, want[i].Data) {
			t.Fatalf("chunk %d: %d %q, want %d %q", i, got[i].Line, got[i].Data, want[i].Line, want[i].Data)
		}
	}
}

func TestRead(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("b.yaml", "kind: Resource\ntype: A/v1\nmetadata: {name: b}\n")
	write("a.json", `{"kind": "Resource", "type": "A/v1", "metadata": {"name": "a"}}`)
	write("notes.txt", "not a document")
	write("sub/c.yml", "kind: Resource\ntype: A/v1\nmetadata: {name: c}\n")
	docs, err := Read([]string{dir}, nil, false)
	if err != nil || len(docs) != 2 || docs[0].Resource.Name != "a" || docs[1].Resource.Name != "b" {
		t.Fatalf("%v %v", docs, err)
	}
	docs, err = Read([]string{dir}, nil, true)
	if err != nil || len(docs) != 3 {
		t.Fatalf("recursive: %v %v", docs, err)
	}
	docs, err = Read([]string{"-"}, strings.NewReader("kind: Resource\ntype: A/v1\nmetadata: {name: s}\n"), false)
	if err != nil || len(docs) != 1 || docs[0].Source.File != "-" {
		t.Fatalf("stdin: %v %v", docs, err)
	}
	if _, err := Read([]string{filepath.Join(dir, "missing.yaml")}, nil, false); err == nil || !strings.Contains(err.Error(), "missing.yaml") {
		t.Fatalf("missing: %v", err)
	}
	if _, err := Read([]string{"-"}, strings.NewReader("# nothing\n"), false); err == nil || !strings.Contains(err.Error(), "no documents") {
		t.Fatalf("empty: %v", err)
	}
}

// FuzzSplit checks the splitter's promises on any input: every content line
// lands in exactly one document, in order; no document holds a separator;
// each document's Line points at its first line.
func FuzzSplit(f *testing.F) {
	f.Add([]byte(sample))
	f.Add([]byte("a: 1\r\n---\r\nb: 2\r\n"))
	f.Add([]byte("--- {c: 3}\n...\n---\t# x\nd\n"))
	f.Add([]byte("----\n --- \n---"))
	f.Fuzz(func(t *testing.T, data []byte) {
		chunks := Split(data)
		lines := strings.Split(string(data), "\n")
		var want []string // the content lines of the input, as documents hold them
		for _, l := range lines {
			text := strings.TrimRight(l, "\r")
			switch {
			case isSeparator([]byte(text)):
				rest := text
				for isSeparator([]byte(rest)) {
					rest = strings.TrimLeft(rest[3:], " \t")
				}
				if isContent([]byte(rest)) && !isEnd([]byte(rest)) {
					want = append(want, rest)
				}
			case isEnd([]byte(text)):
			case isContent([]byte(text)):
				want = append(want, text)
			}
		}
		var got []string
		prev := 0
		for _, c := range chunks {
			if c.Line <= prev || c.Line > len(lines) {
				t.Fatalf("chunk line %d after %d (%d lines)", c.Line, prev, len(lines))
			}
			prev = c.Line
			first := strings.TrimRight(strings.SplitN(string(c.Data), "\n", 2)[0], "\r")
			if src := strings.TrimRight(lines[c.Line-1], "\r"); src != first && !strings.HasSuffix(src, first) {
				t.Fatalf("chunk at line %d starts %q, the line is %q", c.Line, first, src)
			}
			if !isContent([]byte(first)) {
				t.Fatalf("chunk at line %d starts with no content: %q", c.Line, first)
			}
			for _, l := range strings.Split(strings.TrimSuffix(string(c.Data), "\n"), "\n") {
				text := strings.TrimRight(l, "\r")
				if isSeparator([]byte(text)) || isEnd([]byte(text)) {
					t.Fatalf("chunk at line %d holds a separator %q", c.Line, text)
				}
				if isContent([]byte(text)) {
					got = append(got, text)
				}
			}
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("content lines differ:\n got %q\nwant %q", got, want)
		}
	})
}

// FuzzParse: any input yields documents or an error naming where, never a
// panic; a returned document is complete.
func FuzzParse(f *testing.F) {
	f.Add([]byte(sample))
	f.Add([]byte("kind: Resource\ntype: A/v1\nmetadata: {name: a, labels: {x: y}}\nspec: {a: [1, 2, {b: c}]}\n"))
	f.Add([]byte("{\"kind\": \"ResourceType\", \"metadata\": {\"name\": \"A\"}, \"version\": \"v1\", \"schema\": {}}"))
	f.Add([]byte("kind: Namespace\nmetadata: {name: team-a}\n---\nkind: Resource\ntype: A/v1\nmetadata: {name: a, namespace: team-a}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		docs, err := Parse("fuzz.yaml", data)
		if err != nil {
			if docs != nil || !strings.Contains(err.Error(), "fuzz.yaml: document ") {
				t.Fatalf("docs %v with error %q", docs, err)
			}
			return
		}
		for _, d := range docs {
			switch {
			case d.Resource != nil:
				if d.Resource.Name == "" || d.Resource.TypeVersion == "" || len(d.Resource.Spec) == 0 {
					t.Fatalf("incomplete resource %+v", d.Resource)
				}
			case d.Type != nil:
				if d.Type.Name == "" || len(d.Type.Schema) == 0 {
					t.Fatalf("incomplete type %+v", d.Type)
				}
			case d.Webhook != nil:
				if d.Webhook.Name == "" || !utf8.Valid(d.Webhook.Body) {
					t.Fatalf("bad webhook %+v", d.Webhook)
				}
			case d.Namespace != nil:
				if d.Namespace.Name == "" {
					t.Fatalf("incomplete namespace %+v", d.Namespace)
				}
			default:
				t.Fatalf("empty document %+v", d)
			}
		}
	})
}

// The documented examples (docs/examples) parse, and all-in-one.yaml holds
// every kind, its namespace applied first though written last.
func TestDocsExamples(t *testing.T) {
	docs, err := Read([]string{filepath.Join("..", "..", "..", "docs", "examples")}, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]bool{}
	for _, d := range docs {
		kinds[d.Kind] = true
	}
	for _, k := range []string{KindNamespace, KindResourceType, KindAdmissionWebhook, KindResource} {
		if !kinds[k] {
			t.Errorf("no %s in docs/examples", k)
		}
	}
	all, err := Read([]string{filepath.Join("..", "..", "..", "docs", "examples", "all-in-one.yaml")}, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	SortForApply(all)
	if all[0].Key() != "Namespace storage" || all[len(all)-1].Key() != "Bucket/v1 storage/backups" {
		t.Fatalf("all-in-one.yaml applies %s first and %s last", all[0].Key(), all[len(all)-1].Key())
	}
}
