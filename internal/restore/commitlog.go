package restore

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"

	"github.com/homesnap/homesnap/internal/archive"
	"github.com/homesnap/homesnap/internal/fetch"
	"github.com/homesnap/homesnap/internal/homefs"
	"github.com/homesnap/homesnap/internal/scan"
	"github.com/homesnap/homesnap/internal/selector"
)

// A restore's commit log is its crash recovery: the commit writes ahead,
// into <stage>/journal (its name on disk), each step it is about to take
// (and, for metadata, what it was), one write(2) per step. A restore
// killed during the moves (SIGKILL, OOM) leaves the log behind; the next
// restore, before anything else, undoes the steps it lists, newest first,
// so the home is back to where the killed restore found it. Undoing is
// idempotent: a step that never happened has nothing to move back. The
// log is not fsynced: it survives a killed process, not a lost machine.
// (It is no relation of internal/journal, the sidecar's change journal.)
//
// The home's user (build code, uid 1000) can write anything into the home,
// a commit log included, so restore state is trusted only once it is
// recognised as the restore's own:
//
//   - The staging directory, its tree and its commit log must be a real
//     directory and a regular file (no symlink followed) owned by the
//     restore's effective uid, with no group or world access: a root
//     restore creates them so, and the home's user can neither create a
//     root-owned file nor write into a root-owned 0700 directory. Nothing
//     else is needed against another uid; a secret (an HMAC key) would
//     have to live somewhere the next restore can read and the home's
//     user cannot, and for a restore running as the home's own uid no
//     such place exists (everything it can read, the same uid can read).
//   - So for a restore running as the home's uid, which the attacker can
//     impersonate, what keeps a forged commit log harmless is what it may
//     do: every path is checked like an archive path (relative, clean,
//     within the selection, outside homesnap's reserved names), every
//     step acts through descriptors opened beneath the home with no
//     symlink followed, renames never replace anything, and modes lose
//     setuid (and setgid on files). Such a commit log can only rename,
//     chmod and touch selected paths of the home, and remove them (an
//     undone move-in puts a path back into the staging tree, which is
//     then removed): all of which the same uid can do directly, so it
//     gains nothing.
//   - What is not the restore's own is renamed to a .homesnap-quarantine-*
//     directory, reported, and never replayed or deleted.
//
// The staging directory's name carries a random token, so that nobody can
// create it first and make the restore fail.

// commitLogName is the log's file name in the staging directory, and
// "homesnap-journal" its header: both as restores before the rename wrote
// them, so that a log one of them left is still recognised and undone.
const commitLogName = "journal"

// commitLog is the log a commit writes ahead of its steps.
type commitLog struct {
	f *os.File
}

func (r *restorer) openCommitLog() (*commitLog, error) {
	fd, err := unix.Openat(r.stageFD, commitLogName, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_APPEND|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("create the commit log: %w", err)
	}
	j := &commitLog{f: os.NewFile(uintptr(fd), commitLogName)}
	disp := "-"
	if r.disp >= 0 {
		disp = strconv.Quote(r.dispName)
	}
	if err := j.write("homesnap-journal 1 " + disp); err != nil {
		j.f.Close()
		return nil, err
	}
	return j, nil
}

func (j *commitLog) write(line string) error {
	if _, err := j.f.WriteString(line + "\n"); err != nil {
		return fmt.Errorf("write the commit log: %w", err)
	}
	return nil
}

// record notes a step before it is taken.
func (j *commitLog) record(a *action) error {
	s := logStep{rel: a.rel}
	switch a.kind {
	case actDisplace:
		s.kind = 'D'
	case actMoveIn:
		s.kind = 'I'
	default:
		st := &a.meta.old
		s.kind, s.uid, s.gid, s.mode = 'M', int64(st.Uid), int64(st.Gid), uint32(st.Mode&0o7777)
		s.atime, s.mtime = st.Atim.Nano(), st.Mtim.Nano()
	}
	return j.write(s.String())
}

// logStep is one line of a commit log: D moves rel back from the
// displaced directory, I moves it back into the staging tree, M restores
// its owner, mode and times.
type logStep struct {
	kind         byte
	rel          string
	uid, gid     int64
	mode         uint32
	atime, mtime int64
}

func (s logStep) String() string {
	if s.kind != 'M' {
		return string(s.kind) + " " + strconv.Quote(s.rel)
	}
	return fmt.Sprintf("M %s %d %d %d %d %d", strconv.Quote(s.rel), s.uid, s.gid, s.mode, s.atime, s.mtime)
}

