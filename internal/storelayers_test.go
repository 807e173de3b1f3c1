package internal_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// Every store layer says what it wraps (store.Layer), so that store.As
// finds a layer wherever it sits in a stack: a layer without Unwrap hides
// every layer below it. This test finds the types that wrap a store by
// embedding it (as every layer but auth's and crypt's does, which hold
// theirs in a field and are checked by TestStoresAreStackedInOrder) in
// the non-test code, and wants an Unwrap method on each.
func TestEveryStoreLayerUnwraps(t *testing.T) {
	type typ struct{ dir, name string }
	embedders := map[typ]token.Position{}
	unwraps := map[typ]bool{}
	root := ".."
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") && path != root {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		dir := filepath.Dir(path)
		inStore := f.Name.Name == "store"
		for _, decl := range f.Decls {
			switch decl := decl.(type) {
			case *ast.GenDecl:
				for _, spec := range decl.Specs {
					ts, ok := spec.(*ast.TypeSpec)
					if !ok {
						continue
					}
					st, ok := ts.Type.(*ast.StructType)
					if !ok {
						continue
					}
					for _, field := range st.Fields.List {
						if len(field.Names) == 0 && embedsStore(field.Type, inStore) {
							embedders[typ{dir, ts.Name.Name}] = fset.Position(ts.Pos())
						}
					}
				}
			case *ast.FuncDecl:
				if decl.Recv != nil && decl.Name.Name == "Unwrap" && len(decl.Recv.List) == 1 {
					rt := decl.Recv.List[0].Type
					if star, ok := rt.(*ast.StarExpr); ok {
						rt = star.X
					}
					if id, ok := rt.(*ast.Ident); ok {
						unwraps[typ{dir, id.Name}] = true
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(embedders) < 5 {
		t.Fatalf("found %d store layers, fewer than the code has: the test no longer sees them", len(embedders))
	}
	for ty, pos := range embedders {
		if !unwraps[ty] {
			t.Errorf("%s: %s wraps a store without an Unwrap method: give it one (store.Layer), or store.As cannot see below it", pos, ty.name)
		}
	}
}

// embedsStore tells an embedded store.Store (Store inside package store).
func embedsStore(e ast.Expr, inStore bool) bool {
	if star, ok := e.(*ast.StarExpr); ok {
		e = star.X
	}
	switch e := e.(type) {
	case *ast.SelectorExpr:
		x, ok := e.X.(*ast.Ident)
		return ok && x.Name == "store" && e.Sel.Name == "Store"
	case *ast.Ident:
		return inStore && e.Name == "Store"
	}
	return false
}
