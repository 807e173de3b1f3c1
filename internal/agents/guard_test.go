package agents

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/rs/zerolog"

	"github.com/homesnap/homesnap/internal/archive"
	"github.com/homesnap/homesnap/internal/jenkins"
	"github.com/homesnap/homesnap/internal/jenkins/jenkinstest"
	"github.com/homesnap/homesnap/internal/repo"
	"github.com/homesnap/homesnap/internal/snapshot"
	"github.com/homesnap/homesnap/internal/snaptest"
	"github.com/homesnap/homesnap/internal/store"
)

// manifestReads counts the reads of manifests.
type manifestReads struct {
	store.Store
	n atomic.Int64
}

func (m *manifestReads) Get(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	if repo.IsManifestKey(key) {
		m.n.Add(1)
	}
	return m.Store.Get(ctx, key, off, n)
}

// TestGuardChecksAgainstWhatItCommitted: while the sidecar's last snapshot
// is the head, the guard checks the next one against the entries it kept
// of it (a full snapshot's and an incremental's), reading no manifest, and
// still refuses keys regenerated since; with another head it reads that
// head's manifest and decides the same.
func TestGuardChecksAgainstWhatItCommitted(t *testing.T) {
	ctx := context.Background()
	path := t.TempDir()
	if err := jenkinstest.WriteKeys(path); err != nil {
		t.Fatal(err)
	}
	if err := jenkinstest.InboundNode(path, "agent-1", false); err != nil {
		t.Fatal(err)
	}
	snaptest.Write(t, path, "jobs/build/config.xml", "<project/>")
	home := openHome(t, path)
	st := &manifestReads{Store: snaptest.NewStore(t)}
	take := func() *Known {
		t.Helper()
		res, err := snapshot.Snapshot(ctx, snapshot.Options{Home: home, Store: st, Selector: snaptest.Jenkins(t), Log: zerolog.Nop(), Keep: jenkins.Needed})
		if err != nil || res.Unchanged {
			t.Fatalf("snapshot: %+v, %v", res, err)
		}
		return &Known{Header: archive.Header{ID: res.ID}, Entries: res.Kept}
	}
	guard := func(known *Known) (int64, error) {
		t.Helper()
		before := st.n.Load()
		err := GuardKeys(ctx, home, st, known, false, zerolog.Nop())
		return st.n.Load() - before, err
	}

	known := take()
	if len(known.Entries) < 3 {
		t.Fatalf("kept %d entries of the snapshot, want its secrets, identity and nodes", len(known.Entries))
	}
	snaptest.Write(t, path, "jobs/build/config.xml", "<project>changed</project>")
	known = take() // an incremental: its unchanged key entries come from the parent
	if reads, err := guard(known); err != nil || reads != 0 {
		t.Fatalf("guard of an unchanged home against its own head: %v, %d manifest reads; want it to pass reading none", err, reads)
	}

	master, err := os.ReadFile(filepath.Join(path, jenkins.MasterKeyPath))
	if err != nil {
		t.Fatal(err)
	}
	if err := jenkinstest.WrapKey(path, jenkins.StoreKey(master), jenkins.AgentKeyPath, 32); err != nil {
		t.Fatal(err)
	}
	if reads, err := guard(known); !errors.Is(err, ErrContinuity) || reads != 0 {
		t.Fatalf("guard of a regenerated agent key against the kept entries: %v, %d manifest reads; want ErrContinuity reading none", err, reads)
	}
	if reads, err := guard(&Known{Header: archive.Header{ID: "20260101T000000.000Z-000000"}}); !errors.Is(err, ErrContinuity) || reads == 0 {
		t.Fatalf("guard with another snapshot's entries: %v, %d manifest reads; want ErrContinuity from the head's manifest", err, reads)
	}
}
