package homefs

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// home makes a home with a/b/file, a secret outside it, and symlinks that
// lead out: link -> outside directory, a/out -> the secret, fifo, dev.
func home(t *testing.T) (Dir, string, string) {
	t.Helper()
	root := t.TempDir()
	h, outside := filepath.Join(root, "home"), filepath.Join(root, "outside")
	must(t, os.MkdirAll(filepath.Join(h, "a", "b"), 0o755))
	must(t, os.MkdirAll(outside, 0o755))
	must(t, os.WriteFile(filepath.Join(h, "a", "b", "file"), []byte("inside"), 0o644))
	must(t, os.WriteFile(filepath.Join(outside, "secret"), []byte("SECRET"), 0o600))
	must(t, os.Symlink(outside, filepath.Join(h, "link")))
	must(t, os.Symlink(filepath.Join(outside, "secret"), filepath.Join(h, "a", "out")))
	must(t, os.Symlink("/dev/zero", filepath.Join(h, "zero")))
	must(t, unix.Mkfifo(filepath.Join(h, "fifo"), 0o644))
	d, err := Open(h)
	must(t, err)
	t.Cleanup(func() { d.Close() })
	return d, h, outside
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// both runs a test with openat2, with the per-component walk that
// replaces it on kernels without it, and on the path of systems without
// openat2 and O_PATH (macOS). Elsewhere the last is the only one.
func both(t *testing.T, f func(t *testing.T)) {
	if runtime.GOOS != "linux" {
		f(t)
		return
	}
	t.Run("openat2", f)
	t.Run("walk", func(t *testing.T) {
		noOpenat2.Store(true)
		defer noOpenat2.Store(false)
		f(t)
	})
	t.Run("no O_PATH", func(t *testing.T) {
		noOPath = true
		defer func() { noOPath = false }()
		f(t)
	})
}

func TestReadFileRefusesSymlinksDevicesAndSize(t *testing.T) {
	both(t, func(t *testing.T) {
		d, _, _ := home(t)
		if got, err := d.ReadFile("a/b/file", 100); err != nil || string(got) != "inside" {
			t.Fatalf("a/b/file: %q, %v", got, err)
		}
		for rel, want := range map[string]error{
			"link/secret": unix.ELOOP, "a/out": unix.ELOOP, "zero": unix.ELOOP,
			"fifo": ErrNotRegular, "a": ErrNotRegular, "../home/a/b/file": unix.EXDEV,
		} {
			if got, err := d.ReadFile(rel, 100); !errors.Is(err, want) {
				t.Errorf("%s: %q, %v; want %v", rel, got, err, want)
			}
		}
		if _, err := d.ReadFile("a/b/file", 5); !errors.Is(err, ErrTooLarge) {
			t.Errorf("6 bytes with a limit of 5: %v", err)
		}
	})
}

// TestWalkFallbackIsUsedWithoutOpenat2 covers kernels before 5.6 (ENOSYS)
// and the seccomp profiles of older container runtimes, which refuse
// openat2 with EPERM: both fall back to the walk, which refuses symlinks
// as openat2 does, instead of failing every access to the home.
func TestWalkFallbackIsUsedWithoutOpenat2(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("openat2 is Linux's")
	}
	for _, errno := range []unix.Errno{unix.ENOSYS, unix.EPERM} {
		t.Run(unix.ErrnoName(errno), func(t *testing.T) {
			d, _, _ := home(t)
			defer func() { openat2Errno = 0; noOpenat2.Store(false) }()
			openat2Errno = errno
			if got, err := d.ReadFile("a/b/file", 100); err != nil || string(got) != "inside" {
				t.Fatalf("a/b/file without openat2: %q, %v", got, err)
			}
			if !noOpenat2.Load() {
				t.Fatalf("%v not remembered", errno)
			}
			if _, err := d.ReadFile("link/secret", 100); !errors.Is(err, unix.ELOOP) {
				t.Fatalf("through a symlinked directory without openat2: %v", err)
			}
			if _, err := d.ReadFile("a/out", 100); !errors.Is(err, unix.ELOOP) {
				t.Fatalf("a symlink without openat2: %v", err)
			}
		})
	}
}

