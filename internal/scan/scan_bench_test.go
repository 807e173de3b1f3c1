package scan_test

import (
	"context"
	"testing"

	"github.com/homesnap/homesnap/internal/archive"
	"github.com/homesnap/homesnap/internal/gen"
	"github.com/homesnap/homesnap/internal/scan"
	"github.com/homesnap/homesnap/internal/selector"
	"github.com/homesnap/homesnap/internal/testhome"
)

// BenchmarkWalk walks the jenkins selection of a generated small home
// (~3.4k paths on disk, ~2.7k selected), with a warm page cache: the cost
// of the walk itself (readdir, fstatat, selection), the floor of a snapshot
// where nothing changed.
func BenchmarkWalk(b *testing.B) {
	home := b.TempDir()
	st, err := gen.Generate(home, gen.Options{Preset: "small", Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	h := testhome.Open(b, home)
	for _, preset := range []string{"jenkins", "all"} {
		b.Run("preset="+preset, func(b *testing.B) {
			sel, err := selector.New(selector.Spec{Preset: preset})
			if err != nil {
				b.Fatal(err)
			}
			var n int
			b.ReportAllocs()
			for b.Loop() {
				n = 0
				err := scan.Walk(context.Background(), h, sel, nil, func(*archive.Entry) error {
					n++
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
			}
			if n == 0 {
				b.Fatal("the walk reported nothing")
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/path")
			b.ReportMetric(float64(n), "paths")
		})
	}
	b.Logf("home: %s", st)
}
