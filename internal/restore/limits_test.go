package restore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"

	"github.com/homesnap/homesnap/internal/homefs"
	"github.com/homesnap/homesnap/internal/snaptest"
	"github.com/homesnap/homesnap/internal/testenv"
	"github.com/homesnap/homesnap/internal/testhome"
)

// driftedHome is a home that differs from newHome's snapshot in every way a
// commit handles: changed, new, removed and retyped paths.
func driftedHome(t *testing.T, dir string) string {
	t.Helper()
	if err := testhome.Build(dir); err != nil {
		t.Fatal(err)
	}
	testhome.Change(t, dir)
	snaptest.Write(t, dir, "jobs/newjob/builds/1/log", "local build")
	return dir
}

// A commit that fails and whose rollback fails too (the volume ran out of
// space or inodes) must delete nothing: every path of the home is in the
// home or in the displaced directory the error names.
func TestFailedRollbackDeletesNothing(t *testing.T) {
	testenv.Long(t, "fails restores at many points")
	home, st := snaptest.NewHome(t), snaptest.NewStore(t)
	snaptest.Snap(t, home, st)
	target := driftedHome(t, t.TempDir())
	before := snaptest.All(t, target)
	failed, moves := false, 0
	_, err := restoreWith(target, st, "", func(o *Options, s *staged) {
		s.hooks = &restoreHooks{
			beforeAction: func(a *action) error {
				if a.kind == actMoveIn {
					if moves++; moves == 3 {
						failed = true
						return errors.New("injected failure")
					}
				}
				return nil
			},
			rename: func(fromDir int, from string, toDir int, to string) error {
				if failed {
					return unix.ENOSPC
				}
				return unix.Renameat(fromDir, from, toDir, to)
			},
		}
	})
	var rb *rollbackError
	if !errors.As(err, &rb) || !errors.Is(err, ErrRollbackFailed) || rb.displaced == "" || !strings.Contains(err.Error(), rb.displaced) || !strings.Contains(err.Error(), "nothing was deleted") {
		t.Fatalf("restore: %v", err)
	}
	displaced, err := testhome.Read(rb.displaced, nil)
	if err != nil {
		t.Fatalf("the displaced paths are gone: %v", err)
	}
	now := snaptest.All(t, target)
	for p, a := range before {
		if a.Type != "f" {
			continue
		}
		if now[p].Sum != a.Sum && displaced[p].Sum != a.Sum {
			t.Errorf("%s was lost", p)
		}
	}
	if _, err := os.Stat(rb.stage); err != nil {
		t.Errorf("the staged snapshot is gone: %v", err)
	}
}

// mountTmpfs mounts a small tmpfs (root only) for the test's lifetime.
func mountTmpfs(t *testing.T, opts string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", opts, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", dir).Run() })
	return dir
}

func freeInodes(t *testing.T, dir string) uint64 {
	var s unix.Statfs_t
	if err := unix.Statfs(dir, &s); err != nil {
		t.Fatal(err)
	}
	return s.Ffree
}