func TestWriteFileReplacesAPlantedTemporary(t *testing.T) {
	both(t, func(t *testing.T) {
		d, h, outside := home(t)
		must(t, os.Symlink(filepath.Join(outside, "secret"), filepath.Join(h, "a", "mark.tmp")))
		must(t, d.WriteFile("a/mark", "mark.tmp", []byte("new"), 0o600, nil))
		if got, _ := os.ReadFile(filepath.Join(outside, "secret")); string(got) != "SECRET" {
			t.Fatalf("the file behind the planted link became %q", got)
		}
		got, err := os.ReadFile(filepath.Join(h, "a", "mark"))
		if err != nil || string(got) != "new" {
			t.Fatalf("a/mark: %q, %v", got, err)
		}
		if fi, _ := os.Stat(filepath.Join(h, "a", "mark")); fi.Mode().Perm() != 0o600 {
			t.Fatalf("mode %v", fi.Mode())
		}
		if _, err := os.Lstat(filepath.Join(h, "a", "mark.tmp")); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("temporary left: %v", err)
		}
		if err := d.WriteFile("link/x", "x.tmp", []byte("new"), 0o600, nil); !errors.Is(err, unix.ELOOP) {
			t.Fatalf("write through a symlinked directory: %v", err)
		}
	})
}

func TestMetadataAndRenameStayBeneath(t *testing.T) {
	both(t, func(t *testing.T) {
		d, h, outside := home(t)
		secret := filepath.Join(outside, "secret")
		if err := d.Chmod("link/secret", 0o777); !errors.Is(err, unix.ELOOP) {
			t.Errorf("chmod through a symlinked directory: %v", err)
		}
		if err := d.Chmod("a/out", 0o777); !errors.Is(err, unix.ELOOP) {
			t.Errorf("chmod of a symlink: %v", err)
		}
		if fi, _ := os.Stat(secret); fi.Mode().Perm() != 0o600 {
			t.Fatalf("the secret's mode became %v", fi.Mode())
		}
		must(t, d.Chmod("a/b/file", 0o640))
		if fi, _ := os.Stat(filepath.Join(h, "a", "b", "file")); fi.Mode().Perm() != 0o640 {
			t.Fatalf("a/b/file: %v", fi.Mode())
		}
		must(t, d.Chown("a/out", os.Getuid(), os.Getgid()))
		if err := d.Rename("link/secret", d, "stolen"); !errors.Is(err, unix.ELOOP) {
			t.Errorf("rename through a symlinked directory: %v", err)
		}
		must(t, d.Rename("a/b/file", d, "moved"))
		if got, _ := d.ReadFile("moved", 10); string(got) != "inside" {
			t.Fatalf("moved: %q", got)
		}
	})
}

func TestRemoveAllDoesNotFollowAndOpensLockedDirectories(t *testing.T) {
	d, h, outside := home(t)
	must(t, os.MkdirAll(filepath.Join(h, "t", "ro", "x"), 0o755))
	must(t, os.Symlink(outside, filepath.Join(h, "t", "ro", "out")))
	must(t, os.Chmod(filepath.Join(h, "t", "ro"), 0o555))
	must(t, d.RemoveAll("t"))
	if _, err := os.Lstat(filepath.Join(h, "t")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("t is left: %v", err)
	}
	if got, _ := os.ReadFile(filepath.Join(outside, "secret")); string(got) != "SECRET" {
		t.Fatal("the link's target was removed")
	}
	must(t, d.RemoveAll("never-there"))
}

func TestFSRefusesLinksAndDevices(t *testing.T) {
	d, _, _ := home(t)
	fsys := FS(d)
	if got, err := fs.ReadFile(fsys, "a/b/file"); err != nil || string(got) != "inside" {
		t.Fatalf("a/b/file: %q %v", got, err)
	}
	for _, p := range []string{"link/secret", "a/out", "zero", "fifo"} {
		if _, err := fs.ReadFile(fsys, p); err == nil {
			t.Errorf("%s was read", p)
		}
	}
	entries, err := fs.ReadDir(fsys, "a")
	must(t, err)
	var names bytes.Buffer
	for _, e := range entries {
		names.WriteString(e.Name() + ":" + e.Type().String() + " ")
	}
	if names.String() != "b:d--------- out:L--------- " {
		t.Errorf("a lists %q", names.String())
	}
}

