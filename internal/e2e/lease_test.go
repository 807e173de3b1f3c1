package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/homesnap/homesnap/internal/repo"
	"github.com/homesnap/homesnap/internal/store/file"
	"github.com/homesnap/homesnap/internal/testenv"
	"github.com/homesnap/homesnap/internal/testhome"
)

// TestThreeSidecarsRaceOnOneStore runs three sidecars on the same home and
// store while the home changes, and kills one with SIGKILL now and then:
// the lease lets one write at a time, the history stays one chain, every
// snapshot any of them reported committed is in it, and every archive the
// history needs exists; afterwards the store prunes and the head restores.
func TestThreeSidecarsRaceOnOneStore(t *testing.T) {
	testenv.Long(t, "runs three sidecars through six kills")
	home, storeDir := t.TempDir(), t.TempDir()
	if err := testhome.Build(home); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var outs []*syncBuffer
	start := func() *exec.Cmd {
		cmd := exec.Command(filepath.Join(bin, "snapshot"), "--home", home, "--store", storeDir,
			"--interval", "150ms", "--lease-ttl", "1s", "--listen", "off", "--log-format", "json")
		out := &syncBuffer{}
		cmd.Stdout, cmd.Stderr = out, &syncBuffer{}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		outs = append(outs, out)
		mu.Unlock()
		return cmd
	}
	procs := []*exec.Cmd{start(), start(), start()}
	t.Cleanup(func() { // after a failure, none is left running
		for _, p := range procs {
			p.Process.Kill()
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	churn := make(chan struct{})
	go func() { // Jenkins at work
		defer close(churn)
		for i := 0; ctx.Err() == nil; i++ {
			os.WriteFile(filepath.Join(home, "jobs", fmt.Sprintf("race-%d", i%7)), []byte(fmt.Sprint(i)), 0o644)
			time.Sleep(40 * time.Millisecond) // Jenkins' pace: time passing on purpose
		}
	}()
	// reported counts the snapshots the sidecars reported committed.
	reported := func() int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, out := range outs {
			n += len(strings.Fields(out.String()))
		}
		return n
	}
	// Between kills, and after the last, the sidecars commit two more.
	more := func(round int) {
		want := reported() + 2
		for deadline := time.Now().Add(time.Minute); reported() < want; time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: %d snapshots committed in a minute, want %d: the sidecars do not take turns", round, reported(), want)
			}
		}
	}
	for round := range 6 {
		more(round)
		i := rand.IntN(len(procs))
		procs[i].Process.Signal(syscall.SIGKILL)
		procs[i].Wait()
		procs[i] = start()
	}
	more(6)
	cancel()
	<-churn
	for _, p := range procs {
		p.Process.Signal(syscall.SIGTERM)
	}
	for _, p := range procs {
		p.Wait()
	}

	st, err := file.Open(storeDir)
	if err != nil {
		t.Fatal(err)
	}
	h, err := repo.LoadHistory(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	in := map[string]bool{}
	for _, r := range h.Snapshots {
		in[r.ID] = true
		for _, a := range r.Archives {
			if _, err := os.Stat(filepath.Join(storeDir, "archives", a+".tar.zst")); err != nil {
				t.Errorf("snapshot %s needs archive %s: %v", r.ID, a, err)
			}
		}
	}
	for _, out := range outs {
		for _, id := range strings.Fields(out.String()) {
			if !in[id] {
				t.Errorf("snapshot %s was reported committed but is not in the history from the head", id)
			}
		}
	}
	t.Logf("%d snapshots in the history, %d reported, %d unreferenced", len(h.Snapshots), reported(), len(h.Unreferenced))
	// What the kills left is prunable, and the head still restores.
	ok(t, run(t, "prune", nil, "--keep-last", "3", "--store", storeDir))
	target := t.TempDir()
	ok(t, run(t, "restore", nil, "--home", target, "--store", storeDir))
}
