package retention

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Units of a retention duration. "m" is not one: restic users read it as
// months and Go as minutes, and either guess deletes the wrong snapshots.
var units = []struct {
	name string
	d    time.Duration
}{{"y", 365 * 24 * time.Hour}, {"w", 7 * 24 * time.Hour}, {"d", 24 * time.Hour}, {"h", time.Hour}}

// ParseDuration reads a retention duration such as 36h, 30d, 2w, 1y or
// 1y6w: whole numbers of years (365 days), weeks, days and hours, largest
// first. "0" is no duration.
func ParseDuration(s string) (time.Duration, error) {
	if s == "0" {
		return 0, nil
	}
	bad := func(why string) (time.Duration, error) {
		return 0, fmt.Errorf("duration %q: %s; write whole years, weeks, days and hours, largest first, such as 36h, 30d, 2w, 1y or 1y6w", s, why)
	}
	if s == "" {
		return bad("empty")
	}
	var total time.Duration
	rest, next := s, 0
	for rest != "" {
		i := strings.IndexFunc(rest, func(r rune) bool { return r < '0' || r > '9' })
		if i <= 0 {
			return bad("want a number followed by y, w, d or h")
		}
		n, err := strconv.Atoi(rest[:i])
		if err != nil {
			return bad(err.Error())
		}
		u := strings.IndexFunc(rest[i:], func(r rune) bool { return r >= '0' && r <= '9' })
		if u < 0 {
			u = len(rest) - i
		}
		unit := rest[i : i+u]
		k := 0
		for k < len(units) && units[k].name != unit {
			k++
		}
		switch {
		case k == len(units) && (unit == "m" || unit == "mo" || unit == "min"):
			return bad(`"m" is ambiguous (minutes or months)`)
		case k == len(units):
			return bad(fmt.Sprintf("unknown unit %q", unit))
		case k < next:
			return bad("units go largest first, each once")
		}
		if n > int((1<<63-1)/units[k].d) || total > (1<<63-1)-time.Duration(n)*units[k].d {
			return bad("too long")
		}
		total += time.Duration(n) * units[k].d
		rest, next = rest[i+u:], k+1
	}
	return total, nil
}

// FormatDuration writes d in the largest unit of ParseDuration that
// divides it (30d, not 4w2d).
func FormatDuration(d time.Duration) string {
	if d <= 0 {
		return "0"
	}
	for _, u := range units {
		if d%u.d == 0 {
			return fmt.Sprintf("%d%s", d/u.d, u.name)
		}
	}
	return d.String() // under an hour's precision: Go's own form
}

// Duration is a retention duration as a setting: it reads and prints the
// form of ParseDuration.
type Duration time.Duration

// UnmarshalText reads the form of ParseDuration.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := ParseDuration(string(b))
	*d = Duration(v)
	return err
}

func (d Duration) String() string { return FormatDuration(time.Duration(d)) }
