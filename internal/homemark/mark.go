package homemark

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"golang.org/x/sys/unix"

	"github.com/homesnap/homesnap/internal/archive"
	"github.com/homesnap/homesnap/internal/homefs"
	"github.com/homesnap/homesnap/internal/scan"
	"github.com/homesnap/homesnap/internal/selector"
)

// Name is the file at the home's root that records which snapshot
// the home matches. It lives in the reserved namespace, so no walk or
// snapshot ever sees it.
const Name = scan.ReservedPrefix + "home.json"

// Mark says the home's selection was equal to snapshot Snapshot of
// store Store when Fingerprint was taken. A restore reads it to tell a
// home at the store's head (left alone without a walk) from one behind the
// head, unchanged since (a delta restore, after one stat walk), or of
// unknown origin.
type Mark struct {
	Store     string        `json:"store"` // for messages; identity comes from the snapshot ID
	Snapshot  string        `json:"snapshot"`
	Time      time.Time     `json:"time"` // the snapshot's
	Selection selector.Spec `json:"selection"`
	Print     Fingerprint   `json:"fingerprint"`
	Written   time.Time     `json:"written"`
	// Seq is the commit count (repo.Head.Seq) of the newest head of Store
	// this home saw: a restore refuses a head with a lower one, which the
	// store alone cannot prove old when it is older by exactly one
	// snapshot. 0 (a mark from before it) checks nothing.
	Seq int64 `json:"seq,omitempty"`
	// Pending is the snapshot a sidecar was committing when it last wrote
	// the mark: the head names it when the process stopped between moving
	// the head and marking the home, and it is this home's all the same.
	Pending string `json:"pending,omitempty"`
}

// Fingerprint summarises a home's selection from one stat walk: how many
// paths it holds, the newest ctime among them, and sums of their sizes and
// inode numbers. Any change to a path (content, mode, owner, rename) sets
// its ctime to the present, beyond every ctime seen before; a removal
// changes the count. The sums catch what a ctime alone can miss within one
// kernel clock tick: an append (size) and a file replaced by rename, as
// Jenkins saves its XML files (inode).
type Fingerprint struct {
	Entries  int64  `json:"entries"`
	MaxCTime int64  `json:"max_ctime"`
	Bytes    int64  `json:"bytes"`
	Inodes   uint64 `json:"inode_sum"`
	// Counted marks a fingerprint a restore counted instead of walking
	// (see RestoredPrint): it has no inode sum.
	Counted bool `json:"counted,omitempty"`
}

// Add folds one walked entry into the fingerprint.
func (f *Fingerprint) Add(e *archive.Entry) {
	f.Entries++
	f.MaxCTime = max(f.MaxCTime, e.CTime)
	f.Bytes += e.Size
	f.Inodes += e.Inode
}

// AddSpan folds in the entries of a span a snapshot passed over, as Add
// of each would.
func (f *Fingerprint) AddSpan(sp *archive.Span) {
	f.Entries += sp.Entries
	f.MaxCTime = max(f.MaxCTime, sp.MaxCTime)
	f.Bytes += sp.Sizes
	f.Inodes += sp.Inodes
}

// Changed reports whether the home changed since f was taken.
func (f Fingerprint) Changed(now Fingerprint) bool {
	return now.Entries != f.Entries || now.MaxCTime > f.MaxCTime || now.Bytes != f.Bytes || !f.Counted && now.Inodes != f.Inodes
}

// RestoredPrint is the fingerprint of a home a restore has just made equal
// to a snapshot (entries paths, bytes file bytes), without walking it again (a third of the system calls of
// a restore into an empty home): the restore counted the paths and file
// bytes it left in the selection, and no path of the home has a ctime
// beyond the filesystem's clock now, read from a probe file. Nothing else
// writes meanwhile (the restore holds the home's lock), so the sums that
// guard against changes within one clock tick are not needed. Should the
// count ever differ from a walk, the next restore sees local changes and
// skips, and the sidecar's next walk marks the home afresh: safe.
func RestoredPrint(home *homefs.Home, entries, bytes int64) (Fingerprint, error) {
	if !home.Exists() {
		return Fingerprint{}, errNotOpen(home)
	}
	var st unix.Stat_t
	if err := home.Dir.Probe(scan.ReservedPrefix+"probe", &st); err != nil {
		return Fingerprint{}, err
	}
	return Fingerprint{Entries: entries, Bytes: bytes, MaxCTime: st.Ctim.Nano(), Counted: true}, nil
}

