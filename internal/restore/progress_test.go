package restore

import (
	"sync/atomic"
	"testing"

	"github.com/homesnap/homesnap/internal/snaptest"
)

// countProgress adds up what a restore reports.
type countProgress struct {
	plannedFiles, plannedBytes, doneFiles, doneBytes atomic.Int64
}

func (c *countProgress) Planned(files, bytes int64) {
	c.plannedFiles.Add(files)
	c.plannedBytes.Add(bytes)
}

func (c *countProgress) Done(files, bytes int64) {
	c.doneFiles.Add(files)
	c.doneBytes.Add(bytes)
}

// A full restore reports every file of the snapshot, planned and done.
func TestRestoreReportsProgress(t *testing.T) {
	home, st := snaptest.NewHome(t), snaptest.NewStore(t)
	s := snaptest.Snap(t, home, st)
	var p countProgress
	res, err := restoreWith(t.TempDir(), st, "", func(o *Options, s *staged) { o.Progress = &p })
	if err != nil {
		t.Fatal(err)
	}
	if s.Totals.Files == 0 || res.Files != s.Totals.Files || res.Bytes != s.Totals.Bytes {
		t.Fatalf("restored %d files of %d bytes; the snapshot holds %d of %d", res.Files, res.Bytes, s.Totals.Files, s.Totals.Bytes)
	}
	for _, c := range []struct {
		what         string
		files, bytes int64
	}{
		{"planned", p.plannedFiles.Load(), p.plannedBytes.Load()},
		{"done", p.doneFiles.Load(), p.doneBytes.Load()},
	} {
		if c.files != s.Totals.Files || c.bytes != s.Totals.Bytes {
			t.Errorf("progress %s: %d files, %d bytes; the snapshot holds %d files, %d bytes", c.what, c.files, c.bytes, s.Totals.Files, s.Totals.Bytes)
		}
	}
	// A dry run reports nothing: it does nothing.
	var dry countProgress
	if _, err := restoreWith(t.TempDir(), st, "", func(o *Options, s *staged) { o.Progress, o.DryRun = &dry, true }); err != nil {
		t.Fatal(err)
	}
	if dry.plannedFiles.Load() != 0 || dry.doneFiles.Load() != 0 {
		t.Errorf("a dry run reported progress")
	}
}