// parsedLog is a parsed commit log.
type parsedLog struct {
	displaced string // the displaced directory's name at the home's root, "" if none
	steps     []logStep
}

// maxCommitLog bounds what is read of a commit log: about a line per path of a
// 10-million-path home.
const maxCommitLog = 2 << 30

// parseCommitLog checks a whole commit log before any of it is acted on: a
// line that is not one the commit writes, or a path the restore may not
// touch (allowed says which selected paths it may), refuses all of it.
// Only a last line the kill cut short (no newline) is dropped: its step
// never ran.
func parseCommitLog(data []byte, allowed func(rel string) bool) (*parsedLog, error) {
	if len(data) == 0 {
		return &parsedLog{}, nil // killed between creating it and its header: no step ran
	}
	text := string(data)
	if i := strings.LastIndexByte(text, '\n'); i < 0 {
		return nil, errors.New("no header line")
	} else {
		text = text[:i]
	}
	lines := strings.Split(text, "\n")
	head := strings.Split(lines[0], " ")
	if len(head) != 3 || head[0] != "homesnap-journal" || head[1] != "1" {
		return nil, fmt.Errorf("header %.80q is not a restore commit log's", lines[0])
	}
	j := &parsedLog{}
	if head[2] != "-" {
		name, err := strconv.Unquote(head[2])
		if err != nil || !validStateName(name, displacedPrefix) {
			return nil, fmt.Errorf("header names %.80q as its displaced directory", head[2])
		}
		j.displaced = name
	}
	for n, line := range lines[1:] {
		s, err := parseStep(line, allowed)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n+2, err)
		}
		j.steps = append(j.steps, s)
	}
	return j, nil
}

func parseStep(line string, allowed func(string) bool) (logStep, error) {
	var s logStep
	kind, rest, _ := strings.Cut(line, " ")
	if len(kind) != 1 || !strings.Contains("DIM", kind) {
		return s, fmt.Errorf("unknown step %.20q", kind)
	}
	s.kind = kind[0]
	quoted, err := strconv.QuotedPrefix(rest)
	if err != nil {
		return s, errors.New("no quoted path")
	}
	if s.rel, err = strconv.Unquote(quoted); err != nil {
		return s, errors.New("no quoted path")
	}
	if err := checkStatePath(s.rel, allowed); err != nil {
		return s, err
	}
	tail := rest[len(quoted):]
	if s.kind != 'M' {
		if tail != "" {
			return s, fmt.Errorf("%q: unexpected %.20q after the path", s.rel, tail)
		}
		return s, nil
	}
	f := strings.Split(tail, " ")
	if len(f) != 6 || f[0] != "" {
		return s, fmt.Errorf("%q: want owner, group, mode and two times", s.rel)
	}
	var v [5]int64
	for i, x := range f[1:] {
		if v[i], err = strconv.ParseInt(x, 10, 64); err != nil || strconv.FormatInt(v[i], 10) != x {
			return s, fmt.Errorf("%q: %.24q is not a number", s.rel, x)
		}
	}
	if v[0] < 0 || v[0] > fetch.MaxUID || v[1] < 0 || v[1] > fetch.MaxUID || v[2] < 0 || v[2] > 0o7777 {
		return s, fmt.Errorf("%q: owner %d:%d or mode %o out of range", s.rel, v[0], v[1], v[2])
	}
	s.uid, s.gid, s.mode, s.atime, s.mtime = v[0], v[1], uint32(v[2]), v[3], v[4]
	return s, nil
}

// checkStatePath accepts what the entry filter accepts from a manifest:
// a clean relative path, outside the reserved names, that the restore's
// selection reaches.
func checkStatePath(rel string, allowed func(string) bool) error {
	if err := archive.CheckPath(rel); err != nil {
		return err
	}
	if len(rel) > fetch.MaxPath {
		return fmt.Errorf("path %.64q… is longer than Linux allows", rel)
	}
	if first, _, _ := strings.Cut(rel, "/"); strings.HasPrefix(first, scan.ReservedPrefix) {
		return fmt.Errorf("%q is in homesnap's reserved namespace", rel)
	}
	if !allowed(rel) {
		return fmt.Errorf("%q is outside the restore's selection", rel)
	}
	return nil
}