func TestChmodFuncChoosesByTheInodeItChanges(t *testing.T) {
	both(t, func(t *testing.T) {
		d, h, outside := home(t)
		mode := func(isDir bool) uint32 {
			if isDir {
				return 0o2750
			}
			return 0o640
		}
		must(t, d.ChmodFunc("a/b", mode))
		must(t, d.ChmodFunc("a/b/file", mode))
		for rel, want := range map[string]fs.FileMode{"a/b": fs.ModeDir | fs.ModeSetgid | 0o750, "a/b/file": 0o640} {
			if fi, _ := os.Lstat(filepath.Join(h, rel)); fi.Mode() != want {
				t.Errorf("%s: %v, want %v", rel, fi.Mode(), want)
			}
		}
		for _, rel := range []string{"link", "a/out", "link/secret"} {
			if err := d.ChmodFunc(rel, mode); !errors.Is(err, unix.ELOOP) {
				t.Errorf("%s: %v, want ELOOP", rel, err)
			}
		}
		if fi, _ := os.Stat(outside); fi.Mode().Perm() != 0o755 {
			t.Errorf("the linked directory became %v", fi.Mode())
		}
		if fi, _ := os.Stat(filepath.Join(outside, "secret")); fi.Mode().Perm() != 0o600 {
			t.Errorf("the secret became %v", fi.Mode())
		}
	})
}

func TestRenameNoReplaceKeepsWhatIsThere(t *testing.T) {
	for _, unsupported := range []bool{false, true} {
		t.Run(map[bool]string{false: "renameat2", true: "check-then-rename"}[unsupported], func(t *testing.T) {
			renameNoReplaceUnsupported = unsupported
			defer func() { renameNoReplaceUnsupported = false }()
			both(t, func(t *testing.T) {
				d, h, outside := home(t)
				must(t, os.WriteFile(filepath.Join(h, "a", "taken"), []byte("kept"), 0o644))
				for _, to := range []string{"a/taken", "a/out", "link", "a/b"} {
					if err := d.RenameNoReplace("a/b/file", d, to); !errors.Is(err, unix.EEXIST) {
						t.Errorf("onto %s: %v, want EEXIST", to, err)
					}
				}
				if err := d.RenameNoReplace("a/b/file", d, "link/x"); !errors.Is(err, unix.ELOOP) {
					t.Errorf("into a symlinked directory: %v", err)
				}
				if err := d.RenameNoReplace("link/secret", d, "stolen"); !errors.Is(err, unix.ELOOP) {
					t.Errorf("out of a symlinked directory: %v", err)
				}
				if got, _ := os.ReadFile(filepath.Join(h, "a", "taken")); string(got) != "kept" {
					t.Fatalf("a/taken became %q", got)
				}
				if _, err := os.Stat(filepath.Join(outside, "x")); !errors.Is(err, fs.ErrNotExist) {
					t.Fatalf("moved out of the home: %v", err)
				}
				must(t, d.RenameNoReplace("a/b/file", d, "a/moved"))
				if got, _ := d.ReadFile("a/moved", 10); string(got) != "inside" {
					t.Fatalf("a/moved: %q", got)
				}
			})
		})
	}
}

func TestRemoveEmptyDirsKeepsAnythingElse(t *testing.T) {
	both(t, func(t *testing.T) {
		d, h, outside := home(t)
		must(t, os.MkdirAll(filepath.Join(h, "e", "x", "y"), 0o755))
		must(t, os.MkdirAll(filepath.Join(h, "e", "z"), 0o755))
		if ok, err := d.RemoveEmptyDirs("e"); !ok || err != nil {
			t.Fatalf("a tree of directories: %v, %v", ok, err)
		}
		if _, err := os.Lstat(filepath.Join(h, "e")); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("e is left: %v", err)
		}
		must(t, os.MkdirAll(filepath.Join(h, "f", "x"), 0o755))
		must(t, os.Symlink(outside, filepath.Join(h, "f", "x", "out")))
		if ok, err := d.RemoveEmptyDirs("f"); ok || err != nil {
			t.Fatalf("a tree holding a symlink: %v, %v", ok, err)
		}
		if _, err := os.Lstat(filepath.Join(h, "f", "x", "out")); err != nil {
			t.Fatalf("the symlink was removed: %v", err)
		}
		if ok, err := d.RemoveEmptyDirs("a"); ok || err != nil {
			t.Fatalf("a tree holding a file: %v, %v", ok, err)
		}
		if got, _ := d.ReadFile("a/b/file", 10); string(got) != "inside" {
			t.Fatalf("a/b/file: %q", got)
		}
		if got, _ := os.ReadFile(filepath.Join(outside, "secret")); string(got) != "SECRET" {
			t.Fatal("the link's target was removed")
		}
		if _, err := d.RemoveEmptyDirs("link/x"); !errors.Is(err, unix.ELOOP) {
			t.Fatalf("through a symlinked directory: %v", err)
		}
	})
}

