package restore

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"

	"github.com/homesnap/homesnap/internal/homefs"
	"github.com/homesnap/homesnap/internal/snaptest"
	"github.com/homesnap/homesnap/internal/store"
	"github.com/homesnap/homesnap/internal/testhome"
)

// The home's user (uid 1000, build code) replaces a file of the home by a
// hard link to a root-owned file elsewhere on the home's filesystem with
// the same bytes, then waits for a root restore with --chown 1000:1000.
// Two ways it gets the link: where fs.protected_hardlinks=0 it can link a
// root-only file (the test makes that link as root: only its existence
// matters), and everywhere it can link a root file it can write (the test
// runs ln as uid 1000).
var hardLinkCases = []struct {
	name   string
	mode   uint32 // of the root-owned file outside the home
	asUser bool   // ln runs as uid 1000
}{
	{"root-only file (protected_hardlinks=0)", 0o600, false},
	{"root file uid 1000 can write, linked by uid 1000", 0o666, true},
}

const victim = "jobs/a/config.xml"

// adversaryHome snapshots a small home and restores it, as root with
// --chown 1000:1000, into a home uid 1000 can reach, next to a directory
// outside it on the same filesystem. It returns the store, the home and
// the root-owned file outside, which holds victim's bytes.
func adversaryHome(t *testing.T, mode uint32) (store.Store, string, string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the attack needs a root restore")
	}
	src, st := t.TempDir(), snaptest.NewStore(t)
	for rel, data := range map[string]string{
		"config.xml": "<hudson/>\n", victim: "<project>a</project>\n",
		"jobs/a/builds/1/log": "Started\n", "nodes/n/config.xml": "<slave/>\n", "secrets/master.key": "k",
	} {
		snaptest.Write(t, src, rel, data)
	}
	if err := os.Chmod(filepath.Join(src, victim), 0o644); err != nil {
		t.Fatal(err)
	}
	snaptest.Snap(t, src, st)
	base, err := os.MkdirTemp("", "homesnap-hardlink-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	home, outside := filepath.Join(base, "home"), filepath.Join(base, "outside")
	for _, d := range []string{home, outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Chmod(base, 0o755))
	must(os.Chown(home, 1000, 1000))
	if _, err := restoreWith(home, st, "", func(o *Options, s *staged) { o.Chown = &Owner{1000, 1000} }); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(outside, "secret")
	data, err := os.ReadFile(filepath.Join(home, victim))
	must(err)
	must(os.WriteFile(secret, data, 0o600))
	must(os.Chmod(secret, os.FileMode(mode)))
	must(unix.Lutimes(secret, []unix.Timeval{{Sec: 1000}, {Sec: 1000}}))
	return st, home, secret
}

// linkOutside replaces rel in home by a hard link to secret, as the
// home's user.
func linkOutside(t *testing.T, home, rel, secret string, asUser bool) {
	t.Helper()
	p := filepath.Join(home, rel)
	if !asUser {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
		if err := os.Link(secret, p); err != nil {
			t.Fatal(err)
		}
		return
	}
	cmd := exec.Command("ln", "-f", secret, p)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 1000, Gid: 1000}}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("ln as uid 1000: %v: %s", err, out)
	}
}

// assertUntouched fails if the file outside the home lost its owner, mode
// or mtime.
func assertUntouched(t *testing.T, secret string, mode uint32) {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(secret, &st); err != nil {
		t.Fatal(err)
	}
	if st.Uid != 0 || st.Gid != 0 || st.Mode&0o7777 != mode || st.Mtim.Sec != 1000 {
		t.Errorf("the root file outside the home became %d:%d %04o mtime %d; want 0:0 %04o mtime 1000",
			st.Uid, st.Gid, st.Mode&0o7777, st.Mtim.Sec, mode)
	}
}

