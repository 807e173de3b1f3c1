package retention

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// at parses "2026-12-03 14:05" in UTC.
func at(s string) time.Time {
	t, err := time.Parse("2006-01-02 15:04", s)
	if err != nil {
		panic(err)
	}
	return t
}

func snaps(spec ...string) []Snapshot {
	var out []Snapshot
	for _, s := range spec {
		id, when, _ := strings.Cut(s, "@")
		out = append(out, Snapshot{ID: id, Time: at(when)})
	}
	return out
}

// kept renders the decisions as "id(reasons)" for kept snapshots, newest first.
func kept(ds []Decision) string {
	var out []string
	for _, d := range ds {
		if d.Keep {
			out = append(out, fmt.Sprintf("%s(%s)", d.ID, strings.Join(d.Reasons, ",")))
		}
	}
	return strings.Join(out, " ")
}

func TestApply(t *testing.T) {
	for _, c := range []struct {
		name   string
		snaps  []Snapshot
		head   string
		policy Policy
		want   string
	}{
		{
			name:  "no policy keeps everything",
			snaps: snaps("a@2026-12-01 10:00", "b@2026-12-01 11:00"),
			head:  "b",
			want:  "b(no policy,head) a(no policy)",
		},
		{
			name:   "last 3 of 5",
			snaps:  snaps("a@2026-12-01 10:00", "b@2026-12-01 10:05", "c@2026-12-01 10:10", "d@2026-12-01 10:15", "e@2026-12-01 10:20"),
			head:   "e",
			policy: Policy{Last: 3},
			want:   "e(last,head) d(last) c(last)",
		},
		{
			name: "hourly keeps the newest of each of the newest hours",
			snaps: snaps("a@2026-12-01 09:10", "b@2026-12-01 09:50", "c@2026-12-01 10:05",
				"d@2026-12-01 10:55", "e@2026-12-01 11:00"),
			head:   "e",
			policy: Policy{Hourly: 2},
			want:   "e(hourly,head) d(hourly)",
		},
		{
			name: "rules combine; a snapshot kept by several says so",
			snaps: snaps("a@2026-11-29 23:00", "b@2026-11-30 08:00", "c@2026-11-30 20:00",
				"d@2026-12-01 07:00", "e@2026-12-01 07:30"),
			head:   "e",
			policy: Policy{Last: 1, Daily: 3},
			want:   "e(last,daily,head) c(daily) a(daily)",
		},
		{
			name: "weeks are ISO weeks: Sunday ends one, Monday starts the next",
			snaps: snaps("a@2026-11-22 12:00", "b@2026-11-29 12:00", "c@2026-11-30 09:00",
				"d@2026-12-02 09:00"),
			head:   "d",
			policy: Policy{Weekly: 2},
			want:   "d(weekly,head) b(weekly)",
		},
		{
			name:   "monthly",
			snaps:  snaps("a@2026-09-30 23:59", "b@2026-10-01 00:00", "c@2026-10-31 12:00", "d@2026-11-15 00:00", "e@2026-12-01 00:00"),
			head:   "e",
			policy: Policy{Monthly: 3},
			want:   "e(monthly,head) d(monthly) c(monthly)",
		},
		{
			name:   "equal times are ordered by ID",
			snaps:  snaps("b@2026-12-01 10:00", "a@2026-12-01 10:00", "c@2026-12-01 10:00"),
			head:   "c",
			policy: Policy{Last: 2},
			want:   "c(last,head) b(last)",
		},
		{
			name: "a clock that jumped back: times decide, and the head is kept anyway",
			// z was taken last (it is the head) by a node whose clock was an
			// hour behind; y is the newest by time.
			snaps:  snaps("x@2026-12-01 10:00", "y@2026-12-01 11:00", "z@2026-12-01 10:30"),
			head:   "z",
			policy: Policy{Last: 1},
			want:   "y(last) z(head)",
		},
		{
			name:   "fewer snapshots than the counts",
			snaps:  snaps("a@2026-12-01 10:00"),
			head:   "a",
			policy: Policy{Last: 5, Hourly: 24, Daily: 7, Weekly: 4, Monthly: 12},
			want:   "a(last,hourly,daily,weekly,monthly,head)",
		},
	} {
		if got := kept(Apply(c.snaps, c.head, c.policy)); got != c.want {
			t.Errorf("%s:\n got  %s\n want %s", c.name, got, c.want)
		}
	}
}

// Periods are UTC whatever zone the times carry.
func TestPeriodsAreUTC(t *testing.T) {
	tokyo := time.FixedZone("JST", 9*3600)
	// 23:30 and 00:30 UTC are two days in UTC, one day in Tokyo.
	s := []Snapshot{
		{ID: "a", Time: at("2026-12-01 23:30").In(tokyo)},
		{ID: "b", Time: at("2026-12-02 00:30").In(tokyo)},
	}
	if got := kept(Apply(s, "b", Policy{Daily: 2})); got != "b(daily,head) a(daily)" {
		t.Errorf("got %s", got)
	}
}

func TestPolicyValidateAndString(t *testing.T) {
	if err := (Policy{Daily: -1}).Validate(); err == nil {
		t.Error("negative count accepted")
	}
	if s := (Policy{Last: 24, Daily: 7}).String(); s != "keep last 24, daily 7" {
		t.Errorf("String = %q", s)
	}
	if s := (Policy{}).String(); s != "keep all" {
		t.Errorf("String = %q", s)
	}
}
