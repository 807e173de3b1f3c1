package file

import (
	"errors"
	"io"
	"io/fs"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Big ranges are read past the page cache (O_DIRECT). A restore reads each
// archive range once and has no use for cached pages, and filling the cache
// is what a cold read costs: on the benchmark VM, 717 MiB of archive took
// 1.39 s of system time read buffered and 0.08 s read direct, and the
// direct read also ended sooner (BENCHMARKS.md, "Archives read past the
// page cache").
const (
	directMin   = 256 << 10 // smaller ranges (manifest heads, single files) are read through the cache
	directAlign = 4096      // of a read's memory, offset and length, on the usual devices
	directChunk = 512 << 10 // bytes read at once; a multiple of directAlign
)

// localDisk reports whether root is on a local disk file system where
// direct reads were measured to pay. On a network or FUSE file system an
// uncached read is a round trip with no read-ahead: those read through
// the cache.
func localDisk(root string) bool {
	var st unix.Statfs_t
	if unix.Statfs(root, &st) != nil {
		return false
	}
	switch st.Type {
	case unix.EXT4_SUPER_MAGIC, unix.XFS_SUPER_MAGIC, unix.BTRFS_SUPER_MAGIC:
		return true
	}
	return false
}

// Chunks are large allocations, which Go aligns to its 8 KiB pages;
// openDirect checks that all the same.
var directChunks = sync.Pool{New: func() any { b := make([]byte, directChunk); return &b }}

// openDirect opens length bytes of the file p from offset (length < 0: to
// its end) for reading past the page cache. It returns nil and no error
// when the range is small or the file system has no O_DIRECT: the caller
// then reads through the cache.
func openDirect(p string, offset, length int64) (io.ReadCloser, error) {
	if length >= 0 && length < directMin {
		return nil, nil
	}
	offset = max(offset, 0) // as Get's buffered read: from the start
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_DIRECT, 0)
	if errors.Is(err, unix.EINVAL) {
		return nil, nil
	}
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: p, Err: err}
	}
	end := offset + length
	if length < 0 {
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			return nil, &fs.PathError{Op: "stat", Path: p, Err: err}
		}
		end = st.Size
	}
	chunk := directChunks.Get().(*[]byte)
	if uintptr(unsafe.Pointer(unsafe.SliceData(*chunk)))%directAlign != 0 {
		directChunks.Put(chunk)
		unix.Close(fd)
		return nil, nil
	}
	return &directReader{path: p, fd: fd, direct: true, chunk: chunk,
		next: offset &^ (directAlign - 1), skip: int(offset % directAlign), end: end}, nil
}

// directReader reads [next+skip, end) of a file in aligned chunks and hands
// out their bytes. Like a buffered read of the range, it ends early (io.EOF)
// where the file does.
type directReader struct {
	path   string
	fd     int
	direct bool // O_DIRECT is still set: cleared if the device refuses an aligned read
	chunk  *[]byte
	r, w   int   // the unread bytes of the chunk
	next   int64 // the file offset of the next read, aligned until the file's end
	skip   int   // bytes of the next read before the range starts
	end    int64
	eof    bool // the file ended before end
}

func (d *directReader) Read(p []byte) (int, error) {
	if d.chunk == nil {
		return 0, &fs.PathError{Op: "read", Path: d.path, Err: fs.ErrClosed}
	}
	for d.r == d.w {
		if d.eof || d.next >= d.end {
			return 0, io.EOF
		}
		buf := *d.chunk
		want := min(int64(len(buf)), (d.end-d.next+directAlign-1)&^(directAlign-1))
		n, err := unix.Pread(d.fd, buf[:want], d.next)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EINVAL) && d.direct:
			// An alignment this device does not take: read through the cache.
			if _, err := unix.FcntlInt(uintptr(d.fd), unix.F_SETFL, 0); err != nil {
				return 0, &fs.PathError{Op: "read", Path: d.path, Err: err}
			}
			d.direct = false
			continue
		case err != nil:
			return 0, &fs.PathError{Op: "read", Path: d.path, Err: err}
		}
		d.eof = int64(n) < want
		d.r, d.w = min(d.skip, n), int(min(int64(n), d.end-d.next))
		d.skip = 0
		d.next += int64(n)
	}
	n := copy(p, (*d.chunk)[d.r:d.w])
	d.r += n
	return n, nil
}

func (d *directReader) Close() error {
	if d.chunk == nil {
		return nil
	}
	directChunks.Put(d.chunk)
	d.chunk = nil
	return unix.Close(d.fd)
}
