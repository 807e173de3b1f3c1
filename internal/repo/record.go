package repo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/homesnap/homesnap/internal/archive"
	"github.com/homesnap/homesnap/internal/store"
)

// Record summarises one snapshot. It is a small object written beside the
// manifest before the head moves, so that listing a store costs one LIST
// and one small GET per snapshot (in parallel) instead of decompressing
// every manifest to its trailer; the head stays a tiny pointer that the
// compare-and-swap rewrites.
type Record struct {
	ID         string    `json:"id"`
	Parent     string    `json:"parent,omitempty"`
	Time       time.Time `json:"time"`
	Host       string    `json:"host,omitempty"`
	Trigger    string    `json:"trigger,omitempty"` // why it was taken: Trigger*; "" for --once, imports and older records
	Entries    int64     `json:"entries"`
	Files      int64     `json:"files"`
	Bytes      int64     `json:"bytes"`
	NewEntries int64     `json:"new_entries"`
	NewBytes   int64     `json:"new_bytes"`
	Stored     int64     `json:"stored_bytes"` // compressed bytes of this snapshot's own archive
	Archives   []string  `json:"archives"`     // archives the snapshot's entries point into
	// Manifests lists the snapshots whose manifests a reader merges to
	// resolve this one, the full manifest first and this snapshot last;
	// empty means its own manifest is full. Prune keeps every one a kept
	// snapshot lists, so it never needs to read a manifest (or the key).
	Manifests []string `json:"manifests,omitempty"`
	// DeltaLines sums the lines of the delta manifests among Manifests:
	// what a reader reads beyond the full manifest.
	DeltaLines int64 `json:"delta_lines,omitempty"`
	// SpannedEntries and CoveredEntries: of the entries in the spans of
	// the full manifest below the parent's chain, how many the snapshot
	// reached while passing over spans (through the change journal), and
	// how many of those were in spans a delta had a line in, and so were
	// decoded whatever changed. Zero when it decoded everything.
	SpannedEntries int64 `json:"spanned_entries,omitempty"`
	CoveredEntries int64 `json:"covered_entries,omitempty"`
	// Partial marks a record rebuilt from a manifest header (a snapshot
	// taken before records existed): only ID, Parent, Time and Host are known.
	Partial bool `json:"partial,omitempty"`
	// Seq is the commit count the snapshot's head carries (see Head.Seq).
	Seq int64 `json:"seq,omitempty"`
}

// What took a snapshot (Record.Trigger). Retention counts on-demand
// snapshots apart from the others.
const (
	TriggerScheduled = "scheduled"
	TriggerFinal     = "final"
	TriggerOnDemand  = "on-demand"
)

// Layers returns the snapshots whose manifests the snapshot needs.
func (r *Record) Layers() []string {
	if len(r.Manifests) == 0 {
		return []string{r.ID}
	}
	return r.Manifests
}

// WriteRecord stores a snapshot's record; it must precede the head move.
func WriteRecord(ctx context.Context, s store.Store, r *Record) error {
	if err := CheckID(r.ID); err != nil {
		return err
	}
	data, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if err := s.Put(ctx, RecordKey(r.ID), strings.NewReader(string(data))); err != nil {
		return fmt.Errorf("write record %s: %w", Name(s, RecordKey(r.ID)), err)
	}
	return nil
}

// LoadRecord reads a snapshot's record, or rebuilds a partial one from its
// manifest's header when the snapshot predates records.
func LoadRecord(ctx context.Context, s store.Store, id string) (*Record, error) {
	r, err := loadStoredRecord(ctx, s, id)
	if errors.Is(err, store.ErrNotExist) {
		return recordFromManifest(ctx, s, id)
	}
	return r, err
}

// loadStoredRecord reads a snapshot's record object only.
func loadStoredRecord(ctx context.Context, s store.Store, id string) (*Record, error) {
	if err := CheckID(id); err != nil {
		return nil, err
	}
	data, _, err := s.Load(ctx, RecordKey(id))
	if err != nil {
		return nil, err
	}
	var r Record
	if err := json.Unmarshal(data, &r); err != nil || r.ID != id || (r.Parent != "" && CheckID(r.Parent) != nil) || checkLayers(&r) != nil ||
		r.CoveredEntries < 0 || r.CoveredEntries > r.SpannedEntries {
		return nil, fmt.Errorf("%s is corrupt (%s): delete it and its snapshot is listed from its manifest", Name(s, RecordKey(id)), excerpt(data))
	}
	return &r, nil
}

