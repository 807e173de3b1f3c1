package internal_test

import (
	"bufio"
	"go/build/constraint"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNoRaceBuildTag: scripts/test.sh runs `go vet -race` so that vet and
// `go test -race` share one build. That vets every file only while no file
// is chosen by the race build tag: one such file would go unvetted.
func TestNoRaceBuildTag(t *testing.T) {
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") && path != "..") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			if strings.HasPrefix(line, "package ") {
				break
			}
			if !constraint.IsGoBuild(line) && !constraint.IsPlusBuild(line) {
				continue
			}
			expr, err := constraint.Parse(line)
			if err != nil {
				t.Errorf("%s: %v", path, err)
				continue
			}
			if mentions(expr, "race") {
				t.Errorf("%s: %q: a file chosen by the race tag is vetted only with or without -race; scripts/test.sh vets with -race alone", path, line)
			}
		}
		return sc.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
}

// mentions reports whether tag appears anywhere in x.
func mentions(x constraint.Expr, tag string) bool {
	switch x := x.(type) {
	case *constraint.TagExpr:
		return x.Tag == tag
	case *constraint.NotExpr:
		return mentions(x.X, tag)
	case *constraint.AndExpr:
		return mentions(x.X, tag) || mentions(x.Y, tag)
	case *constraint.OrExpr:
		return mentions(x.X, tag) || mentions(x.Y, tag)
	}
	return false
}

// TestTestCommandRunsEverything: the test command is the full suite.
// `go test -short` is the fast tier (internal/testenv), which skips every
// test needing a server, a container runtime, a tool or much time; the
// test command never passes -short, and sets HOMESNAP_TEST_SERVERS=1
// before it runs a test, so that a missing server fails rather than skips.
func TestTestCommandRunsEverything(t *testing.T) {
	for _, script := range []string{"../scripts/test.sh", "../scripts/k8s.sh", "../.ci/run"} {
		data, err := os.ReadFile(script)
		if err != nil {
			t.Fatal(err)
		}
		servers := false
		for i, line := range strings.Split(string(data), "\n") {
			code, _, _ := strings.Cut(line, "#")
			if strings.Contains(code, "-short") || strings.Contains(code, "test.short") {
				t.Errorf("%s:%d: %q: the test command runs the full suite, never -short", script, i+1, strings.TrimSpace(line))
			}
			if strings.Contains(code, "export HOMESNAP_TEST_SERVERS=1") {
				servers = true
			}
			if script == "../scripts/test.sh" && strings.Contains(code, "go test") && !servers {
				t.Errorf("%s:%d: go test runs before HOMESNAP_TEST_SERVERS=1 is exported", script, i+1)
			}
		}
		if script == "../scripts/test.sh" && !servers {
			t.Errorf("%s does not export HOMESNAP_TEST_SERVERS=1", script)
		}
	}
}
