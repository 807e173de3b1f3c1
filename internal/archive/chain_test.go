package archive

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
)

// layer writes one manifest: a full one when base is nil, else a delta of
// snap against base.
func layer(t *testing.T, id string, chain []string, base, snap []*Entry) []byte {
	t.Helper()
	hdr := Header{ID: id}
	if base != nil {
		hdr.Base, hdr.Chain = chain[len(chain)-2], chain
	}
	var buf bytes.Buffer
	w, err := NewManifestWriter(&buf, hdr)
	if err != nil {
		t.Fatal(err)
	}
	i, j := 0, 0
	for i < len(snap) || j < len(base) {
		switch {
		case j == len(base) || i < len(snap) && ComparePaths(snap[i].Path, base[j].Path) < 0:
			err = w.Write(snap[i])
			i++
		case i == len(snap) || ComparePaths(snap[i].Path, base[j].Path) > 0:
			err = w.Delete(base[j].Path)
			j++
		default:
			err = w.WriteOver(snap[i], base[j])
			i, j = i+1, j+1
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if _, err := w.Close(0, 0); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func openChain(t *testing.T, data ...[]byte) (*ChainReader, error) {
	t.Helper()
	var layers []*ManifestReader
	var names []string
	for i, d := range data {
		m, err := NewManifestReader(bytes.NewReader(d))
		if err != nil {
			return nil, err
		}
		layers = append(layers, m)
		names = append(names, fmt.Sprintf("layer%d", i))
	}
	return NewChainReader(layers, names)
}

func readChain(c *ChainReader) ([]*Entry, error) {
	defer c.Close()
	var out []*Entry
	for {
		e, err := c.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, e)
	}
}

func tree(specs ...string) []*Entry {
	var out []*Entry
	for _, s := range specs {
		path, kind, _ := strings.Cut(s, ":")
		e := &Entry{Path: path, Type: TypeDir, Mode: 0o755, MTime: 1}
		switch kind {
		case "f", "f2":
			h := Hash{byte(len(kind))}
			e.Type, e.Size, e.Hash, e.Archive, e.Length = TypeFile, int64(len(kind)), &h, "a"+kind, 10
		case "l":
			e.Type, e.Link = TypeSymlink, "target"
		case "mode":
			e.Mode = 0o700
		case "mtime":
			e.MTime = 2
		}
		out = append(out, e)
	}
	return out
}

func TestChainResolvesDeltas(t *testing.T) {
	s1 := tree("a", "a/x:f", "a/y:f", "b", "b/z:f", "c")
	s2 := tree("a", "a/x:f2", "b:l", "c:mode", "d")         // y and b/z deleted, b dir→symlink, x changed
	s3 := tree("a:mtime", "a/x:f2", "b", "b/w:f", "c:mode") // d deleted, b symlink→dir
	full := layer(t, "s1", nil, nil, s1)
	d2 := layer(t, "s2", []string{"s1", "s2"}, s1, s2)
	d3 := layer(t, "s3", []string{"s1", "s2", "s3"}, s2, s3)
	if len(d3) >= len(layer(t, "s3", nil, nil, s3)) {
		t.Errorf("delta of %d bytes is not smaller than the full manifest", len(d3))
	}
	for name, c := range map[string]struct {
		layers [][]byte
		want   []*Entry
	}{"s1": {[][]byte{full}, s1}, "s2": {[][]byte{full, d2}, s2}, "s3": {[][]byte{full, d2, d3}, s3}} {
		ch, err := openChain(t, c.layers...)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got, err := readChain(ch)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(got) != len(c.want) {
			t.Fatalf("%s: %d entries, want %d", name, len(got), len(c.want))
		}
		for i := range got {
			if !got[i].Equal(c.want[i]) {
				t.Errorf("%s: entry %d is %+v, want %+v", name, i, got[i], c.want[i])
			}
		}
		if ch.Totals == nil || ch.Totals.Entries != int64(len(c.want)) {
			t.Errorf("%s: totals %+v", name, ch.Totals)
		}
	}
	// The delta holds only what changed: 3 lines for s3 (a's mtime, b back
	// to a directory, b/w new) and one marker (d).
	m, _ := NewManifestReader(bytes.NewReader(d3))
	var lines []string
	for {
		e, err := m.Next()
		if err != nil {
			break
		}
		lines = append(lines, e.Path+":"+string(e.Type))
	}
	if want := "a:d b:d b/w:f d:deleted"; strings.Join(lines, " ") != want {
		t.Errorf("delta lines %q, want %q", lines, want)
	}
}

func TestChainRefusesBrokenLinks(t *testing.T) {
	s1 := tree("a", "a/x:f")
	s2 := tree("a")
	full := layer(t, "s1", nil, nil, s1)
	other := layer(t, "s0", nil, nil, s1)
	d2 := layer(t, "s2", []string{"s1", "s2"}, s1, s2)
	for name, layers := range map[string][][]byte{
		"missing base":  {d2},
		"wrong base":    {other, d2},
		"delta as base": {d2, d2},
	} {
		if _, err := openChain(t, layers...); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", name, err)
		}
	}
	// A trailer whose resolved totals disagree with the chain is refused.
	var buf bytes.Buffer
	w, _ := NewManifestWriter(&buf, Header{ID: "s2", Base: "s1", Chain: []string{"s1", "s2"}})
	w.ForceWrite(&Entry{Path: "a/x", Type: TypeDeleted})
	w.Close(0, 0)
	c, err := openChain(t, full, buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := readChain(c); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "layer1") {
		t.Errorf("totals mismatch: %v, want ErrCorrupt naming layer1", err)
	}
	// A marker that deletes nothing is refused, naming its layer.
	buf.Reset()
	w, _ = NewManifestWriter(&buf, Header{ID: "s2", Base: "s1", Chain: []string{"s1", "s2"}})
	w.Write(&Entry{Path: "a", Type: TypeDir})
	w.Delete("a/nothing")
	w.Close(0, 0)
	if c, err = openChain(t, full, buf.Bytes()); err == nil {
		_, err = readChain(c)
	}
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "layer1") {
		t.Errorf("stray deletion: %v, want ErrCorrupt naming layer1", err)
	}
	// A full manifest carries no deletion markers.
	buf.Reset()
	w, _ = NewManifestWriter(&buf, Header{ID: "s1"})
	w.ForceWrite(&Entry{Path: "a", Type: TypeDeleted})
	w.Close(0, 0)
	if c, err = openChain(t, buf.Bytes()); err == nil {
		_, err = readChain(c)
	}
	if !errors.Is(err, ErrCorrupt) {
		t.Errorf("deletion in a full manifest: %v, want ErrCorrupt", err)
	}
}

