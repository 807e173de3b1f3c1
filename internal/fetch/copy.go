package fetch

import (
	"crypto/sha256"
	"fmt"
	"io"

	"github.com/homesnap/homesnap/internal/archive"
)

// CopyEntry copies the file e whose header tr has just read (size bytes
// of content, from where, for messages) into fw, checking its size and hash against the entry's,
// and returns the frames holding its header and its last byte.
func CopyEntry(fw *archive.FrameWriter, tr io.Reader, size int64, e *archive.Entry, buf []byte, where string) (first, last int, err error) {
	if size != e.Size {
		return 0, 0, fmt.Errorf("%w archive %s: %q has %d bytes, the manifest says %d", archive.ErrCorrupt, where, e.Path, size, e.Size)
	}
	if err := fw.WriteHeader(e); err != nil {
		return 0, 0, err
	}
	first = fw.Frame()
	h := sha256.New()
	n, err := io.CopyBuffer(fw, io.TeeReader(io.LimitReader(tr, e.Size), h), buf)
	if err != nil {
		return 0, 0, fmt.Errorf("read %s: %w", where, err)
	}
	if n != e.Size {
		return 0, 0, fmt.Errorf("%w archive %s: %q ends after %d of %d bytes", archive.ErrCorrupt, where, e.Path, n, e.Size)
	}
	var sum archive.Hash
	h.Sum(sum[:0])
	if e.Hash == nil || sum != *e.Hash {
		return 0, 0, fmt.Errorf("%w archive %s: %q does not match its hash", archive.ErrCorrupt, where, e.Path)
	}
	return first, fw.Frame(), nil
}