// validStateName reports whether name can be one of the restore's
// directories at the home's root.
func validStateName(name, prefix string) bool {
	return strings.HasPrefix(name, prefix) && len(name) > len(prefix) && len(name) <= 255 &&
		!strings.ContainsAny(name, "/\x00")
}

// undoMode is the mode an undo step sets: permission bits, and the
// special bits the entry filter keeps (setgid and sticky on directories).
func undoMode(mode uint32, isDir bool) uint32 {
	return unixMode(scan.Mode(mode) &^ fetch.DroppedSpecial(isDir))
}

// recovery finds and undoes what killed restores left in a home.
type recovery struct {
	home     int
	homePath string
	set      map[string]bool // quarantined by this pass (reported already)
	allowed  func(string) bool
	log      zerolog.Logger
	euid     int
}

// RecoverInterrupted finishes what a restore killed during its moves left
// in the home: it undoes the moves its commit log lists, so the home is as
// that restore found it, and removes its staging directory. Paths an
// earlier restore displaced are never removed, only reported; restore
// state it does not recognise as its own is set aside, never replayed.
// Restore calls it first; a caller that inspects the home before restoring
// (the init container's decisions) should call it before that. It assumes
// the jenkins preset's selection.
func RecoverInterrupted(home *homefs.Home, log zerolog.Logger) error {
	return recoverHome(home, nil, log)
}

func recoverHome(home *homefs.Home, sel *selector.Selector, log zerolog.Logger) error {
	if !home.Exists() {
		return nil
	}
	d, err := home.Dir.Reopen() // its own flock, released when it closes
	if err != nil {
		return fmt.Errorf("open home %s: %w", home.Path, errors.Unwrap(err))
	}
	defer d.Close()
	if err := lockHome(d.Fd(), home.Path); err != nil {
		return err
	}
	return recoverLeftovers(d.Fd(), home.Path, sel, log)
}

// recoverLeftovers recovers every staging directory at the home's root,
// allowing commit log paths that sel (nil: the jenkins preset) reaches, and
// reports what remains displaced or quarantined.
func recoverLeftovers(home int, homePath string, sel *selector.Selector, log zerolog.Logger) error {
	if sel == nil {
		var err error
		if sel, err = selector.New(selector.Spec{Preset: "jenkins"}); err != nil {
			return err
		}
	}
	rc := &recovery{home: home, homePath: homePath, log: log, euid: os.Geteuid(), set: map[string]bool{},
		allowed: func(rel string) bool { return sel.Selected(rel) || sel.Enter(rel) }}
	names, err := rootNames(home)
	if err != nil {
		return fmt.Errorf("read home %s: %w", homePath, err)
	}
	for _, name := range names {
		if strings.HasPrefix(name, stagePrefix) {
			if err := rc.recoverStage(name); err != nil {
				return err
			}
		}
	}
	if names, err = rootNames(home); err != nil {
		return fmt.Errorf("read home %s: %w", homePath, err)
	}
	for _, name := range names {
		switch {
		case strings.HasPrefix(name, displacedPrefix):
			log.Warn().Str("dir", rc.abs(name)).Msg("paths displaced by an earlier restore are kept here; delete the directory once you no longer need them")
		case strings.HasPrefix(name, quarantinePrefix) && !rc.set[name]:
			log.Warn().Str("dir", rc.abs(name)).Msg("restore state a restore did not recognise as its own was set aside here, never replayed; review it, then delete the directory")
		}
	}
	return nil
}

func (rc *recovery) abs(name string) string { return filepath.Join(rc.homePath, name) }

// rootNames lists the names at the home's root.
func rootNames(home int) ([]string, error) {
	entries, err := fs.ReadDir(homefs.FS(homefs.Dir(home)), ".")
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name()
	}
	return names, err
}

// notOurs explains why restore state is not the restore's own.
type notOurs struct{ why string }

func (e *notOurs) Error() string { return e.why }

// recoverStage undoes the commit log in the staging directory name, if it is
// the restore's own, and removes it; anything else is quarantined.
func (rc *recovery) recoverStage(name string) error {
	j, stage, tree, err := rc.openStage(name)
	var no *notOurs
	if errors.As(err, &no) {
		return rc.quarantine(name, no.why)
	}
	if err != nil {
		return err
	}
	defer unix.Close(stage)
	if j != nil {
		defer unix.Close(tree)
		if err := rc.undo(name, j, tree); err != nil {
			return err
		}
	}
	// What remains is data fetched from the store.
	rc.log.Warn().Str("dir", rc.abs(name)).Msg("removing the staging directory of an interrupted restore")
	if err := homefs.Dir(rc.home).RemoveAll(name); err != nil {
		return fmt.Errorf("remove leftover staging directory %s: %w", rc.abs(name), errors.Unwrap(err))
	}
	return nil
}

