package auth_test

import (
	"bytes"
	"context"
	"io"
	"testing"

	"github.com/homesnap/homesnap/internal/auth"
	"github.com/homesnap/homesnap/internal/repo"
	"github.com/homesnap/homesnap/internal/store/file"
)

// BenchmarkManifestTags measures tagging a manifest as it is written and
// verifying it as it is read, against the same store without a key.
func BenchmarkManifestTags(b *testing.B) {
	body := bytes.Repeat([]byte("0123456789abcdef"), 1<<20) // 16 MiB, a large manifest
	k, _ := auth.ParseKeyFile(bytes.Repeat([]byte{7}, 32), "bench")
	for _, c := range []struct {
		name string
		keys []auth.Key
	}{{"plain", nil}, {"tagged", []auth.Key{k}}} {
		b.Run(c.name, func(b *testing.B) {
			inner, err := file.Open(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			st := auth.Wrap(inner, auth.Options{Keys: c.keys})
			ctx := context.Background()
			key := repo.ManifestKey("20261201T100000.000Z-aaaaaa")
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				if err := st.Put(ctx, key, bytes.NewReader(body)); err != nil {
					b.Fatal(err)
				}
				rc, err := st.Get(ctx, key, 0, -1)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := io.Copy(io.Discard, rc); err != nil {
					b.Fatal(err)
				}
				rc.Close()
			}
		})
	}
}

// BenchmarkManifestGet measures a restore's read of a tagged manifest
// layer, verified before Get returns: one the size of the medium home's
// full manifest (6.2 MB, held in memory from its check) and one the size
// of the million-file home's (62 MB, read twice).
func BenchmarkManifestGet(b *testing.B) {
	k, _ := auth.ParseKeyFile(bytes.Repeat([]byte{7}, 32), "bench")
	for _, c := range []struct {
		name string
		size int
	}{{"medium", 6_231_686}, {"million", 62_000_000}} {
		b.Run(c.name, func(b *testing.B) {
			inner, err := file.Open(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			st := auth.Wrap(inner, auth.Options{Keys: []auth.Key{k}})
			ctx := context.Background()
			key := repo.ManifestKey("20261201T100000.000Z-aaaaaa")
			body := bytes.Repeat([]byte("0123456789abcdef"), c.size/16)
			if err := st.Put(ctx, key, bytes.NewReader(body)); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				rc, err := st.Get(ctx, key, 0, -1)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := io.Copy(io.Discard, rc); err != nil {
					b.Fatal(err)
				}
				rc.Close()
			}
		})
	}
}
