package archive_test

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/homesnap/homesnap/internal/archive"
)

// benchFile is one regular file of the benchmark archive.
type benchFile struct {
	e    archive.Entry
	data []byte
}

// benchFiles is ~64 MiB of content shaped like a Jenkins home: mostly
// console-log and XML-like text (compressible) with a quarter of random
// bytes (artifacts, which do not compress), in files from a few hundred
// bytes to several MiB. It is built once and shared by the benchmarks.
var benchFiles = sync.OnceValues(func() ([]benchFile, int64) {
	const total = 64 << 20
	r := rand.New(rand.NewPCG(1, 2))
	var files []benchFile
	var sum int64
	for i := 0; sum < total; i++ {
		var size int
		switch {
		case i%50 == 0:
			size = 1<<20 + r.IntN(7<<20) // a big log or artifact, often past a frame
		case i%5 == 0:
			size = 64<<10 + r.IntN(512<<10)
		default:
			size = 200 + r.IntN(24<<10)
		}
		size = min(size, total-int(sum)+1)
		var data []byte
		if i%4 == 3 {
			data = make([]byte, size)
			for j := range data {
				data[j] = byte(r.Uint32())
			}
		} else {
			data = logText(r, size)
		}
		files = append(files, benchFile{
			e: archive.Entry{
				Path: fmt.Sprintf("jobs/job-%03d/builds/%d/log", i/20, i%20),
				Type: archive.TypeFile, Mode: 0o644, UID: 1000, GID: 1000,
				Size: int64(size), MTime: 1_760_000_000_000_000_000 + int64(i)*1e9,
			},
			data: data,
		})
		sum += int64(size)
	}
	return files, sum
})

var words = []string{"INFO", "WARN", "DEBUG", "Building", "in", "workspace", "/var/jenkins_home/workspace/app",
	"[Pipeline]", "sh", "stage", "node", "git", "fetch", "--tags", "origin", "Checking", "out", "Revision",
	"mvn", "-B", "test", "Tests", "run:", "Failures:", "0,", "Errors:", "Skipped:", "Time", "elapsed:",
	"<hudson.model.ParametersAction>", "</hudson.model.ParametersAction>", "<name>BRANCH</name>",
	"Downloading", "from", "central:", "https://repo.maven.apache.org/maven2/org/apache/", "SUCCESS", "Finished:"}

// logText returns size bytes of timestamped, log-like lines with numbers
// and hashes sprinkled in, so the text compresses like a real console log
// rather than like a repeated string.
func logText(r *rand.Rand, size int) []byte {
	b := make([]byte, 0, size+128)
	for len(b) < size {
		b = fmt.Appendf(b, "%02d:%02d:%02d.%03d ", r.IntN(24), r.IntN(60), r.IntN(60), r.IntN(1000))
		for n := 3 + r.IntN(10); n > 0; n-- {
			switch r.IntN(8) {
			case 0:
				b = fmt.Appendf(b, "%d ", r.IntN(100000))
			case 1:
				b = fmt.Appendf(b, "%016x ", r.Uint64())
			default:
				b = append(b, words[r.IntN(len(words))]...)
				b = append(b, ' ')
			}
		}
		b[len(b)-1] = '\n'
	}
	return b[:size]
}

// writeArchive lays the files out through a FrameWriter, passing content in
// 256 KiB writes as a snapshot does, and returns the archive bytes.
func writeArchive(b *testing.B, c *archive.Compressor, files []benchFile, out *bytes.Buffer) {
	fw := archive.NewFrameWriter(c, func(frame []byte) error {
		out.Write(frame)
		c.Release(frame)
		return nil
	})
	for i := range files {
		f := &files[i]
		if err := fw.WriteHeader(&f.e); err != nil {
			b.Fatal(err)
		}
		for p := f.data; len(p) > 0; {
			n := min(len(p), 256<<10)
			if _, err := fw.Write(p[:n]); err != nil {
				b.Fatal(err)
			}
			p = p[n:]
		}
	}
	if err := fw.Cut(); err != nil {
		b.Fatal(err)
	}
	out.Write(c.EndFrame())
}

func BenchmarkFrameWriter(b *testing.B) {
	files, total := benchFiles()
	for _, level := range []zstd.EncoderLevel{zstd.SpeedFastest, zstd.SpeedDefault, zstd.SpeedBetterCompression} {
		b.Run(fmt.Sprintf("level=%s", level), func(b *testing.B) {
			c, err := archive.NewCompressor(level, runtime.GOMAXPROCS(0))
			if err != nil {
				b.Fatal(err)
			}
			var out bytes.Buffer
			out.Grow(int(total))
			b.SetBytes(total)
			b.ReportAllocs()
			for b.Loop() {
				out.Reset()
				writeArchive(b, c, files, &out)
			}
			b.ReportMetric(float64(total)/float64(out.Len()), "ratio")
		})
	}
}

