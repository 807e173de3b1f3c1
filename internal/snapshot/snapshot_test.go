package snapshot_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/homesnap/homesnap/internal/repo"
	"github.com/homesnap/homesnap/internal/snapshot"
	"github.com/homesnap/homesnap/internal/snaptest"
	"github.com/homesnap/homesnap/internal/testhome"
)

func TestIncrementalWritesOnlyChangesAndForgetsDeletions(t *testing.T) {
	home, st := snaptest.NewHome(t), snaptest.NewStore(t)
	first := snaptest.Snap(t, home, st)
	want1 := snaptest.Selected(t, home)
	testhome.Change(t, home)
	want2 := snaptest.Selected(t, home)
	second := snaptest.Snap(t, home, st)
	if second.Parent != first.ID {
		t.Fatalf("parent %q, want %q", second.Parent, first.ID)
	}
	changedBytes := int64(len("<project><description>edited</description></project>\n") + len("<build/>\n"))
	changedBytes += want2["jobs/test/builds/2/log"].Size
	changedBytes += want2["nodes/agent-1/config.xml"].Size // chmod: metadata changed
	if second.Totals.NewBytes != changedBytes {
		t.Errorf("incremental wrote %d file bytes, want exactly the changed files' %d", second.Totals.NewBytes, changedBytes)
	}
	if second.Stored >= first.Stored/2 {
		t.Errorf("incremental stored %d bytes, full stored %d: expected far less", second.Stored, first.Stored)
	}
	if second.Deleted == 0 {
		t.Error("deleted build not counted")
	}
	for id, want := range map[string]testhome.Tree{first.ID: want1, second.ID: want2} {
		target := t.TempDir()
		if err := restoreInto(target, st, id); err != nil {
			t.Fatal(err)
		}
		snaptest.AssertSame(t, want, snaptest.All(t, target))
	}
	// The newest is the default, and a deleted build stays deleted.
	target := t.TempDir()
	if err := restoreInto(target, st, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(target, "jobs/parameterized-windows/builds/1")); !os.IsNotExist(err) {
		t.Errorf("deleted build came back: %v", err)
	}
	snaptest.AssertSame(t, want2, snaptest.All(t, target))
}

func TestUnchangedHomeTakesNoSnapshot(t *testing.T) {
	home, st := snaptest.NewHome(t), snaptest.NewStore(t)
	first := snaptest.Snap(t, home, st)
	again := snaptest.Snap(t, home, st)
	if !again.Unchanged || again.Parent != first.ID {
		t.Fatalf("got %+v, want unchanged with parent %s", again, first.ID)
	}
	h, err := repo.LoadHistory(context.Background(), st)
	if err != nil || len(h.Snapshots) != 1 || h.Head != first.ID || len(h.Unreferenced) != 0 {
		t.Fatalf("LoadHistory = %+v %v, want just %s", h, err, first.ID)
	}
}

func TestFileChangedWhileReadIsMarkedAndReadAgain(t *testing.T) {
	home, st := snaptest.NewHome(t), snaptest.NewStore(t)
	logPath := filepath.Join(home, "jobs/test/builds/2/log")
	*snapshot.AfterOpen = func(p string) {
		if p == logPath {
			f, _ := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
			f.WriteString("appended while read\n")
			f.Close()
		}
	}
	first := snaptest.Snap(t, home, st)
	*snapshot.AfterOpen = nil
	m, err := repo.OpenManifest(context.Background(), st, first.ID)
	if err != nil {
		t.Fatal(err)
	}
	var marked bool
	for {
		e, err := m.Next()
		if err != nil {
			break
		}
		if e.Path == "jobs/test/builds/2/log" {
			marked = e.Changed
		}
	}
	m.Close()
	if !marked {
		t.Fatal("a file appended while read is not marked changed_while_read")
	}
	second := snaptest.Snap(t, home, st)
	if second.Unchanged || second.Totals.NewBytes < snaptest.All(t, home)["jobs/test/builds/2/log"].Size {
		t.Fatalf("the torn file was not read again: %+v", second)
	}
	target := t.TempDir()
	if err := restoreInto(target, st, ""); err != nil {
		t.Fatal(err)
	}
	snaptest.AssertSame(t, snaptest.Selected(t, home), snaptest.All(t, target))
}

func TestSnapshotToleratesALiveJenkins(t *testing.T) {
	home, st := snaptest.NewHome(t), snaptest.NewStore(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { // delete builds, rename temp files, append to logs
		defer close(done)
		for i := 0; ctx.Err() == nil; i++ {
			b := filepath.Join(home, "jobs/test0/builds", "x"+string(rune('a'+i%26)))
			os.MkdirAll(b, 0o755)
			os.WriteFile(filepath.Join(b, "log"), []byte(strings.Repeat("line\n", i%100)), 0o644)
			tmp := filepath.Join(home, "jobs/test/config.xml-atomic99tmp")
			os.WriteFile(tmp, []byte("<x/>"), 0o644)
			os.Rename(tmp, filepath.Join(home, "jobs/test/config.xml"))
			os.RemoveAll(filepath.Join(home, "jobs/test0/builds", "x"+string(rune('a'+(i+13)%26))))
		}
	}()
	var last *snapshot.Result
	for range 5 {
		last = snaptest.Snap(t, home, st)
	}
	cancel()
	<-done
	if last.ID == "" && last.Parent == "" {
		t.Fatal("no snapshot taken")
	}
	if err := restoreInto(t.TempDir(), st, ""); err != nil {
		t.Fatalf("restore of a snapshot taken during churn: %v", err)
	}
}
