//go:build linux

package journal

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/homesnap/homesnap/internal/archive"
	"github.com/homesnap/homesnap/internal/gen"
	"github.com/homesnap/homesnap/internal/scan"
	"github.com/homesnap/homesnap/internal/selector"
	"github.com/homesnap/homesnap/internal/testhome"
)

// BenchmarkJournalNothingChanged compares, on a generated home shaped
// like the million-file preset (freestyle jobs keeping many small builds;
// HOMESNAP_JOURNAL_BENCH_JOBS jobs, 15 by default: ~50k files), what a
// snapshot with nothing to store costs to learn that: a full walk against
// Take + Rescan with the journal. "open" is the journal's start (every
// directory watched, every file statted once).
func BenchmarkJournalNothingChanged(b *testing.B) {
	p, err := gen.LookupPreset("million")
	if err != nil {
		b.Fatal(err)
	}
	p.Name, p.Freestyle = "journal-bench", 15
	if v, err := strconv.Atoi(os.Getenv("HOMESNAP_JOURNAL_BENCH_JOBS")); err == nil {
		p.Freestyle = v
	}
	home := filepath.Join(b.TempDir(), "home")
	hs, err := gen.Generate(home, gen.Options{Custom: &p, Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	sel, err := selector.New(selector.Spec{Preset: "jenkins"})
	if err != nil {
		b.Fatal(err)
	}
	base := walkAll(b, home, sel)
	h := testhome.Open(b, home)
	dirs := 0
	for _, e := range base {
		if e.Type == archive.TypeDir {
			dirs++
		}
	}
	b.Logf("home: %s; selection: %d paths, %d directories", hs, len(base), dirs)

	b.Run("walk", func(b *testing.B) {
		for b.Loop() {
			n := 0
			if err := scan.Walk(context.Background(), h, sel, nil, func(*archive.Entry) error { n++; return nil }); err != nil {
				b.Fatal(err)
			}
			if n != len(base) {
				b.Fatalf("walk: %d paths, want %d", n, len(base))
			}
		}
		b.ReportMetric(float64(len(base)), "paths")
	})
	b.Run("journal", func(b *testing.B) {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		j, err := Open(h, sel)
		if err != nil {
			b.Fatal(err)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		defer j.Close()
		if _, err := j.Take(); err == nil {
			b.Fatal("the first Take must ask for a full walk")
		}
		for b.Loop() {
			ch, err := j.Take()
			if err != nil {
				b.Fatal(err)
			}
			n := 0
			if err := Rescan(context.Background(), h, sel, Entries(base), resolve(b, ch, base), nil, func(*archive.Entry) error { n++; return nil }); err != nil {
				b.Fatal(err)
			}
			if n != len(base) {
				b.Fatalf("rescan: %d paths, want %d", n, len(base))
			}
		}
		st := j.Stats()
		b.ReportMetric(float64(st.DirWatches+st.FileWatches), "watches")
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(st.DirWatches+st.FileWatches), "heap-B/watch")
		if cost := watchCost(); cost > 0 {
			b.ReportMetric(float64(cost*(st.DirWatches+st.FileWatches))/(1<<20), "kernel-MiB")
			b.Logf("kernel memory per watch: %d bytes (INOTIFY_WATCH_COST, from fs.inotify.max_user_watches and MemTotal); %d watches for %d selected files: %.0f per million files",
				cost, st.DirWatches+st.FileWatches, len(base)-dirs, float64(st.DirWatches+st.FileWatches)/float64(len(base)-dirs)*1e6)
		}
	})
	// 1% churn by the generator before each snapshot (not timed), then
	// what the snapshot pays to see it. This changes the home: it runs last.
	round := int64(0)
	churn := func(b *testing.B) {
		b.StopTimer()
		round++
		if _, err := gen.Churn(home, gen.ChurnOptions{Fraction: 0.01, Seed: round}); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	defer b.Run("churn-1pct/walk", func(b *testing.B) {
		var cpu time.Duration
		for range b.N {
			churn(b)
			c0 := cpuTime()
			walkAll(b, home, sel)
			cpu += cpuTime() - c0
		}
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
	})
	defer b.Run("churn-1pct/journal", func(b *testing.B) {
		j, err := Open(h, sel)
		if err != nil {
			b.Fatal(err)
		}
		defer j.Close()
		j.Take()
		cur := walkAll(b, home, sel)
		var take, cpu time.Duration
		for range b.N {
			churn(b)
			c0 := cpuTime()
			t0 := time.Now()
			ch, err := j.Take()
			if err != nil {
				b.Fatal(err)
			}
			take += time.Since(t0)
			var got []*archive.Entry
			if err := Rescan(context.Background(), h, sel, Entries(cur), resolve(b, ch, cur), nil, func(e *archive.Entry) error { got = append(got, e); return nil }); err != nil {
				b.Fatal(err)
			}
			cpu += cpuTime() - c0
			b.StopTimer()
			if ds := diff(walkAll(b, home, sel), got, 5); len(ds) > 0 {
				b.Fatalf("after churn, journal + rescan differs from a full walk:\n%s", strings.Join(ds, "\n"))
			}
			cur = got
			b.StartTimer()
		}
		b.ReportMetric(float64(take.Nanoseconds())/float64(b.N), "take-ns/op")
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
	})
	b.Run("open", func(b *testing.B) {
		for b.Loop() {
			j, err := Open(h, sel)
			if err != nil {
				b.Fatal(err)
			}
			j.Close()
		}
	})
}

// watchCost is the kernel's own estimate of a watch's memory
// (INOTIFY_WATCH_COST: the mark plus two inodes it pins), recovered from
// the default fs.inotify.max_user_watches, which the kernel sets to 1% of
// memory divided by that cost when not clamped to [8192, 1048576]. 0 when
// the sysctl looks changed or clamped.
func watchCost() int {
	max, err := strconv.Atoi(readSysctl("fs/inotify/max_user_watches"))
	if err != nil || max <= 8192 || max >= 1048576 {
		return 0
	}
	mem, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(mem), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "MemTotal:" {
			kb, _ := strconv.Atoi(f[1])
			return kb * 1024 / 100 / max
		}
	}
	return 0
}

// cpuTime is the CPU time the process has used (every thread), which a
// loaded machine does not inflate as it does wall time.
func cpuTime() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
