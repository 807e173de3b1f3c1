// Package journal follows changes to a home's selection as they happen
// (inotify on Linux), so that a snapshot can re-stat only what changed
// instead of walking everything, and re-walk it into exactly the entries a
// full walk would report (Rescan).
//
// It is never trusted blindly: anything it cannot account for (a lost
// event, a watch it could not place, an event it cannot interpret) makes
// the next Take ask for a full walk, with the reason.
//
// The contract with the taker: the changes a Take returns cover every
// change completed between the previous Take and this one. After a Take
// that asks for a full walk, the walk must start after that Take returned
// and tell Linked of every file it finds with several names (the journal
// watches those itself and, to open fast, does not stat files to find
// them); what it reports is then the base the next Take's changes apply
// to.
//
// What inotify cannot tell, so only a full walk sees (the scheduled
// verification walk is there for these): a selected file with a single
// name given a second one in a directory that is not watched (its link
// count and ctime change, and only watchers of the file itself hear of
// it; files that already have several names are watched themselves);
// writes through a shared mmap (no event; the mtime moves at writeback);
// changes made by another machine, which is why Open refuses a home on a
// network file system.
package journal

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/homesnap/homesnap/internal/archive"
)

// Changes is what changed in one interval.
type Changes struct {
	// Paths maps each path that may have changed (appeared, gone, or its
	// metadata) to whether everything below it must be walked again too
	// (a directory created, moved in, or replaced).
	Paths map[string]bool
	// Inodes are files whose metadata changed under every one of their
	// names (hard links): each name the base has for them must be
	// re-statted.
	Inodes map[uint64]bool
}

func newChanges() *Changes {
	return &Changes{Paths: map[string]bool{}, Inodes: map[uint64]bool{}}
}

// Empty reports whether nothing changed.
func (c *Changes) Empty() bool { return len(c.Paths) == 0 && len(c.Inodes) == 0 }

func (c *Changes) path(rel string, tree bool) {
	c.Paths[rel] = c.Paths[rel] || tree
}

// covers reports whether p itself is marked, or lies in a tree marked to
// be walked again.
func (c *Changes) covers(p string) bool {
	if _, ok := c.Paths[p]; ok {
		return true
	}
	for p != "" {
		i := strings.LastIndexByte(p, '/')
		p = p[:max(i, 0)] // "" is the home itself
		if c.Paths[p] {
			return true
		}
	}
	return false
}

// sorted returns the paths in walk order, leaving out those below a path
// whose whole tree is re-walked anyway.
func (c *Changes) sorted() []string {
	ps := slices.SortedFunc(maps.Keys(c.Paths), archive.ComparePaths)
	out := ps[:0]
	tree := "\x00"
	for _, p := range ps {
		if below(p, tree) {
			continue
		}
		if c.Paths[p] {
			tree = p
		}
		out = append(out, p)
	}
	return out
}

// Entries iterates over a slice of entries (a walk's result in memory),
// as a base for Rescan.
func Entries(es []*archive.Entry) Base { return &slice{es} }

type slice struct{ es []*archive.Entry }

func (s *slice) Next() (*archive.Entry, error) {
	if len(s.es) == 0 {
		return nil, io.EOF
	}
	e := s.es[0]
	s.es = s.es[1:]
	return e, nil
}

func (*slice) Span() (*archive.Span, error) { return nil, nil }
func (*slice) SkipSpan() error              { return errors.New("no span to pass over") }

// Base is what a rescan starts from: the entries a walk reported, in walk
// order (a manifest chain, archive.ChainReader).
type Base interface {
	// Next returns the next entry, or io.EOF after the last.
	Next() (*archive.Entry, error)
	// Span returns the run of entries Next would begin with, when the
	// base can pass over it whole (archive.Span), or nil.
	Span() (*archive.Span, error)
	// SkipSpan passes over that run.
	SkipSpan() error
}

// ResolveInodes returns the changes with each changed hard-linked inode
// (Inodes) turned into the paths base has for it, which Rescan statts
// again. base is read to its end when there are such inodes: it must be
// a reader of its own, not the one Rescan is given.
func (c *Changes) ResolveInodes(base Base) (*Changes, error) {
	if len(c.Inodes) == 0 {
		return c, nil
	}
	paths := maps.Clone(c.Paths)
	for {
		e, err := base.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		if e.Type == archive.TypeFile && c.Inodes[e.Inode] && !paths[e.Path] {
			paths[e.Path] = false
		}
	}
	return &Changes{Paths: paths}, nil
}

// below reports whether p lies strictly below dir.
func below(p, dir string) bool {
	if dir == "" {
		return p != ""
	}
	return len(p) > len(dir) && p[len(dir)] == '/' && p[:len(dir)] == dir
}

// Reason is why the journal cannot be trusted for an interval.
type Reason string

// The reasons, also the labels of the fallback counters.
const (
	ReasonStarted     Reason = "started"      // nothing seen before the journal started
	ReasonOverflow    Reason = "overflow"     // the kernel's event queue overflowed: events were lost
	ReasonWatchLimit  Reason = "watch_limit"  // fs.inotify.max_user_watches reached
	ReasonWatchFailed Reason = "watch_failed" // a directory could not be watched
	ReasonWatchLost   Reason = "watch_lost"   // a watch ended without a delete explaining it
	ReasonUnmount     Reason = "unmount"      // a file system below the home was unmounted
	ReasonUnknown     Reason = "unknown"      // an event the journal cannot interpret
	ReasonInvalidated Reason = "invalidated"  // the taker said so (a failed snapshot, a verification walk)
	ReasonClosed      Reason = "closed"       // the journal was closed
	ReasonUnsupported Reason = "unsupported"  // no journal on this platform
)

// FullWalkError is what Take returns when the changes cannot be trusted:
// the snapshot must walk the whole selection.
type FullWalkError struct {
	Reason Reason
	Detail string
}

func (e *FullWalkError) Error() string {
	return fmt.Sprintf("change journal cannot be trusted (%s): %s; a full walk is needed", e.Reason, e.Detail)
}

// WatchBytes is about what the journal holds on the heap per watch, with a
// margin: its node, name, parent's slot and table slot, 45 bytes measured
// (BENCHMARKS.md: five million files). What runs beside the journal sizes
// its room with it.
const WatchBytes = 50

// Stats are the journal's counters.
type Stats struct {
	DirWatches  int               // directories watched
	FileWatches int               // multiply linked files watched (their other names may be outside the selection)
	Events      uint64            // events read
	Fallbacks   map[Reason]uint64 // intervals that needed a full walk, by the first reason
}
