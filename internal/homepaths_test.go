package internal_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// The home is touched only through internal/homefs: descriptor-relative,
// no symlink followed, bounded reads. This test fails on a path-based
// file-system call in a package that works on the home, unless it is
// listed below with the reason it is not a home path.

// homePackages are the production packages that work on the home.
var homePackages = []string{"snapshot", "restore", "homemark", "fetch", "jenkins", "cli", "scan", "runner", "agents", "journal"}

// pathCalls are the path-based calls that resolve every component of
// their path, following symlinks on the way.
var pathCalls = map[string][]string{
	"os": {"Open", "OpenFile", "Create", "CreateTemp", "MkdirTemp", "ReadFile", "WriteFile", "ReadDir", "DirFS",
		"Stat", "Lstat", "Readlink", "Chmod", "Chown", "Lchown", "Chtimes", "Rename", "Remove", "RemoveAll",
		"Mkdir", "MkdirAll", "Symlink", "Link", "Truncate"},
	"filepath": {"Walk", "WalkDir", "Glob", "EvalSymlinks"},
	"unix":     {"Open", "Stat", "Lstat", "Chmod", "Chown", "Lchown", "Rename", "Unlink", "Rmdir", "Mkdir", "Readlink", "Creat", "Truncate"},
}

// notHome lists the path-based calls allowed in those packages, as
// "package/file.go function pkg.Call", each with why its path is not in
// the home (or is the home directory itself, which the configuration
// names and which is trusted).
var notHome = map[string]string{
	"agents/masterkey.go ReadMasterKeyFile os.ReadFile": "--master-key-file: a mounted Secret, not the home",
	"cli/dispatch.go execute os.Create":                 "HOMESNAP_CPUPROFILE: a profile file the operator names",
	"cli/crypt.go keySource os.Open":                    "an age key file: a mounted Secret",
	"cli/import.go runImport os.Open":                   "--import: a tar file the operator names",
	"restore/write.go processUmask os.ReadFile":         "/proc/self/status",
	"journal/journal_linux.go readSysctl os.ReadFile":   "/proc/sys: the inotify limits, for messages",
	"homemark/check.go Check os.Stat":                   "the home directory itself, as configured",
	"homemark/check.go Check os.MkdirAll":               "the home directory itself, as configured",
	"cli/sidecar.go readToken os.Open":                  "--trigger-token-file: a mounted Secret",
	"cli/sidecar.go tokenSource os.Stat":                "--trigger-token-file: a mounted Secret",
	"cli/sidecar.go get os.Stat":                        "--trigger-token-file: a mounted Secret, checked for an update",
}

func TestHomeIsTouchedOnlyThroughHomefs(t *testing.T) {
	calls := map[string]bool{}
	for _, c := range pathCallsIn(t) {
		if _, ok := notHome[c.key]; !ok {
			t.Errorf("%s: path-based %s in a package that works on the home: use internal/homefs, or list it in notHome with why its path is not in the home", c.pos, c.call)
		}
		calls[c.key] = true
	}
	for k := range notHome {
		if !calls[k] {
			t.Errorf("notHome lists %q, which no longer exists: remove it", k)
		}
	}
}

type pathCall struct{ key, pos, call string }

