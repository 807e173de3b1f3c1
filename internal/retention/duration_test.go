package retention

import (
	"strings"
	"testing"
	"time"
)

func TestParseDuration(t *testing.T) {
	day := 24 * time.Hour
	for _, c := range []struct {
		in   string
		want time.Duration
	}{
		{"0", 0}, {"36h", 36 * time.Hour}, {"30d", 30 * day}, {"2w", 14 * day},
		{"1y", 365 * day}, {"1y6w", (365 + 42) * day}, {"1d12h", 36 * time.Hour},
	} {
		t.Run(c.in, func(t *testing.T) {
			got, err := ParseDuration(c.in)
			if err != nil || got != c.want {
				t.Fatalf("ParseDuration(%q) = %v, %v; want %v", c.in, got, err, c.want)
			}
			if back, _ := ParseDuration(FormatDuration(got)); back != got {
				t.Fatalf("FormatDuration(%v) = %q reads back as %v", got, FormatDuration(got), back)
			}
		})
	}
}

// A duration that could be read two ways, or not at all, is refused with
// the forms that work: retention deletes what it does not keep.
func TestParseDurationRefuses(t *testing.T) {
	for _, c := range []struct{ in, why string }{
		{"6m", "ambiguous"}, {"90min", "ambiguous"}, {"", "empty"}, {"d", "number"},
		{"7", "number followed by"}, {"3x", `unknown unit "x"`}, {"1d1w", "largest first"},
		{"1h1h", "largest first"}, {"-3d", "number"}, {"99999999999y", "too long"},
	} {
		t.Run(c.in, func(t *testing.T) {
			_, err := ParseDuration(c.in)
			if err == nil || !strings.Contains(err.Error(), c.why) || !strings.Contains(err.Error(), "30d") {
				t.Fatalf("ParseDuration(%q) = %v; want an error saying %q and showing the forms that work", c.in, err, c.why)
			}
		})
	}
}

func TestKeepWithin(t *testing.T) {
	day := 24 * time.Hour
	for _, c := range []struct {
		name   string
		snaps  []Snapshot
		head   string
		policy Policy
		want   string
	}{
		{
			name: "within keeps every snapshot this close to the newest, whatever time it is now",
			snaps: snaps("a@2026-01-01 10:00", "b@2026-01-05 10:00", "c@2026-01-07 09:00",
				"d@2026-01-07 10:00", "e@2026-01-08 10:00"),
			head:   "e",
			policy: Policy{Within: 3 * day},
			want:   "e(within,head) d(within) c(within) b(within)",
		},
		{
			name: "within-daily keeps the newest of each day in the window",
			snaps: snaps("a@2026-01-01 10:00", "b@2026-01-06 08:00", "c@2026-01-06 20:00",
				"d@2026-01-07 07:00", "e@2026-01-07 09:00"),
			head:   "e",
			policy: Policy{WithinDaily: 2 * day},
			want:   "e(within-daily,head) c(within-daily)",
		},
		{
			name:   "within-yearly and yearly",
			snaps:  snaps("a@2023-06-01 10:00", "b@2024-12-31 10:00", "c@2025-03-01 10:00", "d@2026-01-07 09:00"),
			head:   "d",
			policy: Policy{WithinYearly: 2 * 365 * day, Yearly: 1},
			want:   "d(yearly,within-yearly,head) c(within-yearly) b(within-yearly)",
		},
		{
			name: "within counts scheduled snapshots only; on demand keeps its own",
			snaps: snaps("a@2026-01-07 08:00", "b!@2026-01-07 08:30", "c!@2026-01-07 08:40",
				"d@2026-01-07 09:00"),
			head:   "d",
			policy: Policy{Within: day, OnDemand: 1},
			want:   "d(within,head) c(on-demand) a(within)",
		},
		{
			name:   "a duration alone is a policy: older snapshots go",
			snaps:  snaps("a@2026-01-01 10:00", "b@2026-01-07 09:00"),
			head:   "b",
			policy: Policy{Within: time.Hour},
			want:   "b(within,head)",
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := kept(Apply(c.snaps, c.head, c.policy)); got != c.want {
				t.Errorf("\n got  %s\n want %s", got, c.want)
			}
		})
	}
	if s := (Policy{Within: 30 * day, WithinDaily: 90 * day, Yearly: 3}).String(); s != "keep yearly 3, within 30d, within-daily 90d" {
		t.Errorf("String = %q", s)
	}
	if err := (Policy{WithinWeekly: -time.Hour}).Validate(); err == nil {
		t.Error("negative duration accepted")
	}
}