// A delta restore meets the linked file with the snapshot's bytes and
// other metadata: it replaces the name with a fresh file (the snapshot's,
// owned 1000:1000) and never changes the shared inode.
// Fails on main: the outside file became 1000:1000 0644.
func TestDeltaRestoreReplacesAHardLinkedFile(t *testing.T) {
	for _, c := range hardLinkCases {
		t.Run(c.name, func(t *testing.T) {
			st, home, secret := adversaryHome(t, c.mode)
			linkOutside(t, home, victim, secret, c.asUser)
			var kind ChangeKind
			_, err := restoreWith(home, st, "", func(o *Options, s *staged) {
				s.delta, o.Chown = true, &Owner{1000, 1000}
				o.OnChange = func(c Change) {
					if c.Path == victim {
						kind = c.Kind
					}
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			assertUntouched(t, secret, c.mode)
			var got unix.Stat_t
			if err := unix.Lstat(filepath.Join(home, victim), &got); err != nil {
				t.Fatal(err)
			}
			if got.Nlink != 1 || got.Uid != 1000 || got.Mode&0o7777 != 0o644 {
				t.Errorf("%s: %d links, owner %d, mode %04o; want a fresh file of 1000 with mode 0644", victim, got.Nlink, got.Uid, got.Mode&0o7777)
			}
			if data, _ := os.ReadFile(filepath.Join(home, victim)); string(data) != "<project>a</project>\n" {
				t.Errorf("%s holds %q", victim, data)
			}
			if kind != ChangeReplace {
				t.Errorf("%s: change %q, want %q", victim, kind, ChangeReplace)
			}
		})
	}
}

// The link appears between the comparison and the commit's metadata step
// (a partial restore into a running controller): the step is refused on
// the opened inode, and the commit rolls back.
// Fails on main: the outside file became 1000:1000 0644.
func TestCommitRefusesAFileHardLinkedMeanwhile(t *testing.T) {
	for _, c := range hardLinkCases {
		t.Run(c.name, func(t *testing.T) {
			st, home, secret := adversaryHome(t, c.mode)
			if err := os.Chmod(filepath.Join(home, victim), 0o600); err != nil { // so the commit fixes its mode
				t.Fatal(err)
			}
			_, err := restoreWith(home, st, "", func(o *Options, s *staged) {
				s.delta, o.Chown = true, &Owner{1000, 1000}
				s.hooks = &restoreHooks{beforeAction: func(a *action) error {
					if a.kind == actMeta && a.rel == victim {
						linkOutside(t, home, victim, secret, c.asUser)
					}
					return nil
				}}
			})
			if !errors.Is(err, homefs.ErrHardLinked) {
				t.Fatalf("restore: %v, want a refusal naming the hard link", err)
			}
			assertUntouched(t, secret, c.mode)
			snaptest.AssertNoStaging(t, home)
		})
	}
}

// A restore is killed after fixing a file's metadata; the home's user
// then replaces that file by the link, and the next restore undoes the
// killed one's journal: it leaves the link alone.
// Fails on main: the outside file became 1000:1000 0600.
func TestCommitLogUndoLeavesAHardLinkedFileAlone(t *testing.T) {
	for _, c := range hardLinkCases {
		t.Run(c.name, func(t *testing.T) {
			st, home, secret := adversaryHome(t, c.mode)
			if err := os.Chmod(filepath.Join(home, victim), 0o600); err != nil {
				t.Fatal(err)
			}
			// Another file changed, so a step follows the metadata step.
			snaptest.Write(t, home, "secrets/master.key", "local")
			fixed := false
			_, err := restoreWith(home, st, "", func(o *Options, s *staged) {
				s.delta, o.Chown = true, &Owner{1000, 1000}
				s.hooks = &restoreHooks{kill: func(a *action) bool {
					if fixed {
						return true
					}
					fixed = a.kind == actMeta && a.rel == victim
					return false
				}}
			})
			if !errors.Is(err, errSimulatedKill) || !fixed {
				t.Fatalf("restore: %v (metadata step taken: %v)", err, fixed)
			}
			linkOutside(t, home, victim, secret, c.asUser)
			if err := RecoverInterrupted(testhome.Open(t, home), zerolog.Nop()); err != nil {
				t.Fatal(err)
			}
			assertUntouched(t, secret, c.mode)
			snaptest.AssertNoStaging(t, home)
		})
	}
}
