package archive

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// TarHeader is what a ranged read needs of a tar header: which entry it
// is and how much data follows. Everything else comes from the manifest.
type TarHeader struct {
	Name     string
	Typeflag byte
	Size     int64
}

// tarReader reads the tar stream inside an archive range: the ustar
// headers, with pax extended headers before the few that need them (long
// or non-ASCII names, long link targets, big ids), that archive/tar's
// writer makes of tarHeader's fields, which is every archive homesnap has
// written. It parses only a header's name, type and size; archive/tar's
// reader, which also parses the other fields and checks which format each
// header is, spent 3.6 µs a file of a million-file restore. Anything
// outside that subset is an error, never a guess: FuzzTarReader holds every
// header this reader accepts to what archive/tar reads from the same bytes.
type tarReader struct {
	r    io.Reader
	blk  [blockSize]byte
	left int64 // data of the current entry not yet read
	pad  int64 // zeros after it, to the next block
	pax  []byte
}

const (
	blockSize = 512
	// maxPAX bounds a pax header's records, as archive/tar does: ours hold
	// a path, a link target and a few numbers.
	maxPAX = 1 << 20
)

var errTarHeader = errors.New("invalid tar header")

// Next skips what is left of the current entry and reads the next header.
// It returns io.EOF at the end of the stream (a zero block, or nothing
// more to read at a block boundary).
func (t *tarReader) Next() (TarHeader, error) {
	if err := t.skip(t.left); err != nil { // apart: their sum may overflow
		return TarHeader{}, err
	}
	if err := t.skip(t.pad); err != nil {
		return TarHeader{}, err
	}
	t.left, t.pad = 0, 0
	var hdr TarHeader
	var path string
	var size []byte // of the pax header (t.pax), when it has one
	for pax := false; ; pax = true {
		if err := t.readBlock(); err != nil {
			return TarHeader{}, err
		}
		flag := t.blk[156]
		n, err := t.size()
		if err != nil {
			return TarHeader{}, err
		}
		if flag != 'x' {
			hdr = TarHeader{Typeflag: flag, Size: n}
			break
		}
		if pax { // two pax headers in a row
			return TarHeader{}, fmt.Errorf("%w: a pax header follows a pax header", errTarHeader)
		}
		if path, size, err = t.readPAX(n); err != nil {
			return TarHeader{}, err
		}
	}
	hdr.Name = path
	if path == "" {
		hdr.Name = t.name()
	}
	if len(size) > 0 {
		n, err := strconv.ParseInt(string(size), 10, 64)
		if err != nil || n < 0 {
			return TarHeader{}, fmt.Errorf("%w: pax size %q", errTarHeader, size)
		}
		hdr.Size = n
	}
	if hdr.Typeflag == 0 { // pre-POSIX: a directory by its trailing slash
		hdr.Typeflag = '0'
		if strings.HasSuffix(hdr.Name, "/") {
			hdr.Typeflag = '5'
		}
	}
	switch hdr.Typeflag {
	case '1', '2', '3', '4', '5', '6': // no data follows, whatever the size says
	case '0', '7':
		t.left = hdr.Size
		t.pad = -hdr.Size & (blockSize - 1)
	default: // gnu long names, sparse files, global pax headers: never written
		return TarHeader{}, fmt.Errorf("%w: type %q", errTarHeader, hdr.Typeflag)
	}
	return hdr, nil
}

