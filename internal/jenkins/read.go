package jenkins

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
)

// The agent check reads files anyone who runs build code can write, so
// each read is bounded and of regular files only: a config.xml that is a
// link to /dev/zero, a FIFO or a 10 GB file is a problem of that node,
// never an endless read.
const (
	// MaxConfigXML bounds a node's config.xml: a few KB in practice, more
	// with many labels, tools and environment variables.
	MaxConfigXML = 1 << 20
	// MaxKeyFile bounds master.key (256 bytes), the ConfidentialStore keys
	// (272) and identity.key.enc (1680), with room for larger keys.
	MaxKeyFile = 64 << 10
)

// ErrUnreadable wraps why a file the check needs cannot be read as one:
// it is not a regular file, or is larger than its bound.
var ErrUnreadable = errors.New("not a readable file")

// readBounded reads the regular file p of fsys, at most limit bytes. What
// is not a regular file as fsys reports it (an fs.FS that follows links
// reports their targets), or is larger, is ErrUnreadable.
func readBounded(fsys fs.FS, p string, limit int64) ([]byte, error) {
	f, err := fsys.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %s is a %s, not a regular file", ErrUnreadable, p, kind(fi.Mode()))
	}
	if fi.Size() > limit {
		return nil, fmt.Errorf("%w: %s has %d bytes, more than the %d expected", ErrUnreadable, p, fi.Size(), limit)
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%w: %s grew past %d bytes while read", ErrUnreadable, p, limit)
	}
	return data, nil
}

func kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "directory"
	case m&fs.ModeSymlink != 0:
		return "symlink"
	case m&fs.ModeNamedPipe != 0:
		return "named pipe"
	case m&fs.ModeDevice != 0:
		return "device"
	}
	return "special file"
}
