// Package archive is homesnap's on-store format.
//
// An archive object is a tar stream compressed with zstd as a sequence of
// independent frames: `zstd -dc A | tar -x` (or `tar --zstd -xf A`) unpacks
// it with stock tools. Every frame that holds a tar header starts on a
// header boundary, so a reader can fetch one byte range and decode it alone;
// a file larger than a frame continues in frames of its own.
//
// A manifest lists every selected path of one snapshot, sorted in walk
// order, with its metadata, content hash and the archive byte range holding
// its bytes. It is zstd-compressed JSON lines: a header, the entries, and a
// trailer that proves the manifest is complete.
package archive

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"strings"
)

// Type is the kind of a manifest entry.
type Type string

const (
	TypeFile    Type = "f"
	TypeDir     Type = "d"
	TypeSymlink Type = "l"
	// TypeDeleted marks, in a delta manifest only, a path of the base that
	// the snapshot no longer has; such a line carries nothing but the path.
	TypeDeleted Type = "deleted"
)

// Hash is a SHA-256 content hash.
type Hash [32]byte

func (h Hash) String() string { return hex.EncodeToString(h[:]) }

func (h Hash) MarshalText() ([]byte, error) { return []byte(h.String()), nil }

func (h *Hash) UnmarshalText(b []byte) error {
	if len(b) != 64 {
		return fmt.Errorf("sha256 %q: want 64 hex digits", b)
	}
	_, err := hex.Decode(h[:], b)
	return err
}

// Entry is one path of a snapshot.
type Entry struct {
	Path  string      `json:"path"` // slash-separated, relative to the home
	Type  Type        `json:"type"`
	Mode  fs.FileMode `json:"mode"` // permission, setuid, setgid and sticky bits only
	UID   int         `json:"uid"`
	GID   int         `json:"gid"`
	Size  int64       `json:"size,omitempty"`
	MTime int64       `json:"mtime"` // ns since the Unix epoch
	Link  string      `json:"link,omitempty"`
	Hash  *Hash       `json:"sha256,omitempty"` // regular files only

	// Change detection: not restored, compared with the next walk.
	CTime int64  `json:"ctime,omitempty"`
	Inode uint64 `json:"ino,omitempty"`
	// Dev is the device the walk saw the path on: a read must find the
	// same device and inode. Never stored.
	Dev uint64 `json:"-"`
	// Changed is set when the file changed while it was read (a log being
	// appended, a file rewritten): the bytes are a prefix or a mix, the
	// metadata is from before the read, so the next snapshot reads it again.
	Changed bool `json:"changed_while_read,omitempty"`
	// Implied marks a directory that is not selected itself but leads to
	// selected paths: a restore creates it when missing and otherwise leaves
	// it alone.
	Implied bool `json:"implied,omitempty"`
	// Links is the link count the walk saw (a root sidecar leaves out some
	// hard-linked files: SECURITY.md). Never stored.
	Links uint32 `json:"-"`

	// Where the bytes live: the archive of snapshot Archive, from compressed
	// byte Offset for Length bytes (whole frames). Empty files carry none.
	Archive string `json:"archive,omitempty"`
	Offset  int64  `json:"offset,omitempty"`
	Length  int64  `json:"length,omitempty"`
}

// HasData reports whether the entry's bytes live in an archive.
func (e *Entry) HasData() bool { return e.Type == TypeFile && e.Size > 0 }

// SameMeta reports whether a walked entry looks unchanged compared to the
// entry recorded in the parent snapshot. It is the incremental test: any
// change of size, mtime, ctime, inode, mode, owner or link target means the
// bytes are read again.
func (e *Entry) SameMeta(old *Entry) bool {
	return e.Type == old.Type && e.Size == old.Size && e.MTime == old.MTime &&
		e.CTime == old.CTime && e.Inode == old.Inode && e.Mode == old.Mode &&
		e.UID == old.UID && e.GID == old.GID && e.Link == old.Link && !old.Changed
}

// Equal reports whether two entries would be written as the same line:
// a delta manifest leaves out an entry equal to its base's.
func (e *Entry) Equal(o *Entry) bool {
	if (e.Hash == nil) != (o.Hash == nil) || e.Hash != nil && *e.Hash != *o.Hash {
		return false
	}
	return e.Path == o.Path && e.Type == o.Type && e.Mode == o.Mode && e.UID == o.UID && e.GID == o.GID &&
		e.Size == o.Size && e.MTime == o.MTime && e.Link == o.Link && e.CTime == o.CTime && e.Inode == o.Inode &&
		e.Changed == o.Changed && e.Implied == o.Implied && e.Archive == o.Archive && e.Offset == o.Offset && e.Length == o.Length
}

// ComparePaths orders paths as a depth-first walk with sorted directory
// entries visits them: component by component, so "a/b" sorts before "a.b".
// This is byte order with '/' ranked below every other byte.
func ComparePaths(a, b string) int {
	n := min(len(a), len(b))
	i := 0
	// Paths next to each other share long prefixes, and every manifest
	// line is compared several times: skip the equal part 8 bytes at a time.
	for ; i+8 <= n && word(a, i) == word(b, i); i += 8 {
	}
	for ; i < n; i++ {
		ca, cb := a[i], b[i]
		if ca == cb {
			continue
		}
		if ca == '/' {
			return -1
		}
		if cb == '/' {
			return 1
		}
		if ca < cb {
			return -1
		}
		return 1
	}
	switch {
	case len(a) < len(b):
		return -1
	case len(a) > len(b):
		return 1
	}
	return 0
}

// word is s[i:i+8] as one number (the compiler loads it at once).
func word(s string, i int) uint64 {
	s = s[i : i+8]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// ErrUnsafePath is returned for a path that could land outside the home.
var ErrUnsafePath = errors.New("unsafe path")

// CheckPath refuses paths that are absolute, contain "." or ".." components,
// empty components, backslashes-as-separators tricks or NUL bytes.
func CheckPath(p string) error {
	if p == "" || strings.HasPrefix(p, "/") || strings.ContainsRune(p, 0) {
		return fmt.Errorf("%w %q: must be relative and non-empty", ErrUnsafePath, p)
	}
	for rest, more := p, true; more; { // by component, without allocating: every manifest line is checked
		var c string
		c, rest, more = strings.Cut(rest, "/")
		if c == "" || c == "." || c == ".." {
			return fmt.Errorf("%w %q: contains an empty, \".\" or \"..\" component", ErrUnsafePath, p)
		}
	}
	return nil
}

// Parent returns the directory part of p, "" for a top-level path.
func Parent(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[:i]
	}
	return ""
}