// checkLayers refuses a record whose manifests could not be the chain of
// its snapshot, before any of them becomes a key.
func checkLayers(r *Record) error {
	if len(r.Manifests) == 0 {
		return nil
	}
	if r.Manifests[len(r.Manifests)-1] != r.ID {
		return errors.New("the manifest chain does not end in the snapshot")
	}
	for _, id := range r.Manifests {
		if err := CheckID(id); err != nil {
			return err
		}
	}
	return nil
}

// headerWindow is how much of a manifest is read for its header line.
const headerWindow = 256 << 10

func recordFromManifest(ctx context.Context, s store.Store, id string) (*Record, error) {
	key := ManifestKey(id)
	rc, err := s.Get(ctx, key, 0, headerWindow)
	if err != nil {
		return nil, err
	}
	m, err := archive.NewManifestReader(rc)
	if err != nil {
		rc.Close()
		return nil, fmt.Errorf("%s: %w", Name(s, key), err)
	}
	defer m.Close() // and rc
	h := m.Header
	r := &Record{ID: id, Parent: h.Parent, Time: h.Created, Host: h.Host, Partial: true}
	if h.Base != "" {
		r.Manifests = h.Layers()
	}
	if h.ID != id || (h.Parent != "" && CheckID(h.Parent) != nil) || checkLayers(r) != nil {
		return nil, fmt.Errorf("%s: %w manifest header (id %q, parent %q, chain %q)", Name(s, key), archive.ErrCorrupt, h.ID, h.Parent, h.Chain)
	}
	return r, nil
}

// History is what a store holds: the snapshots the head reaches through
// its parents (the committed history), newest first; the snapshots it does
// not reach (discarded by a lost race or a failed commit, left for prune),
// oldest first; and the manifests kept only as layers that a reached
// snapshot's delta manifest needs (their snapshots were pruned).
type History struct {
	Head         string
	Snapshots    []*Record
	Unreferenced []string
	Layers       []string
}

// loadParallelism bounds the record GETs in flight while listing.
const loadParallelism = 16

