package archive

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// bigTree is n files under jobs/ and 150 under nodes/, in directories of
// 100, the file at marked (if any) marked changed while read.
func bigTree(n int, marked string) []*Entry {
	var out []*Entry
	add := func(top string, files int) {
		out = append(out, &Entry{Path: top, Type: TypeDir, Mode: 0o755, MTime: 1})
		for i := range files {
			dir := fmt.Sprintf("%s/d%05d", top, i/100)
			if i%100 == 0 {
				out = append(out, &Entry{Path: dir, Type: TypeDir, Mode: 0o755, MTime: 1, CTime: 5, Inode: uint64(len(out))})
			}
			h := Hash{byte(i)}
			p := fmt.Sprintf("%s/f%05d", dir, i)
			out = append(out, &Entry{Path: p, Type: TypeFile, Mode: 0o644, Size: int64(i%7 + 1), MTime: 1, CTime: int64(10 + i),
				Inode: uint64(len(out)), Hash: &h, Archive: fmt.Sprintf("a%d", i/1500), Length: 10, Changed: p == marked})
		}
	}
	add("jobs", n)
	add("nodes", 150)
	return out
}

// passing reads a chain, passing over every span that pass accepts, and
// returns the entries it decoded, the spans it passed and the chain's end.
func passing(t *testing.T, c *ChainReader, pass func(*Span) bool) (got []*Entry, passed []*Span, err error) {
	t.Helper()
	defer c.Close()
	c.PassSpans()
	for {
		sp, err := c.Span()
		if err != nil {
			return got, passed, err
		}
		if sp != nil && pass(sp) {
			if err := c.SkipSpan(); err != nil {
				return got, passed, err
			}
			passed = append(passed, sp)
			continue
		}
		e, err := c.Next()
		if errors.Is(err, io.EOF) {
			return got, passed, nil
		}
		if err != nil {
			return got, passed, err
		}
		got = append(got, e)
	}
}

func TestSpansSumUpWhatAReaderPassesOver(t *testing.T) {
	snap := bigTree(5000, "jobs/d00031/f03105")
	full := layer(t, "s1", nil, nil, snap)
	c, err := openChain(t, full)
	if err != nil {
		t.Fatal(err)
	}
	got, passed, err := passing(t, c, func(sp *Span) bool { return !strings.HasPrefix(sp.First, "jobs/d0002") })
	if err != nil {
		t.Fatalf("the chain does not resolve to its totals after passing over spans: %v", err)
	}
	if len(passed) < 3 {
		t.Fatalf("passed over %d spans of a %d-entry manifest", len(passed), len(snap))
	}
	// What was passed over and what was decoded is the snapshot, in order.
	var want Span
	i := 0
	for _, e := range snap {
		if len(passed) > 0 && i < len(got) && got[i].Path == e.Path {
			i++
			continue
		}
		want.Add(e)
	}
	if i != len(got) {
		t.Fatalf("decoded %d entries that are not the snapshot's in order", len(got)-i)
	}
	var sum Span
	for _, sp := range passed {
		sum.Entries += sp.Entries
		sum.Files += sp.Files
		sum.Bytes += sp.Bytes
		sum.Sizes += sp.Sizes
		sum.Inodes += sp.Inodes
		sum.Changed = sum.Changed || sp.Changed
		for top, n := range sp.Tops {
			if sum.Tops == nil {
				sum.Tops = map[string]int64{}
			}
			sum.Tops[top] += n
		}
	}
	if sum.Entries != want.Entries || sum.Files != want.Files || sum.Bytes != want.Bytes || sum.Sizes != want.Sizes ||
		sum.Inodes != want.Inodes || sum.Changed != want.Changed || fmt.Sprint(sum.Tops) != fmt.Sprint(want.Tops) {
		t.Fatalf("the spans passed over sum up to %+v, their entries to %+v", sum, want)
	}
	if !want.Changed {
		t.Fatal("the entry marked changed while read is in no span passed over: the test proves nothing about the flag")
	}
}

