//go:build linux

package journal

import (
	"bytes"
	"encoding/binary"
	"errors"

	"golang.org/x/sys/unix"
)

// dirent is a directory entry as getdents gives it: a name and its type
// (unix.DT_*; DT_UNKNOWN where the file system does not say).
type dirent struct {
	name string
	typ  uint8
}

// readDirents lists the open directory fd from where it stands (without .
// and ..), reading buf's size at a time. Without all, only the entries that
// may be directories are kept: watches are placed on directories, and a
// million-file home would allocate a string per file for nothing.
func readDirents(fd int, buf []byte, all bool) ([]dirent, error) {
	var out []dirent
	for {
		n, err := unix.ReadDirent(fd, buf)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if n <= 0 {
			return out, nil
		}
		// struct linux_dirent64: d_ino u64, d_off s64, d_reclen u16,
		// d_type u8, d_name NUL-terminated.
		for b := buf[:n]; len(b) >= 19; {
			reclen := int(binary.NativeEndian.Uint16(b[16:18]))
			if reclen < 19 || reclen > len(b) {
				return nil, errors.New("getdents returned a malformed entry")
			}
			ino, typ, name := binary.NativeEndian.Uint64(b[0:8]), b[18], b[19:reclen]
			b = b[reclen:]
			if i := bytes.IndexByte(name, 0); i >= 0 {
				name = name[:i]
			}
			if ino == 0 || string(name) == "." || string(name) == ".." {
				continue
			}
			if all || typ == unix.DT_DIR || typ == unix.DT_UNKNOWN {
				out = append(out, dirent{name: string(name), typ: typ})
			}
		}
	}
}

// dtype is the directory entry type of a stat's mode.
func dtype(mode uint32) uint8 {
	switch mode & unix.S_IFMT {
	case unix.S_IFDIR:
		return unix.DT_DIR
	case unix.S_IFREG:
		return unix.DT_REG
	case unix.S_IFLNK:
		return unix.DT_LNK
	}
	return dtOther
}

// dtOther is any other type: neither watched nor statted again.
const dtOther = 0xff