func pathCallsIn(t *testing.T) []pathCall {
	t.Helper()
	var out []pathCall
	fset := token.NewFileSet()
	for _, pkg := range homePackages {
		files, err := filepath.Glob(filepath.Join(pkg, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("package %s: %v (%d files)", pkg, err, len(files))
		}
		sort.Strings(files)
		for _, name := range files {
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			src, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			f, err := parser.ParseFile(fset, name, src, 0)
			if err != nil {
				t.Fatal(err)
			}
			imports := map[string]string{} // local name → import path's last element
			for _, im := range f.Imports {
				p := strings.Trim(im.Path.Value, `"`)
				local := p[strings.LastIndex(p, "/")+1:]
				if im.Name != nil {
					local = im.Name.Name
				}
				imports[local] = p
			}
			for _, decl := range f.Decls {
				fn := "(top level)"
				if d, ok := decl.(*ast.FuncDecl); ok {
					fn = d.Name.Name
				}
				ast.Inspect(decl, func(n ast.Node) bool {
					sel, ok := n.(*ast.SelectorExpr)
					if !ok {
						return true
					}
					id, ok := sel.X.(*ast.Ident)
					if !ok {
						return true
					}
					pkgName := id.Name
					switch imports[pkgName] {
					case "os", "path/filepath", "golang.org/x/sys/unix", "syscall":
					default:
						return true
					}
					short := imports[pkgName][strings.LastIndex(imports[pkgName], "/")+1:]
					if short == "syscall" {
						short = "unix"
					}
					for _, c := range pathCalls[short] {
						if sel.Sel.Name == c {
							call := short + "." + c
							out = append(out, pathCall{key: pkg + "/" + filepath.Base(name) + " " + fn + " " + call, pos: fset.Position(sel.Pos()).String(), call: call})
						}
					}
					return true
				})
			}
		}
	}
	return out
}

// The home is opened once, by the command (internal/cli), and handed down
// as a homefs.Home: every package below works beneath that one descriptor,
// so "beneath the home's descriptor" holds by construction, and none can
// open a different directory than the command checked (a home path
// swapped for a symlink meanwhile, or a stale path in a long-lived
// sidecar). This test fails on a call of homefs.Open or homefs.OpenHome
// outside internal/cli, unless listed in opensHome with why, and on a
// function below the CLI that takes the home as a path (a string
// parameter named home: name a path kept for messages homePath).
var opensHome = map[string]string{
	"homefs":              "defines them: OpenHome opens through Open",
	"testhome":            "a test helper: builds a test's home by path, and opens it as a command would",
	"snaptest":            "a test helper: snapshots and reads a test's home by path",
	"jenkins/jenkinstest": "a test helper: writes a test home's keys by path",
}

func TestHomeIsOpenedOnceByTheCommand(t *testing.T) {
	fset := token.NewFileSet()
	err := filepath.WalkDir(".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return err
		}
		pkg := filepath.ToSlash(filepath.Dir(name))
		if pkg == "cli" || opensHome[pkg] != "" {
			return nil
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			return err
		}
		for _, v := range homeOpenViolations(fset, f) {
			t.Error(v)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// homeOpenViolations reports f's calls of homefs.Open and OpenHome and
// its functions taking a string parameter named home.
func homeOpenViolations(fset *token.FileSet, f *ast.File) []string {
	homefsName := ""
	for _, im := range f.Imports {
		if strings.Trim(im.Path.Value, `"`) == module+"internal/homefs" {
			homefsName = "homefs"
			if im.Name != nil {
				homefsName = im.Name.Name
			}
		}
	}
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.SelectorExpr:
			if id, ok := n.X.(*ast.Ident); ok && homefsName != "" && id.Name == homefsName && (n.Sel.Name == "Open" || n.Sel.Name == "OpenHome") {
				out = append(out, fmt.Sprintf("%s: homefs.%s outside internal/cli: take the homefs.Home the command opened (or list the package in opensHome with why)", fset.Position(n.Pos()), n.Sel.Name))
			}
		case *ast.FuncType:
			for _, p := range n.Params.List {
				if id, ok := p.Type.(*ast.Ident); ok && id.Name == "string" {
					for _, pn := range p.Names {
						if pn.Name == "home" {
							out = append(out, fmt.Sprintf("%s: takes the home as a path: take the *homefs.Home the command opened (a path kept for messages is homePath)", fset.Position(pn.Pos())))
						}
					}
				}
			}
		}
		return true
	})
	return out
}

// TestHomeOpenRuleCatchesViolations: the rule sees an Open by another
// import name, and a home path parameter.
func TestHomeOpenRuleCatchesViolations(t *testing.T) {
	src := `package x
import hf "github.com/homesnap/homesnap/internal/homefs"
func f(home string) { hf.Open(home) }
func g(homePath string, h *hf.Home) { hf.OpenHome(homePath) }`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "x.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := homeOpenViolations(fset, f); len(got) != 3 {
		t.Fatalf("found %d violations, want 3:\n%s", len(got), strings.Join(got, "\n"))
	}
}
