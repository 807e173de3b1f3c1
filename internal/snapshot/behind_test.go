package snapshot_test

import (
	"context"
	"errors"
	"testing"

	"github.com/rs/zerolog"

	"github.com/homesnap/homesnap/internal/homemark"
	"github.com/homesnap/homesnap/internal/repo"
	"github.com/homesnap/homesnap/internal/snapshot"
	"github.com/homesnap/homesnap/internal/snaptest"
	"github.com/homesnap/homesnap/internal/testhome"
)

// Two controllers on one store by mistake: the second was restored from
// the head, the first wrote on. When the first stops and the second takes
// over, a snapshot of the second's home would make its older state the
// head; it is refused, naming both commits, and nothing is written.
func TestSnapshotRefusesAHomeBehindTheHead(t *testing.T) {
	first, st := snaptest.NewHome(t), snaptest.NewStore(t)
	base := snaptest.Snap(t, first, st)
	second := snaptest.CopyDir(t, first) // its mark: equal to base, commit 1
	third := snaptest.CopyDir(t, first)
	testhome.Change(t, first)
	newer := snaptest.Snap(t, first, st)
	testhome.Change(t, second) // Jenkins on the second runs too

	take := func(home string, set func(*snapshot.Options)) (*snapshot.Result, error) {
		o := snapshot.Options{Home: testhome.Open(t, home), Store: st, Selector: snaptest.Jenkins(t), Log: zerolog.Nop()}
		if set != nil {
			set(&o)
		}
		return snapshot.Snapshot(context.Background(), o)
	}
	_, err := take(second, nil)
	var behind *snapshot.BehindError
	if !errors.As(err, &behind) || !errors.Is(err, snapshot.ErrBehind) || behind.Head != newer.ID || behind.HeadSeq != 2 || behind.Mark != base.ID || behind.MarkSeq != 1 {
		t.Fatalf("snapshot of the home behind the head: %v, want a BehindError naming head %s (commit 2) and mark %s (commit 1)", err, newer.ID, base.ID)
	}
	if head, _, err := repo.LoadHead(context.Background(), st); err != nil || head.Snapshot != newer.ID {
		t.Fatalf("the head moved to %+v (%v), want it left at %s", head, err, newer.ID)
	}

	// An operator's override, and the sidecar that committed the head
	// itself (when its mark could not be written), go ahead.
	if res, err := take(second, func(o *snapshot.Options) { o.AllowBehind = true }); err != nil || res.Parent != newer.ID {
		t.Fatalf("with AllowBehind: %+v, %v", res, err)
	}
	head, _, err := repo.LoadHead(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	testhome.Change(t, third)
	if res, err := take(third, func(o *snapshot.Options) { o.OwnCommitted = head.Snapshot }); err != nil || res.Parent != head.Snapshot {
		t.Fatalf("over its own commit: %+v, %v", res, err)
	}
}

// The home the first controller keeps writing is never behind: each of
// its snapshots moves its mark along with the head.
func TestSnapshotsOfTheWriterAreNeverBehind(t *testing.T) {
	home, st := snaptest.NewHome(t), snaptest.NewStore(t)
	snaptest.Snap(t, home, st)
	for range 3 {
		testhome.Change(t, home)
		snaptest.Snap(t, home, st)
	}
}

// A sidecar killed after moving the head and before marking the home: the
// restarted one (which committed nothing yet) finds the head one commit
// past the mark, but the mark says that commit was this home's.
func TestSidecarKilledBeforeMarkingGoesOn(t *testing.T) {
	home, st := snaptest.NewHome(t), snaptest.NewStore(t)
	snaptest.Snap(t, home, st)
	before, err := homemark.Read(testhome.Open(t, home))
	if err != nil || before == nil {
		t.Fatalf("no mark after a snapshot: %v", err)
	}
	testhome.Change(t, home)
	killed := snaptest.Snap(t, home, st)
	if m, err := homemark.Read(testhome.Open(t, home)); err != nil || m.Pending != "" || m.Snapshot != killed.ID {
		t.Fatalf("the mark after the commit: %+v %v, want %s and nothing pending", m, err, killed.ID)
	}
	// The mark as the killed process left it: the earlier one, the commit pending.
	before.Pending = killed.ID
	if err := homemark.Write(testhome.Open(t, home), before); err != nil {
		t.Fatal(err)
	}
	testhome.Change(t, home)
	if res, err := snapshot.Snapshot(context.Background(), snapshot.Options{Home: testhome.Open(t, home), Store: st, Selector: snaptest.Jenkins(t), Log: zerolog.Nop()}); err != nil || res.Parent != killed.ID {
		t.Fatalf("after a kill between the head and the mark: %+v, %v; want a snapshot on top of %s", res, err, killed.ID)
	}
	// Without the pending commit, the same home is behind.
	before.Pending = ""
	if err := homemark.Write(testhome.Open(t, home), before); err != nil {
		t.Fatal(err)
	}
	testhome.Change(t, home)
	if _, err := snapshot.Snapshot(context.Background(), snapshot.Options{Home: testhome.Open(t, home), Store: st, Selector: snaptest.Jenkins(t), Log: zerolog.Nop()}); !errors.Is(err, snapshot.ErrBehind) {
		t.Fatalf("a mark two commits behind, nothing pending: %v, want ErrBehind", err)
	}
}
