package restore

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/homesnap/homesnap/internal/snaptest"
)

// Directory metadata is applied as the manifest leaves each directory, so
// a later failure must also undo modes already set.
func TestRollbackUndoesDirectoryModesSetEarly(t *testing.T) {
	home, st := snaptest.NewHome(t), snaptest.NewStore(t)
	ro := filepath.Join(home, "jobs", "aaa-ro")
	if err := os.MkdirAll(ro, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ro, "config.xml"), []byte("<snap/>"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(ro, 0o555); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(ro, 0o755) })
	snaptest.Snap(t, home, st)

	target := t.TempDir()
	tro := filepath.Join(target, "jobs", "aaa-ro")
	if err := os.MkdirAll(tro, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tro, "config.xml"), []byte("<home/>"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(tro, 0o755) })
	assertRolledBack(t, target, st, func(rel string) error {
		if !strings.HasPrefix(rel, "jobs/") {
			return errors.New("injected failure")
		}
		return nil
	})
	fi, err := os.Stat(tro)
	if err != nil || fi.Mode().Perm() != 0o750 {
		t.Fatalf("mode of jobs/aaa-ro after rollback: %v %v", fi.Mode(), err)
	}

	// Without the failure the snapshot's read-only mode is applied.
	if err := restore(target, st, ""); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(tro); err != nil || fi.Mode().Perm() != 0o555 {
		t.Fatalf("mode of jobs/aaa-ro after restore: %v %v", fi.Mode(), err)
	}
	snaptest.AssertSame(t, snaptest.Selected(t, home), snaptest.Selected(t, target))
}
