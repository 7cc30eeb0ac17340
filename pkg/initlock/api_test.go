package initlock_test

import (
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "write testdata/api.txt from the packages")

// TestAPI lists every exported name the module promises, package by
// package: the top-level constants, variables, functions and types, and
// the methods of exported types. A change to the list is a change to the
// module's promise: it fails here until testdata/api.txt is written again
// with -update and the change is reviewed with it.
func TestAPI(t *testing.T) {
	got, err := exportedNames(".")
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile("testdata/api.txt", []byte(got), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile("testdata/api.txt")
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("the exported names changed; review the change and run go test -run TestAPI -update\n%s", got)
	}
	var names, methods int
	if _, err := fmt.Sscanf(got[strings.LastIndex(got, "# in all:"):], "# in all: %d names, %d methods", &names, &methods); err != nil {
		t.Fatal(err)
	}
	// The module's promise: what providers need (the root package and
	// package locking), what a keeper needs (package keeper), the Cluster
	// API vocabulary they share (package capi) and the test kit.
	if names+methods > maxExported {
		t.Errorf("the library module exports %d names and %d methods; at most %d in all", names, methods, maxExported)
	}
}

// maxExported bounds the library module's exported names, methods
// included.
const maxExported = 52

// exportedNames walks the module's packages, less internal ones and test
// data, and renders their exported names with a count per package.
func exportedNames(root string) (string, error) {
	var dirs []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		if name := d.Name(); name == "internal" || name == "testdata" || (strings.HasPrefix(name, ".") && path != root) {
			return filepath.SkipDir
		}
		dirs = append(dirs, path)
		return nil
	})
	if err != nil {
		return "", err
	}
	var b strings.Builder
	total, methods := 0, 0
	for _, dir := range dirs {
		names, err := packageNames(dir)
		if err != nil {
			return "", err
		}
		if len(names) == 0 {
			continue
		}
		top := 0
		for _, n := range names {
			if !strings.Contains(n, ".") {
				top++
			}
		}
		fmt.Fprintf(&b, "# %s: %d names, %d methods\n", filepath.ToSlash(dir), top, len(names)-top)
		for _, n := range names {
			fmt.Fprintln(&b, n)
		}
		total, methods = total+top, methods+len(names)-top
	}
	fmt.Fprintf(&b, "# in all: %d names, %d methods\n", total, methods)
	return b.String(), nil
}

// packageNames returns the exported names of the package in dir, as the
// go command builds it for this platform, its tests left out: top-level
// names as they are, methods as Type.Method.
func packageNames(dir string) ([]string, error) {
	pkg, err := build.ImportDir(dir, 0)
	if errors.As(err, new(*build.NoGoError)) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", dir, err)
	}
	fset := token.NewFileSet()
	var names []string
	for _, name := range pkg.GoFiles {
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, fmt.Errorf("parsing %s: %w", name, err)
		}
		for _, decl := range f.Decls {
			names = append(names, declNames(decl)...)
		}
	}
	slices.Sort(names)
	return names, nil
}

func declNames(decl ast.Decl) []string {
	var names []string
	switch d := decl.(type) {
	case *ast.FuncDecl:
		if !d.Name.IsExported() {
			return nil
		}
		if d.Recv == nil {
			return []string{d.Name.Name}
		}
		if recv := receiverType(d.Recv.List[0].Type); ast.IsExported(recv) {
			return []string{recv + "." + d.Name.Name}
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
	return names
}

// receiverType names a method's receiver type, without pointer or type
// parameters.
func receiverType(e ast.Expr) string {
	for {
		switch t := e.(type) {
		case *ast.StarExpr:
			e = t.X
		case *ast.IndexExpr:
			e = t.X
		case *ast.IndexListExpr:
			e = t.X
		case *ast.Ident:
			return t.Name
		default:
			return ""
		}
	}
}
