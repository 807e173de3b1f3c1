package engine

import (
	"cmp"
	"context"
	"errors"
	"io"
	"slices"

	"github.com/homesnap/homesnap/internal/archive"
	"github.com/homesnap/homesnap/internal/store"
)

// Ranges is a set of byte ranges [start, end) of one archive, sorted and
// disjoint once normalised. Small files share a frame and so a range, and
// summing their lengths would count the frame once per file: what an
// archive's files use is the union of their ranges.
type Ranges [][2]int64

// normalise sorts r and merges ranges that overlap or touch.
func (r Ranges) normalise() Ranges {
	slices.SortFunc(r, func(a, b [2]int64) int { return cmp.Compare(a[0], b[0]) })
	out := r[:0]
	for _, x := range r {
		if n := len(out); n > 0 && x[0] <= out[n-1][1] {
			out[n-1][1] = max(out[n-1][1], x[1])
			continue
		}
		out = append(out, x)
	}
	return out
}

// Union is the ranges used by r or o.
func (r Ranges) Union(o Ranges) Ranges {
	return append(slices.Clone(r), o...).normalise()
}

// Bytes is how many bytes the ranges cover.
func (r Ranges) Bytes() (n int64) {
	for _, x := range r {
		n += x[1] - x[0]
	}
	return n
}

// LiveRanges reads snapshot id's manifest and returns, per archive its
// files point into, the byte ranges they use.
func LiveRanges(ctx context.Context, st store.Store, id string) (map[string]Ranges, error) {
	m, err := openManifest(ctx, st, id)
	if err != nil {
		return nil, err
	}
	defer m.Close()
	live := map[string]Ranges{}
	for {
		e, err := m.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err // it names the manifest layer at fault
		}
		if e.HasData() {
			live[e.Archive] = append(live[e.Archive], [2]int64{e.Offset, e.Offset + e.Length})
		}
	}
	for a, r := range live {
		live[a] = r.normalise()
	}
	return live, nil
}

// LiveBytes estimates, per archive snapshot id's files point into, how
// many of its stored bytes hold those files: what copying them costs, and
// what the rest of the archive wastes. Ranges overstate it: a frame holds
// about archive.FrameSize raw bytes of many small files, and one live file
// keeps the whole frame in the ranges, so an archive whose files were
// mostly replaced can look nearly all live. Files sharing a range count
// for the share of the frames' raw bytes they fill.
func LiveBytes(ctx context.Context, st store.Store, id string) (map[string]int64, error) {
	m, err := openManifest(ctx, st, id)
	if err != nil {
		return nil, err
	}
	defer m.Close()
	raw := map[span]int64{} // live raw bytes per range
	for {
		e, err := m.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err // it names the manifest layer at fault
		}
		if e.HasData() {
			raw[span{e.Archive, e.Offset, e.Length}] += e.Size
		}
	}
	return filledShare(raw), nil
}

// span is the byte range of an archive that one or more files' entries
// point at.
type span struct {
	archive        string
	offset, length int64
}

// filledShare turns the raw bytes of the live files in each range into
// the stored bytes they fill, per archive (see LiveBytes).
func filledShare(raw map[span]int64) map[string]int64 {
	// An archive's last frame holds what was left over, often far less
	// than a frame: judged by a full frame, a small archive would look
	// mostly dead right after it was written. Its last range is taken as
	// full.
	last := map[string]int64{}
	for s := range raw {
		last[s.archive] = max(last[s.archive], s.offset)
	}
	live := map[string]int64{}
	for s, n := range raw {
		// A range holds at least one frame's worth of raw bytes, or the
		// file that runs on through frames of its own.
		capacity := max(n, int64(archive.FrameSize))
		if s.offset == last[s.archive] {
			capacity = n
		}
		live[s.archive] += int64(float64(s.length) * float64(n) / float64(capacity))
	}
	return live
}
