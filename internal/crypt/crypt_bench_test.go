package crypt

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"testing"

	"filippo.io/age"

	"github.com/homesnap/homesnap/internal/repo"
	"github.com/homesnap/homesnap/internal/store"
	"github.com/homesnap/homesnap/internal/store/file"
)

// BenchmarkStore writes a 64 MiB archive and reads it back in 2 MiB ranges
// (a restore's pattern), through the local file store plain and with age:
// the cost of the wrapper alone.
func BenchmarkStore(b *testing.B) {
	ctx := context.Background()
	data := make([]byte, 64<<20)
	rand.Read(data)
	id, _ := age.GenerateX25519Identity()
	key := repo.ArchiveKey("20261202T111400.000Z-a1b2c3")
	for _, mode := range []string{"plain", "age"} {
		b.Run(mode, func(b *testing.B) {
			fs, err := file.Open(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			var st store.Store = fs
			if mode == "age" {
				st = Wrap(fs, []age.Recipient{id.Recipient()}, []age.Identity{id}, nil)
			}
			b.SetBytes(int64(2 * len(data)))
			buf := make([]byte, 256<<10)
			for b.Loop() {
				if err := st.Put(ctx, key, bytes.NewReader(data)); err != nil {
					b.Fatal(err)
				}
				for off := int64(0); off < int64(len(data)); off += 2 << 20 {
					rc, err := st.Get(ctx, key, off, 2<<20)
					if err != nil {
						b.Fatal(err)
					}
					if _, err := io.CopyBuffer(io.Discard, rc, buf); err != nil {
						b.Fatal(err)
					}
					rc.Close()
				}
			}
		})
	}
}
