package sdk_test

import (
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// maxRootNames bounds what the root package exports: what a reconciler's
// author writes against (about controller-runtime's reconcile plus
// builder), not the runtime's plumbing, which is internal.
const maxRootNames = 25

// TestRootExportsFewNames parses the root package's non-test files and
// counts its exported top-level names: each const, var, func and type is
// one name; methods do not count.
func TestRootExportsFewNames(t *testing.T) {
	names := rootNames(t)
	if len(names) > maxRootNames {
		t.Errorf("the root package exports %d names, more than %d:\n%s", len(names), maxRootNames, strings.Join(names, "\n"))
	}
	t.Logf("%d exported names: %s", len(names), strings.Join(names, " "))
}

func rootNames(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var names []string
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil && d.Name.IsExported() {
					names = append(names, d.Name.Name)
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						if s.Name.IsExported() {
							names = append(names, s.Name.Name)
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() {
								names = append(names, n.Name)
							}
						}
					}
				}
			}
		}
	}
	slices.Sort(names)
	return names
}

// protobufPackages are the import path prefixes that no exported signature
// of the root package may mention, however deep (through the fields and
// methods of the no8s types it names, aliases followed).
var protobufPackages = []string{"github.com/no8s/no8s/proto", "google.golang.org/protobuf"}

// TestRootSignaturesMentionNoProtobuf type-checks the root package from the
// compiler's export data and walks its exported API: function parameters
// and results, exported struct fields, methods of exported types, and, for
// every no8s type reached that way, its own exported fields and methods.
func TestRootSignaturesMentionNoProtobuf(t *testing.T) {
	pkg := loadRoot(t)
	w := &apiWalker{seen: map[types.Type]bool{}}
	for _, name := range pkg.Scope().Names() {
		obj := pkg.Scope().Lookup(name)
		if !obj.Exported() {
			continue
		}
		w.visit(obj.Type(), name)
	}
	for _, p := range w.problems {
		t.Error(p)
	}
	if w.named < 10 {
		t.Fatalf("walked only %d named types: is the walk broken?", w.named)
	}
}

func loadRoot(t *testing.T) *types.Package {
	t.Helper()
	cmd := exec.Command("go", "list", "-export", "-deps", "-f", "{{.ImportPath}}\t{{.Export}}", ".")
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("go list -export: %v\n%s", err, stderr)
	}
	exports := map[string]string{}
	var root string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		path, file, _ := strings.Cut(line, "\t")
		exports[path] = file
		root = path // -deps lists the package itself last
	}
	imp := importer.ForCompiler(token.NewFileSet(), "gc", func(path string) (io.ReadCloser, error) {
		file := exports[path]
		if file == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(file)
	})
	pkg, err := imp.Import(root)
	if err != nil {
		t.Fatalf("import %s: %v", root, err)
	}
	return pkg
}

type apiWalker struct {
	seen     map[types.Type]bool
	named    int
	problems []string
}

func (w *apiWalker) visit(t types.Type, via string) {
	t = types.Unalias(t)
	if w.seen[t] {
		return
	}
	w.seen[t] = true
	switch t := t.(type) {
	case *types.Named:
		w.visitNamed(t, via)
	case *types.Pointer:
		w.visit(t.Elem(), via)
	case *types.Slice:
		w.visit(t.Elem(), via)
	case *types.Array:
		w.visit(t.Elem(), via)
	case *types.Chan:
		w.visit(t.Elem(), via)
	case *types.Map:
		w.visit(t.Key(), via)
		w.visit(t.Elem(), via)
	case *types.Signature:
		for v := range t.Params().Variables() {
			w.visit(v.Type(), via+" (parameter "+v.Name()+")")
		}
		for v := range t.Results().Variables() {
			w.visit(v.Type(), via+" (result)")
		}
	case *types.Struct:
		for f := range t.Fields() {
			if f.Exported() || f.Embedded() {
				w.visit(f.Type(), via+"."+f.Name())
			}
		}
	case *types.Interface:
		for m := range t.Methods() {
			if m.Exported() {
				w.visit(m.Type(), via+"."+m.Name())
			}
		}
	}
}

func (w *apiWalker) visitNamed(t *types.Named, via string) {
	obj := t.Obj()
	if obj.Pkg() == nil {
		return // error, comparable
	}
	path := obj.Pkg().Path()
	for _, bad := range protobufPackages {
		if path == bad || strings.HasPrefix(path, bad+"/") {
			w.problems = append(w.problems, fmt.Sprintf("%s mentions the protobuf type %s.%s", via, path, obj.Name()))
			return
		}
	}
	for arg := range t.TypeArgs().Types() {
		w.visit(arg, via)
	}
	if !strings.HasPrefix(path, "github.com/no8s/no8s/") {
		return // the standard library's and third parties' types are theirs
	}
	w.named++
	for m := range t.Origin().Methods() {
		if m.Exported() {
			w.visit(m.Type(), via+"."+m.Name())
		}
	}
	w.visit(t.Origin().Underlying(), via)
}
