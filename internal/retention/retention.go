// Package retention decides which snapshots a policy keeps, in restic's
// vocabulary: the last N, the newest snapshot of each of the last N hours,
// days, weeks, months and years that have one, and every snapshot (or the
// newest of each period) within a duration of the newest snapshot.
// Snapshots taken on demand are counted apart, so that requests cannot push
// the scheduled history out. It is a pure function of the snapshots' times, so every case is a
// table test.
package retention

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Policy counts how many of each period to keep, and for how long to keep
// every snapshot or the newest of each period; zero keeps none by that
// rule. These rules count only scheduled snapshots; OnDemand keeps the
// newest snapshots taken on demand, which the other rules neither keep nor
// count. A policy whose scheduled rules are all zero keeps everything (no
// retention).
type Policy struct {
	Last, Hourly, Daily, Weekly, Monthly, Yearly int
	// Within keeps every snapshot taken within this long of the newest
	// one; the others keep the newest of each period within it. Measured
	// from the newest snapshot, not from now, so a store whose sidecar
	// stopped a month ago is not emptied by a prune today.
	Within, WithinHourly, WithinDaily, WithinWeekly, WithinMonthly, WithinYearly time.Duration
	OnDemand                                                                     int
}

// Empty reports whether the policy keeps everything.
func (p Policy) Empty() bool { return p == Policy{OnDemand: p.OnDemand} }

// Validate refuses negative counts and durations.
func (p Policy) Validate() error {
	for _, n := range []int{p.Last, p.Hourly, p.Daily, p.Weekly, p.Monthly, p.Yearly, p.OnDemand} {
		if n < 0 {
			return fmt.Errorf("retention counts must not be negative: %+v", p)
		}
	}
	for _, d := range []time.Duration{p.Within, p.WithinHourly, p.WithinDaily, p.WithinWeekly, p.WithinMonthly, p.WithinYearly} {
		if d < 0 {
			return fmt.Errorf("retention durations must not be negative: %+v", p)
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
		switch {
		case r.n > 0:
			parts = append(parts, fmt.Sprintf("%s %d", r.name, r.n))
		case r.within > 0:
			parts = append(parts, fmt.Sprintf("%s %s", r.name, FormatDuration(r.within)))
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
	name   string
	n      int
	within time.Duration // instead of a count: the snapshots this close to the newest
	// bucket names the period a time falls in; times in one bucket compete.
	bucket   func(time.Time) string
	onDemand bool // the rule counts the snapshots taken on demand, and only them
}

func (p Policy) rules() []rule {
	var (
		hour  = func(t time.Time) string { return t.Format("2006-01-02T15") }
		day   = func(t time.Time) string { return t.Format("2006-01-02") }
		week  = func(t time.Time) string { y, w := t.ISOWeek(); return fmt.Sprintf("%d-W%02d", y, w) }
		month = func(t time.Time) string { return t.Format("2006-01") }
		year  = func(t time.Time) string { return t.Format("2006") }
	)
	return []rule{
		{name: "last", n: p.Last},
		{name: "hourly", n: p.Hourly, bucket: hour},
		{name: "daily", n: p.Daily, bucket: day},
		{name: "weekly", n: p.Weekly, bucket: week},
		{name: "monthly", n: p.Monthly, bucket: month},
		{name: "yearly", n: p.Yearly, bucket: year},
		{name: "within", within: p.Within},
		{name: "within-hourly", within: p.WithinHourly, bucket: hour},
		{name: "within-daily", within: p.WithinDaily, bucket: day},
		{name: "within-weekly", within: p.WithinWeekly, bucket: week},
		{name: "within-monthly", within: p.WithinMonthly, bucket: month},
		{name: "within-yearly", within: p.WithinYearly, bucket: year},
		{name: "on-demand", n: p.OnDemand, onDemand: true},
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
	var since time.Time // the newest snapshot's time: within-rules count back from it
	for _, d := range ds {
		if d.Time.After(since) {
			since = d.Time
		}
	}
	for _, r := range p.rules() {
		if (r.n == 0 && r.within == 0) || p.Empty() {
			continue
		}
		last := ""
		kept := 0
		for i := range ds {
			if r.within == 0 && kept == r.n {
				break
			}
			if r.within > 0 && since.Sub(ds[i].Time) > r.within {
				break // newest first: the rest are older still
			}
			if ds[i].OnDemand != r.onDemand {
				continue
			}
			if r.bucket == nil { // last N, or every one within
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
