// Package prune removes what a retention policy no longer keeps: the
// snapshots it drops, the archives no kept snapshot points into, and the
// objects of snapshots that were never committed (a lost race, a crash)
// once they are older than a safety delay, so that an upload still in
// flight is never collected. The plan is a pure function of what the store
// lists; Run executes it.
package prune

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/homesnap/homesnap/internal/repo"
	"github.com/homesnap/homesnap/internal/retention"
	"github.com/homesnap/homesnap/internal/store"
)

// DefaultDelay is how old an uncommitted snapshot's objects must be before
// they are collected: far longer than any snapshot takes to upload.
const DefaultDelay = 6 * time.Hour

// Deletion is one object the plan removes, and why.
type Deletion struct {
	Key  string
	Size int64
	Why  string
}

// Reparent rewrites a kept snapshot's record so the history from the head
// still reaches every kept snapshot once the ones between are gone.
type Reparent struct {
	Record *repo.Record // with the new Parent
	Old    string
}

// Plan is what a prune does.
type Plan struct {
	Policy    retention.Policy
	Decisions []retention.Decision // the committed history, newest first
	Reparent  []Reparent
	Delete    []Deletion
	// Listed is every object under snapshots/ and archives/ the plan was
	// made from (set by Run).
	Listed []store.Object
}

// Remaining is what the store holds under snapshots/ and archives/ once
// the plan is carried out: the listing without the deletions. A record
// the plan rewrote (Reparent) keeps its listed size, a few bytes off.
func (p *Plan) Remaining() []store.Object {
	gone := make(map[string]bool, len(p.Delete))
	for _, d := range p.Delete {
		gone[d.Key] = true
	}
	var out []store.Object
	for _, o := range p.Listed {
		if !gone[o.Key] {
			out = append(out, o)
		}
	}
	return out
}

// Freed is the number of bytes the plan deletes.
func (p *Plan) Freed() (n int64) {
	for _, d := range p.Delete {
		n += d.Size
	}
	return n
}

// Kept counts the snapshots the plan keeps.
func (p *Plan) Kept() (n int) {
	for _, d := range p.Decisions {
		if d.Keep {
			n++
		}
	}
	return n
}

// Inputs is everything a plan is computed from.
type Inputs struct {
	History *repo.History
	Objects []store.Object // every object under snapshots/ and archives/
	Policy  retention.Policy
	Now     time.Time
	Delay   time.Duration
	// Notes are the store's repack notes; an archive a repack replaced is
	// deleted once no kept snapshot points into it and Grace has passed
	// since the repack (a restore that read the old manifest may still be
	// reading it).
	Notes []*repo.RepackNote
	Grace time.Duration
}

