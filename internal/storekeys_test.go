package internal_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// Store keys are assembled and taken apart only in internal/repo; every
// other package names an object by its kind and snapshot ID
// (repo.Handle, repo.ManifestKey, ...) and reads a listing with
// repo.List, repo.ParseKey or repo.Owner. A key built by hand elsewhere
// skips the ID check, misses a layout change and the one list of what is
// encrypted (repo.CarriesContent), as prune's own parser once did.
//
// The parts of the layout are unexported in repo, so what is left to
// catch is a key spelled out: a string literal holding a prefix or a
// suffix of the layout, and the ID's time read by hand (time.Parse with
// the ID's layout; repo.IDTime is the one place). Test files may spell
// keys out: they check the layout from outside.
var layoutPiece = regexp.MustCompile(`(^|[^\w-])(snapshots|archives|repacks)/|\.(json\.zst|tar\.zst|mac\.json)(\W|$)`)

const idTimeLayout = "20060102T150405.000Z"

func TestKeysAreBuiltOnlyInRepo(t *testing.T) {
	root := ".."
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel == "internal/repo" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") && rel != "." {
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
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.BasicLit:
				if n.Kind != token.STRING {
					return true
				}
				s, _ := strconv.Unquote(n.Value)
				if p := layoutPiece.FindString(s); p != "" {
					t.Errorf("%s: %q spells out a store key (%q): name the object with repo (Handle, ManifestKey, ...) and read keys with repo.ParseKey or repo.Owner", fset.Position(n.Pos()), s, p)
				}
				if s == ".age" {
					t.Errorf("%s: the encrypted names' suffix: use repo.EncryptedKey and repo.PlainKey", fset.Position(n.Pos()))
				}
			case *ast.CallExpr:
				sel, ok := n.Fun.(*ast.SelectorExpr)
				if !ok || sel.Sel.Name != "Parse" || len(n.Args) == 0 {
					return true
				}
				if x, ok := sel.X.(*ast.Ident); ok && x.Name == "time" {
					if lit, ok := n.Args[0].(*ast.BasicLit); ok && lit.Value == strconv.Quote(idTimeLayout) {
						t.Errorf("%s: reads a snapshot ID's time by hand: use repo.IDTime", fset.Position(n.Pos()))
					}
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
