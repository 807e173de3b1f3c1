package maint

import (
	"cmp"
	"context"
	"slices"

	"github.com/homesnap/homesnap/internal/archive"
	"github.com/homesnap/homesnap/internal/repo"
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
	live := map[string]Ranges{}
	for e, err := range repo.ManifestEntries(ctx, st, id) {
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
	raw := map[span]int64{} // live raw bytes per range
	for e, err := range repo.ManifestEntries(ctx, st, id) {
		if err != nil {
			return nil, err // it names the manifest layer at fault
		}
		if e.HasData() {
			raw[span{e.Archive, e.Offset, e.Length}] += tarBytes(e.Size)
		}
	}
	return filledShare(raw), nil
}

// tarBytes is what a file of size bytes takes in an archive's tar stream:
// its header and its content padded to whole blocks. Frames are cut by
// these bytes, so for a frame of small files the headers count as much as
// the content.
func tarBytes(size int64) int64 { return 512 + (size+511)/512*512 }

// span is the byte range of an archive that one or more files' entries
// point at.
type span struct {
	archive        string
	offset, length int64
}

// filledShare turns the raw (tar) bytes of the live files in each range
// into the stored bytes they fill, per archive (see LiveBytes). Ranges
// that start at the same offset share their first frame, the shortest of
// them: files within it fill their raw share of it; a file whose range
// runs on past it (its data crossed a frame cut) owns the frames after it
// and is given what the first frame's other live files leave, erring
// towards live so that a freshly written archive never looks dead.
func filledShare(raw map[span]int64) map[string]int64 {
	type start struct {
		archive string
		offset  int64
	}
	groups := map[start][]span{}
	last := map[string]int64{}
	for s := range raw {
		groups[start{s.archive, s.offset}] = append(groups[start{s.archive, s.offset}], s)
		last[s.archive] = max(last[s.archive], s.offset)
	}
	live := map[string]int64{}
	for at, spans := range groups {
		first := spans[0].length
		for _, s := range spans {
			first = min(first, s.length)
		}
		var n int64 // raw bytes of the files within the first frame
		for _, s := range spans {
			if s.length == first {
				n += raw[s]
			}
		}
		// A frame holds at least archive.FrameSize raw bytes, except an
		// archive's last one, which holds what was left over: its last
		// range is taken as full, or a small archive would look mostly
		// dead right after it was written.
		capacity := max(n, int64(archive.FrameSize))
		if at.offset == last[at.archive] {
			capacity = n
		}
		fill := float64(n) / float64(capacity)
		for _, s := range spans {
			if s.length == first {
				live[s.archive] += int64(float64(s.length) * float64(raw[s]) / float64(capacity))
			} else {
				live[s.archive] += s.length - first + int64(float64(first)*(1-fill))
			}
		}
	}
	return live
}