// LoadHistory lists the store's snapshots and walks the parents from the
// head. A store without snapshots gives an empty History.
func LoadHistory(ctx context.Context, s store.Store) (*History, error) {
	head, _, err := LoadHead(ctx, s)
	if err != nil {
		return nil, err
	}
	var ids []string
	// An encrypted store's manifests are listed under their encrypted
	// names when listed directly (List takes both): records stay plain,
	// so listing needs no key.
	err = List(ctx, s, func(h Handle, _ store.Object) error {
		ids = append(ids, h.ID)
		return nil
	}, KindManifest)
	if err != nil {
		return nil, err
	}
	h := &History{}
	if head == nil {
		h.Unreferenced = ids
		return h, nil
	}
	h.Head = head.Snapshot
	records := map[string]*Record{}
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(loadParallelism)
	for _, id := range ids {
		g.Go(func() error {
			r, err := loadStoredRecord(gctx, s, id)
			if errors.Is(err, store.ErrNotExist) {
				return nil // predates records, or a manifest kept as a layer
			}
			if err != nil {
				return err
			}
			mu.Lock()
			records[id] = r
			mu.Unlock()
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	reached := map[string]bool{}
	for id := h.Head; id != "" && !reached[id]; {
		r := records[id]
		if r == nil { // not listed (yet): ask for it
			if r, err = LoadRecord(ctx, s, id); errors.Is(err, store.ErrNotExist) && id != h.Head {
				break // an ancestor pruned away: history ends here
			}
			if err != nil {
				return nil, fmt.Errorf("snapshot %s, which the history from %s reaches: %w", id, Name(s, HeadKey), err)
			}
		}
		reached[id] = true
		h.Snapshots = append(h.Snapshots, r)
		id = r.Parent
	}
	layer := map[string]bool{}
	for _, r := range h.Snapshots {
		for _, id := range r.Layers() {
			layer[id] = true
		}
	}
	for _, id := range ids {
		switch {
		case reached[id]:
		case layer[id]:
			h.Layers = append(h.Layers, id)
		default:
			h.Unreferenced = append(h.Unreferenced, id)
		}
	}
	return h, nil
}

// Find returns the record of a snapshot in the history, or nil.
func (h *History) Find(id string) *Record {
	for _, r := range h.Snapshots {
		if r.ID == id {
			return r
		}
	}
	return nil
}

// At returns the newest snapshot of the history taken at or before t, or
// nil when every snapshot is newer.
func (h *History) At(t time.Time) *Record {
	var best *Record
	for _, r := range h.Snapshots {
		if !r.Time.After(t) && (best == nil || r.Time.After(best.Time)) {
			best = r
		}
	}
	return best
}

// Oldest returns the history oldest first.
func (h *History) Oldest() []*Record {
	out := slices.Clone(h.Snapshots)
	slices.Reverse(out)
	return out
}

// WalkHistory calls fn with the records of from and its ancestors, newest
// first, until fn returns false or the history ends (a parent pruned away).
// It reads one small record per step and needs no LIST, so finding a
// snapshot a few steps back is cheap on any store.
func WalkHistory(ctx context.Context, s store.Store, from string, fn func(*Record) bool) error {
	seen := map[string]bool{}
	for id := from; id != "" && !seen[id]; {
		seen[id] = true
		r, err := LoadRecord(ctx, s, id)
		if errors.Is(err, store.ErrNotExist) && id != from {
			return nil
		}
		if err != nil {
			return err
		}
		if !fn(r) {
			return nil
		}
		id = r.Parent
	}
	return nil
}

// NoneAtError says no snapshot of the head's history is as old as At.
type NoneAtError struct {
	At     time.Time
	Store  string
	Oldest time.Time // the oldest snapshot of the head's history
}

func (e *NoneAtError) Error() string {
	return fmt.Sprintf("%v at or before %s in %s: the oldest in the head's history is from %s", ErrNoSnapshot, e.At.Format(time.RFC3339), e.Store, e.Oldest.Format(time.RFC3339))
}

func (e *NoneAtError) Unwrap() error { return ErrNoSnapshot }

// NoSuchSnapshotError says the store holds neither a record nor a
// manifest of the snapshot asked for: a wrong ID, not a damaged store.
type NoSuchSnapshotError struct{ ID, Store string }

func (e *NoSuchSnapshotError) Error() string {
	return fmt.Sprintf("%v %s in %s", ErrNoSnapshot, e.ID, e.Store)
}

func (e *NoSuchSnapshotError) Unwrap() error { return ErrNoSnapshot }

// CheckSnapshotExists returns a NoSuchSnapshotError unless the store holds
// the record or the manifest of snapshot id (one listing of the
// snapshots; a record alone is read by whoever needs it).
func CheckSnapshotExists(ctx context.Context, s store.Store, id string) error {
	found := errors.New("found")
	err := List(ctx, s, func(h Handle, _ store.Object) error {
		if h.ID == id {
			return found
		}
		return nil
	}, KindRecord, KindManifest)
	switch {
	case errors.Is(err, found):
		return nil
	case err != nil:
		return err
	}
	return &NoSuchSnapshotError{ID: id, Store: s.String()}
}

// SnapshotAt finds the newest snapshot of head's history taken at or
// before at. trust, when set, judges every record the walk steps on before
// its time or parent is used; its error ends the walk.
func SnapshotAt(ctx context.Context, st store.Store, head string, at time.Time, trust func(*Record) error) (string, error) {
	found := ""
	var oldest time.Time
	var distrust error
	err := WalkHistory(ctx, st, head, func(r *Record) bool {
		if trust != nil {
			if distrust = trust(r); distrust != nil {
				return false
			}
		}
		oldest = r.Time
		if !r.Time.After(at) {
			found = r.ID
			return false
		}
		return true
	})
	if err == nil {
		err = distrust
	}
	if err != nil {
		return "", err
	}
	if found == "" {
		return "", &NoneAtError{At: at, Store: st.String(), Oldest: oldest}
	}
	return found, nil
}
