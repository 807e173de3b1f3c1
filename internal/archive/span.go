package archive

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"
)

// A Span sums up a run of consecutive entries of a full manifest, on a line
// of its own before them (format 3). A reader that needs only what the run
// adds up to (a snapshot over its parent where nothing in the run's paths
// changed) passes over its lines without decoding them, so such a snapshot
// costs what changed rather than what the home holds. A reader that does
// decode a run checks it against its span.
type Span struct {
	First, Last string // the paths of its first and last entries
	LastDir     bool   // the last entry is a directory
	// LastImplied: the last entry is an implied directory (Entry.Implied),
	// which leads to selected paths after the span.
	LastImplied bool
	Tally       // its entries, files, file bytes and archives
	// Tops counts the entries under each top-level name.
	Tops map[string]int64
	// What a home's fingerprint sums from a walk (homemark.Fingerprint):
	// every entry's size (not only files'), the newest ctime and the
	// inode numbers.
	Sizes    int64
	MaxCTime int64
	Inodes   uint64
	// Changed: an entry was read while it changed (the next snapshot
	// reads it again).
	Changed bool
}

// SpanEntries is how many entries a writer puts in a span at most (it
// also ends one where the top-level name changes): a snapshot that
// changes one path decodes this many of its parent's, and a manifest gets
// one span line (about 200 bytes) per this many entries.
const SpanEntries = 1024

// maxSpanEntries bounds the entries a span may claim.
const maxSpanEntries = 1 << 16

func topName(path string) string {
	top, _, _ := strings.Cut(path, "/")
	return top
}

// Add counts e, the next entry of the run, in the span.
func (s *Span) Add(e *Entry) {
	if s.Entries == 0 {
		s.First = e.Path
	}
	s.Last, s.LastDir, s.LastImplied = e.Path, e.Type == TypeDir, e.Implied
	s.Tally.Add(e)
	top := topName(e.Path)
	if s.Tops == nil {
		s.Tops = map[string]int64{}
	}
	if _, ok := s.Tops[top]; !ok {
		top = strings.Clone(top) // not the whole path's memory
	}
	s.Tops[top]++
	s.Sizes += e.Size
	s.MaxCTime = max(s.MaxCTime, e.CTime)
	s.Inodes += e.Inode
	s.Changed = s.Changed || e.Changed
}

// same reports whether the entries decoded (o) add up to the span.
func (s *Span) same(o *Span) bool {
	return s.First == o.First && s.Last == o.Last && s.LastDir == o.LastDir && s.LastImplied == o.LastImplied &&
		s.Entries == o.Entries && s.Files == o.Files && s.Bytes == o.Bytes && slices.Equal(s.Archives, o.Archives) &&
		maps.Equal(s.Tops, o.Tops) && s.Sizes == o.Sizes && s.MaxCTime == o.MaxCTime && s.Inodes == o.Inodes && s.Changed == o.Changed
}

// Merge adds o's entries to t.
func (t *Tally) Merge(o Tally) {
	t.Entries += o.Entries
	t.Files += o.Files
	t.Bytes += o.Bytes
	for _, a := range o.Archives {
		if !slices.Contains(t.Archives, a) {
			t.Archives = append(t.Archives, a)
		}
	}
}

// A span line is plain JSON like the entries: names that are not valid
// UTF-8 go base64-encoded under *_b64, as paths do.
type spanLine struct {
	Span spanJSON `json:"span"`
}

type spanJSON struct {
	Entries  int64     `json:"entries"`
	Files    int64     `json:"files"`
	Bytes    int64     `json:"bytes"`
	Archives []string  `json:"archives"`
	First    string    `json:"first,omitempty"`
	FirstB64 []byte    `json:"first_b64,omitempty"`
	Last     string    `json:"last,omitempty"`
	LastB64  []byte    `json:"last_b64,omitempty"`
	LastDir  bool      `json:"last_dir,omitempty"`
	LastImp  bool      `json:"last_implied,omitempty"`
	Tops     []topJSON `json:"tops"`
	Sizes    int64     `json:"sizes"`
	MaxCTime int64     `json:"max_ctime"`
	Inodes   uint64    `json:"inode_sum"`
	Changed  bool      `json:"changed_while_read,omitempty"`
}

