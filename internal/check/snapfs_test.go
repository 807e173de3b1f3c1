package check

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/homesnap/homesnap/internal/archive"
	"github.com/homesnap/homesnap/internal/gen"
	jenkinssel "github.com/homesnap/homesnap/internal/jenkins"
	"github.com/homesnap/homesnap/internal/repo"
	"github.com/homesnap/homesnap/internal/snaptest"
	"github.com/homesnap/homesnap/internal/store"
	"github.com/homesnap/homesnap/internal/store/file"
)

func TestSnapshotFS(t *testing.T) {
	home := t.TempDir()
	big := make([]byte, 3*archive.FrameSize+5) // spans frames
	rand.Read(big)
	files := map[string][]byte{
		"secrets/master.key":         []byte("abcd"),
		"secrets/hudson.util.Secret": {1, 2, 3},
		"secrets/empty":              {},
		"nodes/a/config.xml":         []byte("<slave/>"),
		"nodes/b c/config.xml":       []byte("<slave/>"),
		"jobs/j/builds/1/log":        big,
		"identity.key.enc":           []byte("id"),
	}
	for rel, data := range files {
		p := filepath.Join(home, rel)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	st := snaptest.NewStore(t)
	id := snaptest.Snap(t, home, st).ID
	// restore.Change the home: the FS must show the snapshot, not the home.
	os.WriteFile(filepath.Join(home, "secrets/master.key"), []byte("new"), 0o600)
	snaptest.Snap(t, home, st)

	ctx := context.Background()
	f, err := OpenSnapshotFS(ctx, st, id, func(rel string, dir bool) bool { return !strings.HasPrefix(rel, "jobs/j/builds") })
	if err != nil {
		t.Fatal(err)
	}
	if err := fstest.TestFS(f, "secrets/master.key", "secrets/empty", "nodes/b c/config.xml", "identity.key.enc"); err != nil {
		t.Fatal(err)
	}
	if got, _ := fs.ReadFile(f, "secrets/master.key"); string(got) != "abcd" {
		t.Fatalf("master.key = %q, want the snapshot's", got)
	}
	if _, err := fs.Stat(f, "jobs/j/builds/1/log"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a path left out of the index: %v", err)
	}
	// The head by default, and every file of it, big ones too.
	head, err := OpenSnapshotFS(ctx, st, "", func(string, bool) bool { return true })
	if err != nil || head.ID() == id {
		t.Fatalf("head: %v, %s", err, head.ID())
	}
	for rel, data := range files {
		if rel == "secrets/master.key" {
			data = []byte("new")
		}
		got, err := fs.ReadFile(head, rel)
		if err != nil || !bytes.Equal(got, data) {
			t.Errorf("%s: %d bytes, %v; want %d bytes", rel, len(got), err, len(data))
		}
	}
}

func TestSnapshotFSDamagedArchive(t *testing.T) {
	home := t.TempDir()
	key := filepath.Join(home, "secrets/master.key")
	os.MkdirAll(filepath.Dir(key), 0o700)
	os.WriteFile(key, bytes.Repeat([]byte("k"), 4000), 0o600)
	dir := t.TempDir()
	st, err := file.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	first := snaptest.Snap(t, home, st).ID
	os.WriteFile(key, bytes.Repeat([]byte("x"), 4000), 0o600)
	second := snaptest.Snap(t, home, st).ID
	// The second archive's bytes in place of the first's: it decodes, but
	// the content is not what the first manifest hashed.
	data, err := os.ReadFile(filepath.Join(dir, repo.ArchiveKey(second)))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, repo.ArchiveKey(first)), data, 0o600)
	f, err := OpenSnapshotFS(context.Background(), st, first, func(string, bool) bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fs.ReadFile(f, "secrets/master.key"); !errors.Is(err, archive.ErrCorrupt) {
		t.Fatalf("err = %v, want a corrupt-content error", err)
	}
}

// countingStore counts the bytes read from archives.
type countingStore struct {
	store.Store
	archiveBytes, gets int64
}

func (c *countingStore) Get(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	rc, err := c.Store.Get(ctx, key, off, n)
	if err != nil || !strings.HasPrefix(key, "archives/") {
		return rc, err
	}
	c.gets++
	data, err := io.ReadAll(rc)
	rc.Close()
	c.archiveBytes += int64(len(data))
	return io.NopCloser(bytes.NewReader(data)), err
}

// The agent check on a snapshot reads the keys and node configs, not the
// archive: a generated home of tens of MB costs a few small ranges.
func TestAgentCheckOnASnapshotReadsFewBytes(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	if _, err := gen.Generate(home, gen.Options{Preset: "small", Seed: 5}); err != nil {
		t.Fatal(err)
	}
	st := snaptest.NewStore(t)
	res := snaptest.Snap(t, home, st)
	cs := &countingStore{Store: st}
	f, err := OpenSnapshotFS(context.Background(), cs, "", jenkinssel.Needed)
	if err != nil {
		t.Fatal(err)
	}
	s, err := jenkinssel.Inspect(f, jenkinssel.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Nodes) == 0 || len(s.Keys) == 0 {
		t.Fatalf("the check saw %d nodes, %d keys", len(s.Nodes), len(s.Keys))
	}
	if cs.archiveBytes*20 > res.Stored {
		t.Fatalf("read %d archive bytes in %d requests of a %d-byte archive", cs.archiveBytes, cs.gets, res.Stored)
	}
	t.Logf("read %d archive bytes in %d requests of a %d-byte archive", cs.archiveBytes, cs.gets, res.Stored)
}