func TestFormat1ManifestStillReads(t *testing.T) {
	// A format 1 manifest as homesnap wrote it before deltas existed.
	var raw bytes.Buffer
	raw.WriteString(`{"format":1,"id":"s1","created":"2026-01-01T00:00:00Z","selection":{"preset":"jenkins"}}` + "\n")
	raw.WriteString(`{"path":"a","type":"d","mode":493,"uid":0,"gid":0,"mtime":1}` + "\n")
	raw.WriteString(`{"end":{"entries":1,"files":0,"bytes":0,"new":1,"new_bytes":0,"archives":[]}}` + "\n")
	zw, _ := zstd.NewWriter(nil)
	enc := zw.EncodeAll(raw.Bytes(), nil)
	c, err := openChain(t, enc)
	if err != nil {
		t.Fatal(err)
	}
	got, err := readChain(c)
	if err != nil || len(got) != 1 || got[0].Path != "a" {
		t.Fatalf("format 1 manifest: %v %+v", err, got)
	}
}

// TestChainPairsWithAnOlderView: NextPair gives, beside the resolved
// entry, the one an older layer of the chain resolves to, including paths
// only one of the views has.
func TestChainPairsWithAnOlderView(t *testing.T) {
	s1 := tree("a", "a/x:f", "b")
	s2 := tree("a", "a/x:f2", "c")
	s3 := tree("a", "a/x:f2", "d")
	c, err := openChain(t, layer(t, "s1", nil, nil, s1),
		layer(t, "s2", []string{"s1", "s2"}, s1, s2),
		layer(t, "s3", []string{"s1", "s2", "s3"}, s2, s3))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var got []string
	name := func(e *Entry) string {
		if e == nil {
			return "-"
		}
		return string(e.Type) + fmt.Sprint(e.Size)
	}
	for {
		top, below, err := c.NextPair(0)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		path := cmpOr(top, below).Path
		got = append(got, path+"="+name(top)+"/"+name(below))
	}
	// c was added and deleted above the older view: neither has it.
	if want := "a=d0/d0 a/x=f2/f1 b=-/d0 d=d0/-"; strings.Join(got, " ") != want {
		t.Errorf("pairs %q, want %q", got, want)
	}
}

