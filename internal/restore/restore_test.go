package restore

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/rs/zerolog"

	"github.com/homesnap/homesnap/internal/archive"
	"github.com/homesnap/homesnap/internal/homefs"
	"github.com/homesnap/homesnap/internal/repo"
	"github.com/homesnap/homesnap/internal/snapshot"
	"github.com/homesnap/homesnap/internal/snaptest"
	"github.com/homesnap/homesnap/internal/store"
	"github.com/homesnap/homesnap/internal/store/file"
	"github.com/homesnap/homesnap/internal/testhome"
)

func restore(home string, st store.Store, id string) error {
	_, err := restoreWith(home, st, id, nil)
	return err
}

// restoreWith restores snapshot id (the head when empty) as the
// decision would, with the options and what the decision hands the
// staged restore adjusted by set.
func restoreWith(home string, st store.Store, id string, set func(*Options, *staged)) (*Result, error) {
	o := Options{Store: st, Snapshot: id, Log: zerolog.Nop()}
	var s staged
	if set != nil {
		set(&o, &s)
	}
	h, err := openHome(home, o.DryRun)
	if err != nil {
		return nil, err
	}
	defer h.Close()
	o.Home = h
	return restoreSnapshot(context.Background(), o, s)
}

// openHome opens home as the restore command does: created first, or
// missing in a dry run.
func openHome(home string, dryRun bool) (*homefs.Home, error) {
	if _, err := os.Stat(home); dryRun && errors.Is(err, fs.ErrNotExist) {
		return homefs.Missing(home), nil
	}
	if err := os.MkdirAll(home, 0o755); err != nil {
		return nil, err
	}
	return homefs.OpenHome(home)
}

func TestRoundTripReproducesEveryAttribute(t *testing.T) {
	home, st := snaptest.NewHome(t), snaptest.NewStore(t)
	want := snaptest.Selected(t, home)
	for _, p := range []string{"secrets", "identity.key.enc", "jobs/test/builds/lastFailedBuild", "jobs/empty-folder/jobs", "jobs/déploiement-生产/builds/1/zero"} {
		if _, ok := want[p]; !ok {
			t.Fatalf("fixture lacks %s", p)
		}
	}
	for p := range want {
		if strings.Contains(p, "workspace") || strings.Contains(p, "atomic") || strings.HasPrefix(p, "plugins") {
			t.Fatalf("selection includes %s", p)
		}
	}
	res := snaptest.Snap(t, home, st)
	if res.Totals.Entries != int64(len(want)) {
		t.Errorf("manifest has %d entries, home has %d selected paths", res.Totals.Entries, len(want))
	}
	target := t.TempDir()
	if err := restore(target, st, ""); err != nil {
		t.Fatal(err)
	}
	snaptest.AssertSame(t, want, snaptest.All(t, target))
	if got := snaptest.All(t, target)["secrets"].Mode; got != 0o700 {
		t.Errorf("secrets/ mode %04o, want 0700", got)
	}
	if got := snaptest.All(t, target)["nodes/agent-1/empty"].Mode; got != 0o2750 {
		t.Errorf("setgid directory mode %04o, want 2750", got)
	}
}

