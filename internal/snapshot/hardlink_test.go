package snapshot_test

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/homesnap/homesnap/internal/repo"
	"github.com/homesnap/homesnap/internal/snaptest"
	"github.com/homesnap/homesnap/internal/store"
)

// TestRootSidecarLeavesOutHardLinkedFilesOfOthers: the home's user (uid
// 1000) links a root-owned file from elsewhere on the home's filesystem
// into the home, so that a root sidecar stores its bytes and a restore
// with --chown 1000:1000 hands them over. The root sidecar leaves it out
// with a warning and a count, and stores hard links of the home's user as
// before; with the link in place, the next snapshot finds nothing changed.
// Fails on main: the root file's bytes are stored and restored.
func TestRootSidecarLeavesOutHardLinkedFilesOfOthers(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the guard is a root sidecar's")
	}
	for _, c := range []struct {
		name      string
		homeOwner int    // the home directory's; 0: a volume given through fsGroup
		mode      uint32 // of the root file
		asUser    bool   // ln runs as uid 1000
	}{
		{"root-only file (protected_hardlinks=0)", 1000, 0o600, false},
		{"root file uid 1000 can write, linked by uid 1000", 1000, 0o666, true},
		{"home directory owned by root (fsGroup)", 0, 0o600, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			base, err := os.MkdirTemp("", "homesnap-hardlink-")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(base) })
			home, outside := filepath.Join(base, "home"), filepath.Join(base, "outside")
			must := func(err error) {
				t.Helper()
				if err != nil {
					t.Fatal(err)
				}
			}
			must(os.Chmod(base, 0o755))
			must(os.Mkdir(outside, 0o755))
			for rel, data := range map[string]string{
				"config.xml": "<hudson/>\n", "jobs/a/config.xml": "<project/>\n",
				"jobs/a/builds/1/log": "Started\n", "secrets/master.key": "k",
			} {
				snaptest.Write(t, home, rel, data)
			}
			must(filepath.Walk(home, func(p string, _ os.FileInfo, err error) error {
				if err == nil {
					err = os.Lchown(p, 1000, 1000)
				}
				return err
			}))
			must(os.Chmod(home, 0o775))
			must(os.Chown(home, c.homeOwner, 1000))
			// The home's user's own hard link: stored, both names.
			must(os.Link(filepath.Join(home, "jobs/a/builds/1/log"), filepath.Join(home, "jobs/a/builds/1/log.bak")))
			secret := filepath.Join(outside, "secret")
			must(os.WriteFile(secret, []byte("ROOT ONLY"), 0o600))
			must(os.Chmod(secret, os.FileMode(c.mode)))
			stolen := filepath.Join(home, "secrets/stolen.key")
			if c.asUser {
				cmd := exec.Command("ln", secret, stolen)
				cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 1000, Gid: 1000}}
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("ln as uid 1000: %v: %s", err, out)
				}
			} else {
				must(os.Link(secret, stolen))
			}

			st := snaptest.NewStore(t)
			res := snaptest.Snap(t, home, st)
			if res.LinkedLeftOut != 1 {
				t.Errorf("LinkedLeftOut = %d, want 1", res.LinkedLeftOut)
			}
			entries := storedPaths(t, st, res.ID)
			if _, ok := entries["secrets/stolen.key"]; ok {
				t.Error("the root file linked into the home was stored")
			}
			for _, rel := range []string{"jobs/a/builds/1/log", "jobs/a/builds/1/log.bak", "secrets/master.key"} {
				if _, ok := entries[rel]; !ok {
					t.Errorf("%s was not stored", rel)
				}
			}
			target := t.TempDir()
			if err := restoreInto(target, st, ""); err != nil {
				t.Fatal(err)
			}
			if data, err := os.ReadFile(filepath.Join(target, "secrets/stolen.key")); err == nil {
				t.Errorf("a restore wrote the root file's bytes: %q", data)
			}
			if again := snaptest.Snap(t, home, st); !again.Unchanged {
				t.Errorf("the next snapshot took %s: the left-out file must not look like a change", again.ID)
			}
		})
	}
}

// storedPaths lists the paths snapshot id records.
func storedPaths(t *testing.T, st store.Store, id string) map[string]bool {
	t.Helper()
	m, err := repo.OpenManifest(context.Background(), st, id)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	out := map[string]bool{}
	for {
		e, err := m.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out[e.Path] = true
	}
}
