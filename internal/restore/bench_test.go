package restore

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/rs/zerolog"

	"github.com/homesnap/homesnap/internal/archive"
	"github.com/homesnap/homesnap/internal/gen"
	"github.com/homesnap/homesnap/internal/selector"
	"github.com/homesnap/homesnap/internal/snapshot"
	"github.com/homesnap/homesnap/internal/store/file"
	"github.com/homesnap/homesnap/internal/testhome"
)

// benchHome generates the small preset (~2.4k files, ~40 MiB, ~33 MiB
// selected) once per benchmark.
func benchHome(b *testing.B) (string, gen.Stats) {
	b.Helper()
	home := filepath.Join(b.TempDir(), "home")
	st, err := gen.Generate(home, gen.Options{Preset: "small", Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	return home, st
}

func benchSelector(b *testing.B) *selector.Selector {
	sel, err := selector.New(selector.Spec{Preset: "jenkins"})
	if err != nil {
		b.Fatal(err)
	}
	return sel
}

// benchSnapshot takes one snapshot of home into the local store at dir.
func benchSnapshot(b *testing.B, home, dir string, level archive.Level) *snapshot.Result {
	b.Helper()
	st, err := file.Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	res, err := snapshot.Snapshot(context.Background(), snapshot.Options{
		Home: testhome.Open(b, home), Store: st, Selector: benchSelector(b), Level: level, Log: zerolog.Nop(),
	})
	if err != nil {
		b.Fatal(err)
	}
	return res
}

// BenchmarkSnapshot is a full snapshot of the small home into a fresh local
// store, at the engine's default level (a zero Level, which the CLI's
// default also selects) and at zstd.SpeedDefault ("--level default").
func BenchmarkSnapshot(b *testing.B) {
	home, _ := benchHome(b)
	for _, c := range []struct {
		name  string
		level archive.Level
	}{{"level=engine-default", 0}, {"level=default", zstd.SpeedDefault}} {
		b.Run(c.name, func(b *testing.B) {
			var res *snapshot.Result
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				dir := b.TempDir()
				b.StartTimer()
				res = benchSnapshot(b, home, dir, c.level)
				b.StopTimer()
				os.RemoveAll(dir)
				b.StartTimer()
			}
			b.SetBytes(res.Totals.Bytes)
			b.ReportMetric(float64(res.Totals.Bytes)/float64(res.Stored), "ratio")
			b.ReportMetric(float64(res.Totals.Entries), "entries")
		})
	}
}

// BenchmarkSnapshotUnchanged is a snapshot of a home that did not change
// since the last one: a walk merged with the parent manifest, no snapshot
// written.
func BenchmarkSnapshotUnchanged(b *testing.B) {
	home, _ := benchHome(b)
	dir := b.TempDir()
	first := benchSnapshot(b, home, dir, 0)
	b.ReportAllocs()
	for b.Loop() {
		if res := benchSnapshot(b, home, dir, 0); !res.Unchanged {
			b.Fatalf("snapshot %s taken, nothing changed", res.ID)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(first.Totals.Entries), "ns/entry")
}

// BenchmarkRestore restores the small home's snapshot from the local store
// into an empty directory (staging, hash checks, syncfs and moves included).
func BenchmarkRestore(b *testing.B) {
	home, _ := benchHome(b)
	dir := b.TempDir()
	snap := benchSnapshot(b, home, dir, 0)
	st, err := file.Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	targets := b.TempDir()
	b.SetBytes(snap.Totals.Bytes)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		target := filepath.Join(targets, fmt.Sprint(i))
		i++
		res, err := restoreSnapshot(context.Background(), Options{Home: testhome.Open(b, target), Store: st, Log: zerolog.Nop()}, staged{})
		if err != nil {
			b.Fatal(err)
		}
		if res.Entries != snap.Totals.Entries {
			b.Fatalf("restored %d entries, the snapshot has %d", res.Entries, snap.Totals.Entries)
		}
		b.StopTimer()
		os.RemoveAll(target)
		b.StartTimer()
	}
}