func TestRestoreOverExistingHomeTouchesOnlySelectedPaths(t *testing.T) {
	home, st := snaptest.NewHome(t), snaptest.NewStore(t)
	res := snaptest.Snap(t, home, st)
	want := snaptest.Selected(t, home)
	// A home that drifted: extra jobs and builds, edited secrets, plus
	// things restore must never touch.
	target := t.TempDir()
	if err := testhome.Build(target); err != nil {
		t.Fatal(err)
	}
	testhome.Change(t, target)
	extra := filepath.Join(target, "jobs/test/builds/99")
	if err := os.MkdirAll(extra, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(extra, "log"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(target, "jobs/gone/workspace"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(target, "jobs/gone/workspace/keep.txt"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(target, "jobs/gone/config.xml"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	unselected := func(rel string) bool { return !snaptest.Jenkins(t).Selected(rel) }
	before, err := testhome.Read(target, unselected)
	if err != nil {
		t.Fatal(err)
	}
	if err := restore(target, st, res.ID); err != nil {
		t.Fatal(err)
	}
	// jobs/gone is selected but not in the snapshot: its config goes, and
	// it stays only because of its (unselected) workspace.
	w := want
	w["jobs/gone"] = snaptest.All(t, target)["jobs/gone"]
	snaptest.AssertSame(t, w, snaptest.Selected(t, target))
	after, _ := testhome.Read(target, unselected)
	delete(before, "jobs/gone") // its mtime changed as its config left
	delete(after, "jobs/gone")
	delete(before, "") // the home itself
	snaptest.AssertSame(t, before, after)
	snaptest.AssertNoStaging(t, target)
}

// damage lets a test break one object of the store and checks that a
// restore over an existing home fails, names the object, and leaves the
// home exactly as it was.
func damage(t *testing.T, wantInError string, breakIt func(storeDir string, res *snapshot.Result)) {
	t.Helper()
	home := snaptest.NewHome(t)
	storeDir := t.TempDir()
	st, err := file.Open(storeDir)
	if err != nil {
		t.Fatal(err)
	}
	res := snaptest.Snap(t, home, st)
	target := t.TempDir()
	if err := testhome.Build(target); err != nil {
		t.Fatal(err)
	}
	testhome.Change(t, target)
	before := snaptest.All(t, target)
	breakIt(storeDir, res)
	err = restore(target, st, "")
	if err == nil {
		t.Fatal("restore of a damaged store succeeded")
	}
	if !strings.Contains(err.Error(), wantInError) {
		t.Errorf("error %q does not name %q", err, wantInError)
	}
	snaptest.AssertSame(t, before, snaptest.All(t, target))
	snaptest.AssertNoStaging(t, target)
}

func TestCorruptArchiveLeavesHomeAsItWas(t *testing.T) {
	damage(t, "archives/", func(dir string, res *snapshot.Result) {
		p := filepath.Join(dir, "archives", res.ID+".tar.zst")
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for i := len(b) / 3; i < len(b)/3+64; i++ {
			b[i] ^= 0x5a
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	})
}

func TestMissingArchiveLeavesHomeAsItWas(t *testing.T) {
	damage(t, "archives/", func(dir string, res *snapshot.Result) {
		if err := os.Remove(filepath.Join(dir, "archives", res.ID+".tar.zst")); err != nil {
			t.Fatal(err)
		}
	})
}

func TestTruncatedManifestLeavesHomeAsItWas(t *testing.T) {
	damage(t, "snapshots/", func(dir string, res *snapshot.Result) {
		p := filepath.Join(dir, "snapshots", res.ID+".json.zst")
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b[:len(b)/2], 0o644); err != nil {
			t.Fatal(err)
		}
	})
}

// rewriteManifest replaces the head snapshot's manifest with entries edited
// by edit, keeping its archive.
func rewriteManifest(t *testing.T, st store.Store, id string, edit func([]*archive.Entry) []*archive.Entry) {
	t.Helper()
	ctx := context.Background()
	m, err := repo.OpenManifest(ctx, st, id)
	if err != nil {
		t.Fatal(err)
	}
	var entries []*archive.Entry
	for {
		e, err := m.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		entries = append(entries, e)
	}
	hdr := m.Header
	m.Close()
	entries = edit(entries)
	pr, pw := io.Pipe()
	go func() {
		w, err := archive.NewManifestWriter(pw, hdr)
		if err == nil {
			for _, e := range entries {
				// Bypass the writer's order check for hostile input.
				w.ForceWrite(e)
			}
			_, err = w.Close(0, 0)
		}
		pw.CloseWithError(err)
	}()
	if err := st.Put(ctx, repo.ManifestKey(id), pr); err != nil {
		t.Fatal(err)
	}
}

func TestHostileManifestIsRefused(t *testing.T) {
	cases := map[string]func([]*archive.Entry) []*archive.Entry{
		"dot-dot": func(es []*archive.Entry) []*archive.Entry {
			es[len(es)-1].Path = "jobs/../../escape"
			return es
		},
		"absolute": func(es []*archive.Entry) []*archive.Entry {
			es[len(es)-1].Path = "/etc/passwd"
			return es
		},
		"through-symlink": func(es []*archive.Entry) []*archive.Entry {
			// jobs/test/lastSuccessful is a symlink; a file below it would
			// be written through the link.
			for i, e := range es {
				if e.Path == "jobs/test/lastSuccessful" {
					c := *es[i+1]
					c.Path = "jobs/test/lastSuccessful/evil"
					return append(es[:i+1], append([]*archive.Entry{&c}, es[i+1:]...)...)
				}
			}
			t.Fatal("no symlink in fixture")
			return nil
		},
	}
	for name, edit := range cases {
		t.Run(name, func(t *testing.T) {
			home, st := snaptest.NewHome(t), snaptest.NewStore(t)
			res := snaptest.Snap(t, home, st)
			rewriteManifest(t, st, res.ID, edit)
			target := t.TempDir()
			err := restore(target, st, "")
			if err == nil {
				t.Fatal("hostile manifest restored")
			}
			if !strings.Contains(err.Error(), "corrupt") && !strings.Contains(err.Error(), "unsafe") {
				t.Errorf("error %q does not say the manifest is corrupt/unsafe", err)
			}
			if left, _ := os.ReadDir(target); len(left) != 0 {
				t.Errorf("target not empty after refused restore: %v", left)
			}
			if _, err := os.Lstat(filepath.Join(filepath.Dir(target), "escape")); err == nil {
				t.Error("path escaped the home")
			}
		})
	}
}

func TestStoreErrorsAreClear(t *testing.T) {
	home := snaptest.NewHome(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "backup.tar"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	st, _ := file.Open(dir)
	_, err := snapshot.Snapshot(context.Background(), snapshot.Options{Home: testhome.Open(t, home), Store: st, Selector: snaptest.Jenkins(t), Log: zerolog.Nop()})
	if err == nil || !strings.Contains(err.Error(), "not a homesnap store") {
		t.Errorf("foreign prefix: %v", err)
	}
	empty := snaptest.NewStore(t)
	err = restore(t.TempDir(), empty, "")
	if err == nil || !strings.Contains(err.Error(), "no snapshot") {
		t.Errorf("empty store: %v", err)
	}
	res, err := restoreSnapshot(context.Background(), Options{Home: testhome.Open(t, t.TempDir()), Store: empty, AllowEmpty: true, Log: zerolog.Nop()}, staged{})
	if err != nil || !res.Empty {
		t.Errorf("allow-empty: %+v %v", res, err)
	}
	if _, err := file.Open(filepath.Join(dir, "nope")); err == nil || !strings.Contains(err.Error(), "mkdir -p") {
		t.Errorf("missing store dir: %v", err)
	}
}

func TestFailureWhileMovingIntoPlaceRollsBack(t *testing.T) {
	home, st := snaptest.NewHome(t), snaptest.NewStore(t)
	snaptest.Snap(t, home, st)
	target := t.TempDir()
	if err := testhome.Build(target); err != nil {
		t.Fatal(err)
	}
	testhome.Change(t, target)
	moves := 0
	assertRolledBack(t, target, st, func(rel string) error {
		if moves++; moves == 5 {
			return errors.New("injected failure")
		}
		return nil
	})
}

// assertRolledBack fails a restore of target with failAt and checks that the
// home is back as it was: content, types, modes and owners (directory mtimes
// move with the renames and are not compared), with no staging left.
func assertRolledBack(t *testing.T, target string, st store.Store, failAt func(rel string) error) {
	t.Helper()
	before := snaptest.All(t, target)
	_, err := restoreWith(target, st, "", func(o *Options, s *staged) {
		s.hooks = &restoreHooks{beforeAction: func(a *action) error {
			if a.kind == actMeta {
				return nil
			}
			return failAt(a.rel)
		}}
	})
	if err == nil || !strings.Contains(err.Error(), "left as it was") {
		t.Fatalf("restore: %v", err)
	}
	after := snaptest.All(t, target)
	for _, tree := range []testhome.Tree{before, after} {
		for p, a := range tree {
			if a.Type == "d" {
				a.MTime = 0
				tree[p] = a
			}
		}
	}
	snaptest.AssertSame(t, before, after)
	snaptest.AssertNoStaging(t, target)
}

func TestHardLinkInArchiveIsRefused(t *testing.T) {
	home, st := snaptest.NewHome(t), snaptest.NewStore(t)
	res := snaptest.Snap(t, home, st)
	// Replace the archive with one whose entry for a file is a hard link
	// to /etc/passwd, and point that file's manifest entry at it.
	var buf bytes.Buffer
	zw, _ := zstd.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	tw.WriteHeader(&tar.Header{Name: "jobs/test/config.xml", Typeflag: tar.TypeLink, Linkname: "/etc/passwd"})
	tw.Close()
	zw.Close()
	if err := st.Put(context.Background(), repo.ArchiveKey(res.ID), bytes.NewReader(buf.Bytes())); err != nil {
		t.Fatal(err)
	}
	rewriteManifest(t, st, res.ID, func(es []*archive.Entry) []*archive.Entry {
		var out []*archive.Entry
		for _, e := range es {
			if e.HasData() && e.Path != "jobs/test/config.xml" {
				continue // keep only the poisoned file with data
			}
			if e.Path == "jobs/test/config.xml" {
				e.Offset, e.Length = 0, int64(buf.Len())
			}
			out = append(out, e)
		}
		return out
	})
	target := t.TempDir()
	err := restore(target, st, "")
	if err == nil || !strings.Contains(err.Error(), "jobs/test/config.xml") {
		t.Fatalf("hard link accepted or error unclear: %v", err)
	}
	if left, _ := os.ReadDir(target); len(left) != 0 {
		t.Errorf("target changed: %v", left)
	}
}

// TestFullDiskLeavesHomeAsItWas restores onto a small tmpfs that fills up
// half-way through staging.
func TestFullDiskLeavesHomeAsItWas(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a small tmpfs needs root")
	}
	home, st := snaptest.NewHome(t), snaptest.NewStore(t) // ~13 MiB selected
	snaptest.Snap(t, home, st)
	target := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=6m", "tmpfs", target).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here: %v %s", err, out)
	}
	defer exec.Command("umount", target).Run()
	// A small existing home that must survive.
	os.MkdirAll(filepath.Join(target, "jobs/old"), 0o755)
	os.WriteFile(filepath.Join(target, "jobs/old/config.xml"), []byte("<old/>"), 0o644)
	os.MkdirAll(filepath.Join(target, "plugins"), 0o755)
	os.WriteFile(filepath.Join(target, "plugins/git.jpi"), []byte("PK"), 0o644)
	before := snaptest.All(t, target)
	err := restore(target, st, "")
	if err == nil || !strings.Contains(err.Error(), "no space left on device") {
		t.Fatalf("restore onto a full disk: %v", err)
	}
	t.Log(err)
	snaptest.AssertSame(t, before, snaptest.All(t, target))
	snaptest.AssertNoStaging(t, target)
}

// The staging tree is written back early while the workers still stage
// files (here after every file, so that the fixture's small home
// triggers it): the restore must still be exact, and every writeback
// must have run on the open staging tree, before the restore returned.
func TestEarlyWritebackRunsBesideTheStagingAndEndsBeforeTheRestore(t *testing.T) {
	home, st := snaptest.NewHome(t), snaptest.NewStore(t)
	want := snaptest.Selected(t, home)
	snaptest.Snap(t, home, st)
	var mu sync.Mutex
	var runs int
	var errs []error
	returned := false
	target := t.TempDir()
	_, err := restoreWith(target, st, "", func(_ *Options, s *staged) {
		s.hooks = &restoreHooks{writebackEvery: 1, wroteBack: func(err error) {
			mu.Lock()
			defer mu.Unlock()
			runs++
			if err != nil {
				errs = append(errs, err)
			}
			if returned {
				errs = append(errs, errors.New("a writeback ended after the restore returned"))
			}
		}}
	})
	mu.Lock()
	returned = true
	mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	snaptest.AssertSame(t, want, snaptest.All(t, target))
	mu.Lock()
	defer mu.Unlock()
	if runs == 0 {
		t.Error("no early writeback ran although every staged file asked for one")
	}
	for _, err := range errs {
		t.Errorf("writeback: %v", err)
	}
}
