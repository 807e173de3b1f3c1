//go:build linux

package journal

import (
	"os"
	"runtime"
	"runtime/metrics"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/homesnap/homesnap/internal/homefs"
	"github.com/homesnap/homesnap/internal/selector"
	"github.com/homesnap/homesnap/internal/testhome"
)

// BenchmarkJournalOpenHome times Open on an existing home (the jenkins
// selection), such as genhome's million preset, and reports the heap the
// open journal holds per watch:
//
//	HOMESNAP_JOURNAL_BENCH_HOME=DIR [HOMESNAP_JOURNAL_BENCH_COLD=1] \
//	  go test -run '^$' -bench JournalOpenHome -benchtime 2x ./internal/journal
//
// With HOMESNAP_JOURNAL_BENCH_COLD=1 the page cache is dropped before each
// open (root only). fs.inotify.max_user_watches must exceed the home's
// selected directories.
func BenchmarkJournalOpenHome(b *testing.B) {
	h, sel := benchHome(b)
	cold := os.Getenv("HOMESNAP_JOURNAL_BENCH_COLD") == "1"
	watches := 0
	var held uint64
	for range b.N {
		if cold {
			b.StopTimer()
			unix.Sync()
			if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("3"), 0); err != nil {
				b.Fatalf("drop the page cache: %v", err)
			}
			b.StartTimer()
		}
		before := liveHeap()
		j, err := Open(h, sel)
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		held = liveHeap() - before
		st := j.Stats()
		watches = st.DirWatches + st.FileWatches
		j.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(watches), "watches")
	b.ReportMetric(float64(held)/float64(watches), "heapB/watch") // what the sidecar holds for it
}

// liveHeap is the heap in use after a collection.
func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkCollectionsBesideTheJournal reports the collector's CPU while a
// journal on HOMESNAP_JOURNAL_BENCH_HOME is held and 256 MB of small
// objects come and go, as in a snapshot's walk: what the table costs every
// snapshot beyond its bytes.
func BenchmarkCollectionsBesideTheJournal(b *testing.B) {
	j, err := Open(benchHome(b))
	if err != nil {
		b.Fatal(err)
	}
	defer j.Close()
	gc := []metrics.Sample{{Name: "/cpu/classes/gc/total:cpu-seconds"}}
	metrics.Read(gc)
	before := gc[0].Value.Float64()
	ring := make([][]byte, 4096)
	b.ResetTimer()
	for range b.N {
		for i := range 256 << 10 {
			ring[i%len(ring)] = make([]byte, 1<<10)
		}
	}
	b.StopTimer()
	metrics.Read(gc)
	b.ReportMetric((gc[0].Value.Float64()-before)/float64(b.N), "gc-cpu-s/op")
}

// benchHome opens HOMESNAP_JOURNAL_BENCH_HOME with the jenkins selection.
func benchHome(b *testing.B) (*homefs.Home, *selector.Selector) {
	home := os.Getenv("HOMESNAP_JOURNAL_BENCH_HOME")
	if home == "" {
		b.Skip("HOMESNAP_JOURNAL_BENCH_HOME is not set")
	}
	sel, err := selector.New(selector.Spec{Preset: "jenkins"})
	if err != nil {
		b.Fatal(err)
	}
	return testhome.Open(b, home), sel
}
