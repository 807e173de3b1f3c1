//go:build linux

package journal

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/homesnap/homesnap/internal/selector"
	"github.com/homesnap/homesnap/internal/testhome"
)

// BenchmarkJournalOpenHome times Open on an existing home (the jenkins
// selection), such as genhome's million preset:
//
//	HOMESNAP_JOURNAL_BENCH_HOME=DIR [HOMESNAP_JOURNAL_BENCH_COLD=1] \
//	  go test -run '^$' -bench JournalOpenHome -benchtime 2x ./internal/journal
//
// With HOMESNAP_JOURNAL_BENCH_COLD=1 the page cache is dropped before each
// open (root only). fs.inotify.max_user_watches must exceed the home's
// selected directories.
func BenchmarkJournalOpenHome(b *testing.B) {
	home := os.Getenv("HOMESNAP_JOURNAL_BENCH_HOME")
	if home == "" {
		b.Skip("HOMESNAP_JOURNAL_BENCH_HOME is not set")
	}
	sel, err := selector.New(selector.Spec{Preset: "jenkins"})
	if err != nil {
		b.Fatal(err)
	}
	h := testhome.Open(b, home)
	cold := os.Getenv("HOMESNAP_JOURNAL_BENCH_COLD") == "1"
	watches := 0
	for range b.N {
		if cold {
			b.StopTimer()
			unix.Sync()
			if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("3"), 0); err != nil {
				b.Fatalf("drop the page cache: %v", err)
			}
			b.StartTimer()
		}
		j, err := Open(h, sel)
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		st := j.Stats()
		watches = st.DirWatches + st.FileWatches
		j.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(watches), "watches")
}