func cmpOr(a, b *Entry) *Entry {
	if a != nil {
		return a
	}
	return b
}

// Read ahead, a chain gives the same entries, totals and errors as read
// in step, and closing it half-way ends its goroutines.
func TestChainReadAheadReadsTheSame(t *testing.T) {
	var specs []string
	for i := range 3*aheadBatches*aheadBatch + 7 { // more than the read-ahead holds
		specs = append(specs, fmt.Sprintf("d%04d:f", i))
	}
	s1 := tree(specs...)
	s2 := tree(append(specs[1:len(specs)-1:len(specs)-1], "z:l")...)
	full := layer(t, "s1", nil, nil, s1)
	d2 := layer(t, "s2", []string{"s1", "s2"}, s1, s2)
	read := func(ahead bool, layers ...[]byte) ([]*Entry, *Totals, error) {
		ch, err := openChain(t, layers...)
		if err != nil {
			t.Fatal(err)
		}
		if ahead {
			ch.ReadAhead()
		}
		got, err := readChain(ch)
		return got, ch.Totals, err
	}
	want, wantTotals, err := read(false, full, d2)
	if err != nil || len(want) != len(s2) {
		t.Fatalf("in step: %d entries, %v", len(want), err)
	}
	got, totals, err := read(true, full, d2)
	if err != nil || len(got) != len(want) || !reflect.DeepEqual(totals, wantTotals) {
		t.Fatalf("read ahead: %d entries, totals %+v, %v; in step %d, %+v", len(got), totals, err, len(want), wantTotals)
	}
	for i := range got {
		if !got[i].Equal(want[i]) {
			t.Fatalf("entry %d: %+v, in step %+v", i, got[i], want[i])
		}
	}
	// Damaged half-way: the same error, after the same entries.
	var buf bytes.Buffer
	w, err := NewManifestWriter(&buf, Header{ID: "bad"})
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range s1 {
		if i == aheadBatch+3 {
			w.ForceWrite(s1[0]) // out of order
		}
		w.ForceWrite(e)
	}
	if _, err := w.Close(0, 0); err != nil {
		t.Fatal(err)
	}
	wantN, _, wantErr := read(false, buf.Bytes())
	gotN, _, gotErr := read(true, buf.Bytes())
	if wantErr == nil || gotErr == nil || gotErr.Error() != wantErr.Error() || len(gotN) != len(wantN) || len(gotN) <= aheadBatch {
		t.Fatalf("damaged: read ahead %d entries, %v; in step %d, %v", len(gotN), gotErr, len(wantN), wantErr)
	}
	before := runtime.NumGoroutine()
	for range 10 {
		ch, err := openChain(t, full, d2)
		if err != nil {
			t.Fatal(err)
		}
		ch.ReadAhead()
		if _, err := ch.Next(); err != nil {
			t.Fatal(err)
		}
		ch.Close()
	}
	for deadline := time.Now().Add(5 * time.Second); runtime.NumGoroutine() > before && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond) // the decoders' own goroutines end after Close returns
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Fatalf("%d goroutines after closing the chains, %d before", n, before)
	}
}