// TakeFingerprint stat-walks the selection of home. A missing home has an
// empty fingerprint.
func TakeFingerprint(ctx context.Context, home *homefs.Home, sel *selector.Selector) (f Fingerprint, err error) {
	err = walk(ctx, home, sel, func(e *archive.Entry) error {
		f.Add(e)
		return nil
	})
	return f, err
}

// errFound ends HoldsSelection's walk at the first selected path.
var errFound = errors.New("a selected path")

// HoldsSelection reports whether home holds any path sel selects itself
// (not only a directory leading to one). The walk stops at the first: on
// a Jenkins home that is a listing of the home's root (and of the few
// directories listed ahead meanwhile), not a walk of the home.
func HoldsSelection(ctx context.Context, home *homefs.Home, sel *selector.Selector) (bool, error) {
	err := walk(ctx, home, sel, func(e *archive.Entry) error {
		if e.Implied {
			return nil
		}
		return errFound
	})
	if errors.Is(err, errFound) {
		return true, nil
	}
	return false, err
}

// walk is scan.Walk over a home that may not exist yet (a dry run's: it
// then holds nothing).
func walk(ctx context.Context, home *homefs.Home, sel *selector.Selector, fn func(*archive.Entry) error) error {
	if !home.Exists() {
		return nil
	}
	return scan.Walk(ctx, home, sel, nil, fn)
}

// maxSize bounds the mark a restore reads: it is a few hundred bytes
// plus the selection's patterns, and anyone who writes the home can
// replace it.
const maxSize = 1 << 20

// ErrDamaged marks a home mark that cannot be read: the home's data is then
// of unknown origin, which only a forced restore replaces.
var ErrDamaged = errors.New("is damaged")

// Read returns the home's mark, or nil when it has none (or the home
// does not exist).
func Read(home *homefs.Home) (*Mark, error) {
	if !home.Exists() {
		return nil, nil
	}
	data, err := home.Dir.ReadFile(Name, maxSize)
	if errors.Is(err, unix.ENOENT) {
		return nil, nil
	}
	if err == nil {
		var m *Mark
		if m, err = parse(data); err == nil {
			return m, nil
		}
	}
	return nil, fmt.Errorf("%s %w (%v): remove it", home.Join(Name), ErrDamaged, err)
}

func parse(data []byte) (*Mark, error) {
	var m Mark
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, err
	}
	if m.Snapshot == "" {
		return nil, errors.New("no snapshot named")
	}
	return &m, nil
}

// Carry moves the home's mark from snapshot from to snapshot to, taken at
// at and committed as seq, keeping its fingerprint: to holds from's tree and was taken without
// walking the home (a consolidation), so the home matches to exactly when
// it matches from, and the restore that compares it with the head decides
// as before. A mark naming another snapshot, or none, says nothing about
// to and is left alone. It reports whether the mark moved.
func Carry(home *homefs.Home, from, to string, at time.Time, seq int64) (bool, error) {
	m, err := Read(home)
	if err != nil || m == nil || m.Snapshot != from {
		return false, err
	}
	m.Snapshot, m.Time, m.Seq, m.Pending = to, at, seq, ""
	return true, Write(home, m)
}

// SetPending records in the home's mark, if it has one, that snapshot id
// is about to become the head: see Mark.Pending.
func SetPending(home *homefs.Home, id string) error {
	m, err := Read(home)
	if err != nil || m == nil {
		return err
	}
	m.Pending = id
	return Write(home, m)
}

// Write replaces the home's mark atomically (temporary file in the
// home created afresh, fsync, rename).
func Write(home *homefs.Home, m *Mark) error {
	if !home.Exists() {
		return errNotOpen(home)
	}
	m.Written = time.Now().UTC()
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	if err := home.Dir.WriteFile(Name, Name+".tmp", append(data, '\n'), 0o644, nil); err != nil {
		return fmt.Errorf("write %s: %w", home.Join(Name), errors.Unwrap(err))
	}
	return nil
}

// errNotOpen refuses to write into a home that does not exist (a dry
// run's).
func errNotOpen(home *homefs.Home) error {
	if home == nil {
		return ErrNoHome
	}
	return fmt.Errorf("home %s: %w", home.Path, fs.ErrNotExist)
}
