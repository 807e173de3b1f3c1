// Package testhome builds Jenkins homes with every edge case a restore must
// reproduce, and compares two trees attribute by attribute. Tests only.
package testhome

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"

	"golang.org/x/sys/unix"
)

// Attr is everything a restore must reproduce about one path.
type Attr struct {
	Type  string // "f", "d", "l"
	Mode  uint32 // permission and special bits
	UID   uint32
	GID   uint32
	Size  int64
	MTime int64 // ns
	Link  string
	Sum   [32]byte
}

// Tree maps slash-separated relative paths to their attributes.
type Tree map[string]Attr

// Read records every path under root, without following symlinks. keep
// filters paths (nil keeps all); a directory that is not kept is still
// descended into.
func Read(root string, keep func(rel string) bool) (Tree, error) {
	t := Tree{}
	err := filepath.Walk(root, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel == "." {
			return nil
		}
		rel = filepath.ToSlash(rel)
		if keep != nil && !keep(rel) {
			return nil
		}
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		a := Attr{Mode: uint32(st.Mode) & 0o7777, // uint16 on macOS
			UID: st.Uid, GID: st.Gid, MTime: st.Mtim.Nano()}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			a.Type = "d"
		case unix.S_IFLNK:
			a.Type = "l"
			a.Mode = 0 // link modes are meaningless on Linux
			if a.Link, err = os.Readlink(p); err != nil {
				return err
			}
		case unix.S_IFREG:
			a.Type, a.Size = "f", st.Size
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			h := sha256.New()
			_, err = io.Copy(h, f)
			f.Close()
			if err != nil {
				return err
			}
			h.Sum(a.Sum[:0])
		default:
			return nil
		}
		t[rel] = a
		return nil
	})
	return t, err
}

// Diff lists every difference between want and got, one line each, sorted.
// Directory mtimes are compared too.
func Diff(want, got Tree) []string {
	var out []string
	for p, w := range want {
		g, ok := got[p]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("%s: missing", p))
		case w != g:
			out = append(out, fmt.Sprintf("%s: want %s, got %s", p, w, g))
		}
	}
	for p := range got {
		if _, ok := want[p]; !ok {
			out = append(out, fmt.Sprintf("%s: unexpected", p))
		}
	}
	sort.Strings(out)
	return out
}

func (a Attr) String() string {
	var b bytes.Buffer
	fmt.Fprintf(&b, "{%s mode=%04o uid=%d gid=%d size=%d mtime=%d", a.Type, a.Mode, a.UID, a.GID, a.Size, a.MTime)
	if a.Link != "" {
		fmt.Fprintf(&b, " link=%q", a.Link)
	}
	if a.Type == "f" {
		fmt.Fprintf(&b, " sha256=%x", a.Sum[:6])
	}
	b.WriteString("}")
	return b.String()
}
