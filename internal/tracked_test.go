package internal_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestNoLargeTrackedFiles: every clone downloads every tracked file, so a
// build output committed by mistake (a 79 MB binary once was) costs every
// user. Files over 1 MiB belong in testdata/ with a reason, or nowhere.
func TestNoLargeTrackedFiles(t *testing.T) {
	if _, err := os.Stat(filepath.Join("..", ".git")); err != nil {
		t.Skip("not a git checkout: nothing is tracked")
	}
	cmd := exec.Command("git", "ls-files", "-z")
	cmd.Dir = ".."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	for _, name := range bytes.Split(bytes.TrimRight(out, "\x00"), []byte{0}) {
		path := string(name)
		if strings.HasPrefix(path, "testdata/") || strings.Contains(path, "/testdata/") {
			continue
		}
		fi, err := os.Lstat(filepath.Join("..", path))
		if err != nil {
			continue // deleted in the work tree, not yet committed
		}
		if fi.Mode().IsRegular() && fi.Size() > 1<<20 {
			t.Errorf("%s is tracked and %d bytes: build outputs go in .gitignore; data a test needs goes in a testdata/ directory", path, fi.Size())
		}
	}
}
