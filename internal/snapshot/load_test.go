package snapshot_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/homesnap/homesnap/internal/snapshot"
	"github.com/homesnap/homesnap/internal/snaptest"
	"github.com/homesnap/homesnap/internal/testhome"
)

// Loaders read jobs ahead in parallel, so the first job may finish loading
// last. Its worker must still be the one the sequencer gets first: workers
// once took later jobs as they loaded, filled their frame queues with big
// files while the sequencer waited for the first job, and the snapshot
// hung. The archive must also hold every file where its entry says.
func TestSlowFirstJobNeitherStallsNorReordersTheArchive(t *testing.T) {
	home, st := snaptest.NewHome(t), snaptest.NewStore(t)
	write := func(rel string, size int, seed int) {
		p := filepath.Join(home, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		line := fmt.Appendf(nil, "file %d line of a build log\n", seed)
		if err := os.WriteFile(p, bytes.Repeat(line, size/len(line)+1)[:size], 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Under jobs/bulk, in archive order: a small file that is slow to
	// open, big files that are jobs of their own (streamed by the workers,
	// several frames each), then small files loaded ahead.
	first := "jobs/bulk/a-first.log"
	write(first, 10<<10, 0)
	for i := range 3 {
		write(fmt.Sprintf("jobs/bulk/b-big/%d.bin", i), 5<<20, 100+i)
	}
	for i := range 60 {
		write(fmt.Sprintf("jobs/bulk/builds/%03d/log", i), 100<<10, 200+i)
	}
	// The first file's open returns only once a worker streams a big file
	// of a later job and a loader reads a later job's small files.
	bigOpen, smallOpen := make(chan struct{}), make(chan struct{})
	var bigOnce, smallOnce sync.Once
	*snapshot.AfterOpen = func(p string) {
		switch rel, _ := filepath.Rel(home, p); {
		case strings.HasPrefix(rel, "jobs/bulk/b-big/"):
			bigOnce.Do(func() { close(bigOpen) })
		case strings.HasPrefix(rel, "jobs/bulk/builds/"):
			smallOnce.Do(func() { close(smallOpen) })
		case rel == first:
			watchdog := time.After(time.Minute)
			for _, ch := range []chan struct{}{bigOpen, smallOpen} {
				select {
				case <-ch:
				case <-watchdog: // a watchdog, not a speed check
					t.Error("the later jobs did not load while the first was slow")
					return
				}
			}
		}
	}
	defer func() { *snapshot.AfterOpen = nil }()

	done := make(chan error, 1)
	go func() {
		_, err := snapshot.Snapshot(context.Background(), snapshot.Options{Home: testhome.Open(t, home), Store: st, Selector: snaptest.Jenkins(t), Log: zerolog.Nop(), Jobs: 2})
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("snapshot: %v", err)
		}
	case <-time.After(2 * time.Minute): // a watchdog, not a speed check
		t.Fatal("the snapshot stalled behind its slow first job")
	}
	target := t.TempDir()
	if err := restoreInto(target, st, ""); err != nil {
		t.Fatal(err)
	}
	snaptest.AssertSame(t, snaptest.Selected(t, home), snaptest.All(t, target))
}

// A loader opens several small files before it reads the first of them.
// A snapshot that stops while some are open (here: canceled once the
// fifth is open) must close every one: a sidecar that fails and retries
// would otherwise run out of descriptors, and hold deleted builds' space.
func TestAStoppedSnapshotLeavesNoFileOfTheHomeOpen(t *testing.T) {
	home, st := snaptest.NewHome(t), snaptest.NewStore(t)
	for i := range 40 {
		p := filepath.Join(home, "jobs/many/builds", fmt.Sprintf("%03d", i), "log")
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(strings.Repeat("a line of a build log\n", 50)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var opens atomic.Int32
	*snapshot.AfterOpen = func(p string) {
		if strings.Contains(p, "/jobs/many/builds/") && opens.Add(1) == 5 {
			cancel()
		}
	}
	defer func() { *snapshot.AfterOpen = nil }()
	_, err := snapshot.Snapshot(ctx, snapshot.Options{Home: testhome.Open(t, home), Store: st, Selector: snaptest.Jenkins(t), Log: zerolog.Nop(), Jobs: 2})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("snapshot canceled while loading: got %v, want context.Canceled", err)
	}
	if n := opens.Load(); n < 5 {
		t.Fatalf("only %d files were opened: the cancel did not happen while loading", n)
	}
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd to list descriptors: %v", err)
	}
	for _, fd := range fds {
		if target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name())); err == nil && strings.HasPrefix(target, home+"/") {
			t.Errorf("descriptor %s still open on %s after the snapshot returned", fd.Name(), target)
		}
	}
}
