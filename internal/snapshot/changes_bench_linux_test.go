package snapshot_test

import (
	"context"
	"os"
	"path/filepath"
	"runtime/pprof"
	"testing"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"

	"github.com/homesnap/homesnap/internal/gen"
	"github.com/homesnap/homesnap/internal/snapshot"
	"github.com/homesnap/homesnap/internal/snaptest"
	"github.com/homesnap/homesnap/internal/testhome"
)

// BenchmarkJournalChurn measures what the sidecar's journal-driven
// snapshot costs after one round of the generator's 1 % churn: each
// iteration churns the home (untimed) and takes the snapshot. The home is
// generated from HOMESNAP_CHURN_BENCH_PRESET (default small); the first,
// walking snapshot is untimed. HOMESNAP_CHURN_BENCH_COLD=1 drops the page
// cache before each snapshot (root only).
func BenchmarkJournalChurn(b *testing.B) {
	preset := os.Getenv("HOMESNAP_CHURN_BENCH_PRESET")
	if preset == "" {
		preset = "small"
	}
	home := filepath.Join(b.TempDir(), "home")
	if _, err := gen.Generate(home, gen.Options{Preset: preset, Seed: 1}); err != nil {
		b.Fatal(err)
	}
	st, sel, h := snaptest.NewStore(b), snaptest.Jenkins(b), testhome.Open(b, home)
	j, err := snapshot.OpenChangeJournal(h, sel, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer j.Close()
	snap := func(ctx context.Context) *snapshot.Result {
		res, err := snapshot.Snapshot(ctx, snapshot.Options{Home: h, Store: st, Selector: sel, Log: zerolog.Nop(), ChangeJournal: j})
		if err != nil {
			b.Fatal(err)
		}
		return res
	}
	snap(context.Background())
	round := int64(2)
	for b.Loop() {
		b.StopTimer()
		if _, err := gen.Churn(home, gen.ChurnOptions{Fraction: 0.01, Seed: round}); err != nil {
			b.Fatal(err)
		}
		round++
		if os.Getenv("HOMESNAP_CHURN_BENCH_COLD") == "1" { // as the sidecar after a quiet interval
			unix.Sync()
			if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("3"), 0); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		var res *snapshot.Result
		// Labelled, so that a CPU profile can be narrowed to these (-tagfocus phase=churn).
		pprof.Do(context.Background(), pprof.Labels("phase", "churn"), func(ctx context.Context) { res = snap(ctx) })
		if res.ChangeJournal == nil || res.ChangeJournal.Mode != "journal" || res.Unchanged {
			b.Fatalf("snapshot after churn: %+v", res)
		}
	}
}
