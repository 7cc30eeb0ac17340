package engine_test

import (
	"bytes"
	"encoding/json"
	"errors"
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
	"regexp"
	"strings"
	"testing"
)

// maxFuncLines is the longest a function of the package may be, from its
// func keyword to its closing brace.
const maxFuncLines = 80

// fileInOrder is a line of the reading order in doc.go: a tab, a file name.
var fileInOrder = regexp.MustCompile(`(?m)^//\t(\S+\.go)\s`)

// TestReadingOrder checks the package's reading order (doc.go, "Reading
// order"): it names every source file once; no function is longer than
// maxFuncLines; and every function, and every package-level variable's
// value, uses only functions defined below it: later in its own file, or
// in a file listed after its own.
func TestReadingOrder(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	_, order, found := bytes.Cut(doc, []byte("// # Reading order\n"))
	if !found {
		t.Fatal("doc.go has no section \"Reading order\"")
	}
	rank := map[string]int{}
	for i, m := range fileInOrder.FindAllSubmatch(order, -1) {
		name := string(m[1])
		if _, twice := rank[name]; twice {
			t.Errorf("doc.go lists %s twice in the reading order", name)
		}
		rank[name] = i
	}
	fset, files, info := checkPackage(t)
	for _, f := range files {
		name := filepath.Base(fset.Position(f.Pos()).Filename)
		if _, ok := rank[name]; !ok && name != "doc.go" {
			t.Errorf("doc.go does not list %s in the reading order: place it there", name)
		}
	}
	if t.Failed() {
		return
	}
	type def struct {
		name, file string
		pos        token.Pos
	}
	defs := map[types.Object]def{}
	for _, f := range files {
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok {
				defs[info.Defs[fd.Name]] = def{funcName(fd), filepath.Base(fset.Position(fd.Pos()).Filename), fd.Pos()}
			}
		}
	}
	for _, f := range files {
		file := filepath.Base(fset.Position(f.Pos()).Filename)
		for _, d := range f.Decls {
			caller, self := "", types.Object(nil)
			switch d := d.(type) {
			case *ast.FuncDecl:
				caller, self = funcName(d), info.Defs[d.Name]
				if n := fset.Position(d.End()).Line - fset.Position(d.Pos()).Line + 1; n > maxFuncLines {
					t.Errorf("%s: %s is %d lines long, more than %d: split it by what its parts decide or do", file, caller, n, maxFuncLines)
				}
			case *ast.GenDecl:
				if d.Tok != token.VAR {
					continue
				}
				caller = "var " + d.Specs[0].(*ast.ValueSpec).Names[0].Name
			}
			seen := map[types.Object]bool{}
			ast.Inspect(d, func(n ast.Node) bool {
				id, ok := n.(*ast.Ident)
				if !ok {
					return true
				}
				used := info.Uses[id]
				callee, ok := defs[used]
				switch {
				case !ok || used == self || seen[used]:
				case rank[callee.file] < rank[file]:
					t.Errorf("%s: %s uses %s, defined in %s, which comes before %s in the reading order", file, caller, callee.name, callee.file, file)
				case callee.file == file && callee.pos < d.Pos():
					t.Errorf("%s: %s uses %s, defined above it in the same file", file, caller, callee.name)
				}
				seen[used] = true
				return true
			})
		}
	}
}

// checkPackage parses and type-checks the package's source files, test
// files aside, against the export data of its imports.
func checkPackage(t *testing.T) (*token.FileSet, []*ast.File, *types.Info) {
	t.Helper()
	cmd := exec.Command("go", "list", "-export", "-deps", "-json=ImportPath,Export", ".")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	exports := map[string]string{}
	for dec := json.NewDecoder(bytes.NewReader(out)); ; {
		var p struct{ ImportPath, Export string }
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list: %v", err)
		}
		exports[p.ImportPath] = p.Export
	}
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		if exports[path] == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(exports[path])
	})
	info := &types.Info{Defs: map[*ast.Ident]types.Object{}, Uses: map[*ast.Ident]types.Object{}}
	if _, err := (&types.Config{Importer: imp}).Check("engine", fset, files, info); err != nil {
		t.Fatalf("type-checking the package: %v", err)
	}
	return fset, files, info
}

// funcName is a function's name, or a method's with its receiver's type.
func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil {
		return fd.Name.Name
	}
	recv := fd.Recv.List[0].Type
	if star, ok := recv.(*ast.StarExpr); ok {
		recv = star.X
	}
	if id, ok := recv.(*ast.Ident); ok {
		return id.Name + "." + fd.Name.Name
	}
	return fd.Name.Name
}
