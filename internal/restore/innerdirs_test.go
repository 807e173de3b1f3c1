package restore

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/homesnap/homesnap/internal/snaptest"
)

// Directories staged whole get their mode and mtime while the workers
// still write files elsewhere. Each must get them only after every file
// below it is written (creating one changes the directory's mtime), and
// a queue of directories past its bound must send the run they wait for
// rather than wait forever. The home: 3,000 build directories with a file
// each (two runs of up to 2,048 files), one of them read-only, then 5,000
// empty directories that all wait for the last run, which is still open
// when they are left.
func TestInnerDirectoriesGetTheirMetadataAfterTheirFiles(t *testing.T) {
	home, st := t.TempDir(), snaptest.NewStore(t)
	const builds, empty = 3000, maxQueuedDirs + 904
	for i := range builds {
		snaptest.Write(t, home, fmt.Sprintf("jobs/many/builds/%d/build.xml", i), fmt.Sprintf("<build>%d</build>", i))
	}
	for i := range empty {
		if err := os.MkdirAll(filepath.Join(home, fmt.Sprintf("jobs/many/waiting/%05d", i)), 0o750); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(home, "jobs/many/builds/7"), 0o555); err != nil {
		t.Fatal(err)
	}
	// Times no restore can give by accident, one per directory.
	old := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	n := 0
	err := filepath.WalkDir(filepath.Join(home, "jobs"), func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			n++
			err = os.Chtimes(p, old, old.Add(time.Duration(n)*time.Second+time.Duration(n)))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	want := snaptest.Selected(t, home)
	waiting := 0
	for p := range want {
		if strings.HasPrefix(p, "jobs/many/waiting/") {
			waiting++
		}
	}
	if waiting != empty {
		t.Fatalf("the selection has %d of the %d empty directories", waiting, empty)
	}
	snaptest.Snap(t, home, st)

	target := t.TempDir()
	if err := restore(target, st, ""); err != nil {
		t.Fatal(err)
	}
	snaptest.AssertSame(t, want, snaptest.All(t, target))
	snaptest.AssertNoStaging(t, target)
}