// Read reads the current entry's data.
func (t *tarReader) Read(p []byte) (int, error) {
	if t.left <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > t.left {
		p = p[:t.left]
	}
	n, err := t.r.Read(p)
	t.left -= int64(n)
	if err == io.EOF && t.left > 0 {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}

// readBlock reads the next header block and checks its checksum and magic;
// io.EOF at the stream's end (nothing more at a block boundary, or a zero
// block).
func (t *tarReader) readBlock() error {
	if _, err := io.ReadFull(t.r, t.blk[:]); err != nil {
		return err
	}
	if t.blk == [blockSize]byte{} {
		return io.EOF
	}
	want, err := octal(t.blk[148:156])
	if err != nil {
		return err
	}
	// The checksum field counts as spaces; archive/tar accepts the sum of
	// the bytes as unsigned or as signed values.
	var unsigned, signed int64
	for i, b := range t.blk {
		if i >= 148 && i < 156 {
			b = ' '
		}
		unsigned += int64(b)
		signed += int64(int8(b))
	}
	if want != unsigned && want != signed {
		return fmt.Errorf("%w: checksum", errTarHeader)
	}
	// archive/tar writes ustar's magic and version; a star trailer would
	// make archive/tar read a shorter prefix.
	if string(t.blk[257:265]) != "ustar\x0000" || string(t.blk[508:512]) == "tar\x00" {
		return fmt.Errorf("%w: not a ustar header", errTarHeader)
	}
	return nil
}

// name is the header's path: its prefix field, a slash, its name field.
func (t *tarReader) name() string {
	name := cString(t.blk[0:100])
	if prefix := cString(t.blk[345:500]); len(prefix) > 0 {
		return string(prefix) + "/" + string(name)
	}
	return string(name)
}

// size parses the header's size field: octal, or base-256 for the sizes
// that octal cannot hold.
func (t *tarReader) size() (int64, error) {
	f := t.blk[124:136]
	if f[0]&0x80 == 0 {
		return octal(f)
	}
	if f[0] != 0x80 || f[1]|f[2]|f[3] != 0 || f[4]&0x80 != 0 { // negative or past int64
		return 0, fmt.Errorf("%w: size", errTarHeader)
	}
	var n int64
	for _, b := range f[4:] {
		n = n<<8 | int64(b)
	}
	return n, nil
}

// octal parses a numeric field as archive/tar does: octal digits, padded
// with spaces or NULs on either side, up to the first NUL between them.
func octal(f []byte) (int64, error) {
	f = cString(bytes.Trim(f, " \x00"))
	if len(f) == 0 {
		return 0, nil
	}
	n, err := strconv.ParseUint(string(f), 8, 63)
	if err != nil {
		return 0, fmt.Errorf("%w: number %q", errTarHeader, f)
	}
	return int64(n), nil
}

// cString is b up to its first NUL.
func cString(b []byte) []byte {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		return b[:i]
	}
	return b
}

// readPAX reads the n bytes of a pax header's records and returns its path
// and size (empty when absent: the ustar field holds). Records are "LEN
// key=value\n", LEN counting the whole record; the last of a key wins.
func (t *tarReader) readPAX(n int64) (path string, size []byte, err error) {
	if n > maxPAX {
		return "", nil, fmt.Errorf("%w: pax header of %d bytes", errTarHeader, n)
	}
	need := int(n) + int(-n&(blockSize-1))
	if cap(t.pax) < need {
		t.pax = make([]byte, need)
	}
	b := t.pax[:need]
	if _, err := io.ReadFull(t.r, b); err != nil {
		return "", nil, noEOF(err)
	}
	for b = b[:n]; len(b) > 0; {
		sp := bytes.IndexByte(b, ' ')
		if sp <= 0 {
			return "", nil, fmt.Errorf("%w: pax record", errTarHeader)
		}
		l, err := strconv.Atoi(string(b[:sp]))
		if err != nil || l < 5 || l <= sp+1 || l > len(b) || b[l-1] != '\n' {
			return "", nil, fmt.Errorf("%w: pax record", errTarHeader)
		}
		key, value, ok := bytes.Cut(b[sp+1:l-1], []byte{'='})
		if !ok || len(key) == 0 || bytes.IndexByte(key, 0) >= 0 {
			return "", nil, fmt.Errorf("%w: pax record", errTarHeader)
		}
		switch string(key) {
		case "path", "linkpath", "uname", "gname":
			if bytes.IndexByte(value, 0) >= 0 {
				return "", nil, fmt.Errorf("%w: pax %s with a NUL", errTarHeader, key)
			}
			if string(key) == "path" {
				path = string(value)
			}
		case "size":
			size = value
		default:
			// Sparse files change where data lies; nothing homesnap writes
			// has them. The other keys (mtime, uid, ...) only describe what
			// the manifest holds.
			if bytes.HasPrefix(key, []byte("GNU.sparse.")) {
				return "", nil, fmt.Errorf("%w: pax key %q", errTarHeader, key)
			}
		}
		b = b[l:]
	}
	return path, size, nil
}

// skip reads and drops n bytes.
func (t *tarReader) skip(n int64) error {
	if n <= 0 {
		return nil
	}
	_, err := io.CopyN(io.Discard, t.r, n)
	return noEOF(err)
}

// noEOF turns an end inside an entry into io.ErrUnexpectedEOF.
func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