// BenchmarkFrameOfContent is what one 2 MiB frame costs at the default
// level by content: random bytes (archived artifacts, which do not
// compress) against console-log text. It says whether storing frames that
// do not compress without the encoder would save anything (issue 33).
func BenchmarkFrameOfContent(b *testing.B) {
	r := rand.New(rand.NewPCG(3, 4))
	random := make([]byte, archive.FrameSize)
	rand.NewChaCha8([32]byte{3}).Read(random)
	for _, c := range []struct {
		name string
		raw  []byte
	}{{"random", random}, {"log", logText(r, archive.FrameSize)[:archive.FrameSize]}} {
		b.Run(c.name, func(b *testing.B) {
			comp, err := archive.NewCompressor(zstd.SpeedFastest, 1)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(c.raw)))
			var out []byte
			for b.Loop() {
				out = comp.Frame(c.raw, out[:0])
			}
			b.ReportMetric(float64(len(c.raw))/float64(len(out)), "ratio")
		})
	}
}

func BenchmarkRangeReader(b *testing.B) {
	files, total := benchFiles()
	c, err := archive.NewCompressor(zstd.SpeedFastest, runtime.GOMAXPROCS(0))
	if err != nil {
		b.Fatal(err)
	}
	var out bytes.Buffer
	writeArchive(b, c, files, &out)
	data := out.Bytes()
	buf := make([]byte, 256<<10)
	b.SetBytes(total)
	b.ReportAllocs()
	for b.Loop() {
		rr, err := archive.NewRangeReader(bytes.NewReader(data), math.MaxInt64)
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for {
			_, err := rr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			if _, err := io.CopyBuffer(io.Discard, rr, buf); err != nil {
				b.Fatal(err)
			}
			n++
		}
		rr.Close()
		if n != len(files) {
			b.Fatalf("read %d entries, wrote %d", n, len(files))
		}
	}
}

// manifestEntries is 100k entries in walk order, shaped like a Jenkins
// home's: build directories, logs, build.xml files and a few symlinks.
var manifestEntries = sync.OnceValue(func() []*archive.Entry {
	const n = 100_000
	r := rand.New(rand.NewPCG(3, 4))
	entries := make([]*archive.Entry, 0, n)
	for i := 0; len(entries) < n; i++ {
		dir := fmt.Sprintf("jobs/folder-%02d/jobs/pipeline-%04d/builds/%d", i%37, i/50, i%50)
		mtime := 1_760_000_000_000_000_000 + r.Int64N(1e15)
		entries = append(entries, &archive.Entry{Path: dir, Type: archive.TypeDir, Mode: 0o755, UID: 1000, GID: 1000, MTime: mtime, CTime: mtime, Inode: r.Uint64N(1 << 30)})
		for _, name := range []string{"build.xml", "changelog.xml", "log"} {
			var h archive.Hash
			for j := range h {
				h[j] = byte(r.Uint32())
			}
			size := 100 + r.Int64N(100_000)
			entries = append(entries, &archive.Entry{
				Path: dir + "/" + name, Type: archive.TypeFile, Mode: 0o644, UID: 1000, GID: 1000,
				Size: size, MTime: mtime, CTime: mtime, Inode: r.Uint64N(1 << 30), Hash: &h,
				Archive: "20261202T111400.000Z-a1b2c3", Offset: r.Int64N(1 << 40), Length: 1 + r.Int64N(4<<20),
			})
		}
		if i%10 == 0 {
			entries = append(entries, &archive.Entry{Path: dir + "/z-link", Type: archive.TypeSymlink, Mode: 0o777, UID: 1000, GID: 1000, MTime: mtime, Link: "../lastSuccessfulBuild"})
		}
	}
	entries = entries[:n]
	// Implied parents are not needed: a manifest only demands walk order.
	slices.SortFunc(entries, func(a, b *archive.Entry) int { return archive.ComparePaths(a.Path, b.Path) })
	return slices.CompactFunc(entries, func(a, b *archive.Entry) bool { return a.Path == b.Path })
})

func encodeManifest(b *testing.B, entries []*archive.Entry, w io.Writer) {
	mw, err := archive.NewManifestWriter(w, archive.Header{ID: "20261202T111400.000Z-a1b2c3"})
	if err != nil {
		b.Fatal(err)
	}
	for _, e := range entries {
		if err := mw.Write(e); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := mw.Close(int64(len(entries)), 0); err != nil {
		b.Fatal(err)
	}
}

func BenchmarkManifestWriter(b *testing.B) {
	entries := manifestEntries()
	var out bytes.Buffer
	b.ReportAllocs()
	for b.Loop() {
		out.Reset()
		encodeManifest(b, entries, &out)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(entries)), "ns/entry")
	b.ReportMetric(float64(out.Len())/float64(len(entries)), "bytes/entry")
}

func BenchmarkManifestReader(b *testing.B) {
	entries := manifestEntries()
	var out bytes.Buffer
	encodeManifest(b, entries, &out)
	data := out.Bytes()
	b.ReportAllocs()
	for b.Loop() {
		mr, err := archive.NewManifestReader(bytes.NewReader(data))
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for {
			_, err := mr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			n++
		}
		mr.Close()
		if n != len(entries) {
			b.Fatalf("read %d entries, wrote %d", n, len(entries))
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(entries)), "ns/entry")
}