// MakePlan decides what to delete. Kept snapshots keep every archive their
// records name; a snapshot whose record does not name its archives (taken
// before records existed) keeps every archive, to be safe. They also keep
// every manifest their records list (a delta manifest needs the older
// manifests it applies to), so a dropped snapshot's manifest stays as long
// as a kept snapshot's chain needs it.
func MakePlan(in Inputs) *Plan {
	h := in.History
	p := &Plan{Policy: in.Policy}
	var snaps []retention.Snapshot
	for _, r := range h.Snapshots {
		snaps = append(snaps, retention.Snapshot{ID: r.ID, Time: r.Time, OnDemand: r.Trigger == repo.TriggerOnDemand})
	}
	p.Decisions = retention.Apply(snaps, h.Head, in.Policy)
	kept, dropped := map[string]bool{}, map[string]bool{}
	for _, d := range p.Decisions {
		if d.Keep {
			kept[d.ID] = true
		} else {
			dropped[d.ID] = true
		}
	}
	// released: archives a dropped snapshot pointed into. They were
	// committed, so once no kept snapshot points into them they go now,
	// even when their own snapshot was dropped by an earlier prune (while
	// a kept one still needed them) and is no longer in the history.
	referenced, released, keepAllArchives, layers := map[string]bool{}, map[string]bool{}, false, map[string]bool{}
	for _, r := range h.Snapshots {
		if !kept[r.ID] {
			for _, a := range r.Archives {
				released[a] = true
			}
			continue
		}
		if r.Partial {
			keepAllArchives = true
		}
		for _, a := range r.Archives {
			referenced[a] = true
		}
		for _, id := range r.Layers() {
			layers[id] = true
		}
	}
	layerOnly := map[string]bool{}
	for _, id := range h.Layers {
		layerOnly[id] = true
	}
	// Reparent: walk the history oldest first, linking each kept snapshot
	// to the newest kept one before it.
	prev := ""
	for _, r := range h.Oldest() {
		if !kept[r.ID] {
			continue
		}
		if r.Parent != prev {
			nr := *r
			nr.Parent = prev
			p.Reparent = append(p.Reparent, Reparent{Record: &nr, Old: r.Parent})
		}
		prev = r.ID
	}
	unreferenced := map[string]bool{}
	for _, id := range h.Unreferenced {
		unreferenced[id] = true
	}
	replacedAt, replacedBy := map[string]time.Time{}, map[string]string{}
	for _, n := range in.Notes {
		for _, a := range n.Replaced {
			if n.Time.After(replacedAt[a]) {
				replacedAt[a], replacedBy[a] = n.Time, n.ID
			}
		}
	}
	present := map[string]bool{}
	for _, o := range in.Objects {
		if id, archive, _ := repo.Owner(o.Key); archive {
			present[id] = true
		}
	}
	for _, o := range in.Objects {
		id, archive, ok := repo.Owner(o.Key)
		if !ok {
			continue
		}
		if at, ok := replacedAt[id]; ok && archive && !referenced[id] && !keepAllArchives {
			if in.Now.Sub(at) < in.Grace {
				continue // a restore that opened the old manifest may still read it
			}
			why := fmt.Sprintf("repacked into archive %s at %s; no kept snapshot points into it", replacedBy[id], at.UTC().Format(time.RFC3339))
			p.Delete = append(p.Delete, Deletion{Key: o.Key, Size: o.Size, Why: why})
			continue
		}
		if kept[id] {
			continue
		}
		old := in.Now.Sub(o.Modified) >= in.Delay && in.Now.Sub(repo.IDTime(id)) >= in.Delay
		why := ""
		switch {
		case archive && (referenced[id] || keepAllArchives):
			continue // a kept snapshot points into it
		case !archive && layers[id] && repo.IsLayerObject(o.Key):
			continue // a kept snapshot's delta manifest applies to it
		case dropped[id]:
			why = "snapshot dropped by the policy (" + in.Policy.String() + ")"
			if archive {
				why = "archive of a dropped snapshot that no kept snapshot points into"
			}
		case archive && released[id]:
			why = "archive of a snapshot dropped earlier, and the last snapshots that pointed into it were dropped now"
		case layerOnly[id]:
			why = "record of a snapshot dropped earlier (its manifest stays while a kept snapshot's delta needs it)"
		case unreferenced[id] && old:
			why = fmt.Sprintf("never committed (a lost race or a crash) and older than %v", in.Delay)
		case !unreferenced[id] && h.Find(id) == nil && old:
			// An archive or record without a manifest: a crash mid-upload.
			why = fmt.Sprintf("left by an unfinished snapshot, older than %v", in.Delay)
		default:
			continue // committed, or maybe still being written
		}
		p.Delete = append(p.Delete, Deletion{Key: o.Key, Size: o.Size, Why: why})
	}
	// A note goes once every archive it replaced is gone: the prune after
	// the one that deleted them, so that a note never disappears before
	// what it protects.
	for _, n := range in.Notes {
		if !slices.ContainsFunc(n.Replaced, func(a string) bool { return present[a] }) {
			p.Delete = append(p.Delete, Deletion{Key: repo.RepackKey(n.ID), Why: "note of a finished repack: every archive it replaced is deleted"})
		}
	}
	slices.SortFunc(p.Delete, func(a, b Deletion) int { return strings.Compare(a.Key, b.Key) })
	return p
}

// Options configure Run.
type Options struct {
	Store  store.Store
	Policy retention.Policy
	Delay  time.Duration // 0 means DefaultDelay
	// RepackGrace is how long an archive a repack replaced is kept after
	// the repack (0: until the next prune).
	RepackGrace time.Duration
	DryRun      bool
	Now         func() time.Time // nil: time.Now
	Log         zerolog.Logger
}

// Run plans a prune and, unless DryRun, carries it out: records are
// rewritten first, so that a prune killed half-way leaves a history that
// still reaches every kept snapshot, and what it did not delete yet is
// collected by the next run.
func Run(ctx context.Context, o Options) (*Plan, error) {
	if err := o.Policy.Validate(); err != nil {
		return nil, err
	}
	if o.Delay <= 0 {
		o.Delay = DefaultDelay
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if err := repo.CheckMarker(ctx, o.Store); err != nil {
		return nil, err
	}
	h, err := repo.LoadHistory(ctx, o.Store)
	if err != nil {
		return nil, err
	}
	notes, err := repo.LoadRepackNotes(ctx, o.Store)
	if err != nil {
		return nil, err
	}
	in := Inputs{History: h, Policy: o.Policy, Now: o.Now(), Delay: o.Delay, Notes: notes, Grace: o.RepackGrace}
	if err := repo.ListObjects(ctx, o.Store, func(obj store.Object) error {
		in.Objects = append(in.Objects, obj)
		return nil
	}); err != nil {
		return nil, err
	}
	p := MakePlan(in)
	p.Listed = in.Objects
	for _, d := range p.Delete {
		o.Log.Info().Str("key", d.Key).Int64("bytes", d.Size).Str("why", d.Why).Bool("dry_run", o.DryRun).Msg("prune: delete")
	}
	if o.DryRun || h.Head == "" {
		return p, nil
	}
	for _, rp := range p.Reparent {
		if err := repo.WriteRecord(ctx, o.Store, rp.Record); err != nil {
			return p, err
		}
	}
	keys := make([]string, len(p.Delete))
	for i, d := range p.Delete {
		keys[i] = d.Key
	}
	for len(keys) > 0 {
		n := min(len(keys), 1000) // the S3 batch limit
		if err := o.Store.Delete(ctx, keys[:n]...); err != nil {
			return p, fmt.Errorf("prune: %w", err)
		}
		keys = keys[n:]
	}
	return p, nil
}
