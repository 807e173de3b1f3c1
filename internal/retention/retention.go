// Package retention decides which snapshots a policy keeps, in restic's
// vocabulary: the last N, and the newest snapshot of each of the last N
// hours, days, weeks and months that have one. Snapshots taken on demand
// are counted apart, so that requests cannot push the scheduled history
// out. It is a pure function of the snapshots' times, so every case is a
// table test.
package retention

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Policy counts how many of each period to keep; zero keeps none by that
// rule. These rules count only scheduled snapshots; OnDemand keeps the
// newest snapshots taken on demand, which the other rules neither keep nor
// count. A policy whose scheduled counts are all zero keeps everything (no
// retention).
type Policy struct {
	Last, Hourly, Daily, Weekly, Monthly int
	OnDemand                             int
}

// Empty reports whether the policy keeps everything.
func (p Policy) Empty() bool { return p == Policy{OnDemand: p.OnDemand} }

// Validate refuses negative counts.
func (p Policy) Validate() error {
	for _, n := range []int{p.Last, p.Hourly, p.Daily, p.Weekly, p.Monthly, p.OnDemand} {
		if n < 0 {
			return fmt.Errorf("retention counts must not be negative: %+v", p)
		}
	}
	return nil
}

func (p Policy) String() string {
	if p.Empty() {
		return "keep all"
	}
	var parts []string
	for _, r := range p.rules() {
		if r.n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", r.name, r.n))
		}
	}
	return "keep " + strings.Join(parts, ", ")
}

// Snapshot is what retention needs to know about one snapshot.
type Snapshot struct {
	ID       string
	Time     time.Time
	OnDemand bool // taken on request, not on the schedule
}

// Decision is the verdict on one snapshot, with the rules that keep it.
type Decision struct {
	Snapshot
	Keep    bool
	Reasons []string // e.g. "last", "daily", "on-demand", "head"
}

type rule struct {
	name string
	n    int
	// bucket names the period a time falls in; times in one bucket compete.
	bucket   func(time.Time) string
	onDemand bool // the rule counts the snapshots taken on demand, and only them
}

func (p Policy) rules() []rule {
	return []rule{
		{"last", p.Last, nil, false},
		{"hourly", p.Hourly, func(t time.Time) string { return t.Format("2006-01-02T15") }, false},
		{"daily", p.Daily, func(t time.Time) string { return t.Format("2006-01-02") }, false},
		{"weekly", p.Weekly, func(t time.Time) string { y, w := t.ISOWeek(); return fmt.Sprintf("%d-W%02d", y, w) }, false},
		{"monthly", p.Monthly, func(t time.Time) string { return t.Format("2006-01") }, false},
		{"on-demand", p.OnDemand, nil, true},
	}
}

// Apply decides on every snapshot, newest first. The head is always kept
// whatever the policy says; a snapshot taken on demand is kept by the
// OnDemand rule only (or as the head), and never takes a scheduled
// snapshot's place in the others. Periods are taken in UTC so that every replica
// and every operator's laptop agrees. Snapshots are ordered by time, then
// by ID, so equal times (and clocks that jumped back) still give one
// answer.
func Apply(snaps []Snapshot, head string, p Policy) []Decision {
	ds := make([]Decision, len(snaps))
	for i, s := range snaps {
		ds[i] = Decision{Snapshot: s}
	}
	slices.SortStableFunc(ds, func(a, b Decision) int {
		if c := b.Time.Compare(a.Time); c != 0 {
			return c
		}
		return strings.Compare(b.ID, a.ID)
	})
	keep := func(d *Decision, why string) {
		d.Keep = true
		d.Reasons = append(d.Reasons, why)
	}
	for _, r := range p.rules() {
		if r.n == 0 || p.Empty() {
			continue
		}
		last := ""
		kept := 0
		for i := range ds {
			if kept == r.n {
				break
			}
			if ds[i].OnDemand != r.onDemand {
				continue
			}
			if r.bucket == nil { // last N
				keep(&ds[i], r.name)
				kept++
				continue
			}
			// Newest first: the first snapshot seen in a period is its newest.
			if b := r.bucket(ds[i].Time.UTC()); b != last {
				keep(&ds[i], r.name)
				kept++
				last = b
			}
		}
	}
	for i := range ds {
		if p.Empty() {
			keep(&ds[i], "no policy")
		}
		if ds[i].ID == head {
			keep(&ds[i], "head")
		}
	}
	return ds
}
