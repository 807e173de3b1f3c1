package archive

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"
)

// tarEntries are headers of every shape tarHeader gives archive/tar's
// writer: plain ustar (a whole-second mtime), pax for an mtime's
// nanoseconds, for names past ustar's 100+155 bytes, for non-ASCII names
// and link targets, for ids past ustar's octal; a name split into prefix
// and name; directories, symlinks, empty files and sizes off a block.
func tarEntries() []*Entry {
	ns := time.Date(2026, 12, 7, 18, 0, 0, 123456789, time.UTC).UnixNano()
	sec := time.Date(2026, 12, 7, 18, 0, 0, 0, time.UTC).UnixNano()
	long := "jobs/" + strings.Repeat("folder/", 40) + "config.xml"
	split := "jobs/" + strings.Repeat("f", 90) + "/" + strings.Repeat("b", 90) + "/log"
	return []*Entry{
		{Path: "jobs", Type: TypeDir, Mode: 0o755, MTime: sec},
		{Path: "jobs/a/config.xml", Type: TypeFile, Mode: 0o644, Size: 700, MTime: ns},
		{Path: "jobs/a/empty", Type: TypeFile, Mode: 0o600, MTime: sec},
		{Path: "jobs/a/block", Type: TypeFile, Mode: 0o644, Size: 512, MTime: sec},
		{Path: long, Type: TypeFile, Mode: 0o644, Size: 3, MTime: ns},
		{Path: split, Type: TypeFile, Mode: 0o644, Size: 1025, MTime: sec},
		{Path: "jobs/ünïcødé/log", Type: TypeFile, Mode: 0o644, Size: 9, MTime: ns},
		{Path: "jobs/a/lastSuccessful", Type: TypeSymlink, Link: "builds/" + strings.Repeat("9", 120), MTime: ns},
		{Path: "jobs/a/big-ids", Type: TypeFile, Mode: 0o644, Size: 1, UID: 1 << 30, GID: 1 << 30, MTime: ns},
		{Path: "jobs/a/builds", Type: TypeDir, Mode: 0o2755, MTime: ns},
	}
}