type topJSON struct {
	Name    string `json:"name,omitempty"`
	NameB64 []byte `json:"name_b64,omitempty"`
	Entries int64  `json:"entries"`
}

var spanPrefix = []byte(`{"span":`)

func name(s string) (string, []byte) {
	if utf8.ValidString(s) {
		return s, nil
	}
	return "", []byte(s)
}

func unname(s string, b []byte) string {
	if b != nil {
		return string(b)
	}
	return s
}

// appendSpan appends s as one JSON line.
func appendSpan(b []byte, s *Span) []byte {
	j := spanJSON{Entries: s.Entries, Files: s.Files, Bytes: s.Bytes, Archives: s.Archives, LastDir: s.LastDir, LastImp: s.LastImplied,
		Sizes: s.Sizes, MaxCTime: s.MaxCTime, Inodes: s.Inodes, Changed: s.Changed, Tops: []topJSON{}}
	if j.Archives == nil {
		j.Archives = []string{}
	}
	j.First, j.FirstB64 = name(s.First)
	j.Last, j.LastB64 = name(s.Last)
	for _, top := range slices.Sorted(maps.Keys(s.Tops)) {
		t := topJSON{Entries: s.Tops[top]}
		t.Name, t.NameB64 = name(top)
		j.Tops = append(j.Tops, t)
	}
	line, _ := json.Marshal(spanLine{j}) // cannot fail: strings, bytes and numbers
	return append(append(b, line...), '\n')
}

// parseSpan reads a span line and checks that it can describe a run of
// entries that follows last (the path before it, "" at the start).
func parseSpan(line []byte, last string) (*Span, error) {
	var l spanLine
	if err := json.Unmarshal(line, &l); err != nil {
		return nil, err
	}
	j := l.Span
	s := &Span{First: unname(j.First, j.FirstB64), Last: unname(j.Last, j.LastB64), LastDir: j.LastDir, LastImplied: j.LastImp,
		Tally: Tally{Entries: j.Entries, Files: j.Files, Bytes: j.Bytes, Archives: j.Archives},
		Tops:  make(map[string]int64, len(j.Tops)), Sizes: j.Sizes, MaxCTime: j.MaxCTime, Inodes: j.Inodes, Changed: j.Changed}
	var tops int64
	for _, t := range j.Tops {
		top := unname(t.Name, t.NameB64)
		if _, dup := s.Tops[top]; dup || t.Entries <= 0 || strings.Contains(top, "/") {
			return nil, fmt.Errorf("span counts top-level name %q twice, or not at all", top)
		}
		s.Tops[top] = t.Entries
		tops += t.Entries
	}
	switch {
	case s.Entries < 1 || s.Entries > maxSpanEntries:
		return nil, fmt.Errorf("span of %d entries (1 to %d)", s.Entries, maxSpanEntries)
	case s.Files < 0 || s.Files > s.Entries || s.Bytes < 0 || int64(len(s.Archives)) > s.Entries || tops != s.Entries:
		return nil, fmt.Errorf("span of %d entries counts %d files, %d bytes, %d archives, %d entries by name", s.Entries, s.Files, s.Bytes, len(s.Archives), tops)
	}
	if err := CheckPath(s.First); err != nil {
		return nil, err
	}
	if err := CheckPath(s.Last); err != nil {
		return nil, err
	}
	if c := ComparePaths(s.First, s.Last); c > 0 || c == 0 && s.Entries != 1 || last != "" && ComparePaths(last, s.First) >= 0 {
		return nil, fmt.Errorf("span %q…%q of %d entries is out of order after %q", s.First, s.Last, s.Entries, last)
	}
	return s, nil
}