// TestMetadataRefusesHardLinkedInodes is the home's user linking a file
// from elsewhere on the home's filesystem into the home (with
// fs.protected_hardlinks=0, one it cannot even read): no owner, mode or
// time set on the link's name may reach that file.
func TestMetadataRefusesHardLinkedInodes(t *testing.T) {
	both(t, func(t *testing.T) {
		d, h, outside := home(t)
		secret := filepath.Join(outside, "secret")
		must(t, os.Link(secret, filepath.Join(h, "a", "linked")))
		must(t, os.Symlink("x", filepath.Join(outside, "sym")))
		must(t, os.Link(filepath.Join(outside, "sym"), filepath.Join(h, "a", "linkedsym")))
		var before, sym unix.Stat_t
		must(t, unix.Lstat(secret, &before))
		must(t, unix.Lstat(filepath.Join(outside, "sym"), &sym))
		ts := []unix.Timespec{unix.NsecToTimespec(1e9), unix.NsecToTimespec(1e9)}
		ops := map[string]func(rel string) error{
			"Chmod":     func(rel string) error { return d.Chmod(rel, 0o666) },
			"ChmodFunc": func(rel string) error { return d.ChmodFunc(rel, func(bool) uint32 { return 0o666 }) },
			"Chown":     func(rel string) error { return d.Chown(rel, 1000, 1000) },
			"SetTimes":  func(rel string) error { return d.SetTimes(rel, ts) },
			"SetMeta": func(rel string) error {
				return d.SetMeta(rel, Meta{Owner: &Owner{1000, 1000}, Mode: func(bool) uint32 { return 0o666 }, Times: ts})
			},
		}
		for name, op := range ops {
			for _, rel := range []string{"a/linked", "a/linkedsym"} {
				if err := op(rel); !errors.Is(err, ErrHardLinked) {
					t.Errorf("%s %s: %v, want ErrHardLinked", name, rel, err)
				}
			}
		}
		var after unix.Stat_t
		must(t, unix.Lstat(secret, &after))
		if after.Mode != before.Mode || after.Uid != before.Uid || after.Gid != before.Gid || after.Mtim != before.Mtim {
			t.Fatalf("the outside file changed: mode %o uid %d gid %d mtime %v, was %o %d %d %v",
				after.Mode, after.Uid, after.Gid, after.Mtim, before.Mode, before.Uid, before.Gid, before.Mtim)
		}
		must(t, unix.Lstat(filepath.Join(outside, "sym"), &after))
		if after.Uid != sym.Uid || after.Mtim != sym.Mtim {
			t.Fatalf("the outside symlink changed: uid %d mtime %v", after.Uid, after.Mtim)
		}
		// A file of its own, a directory (always several links) and a
		// symlink (which has no mode) are changed as before.
		m := Meta{Owner: &Owner{os.Getuid(), os.Getgid()}, Mode: func(isDir bool) uint32 { return 0o750 }, Times: ts}
		if err := d.SetMeta("a/out", m); !errors.Is(err, unix.ELOOP) {
			t.Errorf("a mode for a symlink: %v, want ELOOP", err)
		}
		for _, rel := range []string{"a/b/file", "a/b", "a/out"} {
			if rel == "a/out" {
				m.Mode = nil
			}
			must(t, d.SetMeta(rel, m))
			var st unix.Stat_t
			must(t, unix.Lstat(filepath.Join(h, rel), &st))
			if st.Mtim != ts[1] || rel != "a/out" && st.Mode&0o7777 != 0o750 {
				t.Errorf("%s: mode %o mtime %v", rel, st.Mode&0o7777, st.Mtim)
			}
		}
	})
}
