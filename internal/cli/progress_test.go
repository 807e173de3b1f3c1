package cli

import (
	"bytes"
	"encoding/json"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// lockedBuffer is a log destination written by the progress goroutine.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) lines() []map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(l.b.String()), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

// Off a terminal, progress is a structured info line at every tick and a
// last one with the final counts.
func TestLogProgress(t *testing.T) {
	var buf lockedBuffer
	goroutines := runtime.NumGoroutine()
	p := startLogProgress("restore", zerolog.New(&buf), time.Millisecond)
	p.Planned(3, 300)
	p.Done(1, 100)
	for deadline := time.Now().Add(10 * time.Second); len(buf.lines()) == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no progress line while the restore ran")
		}
	}
	p.Done(2, 200)
	p.stop()
	lines := buf.lines()
	first, last := lines[0], lines[len(lines)-1]
	if first["message"] != "restore progress" || first["level"] != "info" || first["files_total"] != 3.0 || first["bytes_total"] != 300.0 {
		t.Errorf("first line %v", first)
	}
	for k, want := range map[string]float64{"files_done": 3, "files_total": 3, "bytes_done": 300, "bytes_total": 300} {
		if last[k] != want {
			t.Errorf("last line %s = %v, want %v (%v)", k, last[k], want, last)
		}
	}
	if _, ok := last["bytes_per_second"]; !ok {
		t.Errorf("last line has no rate: %v", last)
	}
	// Once its goroutine is gone, nothing can log a progress line more.
	n := len(buf.lines())
	for deadline := time.Now().Add(10 * time.Second); runtime.NumGoroutine() > goroutines; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines after stop, %d before the progress started", runtime.NumGoroutine(), goroutines)
		}
	}
	if len(buf.lines()) != n {
		t.Error("progress lines after stop")
	}
}

func TestProgressModes(t *testing.T) {
	var buf bytes.Buffer
	if r := newProgress("off", "restore", &buf, zerolog.Nop()); r != nil || progressOf(r) != nil {
		t.Errorf("--progress=off gave %T", r)
	}
	// Not a terminal: auto is the log variant.
	r := newProgress("auto", "restore", &buf, zerolog.Nop())
	if _, ok := r.(*logProgress); !ok {
		t.Errorf("--progress=auto off a terminal gave %T", r)
	}
	r.stop()
	// --progress=bar draws files, bytes and the share done.
	var bar bytes.Buffer
	b := newProgress("bar", "restore", &bar, zerolog.Nop())
	b.Planned(3, 3<<20)
	b.Done(3, 3<<20)
	b.stop()
	if out := bar.String(); !strings.Contains(out, "3/3 files") || !strings.Contains(out, "100%") || !strings.Contains(out, "3.0 MiB") {
		t.Errorf("bar output %q", out)
	}
	if err := (ProgressConfig{Progress: "fancy"}).validate(); err == nil || exitCode(err) != ExitUsage {
		t.Errorf("--progress=fancy: %v", err)
	}
}
