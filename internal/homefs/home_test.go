package homefs

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestHomeIsTheDirectoryItOpened: a home opened once stays the directory
// the command checked, also when its path is swapped meanwhile (a
// symlink or another directory put there): Reopen gives a descriptor of
// its own of that same directory, and the home's own descriptor is never
// closed by it.
func TestHomeIsTheDirectoryItOpened(t *testing.T) {
	base := t.TempDir()
	path := filepath.Join(base, "home")
	if err := os.Mkdir(path, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(path, "config.xml"), []byte("<hudson/>"), 0o644)
	h, err := OpenHome(path)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if err := os.Rename(path, path+".moved"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(t.TempDir(), path); err != nil {
		t.Fatal(err)
	}
	own, err := h.Dir.Reopen()
	if err != nil {
		t.Fatal(err)
	}
	if own == h.Dir {
		t.Fatal("Reopen returned the home's own descriptor")
	}
	var a, b unix.Stat_t
	if err := unix.Fstat(own.Fd(), &a); err != nil {
		t.Fatal(err)
	}
	if err := unix.Stat(path+".moved", &b); err != nil {
		t.Fatal(err)
	}
	if a.Ino != b.Ino || a.Dev != b.Dev {
		t.Fatal("Reopen opened what the path names now, not the home that was opened")
	}
	own.Close()
	if data, err := h.Dir.ReadFile("config.xml", 1<<10); err != nil || string(data) != "<hudson/>" {
		t.Fatalf("the home after its reopened descriptor closed: %q, %v", data, err)
	}
	if err := h.Close(); err != nil || h.Exists() || h.Close() != nil {
		t.Fatalf("close: %v; exists after close: %v", err, h.Exists())
	}
}

// TestMissingHomeHoldsNothing: a dry run's home that does not exist is
// not an open one, and closing it is no error.
func TestMissingHomeHoldsNothing(t *testing.T) {
	m := Missing(filepath.Join(t.TempDir(), "none"))
	var nilHome *Home
	if m.Exists() || nilHome.Exists() || m.Close() != nil {
		t.Fatal("a missing home exists, or cannot be closed")
	}
}
