package retention

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// at parses "2026-12-03 14:05" in UTC.
func at(s string) time.Time {
	t, err := time.Parse("2006-01-02 15:04", s)
	if err != nil {
		panic(err)
	}
	return t
}

// snaps parses "id@time"; "id!@time" is a snapshot taken on demand.
func snaps(spec ...string) []Snapshot {
	var out []Snapshot
	for _, s := range spec {
		id, when, _ := strings.Cut(s, "@")
		id, onDemand := strings.CutSuffix(id, "!")
		out = append(out, Snapshot{ID: id, Time: at(when), OnDemand: onDemand})
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
			name: "a burst on demand pushes no scheduled snapshot out",
			snaps: snaps("a@2026-12-01 10:00", "b@2026-12-01 10:05", "c@2026-12-01 10:10",
				"d!@2026-12-01 10:11", "e!@2026-12-01 10:12", "f!@2026-12-01 10:13", "g!@2026-12-01 10:14"),
			head:   "g",
			policy: Policy{Last: 3, OnDemand: 2},
			want:   "g(on-demand,head) f(on-demand) c(last) b(last) a(last)",
		},
		{
			name:   "without an on-demand count only the head among them is kept",
			snaps:  snaps("a@2026-12-01 10:00", "b!@2026-12-01 10:01", "c@2026-12-01 10:05", "d!@2026-12-01 10:06"),
			head:   "d",
			policy: Policy{Last: 1},
			want:   "d(head) c(last)",
		},
		{
			name: "periods count scheduled snapshots only: the newest scheduled one of the hour is kept",
			snaps: snaps("a@2026-12-01 09:30", "b@2026-12-01 10:05", "c!@2026-12-01 10:50",
				"d@2026-12-01 11:00"),
			head:   "d",
			policy: Policy{Hourly: 2, OnDemand: 1},
			want:   "d(hourly,head) c(on-demand) b(hourly)",
		},
		{
			name:   "an on-demand count alone is no policy: everything is kept",
			snaps:  snaps("a@2026-12-01 10:00", "b!@2026-12-01 10:01", "c!@2026-12-01 10:02"),
			head:   "c",
			policy: Policy{OnDemand: 1},
			want:   "c(no policy,head) b(no policy) a(no policy)",
		},
		{
			name:   "fewer snapshots than the counts",
			snaps:  snaps("a@2026-12-01 10:00"),
			head:   "a",
			policy: Policy{Last: 5, Hourly: 24, Daily: 7, Weekly: 4, Monthly: 12},
			want:   "a(last,hourly,daily,weekly,monthly,head)",
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := kept(Apply(c.snaps, c.head, c.policy)); got != c.want {
				t.Errorf("\n got  %s\n want %s", got, c.want)
			}
		})
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
	if err := (Policy{Last: 1, OnDemand: -1}).Validate(); err == nil {
		t.Error("negative on-demand count accepted")
	}
	if s := (Policy{Last: 3, OnDemand: 2}).String(); s != "keep last 3, on-demand 2" {
		t.Errorf("String = %q", s)
	}
	if s := (Policy{OnDemand: 2}).String(); s != "keep all" {
		t.Errorf("String = %q", s)
	}
	if s := (Policy{Last: 24, Daily: 7}).String(); s != "keep last 24, daily 7" {
		t.Errorf("String = %q", s)
	}
	if s := (Policy{}).String(); s != "keep all" {
		t.Errorf("String = %q", s)
	}
}

// TestGoldenWeek applies a sidecar's usual policy to three days of hourly
// snapshots, a final one at a restart, and bursts taken on demand (one of
// them the head), and compares every decision with testdata/week.golden
// (go test -run Golden -update rewrites it; review the diff).
func TestGoldenWeek(t *testing.T) {
	var in []Snapshot
	start := at("2026-11-30 00:00")
	for h := range 72 {
		in = append(in, Snapshot{ID: fmt.Sprintf("s%02d", h), Time: start.Add(time.Duration(h)*time.Hour + 2*time.Minute)})
	}
	in = append(in, Snapshot{ID: "final", Time: at("2026-12-01 12:30")})
	for i := range 8 { // the burst of issue 21: eight requests in ten seconds
		in = append(in, Snapshot{ID: fmt.Sprintf("burst%d", i), Time: at("2026-12-02 23:10").Add(time.Duration(i) * 1250 * time.Millisecond), OnDemand: true})
	}
	in = append(in, Snapshot{ID: "old-request", Time: at("2026-11-30 09:40"), OnDemand: true},
		Snapshot{ID: "head-request", Time: at("2026-12-02 23:59"), OnDemand: true})
	ds := Apply(in, "head-request", Policy{Last: 3, Hourly: 6, Daily: 7, OnDemand: 3})
	var b strings.Builder
	for _, d := range ds {
		verdict := "drop"
		if d.Keep {
			verdict = "keep " + strings.Join(d.Reasons, ",")
		}
		trigger := "scheduled"
		if d.OnDemand {
			trigger = "on-demand"
		}
		fmt.Fprintf(&b, "%-12s %s %-9s %s\n", d.ID, d.Time.UTC().Format("2006-01-02T15:04:05.00"), trigger, verdict)
	}
	golden := filepath.Join("testdata", "week.golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (go test -run Golden -update writes it)", err)
	}
	if got := b.String(); got != string(want) {
		t.Errorf("decisions differ from %s:\n got:\n%s\nwant:\n%s", golden, got, want)
	}
}
