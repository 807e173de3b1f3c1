package snapshot_test

import (
	"context"
	"fmt"
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
// snapshot costs after one round of the generator's 1 % churn (1%), or
// after one line appended to one build log (1-file, and again after the
// churn: 1-file-after-1%): each iteration
// changes the home (untimed) and takes the snapshot. The home is
// generated from HOMESNAP_CHURN_BENCH_PRESET (default small); the first,
// walking snapshot is untimed. HOMESNAP_CHURN_BENCH_COLD=1 drops the page
// cache before each snapshot (root only). %decoded is the share of the
// parent's entries the snapshot decoded: the rest it passed over in spans.
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
	changes := map[string]func(){
		"1%": func() {
			if _, err := gen.Churn(home, gen.ChurnOptions{Fraction: 0.01, Seed: round}); err != nil {
				b.Fatal(err)
			}
		},
		"1-file": func() {
			f, err := os.OpenFile(oneLog(b, home), os.O_APPEND|os.O_WRONLY, 0)
			if err == nil {
				_, err = fmt.Fprintf(f, "line %d\n", round)
				f.Close()
			}
			if err != nil {
				b.Fatal(err)
			}
		},
	}
	// One file again after the churn: the churn's delta lines keep most of
	// the full manifest's spans from being passed over, until the second
	// round writes a full manifest (%decoded-last: the last round's share).
	changes["1-file-after-1%"] = changes["1-file"]
	for _, name := range []string{"1-file", "1%", "1-file-after-1%"} {
		b.Run(name, func(b *testing.B) { churnRounds(b, home, changes[name], &round, snap) })
	}
}

// oneLog is a build log in the middle of the generated home.
func oneLog(b *testing.B, home string) string {
	logs, err := filepath.Glob(filepath.Join(home, "jobs", "*", "builds", "*", "log"))
	if err != nil || len(logs) == 0 {
		b.Fatalf("no build log in %s: %v", home, err)
	}
	return logs[len(logs)/2]
}

func churnRounds(b *testing.B, home string, change func(), round *int64, snap func(context.Context) *snapshot.Result) {
	var decoded, entries, last, lastEntries int64
	for b.Loop() {
		b.StopTimer()
		change()
		*round++
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
		entries += res.Totals.Entries
		last, lastEntries = res.Totals.Entries-res.ChangeJournal.Unread, res.Totals.Entries
		decoded += last
	}
	b.ReportMetric(100*float64(decoded)/float64(entries), "%decoded")
	b.ReportMetric(100*float64(last)/float64(lastEntries), "%decoded-last")
}