// tarStream writes es with archive/tar's writer, as a FrameWriter does,
// each file's bytes a pattern of its size.
func tarStream(t testing.TB, es []*Entry) []byte {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, e := range es {
		h := tarHeader(e)
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if e.Type == TypeFile {
			if _, err := tw.Write(content(e)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func content(e *Entry) []byte {
	return bytes.Repeat([]byte(e.Path[len(e.Path)-1:]), int(e.Size))
}

func TestTarReaderReadsWhatArchiveTarWrites(t *testing.T) {
	es := tarEntries()
	tr := &tarReader{r: bytes.NewReader(tarStream(t, es))}
	for _, e := range es {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("before %s: %v", e.Path, err)
		}
		name, flag := e.Path, byte(tar.TypeReg)
		switch e.Type {
		case TypeDir:
			name, flag = e.Path+"/", tar.TypeDir
		case TypeSymlink:
			flag = tar.TypeSymlink
		}
		if h.Name != name || h.Typeflag != flag || h.Size != e.Size {
			t.Errorf("got %q type %q size %d, want %q type %q size %d", h.Name, h.Typeflag, h.Size, name, flag, e.Size)
		}
		if e.Type == TypeFile && e.Size == 700 {
			continue // left unread: Next skips it
		}
		data, err := io.ReadAll(tr)
		if err != nil || (e.Type == TypeFile && !bytes.Equal(data, content(e))) || (e.Type != TypeFile && len(data) > 0) {
			t.Errorf("%s: read %d bytes (%v), want %d", e.Path, len(data), err, e.Size)
		}
	}
	if h, err := tr.Next(); err != io.EOF {
		t.Fatalf("after the last entry: %+v, %v; want io.EOF", h, err)
	}
}

// block is a ustar header block with a valid checksum.
func block(name string, flag byte, size int64) []byte {
	b := make([]byte, blockSize)
	copy(b, name)
	copy(b[100:], "0000644\x00")
	copy(b[124:], fmt.Sprintf("%011o\x00", size))
	b[156] = flag
	copy(b[257:], "ustar\x0000")
	setChecksum(b)
	return b
}

// setChecksum writes the checksum of header block b.
func setChecksum(b []byte) {
	copy(b[148:], "        ")
	var sum int64
	for _, c := range b {
		sum += int64(c)
	}
	copy(b[148:], fmt.Sprintf("%06o\x00 ", sum))
}

// padded is data followed by zeros to the next block.
func padded(data string) []byte {
	return append([]byte(data), make([]byte, -len(data)&(blockSize-1))...)
}

// pax is a pax header block and its records ("key", "value", ...), each
// "LEN key=value\n" with LEN counting the whole record.
func pax(kv ...string) []byte {
	var recs string
	for i := 0; i+1 < len(kv); i += 2 {
		rec := " " + kv[i] + "=" + kv[i+1] + "\n"
		n := len(rec) + len(strconv.Itoa(len(rec)))
		if len(strconv.Itoa(n)) != len(strconv.Itoa(len(rec))) {
			n++
		}
		recs += strconv.Itoa(n) + rec
	}
	return concat(block("PaxHeaders/x", 'x', int64(len(recs))), padded(recs))
}

func concat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// TestTarReaderRefusesWhatHomesnapNeverWrites: headers archive/tar would
// read but no homesnap archive holds, and damaged ones, end the read with
// an error rather than a guess at where the next entry starts.
func TestTarReaderRefusesWhatHomesnapNeverWrites(t *testing.T) {
	badSum := block("jobs/a", '0', 0)
	badSum[0] = 'J'
	gnu := block("jobs/a", '0', 0)
	copy(gnu[257:], "ustar  \x00")
	for name, stream := range map[string][]byte{
		"gnu long name":        concat(block("././@LongLink", 'L', 7), padded("jobs/a\x00"), block("jobs/a", '0', 0)),
		"global pax header":    concat(block("pax_global_header", 'g', 0), block("jobs/a", '0', 0)),
		"sparse file":          concat(block("jobs/a", 'S', 0)),
		"sparse pax keys":      concat(pax("GNU.sparse.size", "9"), block("jobs/a", '0', 0)),
		"two pax headers":      concat(pax("path", "jobs/b"), pax("path", "jobs/c"), block("jobs/a", '0', 0)),
		"pax record too long":  concat(block("PaxHeaders/a", 'x', 12), padded("99 path=a/b\n"), block("jobs/a", '0', 0)),
		"pax header past 1MiB": concat(block("PaxHeaders/a", 'x', maxPAX+1)),
		"negative pax size":    concat(pax("size", "-1"), block("jobs/a", '0', 0)),
		"bad checksum":         badSum,
		"gnu magic":            gnu,
		"truncated header":     block("jobs/a", '0', 0)[:300],
		"truncated data":       concat(block("jobs/a", '0', 600), padded("x")),
	} {
		t.Run(name, func(t *testing.T) {
			tr := &tarReader{r: bytes.NewReader(stream)}
			var err error
			for err == nil {
				if _, err = tr.Next(); err == nil {
					_, err = io.ReadAll(tr)
				}
			}
			if err == io.EOF {
				t.Fatalf("read to the end without an error")
			}
			if !errors.Is(err, errTarHeader) && err != io.ErrUnexpectedEOF {
				t.Fatalf("error %v, want errTarHeader or io.ErrUnexpectedEOF", err)
			}
		})
	}
}

// FuzzTarReader reads arbitrary bytes with tarReader and archive/tar side
// by side: every entry tarReader returns must be the one archive/tar
// returns from the same bytes (name, type, size, data). tarReader may
// stop earlier with an error (it reads a subset), never read differently.
// Every block with ustar's magic gets a valid checksum first, or almost
// no mutated header would get past it (bad checksums: the test above).
//
//	go test ./internal/archive -run '^$' -fuzz FuzzTarReader -fuzztime 1m
func FuzzTarReader(f *testing.F) {
	f.Add(tarStream(f, tarEntries()))
	f.Add(concat(pax("path", "jobs/b", "size", "3", "mtime", "1.5"), block("jobs/a", '0', 0), padded("abc")))
	f.Add(concat(block("jobs/old/", 0, 0), block("jobs/old/f", 0, 2), padded("hi")))
	nul := block("jobs/a", '0', 0) // a size field padded with NULs ahead of its digits
	copy(nul[124:], "\x00\x00 0000012\x00")
	f.Add(concat(nul, padded("0123456789")))
	b256 := block("jobs/b", '0', 0) // a size in base 256
	copy(b256[124:], []byte{0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3})
	f.Add(concat(b256, padded("abc")))
	f.Fuzz(func(t *testing.T, stream []byte) {
		for i := 0; i+blockSize <= len(stream); i += blockSize {
			if b := stream[i : i+blockSize]; string(b[257:263]) == "ustar\x00" {
				setChecksum(b)
			}
		}
		ours := &tarReader{r: bytes.NewReader(stream)}
		theirs := tar.NewReader(bytes.NewReader(stream))
		for {
			got, err := ours.Next()
			if err != nil {
				return
			}
			want, err := theirs.Next()
			if err != nil {
				return // archive/tar checks fields tarReader does not parse
			}
			if got.Name != want.Name || got.Typeflag != want.Typeflag || got.Size != want.Size {
				t.Fatalf("tarReader read %q type %q size %d, archive/tar %q type %q size %d",
					got.Name, got.Typeflag, got.Size, want.Name, want.Typeflag, want.Size)
			}
			gotData, gotErr := io.ReadAll(ours)
			wantData, wantErr := io.ReadAll(theirs)
			if !bytes.Equal(gotData, wantData) {
				t.Fatalf("%q: tarReader read %d bytes (%v), archive/tar %d (%v)", got.Name, len(gotData), gotErr, len(wantData), wantErr)
			}
			if gotErr != nil || wantErr != nil {
				return
			}
		}
	})
}

// BenchmarkTarHeaders reads the tar stream of 10,000 small files (1.4 KiB,
// the five-million home's mean; one ustar header each, as nearly every
// file of a home has) with archive/tar's reader and with tarReader.
func BenchmarkTarHeaders(b *testing.B) {
	es := make([]*Entry, 10_000)
	for i := range es {
		es[i] = &Entry{Path: fmt.Sprintf("jobs/job-%d/builds/%d/log", i%300, i), Type: TypeFile, Mode: 0o644,
			Size: 1400, MTime: time.Date(2026, 12, 7, 18, 0, 0, i+1, time.UTC).UnixNano()}
	}
	stream := tarStream(b, es)
	buf := make([]byte, 32<<10)
	drain := func(b *testing.B, next func() error, data io.Reader) {
		for {
			if err := next(); err == io.EOF {
				return
			} else if err != nil {
				b.Fatal(err)
			}
			if _, err := io.CopyBuffer(io.Discard, data, buf); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("archive-tar", func(b *testing.B) {
		for b.Loop() {
			tr := tar.NewReader(bytes.NewReader(stream))
			drain(b, func() error { _, err := tr.Next(); return err }, tr)
		}
	})
	b.Run("tarReader", func(b *testing.B) {
		for b.Loop() {
			tr := &tarReader{r: bytes.NewReader(stream)}
			drain(b, func() error { _, err := tr.Next(); return err }, tr)
		}
	})
}