// openStage checks that name is the restore's own staging directory and
// returns its parsed commit log (nil if it has none: killed before its first
// move) and descriptors of it and its tree. A *notOurs error says why it
// is not.
func (rc *recovery) openStage(name string) (*parsedLog, int, int, error) {
	stage, err := rc.openOwn(rc.home, name, unix.S_IFDIR)
	if err != nil {
		return nil, -1, -1, err
	}
	jfd, err := rc.openOwn(stage, commitLogName, unix.S_IFREG)
	if errors.Is(err, unix.ENOENT) {
		return nil, stage, -1, nil
	}
	var j *parsedLog
	if err == nil {
		j, err = rc.readCommitLog(jfd)
	}
	tree := -1
	if err == nil {
		tree, err = rc.openOwn(stage, "tree", unix.S_IFDIR)
		if errors.Is(err, unix.ENOENT) {
			err = &notOurs{"it has a commit log but no staging tree"}
		}
	}
	if err != nil {
		unix.Close(stage)
		return nil, -1, -1, err
	}
	return j, stage, tree, nil
}

func (rc *recovery) readCommitLog(fd int) (*parsedLog, error) {
	f := os.NewFile(uintptr(fd), commitLogName)
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxCommitLog+1))
	if err != nil {
		return nil, fmt.Errorf("read the commit log of an interrupted restore: %w", err)
	}
	if len(data) > maxCommitLog {
		return nil, &notOurs{fmt.Sprintf("its commit log is larger than %d bytes", int64(maxCommitLog))}
	}
	j, err := parseCommitLog(data, rc.allowed)
	if err != nil {
		return nil, &notOurs{"its commit log is not one a restore wrote: " + err.Error()}
	}
	return j, nil
}

// openOwn opens name in dir, of type typ (S_IFDIR or S_IFREG), without
// following a symlink, and checks that this process made it: owned by
// the effective uid, no access for group or others. A missing name is
// ENOENT; anything else not right is *notOurs.
func (rc *recovery) openOwn(dir int, name string, typ uint32) (int, error) {
	flags := unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_CLOEXEC
	if typ == unix.S_IFDIR {
		flags |= unix.O_DIRECTORY
	}
	fd, err := unix.Openat(dir, name, flags, 0)
	switch {
	case errors.Is(err, unix.ENOENT):
		return -1, err
	case errors.Is(err, unix.ELOOP), errors.Is(err, unix.ENOTDIR), errors.Is(err, unix.ENXIO):
		return -1, &notOurs{name + " is a symlink or not a " + typeName(typ)}
	case err != nil:
		return -1, &notOurs{fmt.Sprintf("cannot open %s: %v", name, err)}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("inspect %s: %w", name, err)
	}
	why := ""
	switch {
	case uint32(st.Mode&unix.S_IFMT) != typ:
		why = name + " is not a " + typeName(typ)
	case int(st.Uid) != rc.euid:
		why = fmt.Sprintf("%s is owned by uid %d, not by this restore's uid %d", name, st.Uid, rc.euid)
	case st.Mode&0o077 != 0:
		why = fmt.Sprintf("%s has mode %04o; a restore makes its state accessible to its own uid only", name, st.Mode&0o7777)
	}
	if why != "" {
		unix.Close(fd)
		return -1, &notOurs{why}
	}
	return fd, nil
}

func typeName(typ uint32) string {
	if typ == unix.S_IFDIR {
		return "directory"
	}
	return "regular file"
}

// quarantinePrefix names where restore state that is not the restore's
// own is set aside.
const quarantinePrefix = scan.ReservedPrefix + "quarantine-"

