package snapshot_test

import (
	"context"
	"testing"

	"github.com/homesnap/homesnap/internal/repo"
	"github.com/homesnap/homesnap/internal/snaptest"
)

// TestRecordsDescribeSnapshots: each committed snapshot's record carries
// its summary, and a snapshot without one (taken before records existed)
// is still listed, from its manifest's header.
func TestRecordsDescribeSnapshots(t *testing.T) {
	ctx := context.Background()
	home, st := snaptest.NewHome(t), snaptest.NewStore(t)
	first := snaptest.Snap(t, home, st)
	snaptest.WriteRandomFile(t, home, "jobs/test/builds/9/log", 5000)
	second := snaptest.Snap(t, home, st)
	r, err := repo.LoadRecord(ctx, st, second.ID)
	if err != nil {
		t.Fatal(err)
	}
	if r.Parent != first.ID || r.Files != second.Totals.Files || r.Bytes != second.Totals.Bytes ||
		r.NewBytes != second.Totals.NewBytes || r.Stored != second.Stored || len(r.Archives) != 2 || r.Partial {
		t.Errorf("record %+v does not describe snapshot %+v", r, second)
	}
	if err := st.Delete(ctx, repo.RecordKey(first.ID)); err != nil {
		t.Fatal(err)
	}
	h, err := repo.LoadHistory(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Snapshots) != 2 || h.Snapshots[1].ID != first.ID || !h.Snapshots[1].Partial || h.Snapshots[1].Time.IsZero() {
		t.Errorf("history without the first record: %+v", h.Snapshots)
	}
}
