package fetch

import (
	"fmt"
	"io/fs"
	"strings"

	"github.com/homesnap/homesnap/internal/archive"
	"github.com/homesnap/homesnap/internal/scan"
	"github.com/homesnap/homesnap/internal/selector"
)

// What a restore may change comes from its own configuration, never from
// the store. A manifest entry is applied only when the restore's selection
// selects it; the snapshot's recorded selection can only narrow that, never
// widen it:
//
//   - an entry the snapshot's own header does not select contradicts its
//     manifest: the snapshot is refused as corrupt;
//   - an entry the snapshot selects but the restore does not is skipped
//     (intersection), and a directory leading to locally selected paths is
//     treated as implied (created when missing, otherwise left alone);
//   - a home path is removed only when the restore's selection, the
//     snapshot's selection and a partial restore's include/exclude all
//     select it.

// MaxUID is the largest valid uid/gid: uid_t is 32 bits and (uid_t)-1
// means "unchanged" to chown.
const MaxUID = 1<<32 - 2

// MaxPath is the longest path a restore accepts, relative to the home:
// Linux refuses longer ones in any single system call (PATH_MAX).
const MaxPath = 4095

// Filter decides which manifest entries a restore applies and which
// home paths it may remove.
type Filter struct {
	snapshot *selector.Selector // the manifest header's selection
	local    *selector.Selector // the restore's selection, narrowed by include/exclude
	Remove   *selector.Selector // both: what a restore may remove
	// check sees the manifest's entries in order: memos answer for them
	// (one, when both selections are the same).
	snapshotMemo, localMemo *selector.Memo
	KeepModes               bool   // apply modes as stored (see specialBits)
	Dropped                 int64  // paths whose setuid, setgid or world-writable bits were dropped
	Example                 string // the first of them
	Skipped                 int64  // entries outside the restore's selection
	SkippedExample          string // the first of them
}

// newFilter builds the filter of a restore with local selection sel
// (nil: the jenkins preset), narrowed by a partial restore's include and
// exclude patterns, for a snapshot whose header records spec.
func newFilter(sel *selector.Selector, include, exclude []string, spec selector.Spec) (*Filter, error) {
	snap, err := selector.New(spec)
	if err != nil {
		return nil, fmt.Errorf("%w manifest header: %v", archive.ErrCorrupt, err)
	}
	local, err := LocalSelector(sel, include, exclude)
	if err != nil {
		return nil, err
	}
	f := &Filter{snapshot: snap, local: local, Remove: selector.Intersect(local, snap), snapshotMemo: snap.Memo()}
	if !local.Same(snap) {
		f.localMemo = local.Memo()
	}
	return f, nil
}

// LocalSelector is the restore's selection narrowed by include/exclude.
func LocalSelector(sel *selector.Selector, include, exclude []string) (*selector.Selector, error) {
	if sel == nil {
		var err error
		if sel, err = selector.New(selector.Spec{Preset: "jenkins"}); err != nil {
			return nil, err
		}
	}
	if len(include) == 0 && len(exclude) == 0 {
		return sel, nil
	}
	spec := selector.Spec{Preset: "none", Include: include, Exclude: exclude}
	if len(include) == 0 {
		spec.Preset = "all"
	}
	part, err := selector.New(spec)
	if err != nil {
		return nil, fmt.Errorf("partial restore: %w", err)
	}
	return selector.Intersect(sel, part), nil
}

// check validates an entry that the manifest reader accepted and reports
// whether the restore applies it. It may mark e implied and drop special
// mode bits (see specialBits).
func (f *Filter) check(e *archive.Entry) (bool, error) {
	if len(e.Path) > MaxPath {
		return false, fmt.Errorf("path %.64q… is %d bytes long, more than Linux allows (%d)", e.Path, len(e.Path), MaxPath)
	}
	if first, _, _ := strings.Cut(e.Path, "/"); strings.HasPrefix(first, scan.ReservedPrefix) {
		return false, fmt.Errorf("%q is in homesnap's reserved namespace (%s*), which no snapshot holds", e.Path, scan.ReservedPrefix)
	}
	if e.UID < 0 || e.UID > MaxUID || e.GID < 0 || e.GID > MaxUID {
		return false, fmt.Errorf("%q has owner %d:%d, outside the valid range 0-%d", e.Path, e.UID, e.GID, MaxUID)
	}
	isDir := e.Type == archive.TypeDir
	inSnapshot := f.snapshotMemo.Selected(e.Path)
	inLocal := inSnapshot
	if f.localMemo != nil {
		inLocal = f.localMemo.Selected(e.Path)
	}
	if !inSnapshot && !(isDir && f.snapshot.Enter(e.Path)) {
		return false, fmt.Errorf("%q is outside the snapshot's own selection", e.Path)
	}
	if !inLocal {
		if !isDir || !f.local.Enter(e.Path) {
			if f.Skipped++; f.Skipped == 1 {
				f.SkippedExample = e.Path
			}
			return false, nil
		}
		e.Implied = true
	}
	f.specialBits(e)
	return true, nil
}

// specialBits applies the mode policy: a Jenkins home never needs setuid
// or setgid programs or world-writable paths, and restoring them as root
// would hand out privileges a store writer chose. Setuid and setgid are
// dropped from files, setuid from directories; setgid and sticky
// directories are kept (an fsGroup volume relies on setgid directories,
// and neither grants privileges). World-writable bits are dropped from
// everything but symlinks (whose mode means nothing). keepModes turns the
// policy off: the user asked for the modes as stored.
func (f *Filter) specialBits(e *archive.Entry) {
	if f.KeepModes {
		return
	}
	drop := DroppedSpecial(e.Type == archive.TypeDir)
	if e.Type != archive.TypeSymlink {
		drop |= 0o002
	}
	if e.Mode&drop != 0 {
		e.Mode &^= drop
		if f.Dropped++; f.Dropped == 1 {
			f.Example = e.Path
		}
	}
}

// DroppedSpecial is the special mode bits a restore never sets on a file
// or directory, from a snapshot or from a journal.
func DroppedSpecial(isDir bool) fs.FileMode {
	if isDir {
		return fs.ModeSetuid
	}
	return fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky
}