// quarantine renames name at the home's root out of the restore's way,
// never deleting it, and says where it went and why.
func (rc *recovery) quarantine(name, why string) error {
	base := quarantinePrefix + time.Now().UTC().Format("20060102T150405Z") + "-" + strings.TrimPrefix(name, scan.ReservedPrefix)
	if len(base) > 240 {
		base = base[:240]
	}
	// Where the filesystem lacks RENAME_NOREPLACE, the home lock keeps other
	// restores out, and a home writer racing the check loses only its own path.
	home := homefs.Dir(rc.home)
	to := base
	err := home.RenameNoReplace(name, home, to)
	for i := 2; errors.Is(err, unix.EEXIST) && i < 100; i++ {
		to = fmt.Sprintf("%s-%d", base, i)
		err = home.RenameNoReplace(name, home, to)
	}
	if err != nil {
		return fmt.Errorf("%s is not restore state this restore made (%s), and setting it aside failed: %w; move it out of the home, then restore again", rc.abs(name), why, err)
	}
	rc.set[to] = true
	rc.log.Warn().Str("dir", rc.abs(name)).Str("moved_to", rc.abs(to)).Str("reason", why).
		Msg("set aside restore state that this restore did not make: it was not replayed and nothing in it was deleted; review it, then delete it")
	return nil
}

// undo takes back a commit log's steps, newest first.
func (rc *recovery) undo(stage string, j *parsedLog, tree int) error {
	disp := -1
	if j.displaced != "" {
		fd, err := rc.openDisplaced(j.displaced)
		if err != nil {
			return fmt.Errorf("interrupted restore in %s: its displaced directory: %w; nothing was removed", rc.abs(stage), err)
		}
		disp = fd
		defer unix.Close(disp)
	}
	rc.log.Warn().Str("dir", rc.abs(stage)).Int("steps", len(j.steps)).Msg("undoing the moves of an interrupted restore")
	var errs []error
	for i := len(j.steps) - 1; i >= 0; i-- {
		if err := rc.undoStep(j.steps[i], tree, disp); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", j.steps[i].rel, err))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("undoing an interrupted restore (%s) failed: %w; nothing was removed: its staged and displaced paths are still in the home's .homesnap-* directories", rc.abs(stage), errors.Join(errs...))
	}
	if disp >= 0 {
		// Every displaced path is back: only prepared directories remain.
		if ok, _ := homefs.Dir(rc.home).RemoveEmptyDirs(j.displaced); !ok {
			rc.log.Warn().Str("dir", rc.abs(j.displaced)).Msg("an interrupted restore left paths here; review them")
		}
	}
	return nil
}

// openDisplaced opens the displaced directory a trusted commit log names.
// Its owner is not checked: --chown gives it to the home's user during
// the commit. Undoing out of it is safe whatever it holds: renames
// beneath it follow no symlink and replace nothing, so they can only
// bring into the home what its user could have put there.
func (rc *recovery) openDisplaced(name string) (int, error) {
	fd, err := unix.Openat(rc.home, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open %s: %w", rc.abs(name), err)
	}
	return fd, nil
}

// undoStep takes one step back. A step that never happened, or was
// already undone, finds nothing to move (ENOENT) and is skipped.
func (rc *recovery) undoStep(s logStep, tree, disp int) error {
	var err error
	switch s.kind {
	case 'D':
		if disp < 0 {
			return nil
		}
		err = homefs.Dir(disp).RenameNoReplace(s.rel, homefs.Dir(rc.home), s.rel)
	case 'I':
		err = homefs.Dir(rc.home).RenameNoReplace(s.rel, homefs.Dir(tree), s.rel)
	case 'M':
		err = rc.undoMeta(s)
	}
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	return err
}

// undoMeta puts back a path's owner (as root), mode and times, on the
// inode opened beneath the home. A symlink has no mode of its own: it
// gets its owner and times. A path that is now a hard link (the home's
// user replaced it since) is left alone, with a warning: changing it
// could change a file outside the home.
func (rc *recovery) undoMeta(s logStep) error {
	m := homefs.Meta{
		Mode:  func(isDir bool) uint32 { return undoMode(s.mode, isDir) },
		Times: []unix.Timespec{unix.NsecToTimespec(s.atime), unix.NsecToTimespec(s.mtime)},
	}
	if rc.euid == 0 {
		m.Owner = &homefs.Owner{UID: int(s.uid), GID: int(s.gid)}
	}
	home := homefs.Dir(rc.home)
	err := home.SetMeta(s.rel, m)
	if errors.Is(err, unix.ELOOP) { // a symlink, or one on the way (refused again)
		m.Mode = nil
		err = home.SetMeta(s.rel, m)
	}
	if errors.Is(err, homefs.ErrHardLinked) {
		rc.log.Warn().Str("path", rc.abs(s.rel)).Err(err).Msg("left this path's owner, mode and times alone while undoing an interrupted restore: it is now a hard link")
		return nil
	}
	return err
}