func TestNoSpanIsPassedOverWhereADeltaChangesIt(t *testing.T) {
	s1 := bigTree(5000, "")
	s2 := append([]*Entry(nil), s1...)
	changed := *s2[2500]
	changed.MTime = 99
	s2[2500] = &changed
	full := layer(t, "s1", nil, nil, s1)
	d2 := layer(t, "s2", []string{"s1", "s2"}, s1, s2)
	c, err := openChain(t, full, d2)
	if err != nil {
		t.Fatal(err)
	}
	got, passed, err := passing(t, c, func(*Span) bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	for _, sp := range passed {
		if ComparePaths(sp.First, changed.Path) <= 0 && ComparePaths(changed.Path, sp.Last) <= 0 {
			t.Fatalf("passed over span %s…%s, which the delta changes at %s", sp.First, sp.Last, changed.Path)
		}
	}
	found := false
	for _, e := range got {
		if e.Path == changed.Path {
			found = e.MTime == 99
		}
	}
	if !found || len(got) > 2*SpanEntries {
		t.Fatalf("decoded %d entries, the delta's change among them: %v", len(got), found)
	}
	// The one span decoded was decoded for the delta's line: what tells
	// the next snapshot to write a full manifest once deltas cover most.
	var inSpans int64
	for _, sp := range passed {
		inSpans += sp.Entries
	}
	if covered, met := c.Coverage(); covered != met-inSpans || covered == 0 || covered > SpanEntries {
		t.Errorf("coverage: %d of %d entries in spans, %d of them passed over; want one span covered", covered, met, inSpans)
	}
}

// edit rewrites a manifest's uncompressed lines.
func edit(t *testing.T, data []byte, change func(string) string) []byte {
	t.Helper()
	zr, err := zstd.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(zr)
	zr.Close()
	if err != nil {
		t.Fatal(err)
	}
	zw, _ := zstd.NewWriter(nil)
	return zw.EncodeAll([]byte(change(string(raw))), nil)
}

func TestASpanThatDoesNotSumUpItsEntriesIsRefused(t *testing.T) {
	full := layer(t, "s1", nil, nil, bigTree(3000, ""))
	for name, change := range map[string]func(string) string{
		"a byte more": func(s string) string { return strings.Replace(s, `"sizes":`, `"sizes":1`, 2) },
		"an entry fewer": func(s string) string {
			return strings.Replace(s, `{"span":{"entries":1024`, `{"span":{"entries":1023`, 2)
		},
		"an entry more": func(s string) string {
			return strings.Replace(s, `{"span":{"entries":1024`, `{"span":{"entries":1025`, 1)
		},
		"no span": func(s string) string { return strings.Replace(s, `{"span":`, `{"spam":`, 1) },
		"a span in a run": func(s string) string {
			i := strings.Index(s, `{"path":"jobs/d00001`)
			return s[:i] + s[i+strings.Index(s[i:], `{"span":`):]
		},
	} {
		ch, err := openChain(t, edit(t, full, change))
		if err == nil {
			_, err = readChain(ch)
		}
		if !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: read with %v, want it refused as corrupt", name, err)
		}
	}
	// Passing over a span that claims an entry more reads into the next.
	ch, err := openChain(t, edit(t, full, func(s string) string {
		return strings.Replace(s, `{"span":{"entries":1024`, `{"span":{"entries":1025`, 2)
	}))
	if err == nil {
		_, _, err = passing(t, ch, func(*Span) bool { return true })
	}
	if !errors.Is(err, ErrCorrupt) {
		t.Errorf("passing over a span longer than its run: %v, want it refused as corrupt", err)
	}
}

func TestSpanLinesKeepNamesThatAreNotUTF8(t *testing.T) {
	var sp Span
	for _, p := range []string{"a\xfftop", "a\xfftop/a", "a\xfftop/\xfe\xfd", "zz"} {
		sp.Add(&Entry{Path: p, Type: TypeDir, Mode: 0o755, MTime: 1, CTime: 3, Inode: 7})
	}
	line := appendSpan(nil, &sp)
	got, err := parseSpan(line[:len(line)-1], "")
	if err != nil || !got.same(&sp) {
		t.Fatalf("span line %s read back as %+v, %v; want %+v", line, got, err, sp)
	}
}
