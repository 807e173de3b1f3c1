package snapshot_test

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/homesnap/homesnap/internal/archive"
	"github.com/homesnap/homesnap/internal/repo"
	"github.com/homesnap/homesnap/internal/snapshot"
	"github.com/homesnap/homesnap/internal/snaptest"
	"github.com/homesnap/homesnap/internal/store"
)

// TestFileReplacedAfterTheWalkIsNotStored: a file replaced between the
// walk and the read (another inode) is not the file the walk saw. The
// snapshot keeps the parent's version marked changed, and the next
// snapshot reads the new one; a new path replaced so is left out.
func TestFileReplacedAfterTheWalkIsNotStored(t *testing.T) {
	home, st := snaptest.NewHome(t), snaptest.NewStore(t)
	cfg := filepath.Join(home, "jobs/test/config.xml")
	fresh := filepath.Join(home, "jobs/test/fresh.xml")
	first := snaptest.Snap(t, home, st)
	if err := os.WriteFile(cfg, []byte("<changed/>"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(fresh, []byte("<fresh/>"), 0o644); err != nil {
		t.Fatal(err)
	}
	replace := func(p string) {
		if p == cfg || p == fresh {
			tmp := p + "-atomic1tmp"
			os.WriteFile(tmp, []byte("<replaced after the walk/>"), 0o644)
			os.Rename(tmp, p)
		}
	}
	*snapshot.BeforeOpen = replace
	second := snaptest.Snap(t, home, st)
	*snapshot.BeforeOpen = nil
	entries := manifestEntries(t, st, second.ID)
	old := manifestEntries(t, st, first.ID)
	got, ok := entries["jobs/test/config.xml"]
	if !ok || !got.Changed || *got.Hash != *old["jobs/test/config.xml"].Hash {
		t.Fatalf("config.xml replaced after the walk: %+v; want the parent's bytes, marked changed", got)
	}
	if _, ok := entries["jobs/test/fresh.xml"]; ok {
		t.Fatal("a new file replaced after the walk was stored")
	}
	third := manifestEntries(t, st, snaptest.Snap(t, home, st).ID)
	if third["jobs/test/config.xml"].Changed || third["jobs/test/config.xml"].Size != int64(len("<replaced after the walk/>")) {
		t.Fatalf("the next snapshot did not read it again: %+v", third["jobs/test/config.xml"])
	}
	if _, ok := third["jobs/test/fresh.xml"]; !ok {
		t.Fatal("the next snapshot did not pick up the new file")
	}
}

// manifestEntries returns the entries below jobs/test of a snapshot.
func manifestEntries(t *testing.T, st store.Store, id string) map[string]archive.Entry {
	t.Helper()
	m, err := repo.OpenManifest(context.Background(), st, id)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	out := map[string]archive.Entry{}
	for {
		e, err := m.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(e.Path, "jobs/test/") {
			out[e.Path] = *e
		}
	}
}