// The commit and its rollback need no new inode: everything is prepared
// before the first move.
func TestCommitNeedsNoNewInodes(t *testing.T) {
	home, st := snaptest.NewHome(t), snaptest.NewStore(t)
	snaptest.Snap(t, home, st)
	target := driftedHome(t, mountTmpfs(t, "size=128m"))
	seen := map[uint64]bool{}
	_, err := restoreWith(target, st, "", func(o *Options, s *staged) {
		o.Force = true
		s.hooks = &restoreHooks{beforeAction: func(*action) error {
			seen[freeInodes(t, target)] = true
			return nil
		}}
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) != 1 {
		t.Errorf("free inodes changed during the commit: %v", seen)
	}
}

// A home volume with few free inodes: whatever the point at which they run
// out, the restore succeeds or leaves the home as it was.
func TestInodeExhaustionLeavesHomeAsItWas(t *testing.T) {
	testenv.Long(t, "fills a tmpfs's inodes")
	home, st := snaptest.NewHome(t), snaptest.NewStore(t)
	snaptest.Snap(t, home, st)
	outcomes := map[string]int{}
	for _, spare := range []int{3, 40, 400, 1200, 2500, 100000} {
		t.Run(fmt.Sprint(spare), func(t *testing.T) {
			dir := mountTmpfs(t, "size=128m")
			target := driftedHome(t, dir)
			var s unix.Statfs_t
			unix.Statfs(dir, &s)
			used := s.Files - s.Ffree
			if out, err := exec.Command("mount", "-o", fmt.Sprintf("remount,nr_inodes=%d", int(used)+spare), dir).CombinedOutput(); err != nil {
				t.Skipf("cannot limit inodes: %v %s", err, out)
			}
			before := snaptest.All(t, target)
			_, err := restoreWith(target, st, "", nil)
			if err != nil {
				outcomes["failed"]++
				if !strings.Contains(err.Error(), "no space left") {
					t.Errorf("error does not say what ran out: %v", err)
				}
				snaptest.AssertSame(t, before, snaptest.All(t, target))
				snaptest.AssertNoStaging(t, target)
				return
			}
			outcomes["restored"]++
			snaptest.AssertSame(t, snaptest.Selected(t, home), snaptest.Selected(t, target))
		})
	}
	if outcomes["failed"] == 0 || outcomes["restored"] == 0 {
		t.Errorf("outcomes %v: the limits do not span both", outcomes)
	}
}

// A snapshot accepts every path the kernel lets it read; the restore must
// handle all of them although staging adds a prefix (issue: a file at an
// absolute path of 4,071 bytes snapshotted fine and never restored).
func TestPathsNearPathMaxRestore(t *testing.T) {
	home, st := t.TempDir(), snaptest.NewStore(t)
	deep := home
	for len(deep) < 3000 {
		deep = filepath.Join(deep, strings.Repeat("h", 200))
	}
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	home = deep
	rel := "jobs"
	for len(home)+len(rel)+2+255 < 4070 {
		rel += "/" + strings.Repeat("j", 200)
	}
	rel += "/" + strings.Repeat("c", 4070-len(home)-len(rel)-2)
	snaptest.Write(t, home, rel, "<deep/>")
	snaptest.Write(t, home, "jobs/short/config.xml", "<short/>")
	if n := len(filepath.Join(home, rel)); n != 4070 {
		t.Fatalf("path is %d bytes", n)
	}
	snaptest.Snap(t, home, st)
	want := snaptest.Selected(t, home)
	if err := os.RemoveAll(filepath.Join(home, "jobs")); err != nil {
		t.Fatal(err)
	}
	if err := restore(home, st, ""); err != nil {
		t.Fatalf("restore of a path near PATH_MAX: %v", err)
	}
	snaptest.AssertSame(t, want, snaptest.Selected(t, home))
	// Delta and forced restores move single deep paths in and aside.
	snaptest.Write(t, home, rel, "<changed/>")
	res, err := restoreWith(home, st, "", func(o *Options, s *staged) { s.delta, o.Force = true, true })
	if err != nil || res.Fetched != 1 {
		t.Fatalf("delta restore of a deep path: %+v %v", res, err)
	}
	if err := os.RemoveAll(res.Displaced); err != nil { // too deep for testhome.Read
		t.Fatal(err)
	}
	snaptest.AssertSame(t, want, snaptest.Selected(t, home))
}

// A restore killed during its moves (SIGKILL, OOM) leaves a journal; the
// next run undoes the moves first, so the home is as the killed restore
// found it, wherever the kill came.
func TestKilledRestoreIsUndoneByTheNextRun(t *testing.T) {
	testenv.Long(t, "kills a restore at several of its moves")
	home, st := snaptest.NewHome(t), snaptest.NewStore(t)
	snaptest.Snap(t, home, st)
	for _, at := range []int{1, 4, 12, 40} {
		t.Run(fmt.Sprint(at), func(t *testing.T) {
			target := driftedHome(t, t.TempDir())
			before := snaptest.All(t, target)
			steps := 0
			_, err := restoreWith(target, st, "", func(o *Options, s *staged) {
				o.Force = true
				s.hooks = &restoreHooks{kill: func(*action) bool { steps++; return steps == at }}
			})
			if !errors.Is(err, errSimulatedKill) {
				t.Fatalf("restore: %v", err)
			}
			if err := RecoverInterrupted(testhome.Open(t, target), zerolog.Nop()); err != nil {
				t.Fatal(err)
			}
			after := snaptest.All(t, target)
			for _, tree := range []testhome.Tree{before, after} {
				for p, a := range tree {
					if a.Type == "d" { // renames move directory mtimes
						a.MTime = 0
						tree[p] = a
					}
				}
			}
			snaptest.AssertSame(t, before, after)
			snaptest.AssertNoStaging(t, target)
			if err := restore(target, st, ""); err != nil {
				t.Fatal(err)
			}
			snaptest.AssertSame(t, snaptest.Selected(t, home), snaptest.Selected(t, target))
		})
	}
}

// A restore killed after its commit, while it removes its staging
// directory, left its commit log beside a half-removed tree: the next run
// undid what it could of moves that had all succeeded (the moved-in paths
// whose staging directories were gone stayed, the displaced ones could not
// come back) and failed. Seen once in an e2e run; now the log goes first,
// and the next run keeps the completed restore.
func TestRestoreKilledWhileCleaningUpStaysDone(t *testing.T) {
	home, st := snaptest.NewHome(t), snaptest.NewStore(t)
	snaptest.Snap(t, home, st)
	target := driftedHome(t, t.TempDir())
	_, err := restoreWith(target, st, "", func(o *Options, s *staged) {
		o.Force = true
		s.hooks = &restoreHooks{killCleanup: func(stage int) bool {
			// as RemoveAll leaves it partway: part of the tree gone
			fd, err := unix.Openat(stage, "tree", unix.O_RDONLY|unix.O_DIRECTORY, 0)
			if err != nil {
				t.Error(err)
				return true
			}
			defer unix.Close(fd)
			if err := homefs.Dir(fd).RemoveAll("jobs"); err != nil {
				t.Error(err)
			}
			return true
		}}
	})
	if err != nil {
		t.Fatalf("restore: %v", err)
	}
	if err := RecoverInterrupted(testhome.Open(t, target), zerolog.Nop()); err != nil {
		t.Fatalf("the run after the kill: %v", err)
	}
	snaptest.AssertSame(t, snaptest.Selected(t, home), snaptest.Selected(t, target))
	if left, _ := filepath.Glob(filepath.Join(target, stagePrefix+"*")); len(left) > 0 {
		t.Errorf("staging directory left behind: %v", left) // the displaced paths a forced restore keeps are the user's
	}
}

// A second restore must not recover (undo) or remove the staging of a
// restore that is still running in the same home.
func TestConcurrentRestoreIsRefused(t *testing.T) {
	home, st := snaptest.NewHome(t), snaptest.NewStore(t)
	snaptest.Snap(t, home, st)
	target := t.TempDir()
	var second error
	_, err := restoreWith(target, st, "", func(o *Options, s *staged) {
		o.BeforeCommit = func(context.Context, fs.FS) error {
			_, second = restoreWith(target, st, "", nil)
			return nil
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(second, ErrHomeBusy) {
		t.Fatalf("second restore during the first: %v", second)
	}
	if err := RecoverInterrupted(testhome.Open(t, target), zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	snaptest.AssertSame(t, snaptest.Selected(t, home), snaptest.Selected(t, target))
}
