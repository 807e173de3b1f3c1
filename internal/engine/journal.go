package engine

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"
)

// A commit writes ahead, into <stage>/journal, each step it is about to
// take (and, for metadata, what it was), one write(2) per step. A restore
// killed during the moves (SIGKILL, OOM) leaves the journal behind; the
// next restore, before anything else, undoes the steps it lists, newest
// first, so the home is back to where the killed restore found it. Undoing
// is idempotent: a step that never happened has nothing to move back. The
// journal is not fsynced: it survives a killed process, not a lost machine.

const journalName = "journal"

type journal struct {
	f *os.File
}

func (r *restorer) openJournal() (*journal, error) {
	fd, err := unix.Openat(r.home, r.stageDir+"/"+journalName, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_APPEND|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("create the commit journal: %w", err)
	}
	j := &journal{f: os.NewFile(uintptr(fd), journalName)}
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

func (j *journal) write(line string) error {
	if _, err := j.f.WriteString(line + "\n"); err != nil {
		return fmt.Errorf("write the commit journal: %w", err)
	}
	return nil
}

// record notes a step before it is taken.
func (j *journal) record(a *action) error {
	switch a.kind {
	case actDisplace:
		return j.write("D " + strconv.Quote(a.rel))
	case actMoveIn:
		return j.write("I " + strconv.Quote(a.rel))
	}
	st := &a.old
	return j.write(fmt.Sprintf("M %s %d %d %d %d %d", strconv.Quote(a.rel), st.Uid, st.Gid, st.Mode&0o7777, st.Atim.Nano(), st.Mtim.Nano()))
}

// recoverInterrupted undoes the commit of a killed restore whose staging
// directory is stage (relative to the home), and returns the name of its
// displaced directory ("" if none, or if stage holds no journal: killed
// before its first move, nothing to undo).
func recoverInterrupted(home int, homePath, stage string, log zerolog.Logger) (string, error) {
	data, err := readAt(home, stage+"/"+journalName)
	if errors.Is(err, unix.ENOENT) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read the journal of an interrupted restore in %s: %w", filepath.Join(homePath, stage), err)
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	head := strings.Fields(lines[0])
	if len(head) != 3 || head[0] != "homesnap-journal" || head[1] != "1" {
		return "", fmt.Errorf("the journal of an interrupted restore in %s is unreadable; nothing was removed: check the home, then delete that directory", filepath.Join(homePath, stage))
	}
	disp, name := -1, ""
	if head[2] != "-" {
		name, err = strconv.Unquote(head[2])
		if err == nil {
			disp, err = openDirAt(home, name)
		}
		if err != nil {
			return "", fmt.Errorf("interrupted restore in %s: its displaced directory: %w", filepath.Join(homePath, stage), err)
		}
		defer unix.Close(disp)
	}
	tree, err := openDirAt(home, stage+"/tree")
	if err != nil {
		return "", err
	}
	defer unix.Close(tree)
	log.Warn().Str("dir", filepath.Join(homePath, stage)).Int("steps", len(lines)-1).Msg("undoing the moves of an interrupted restore")
	var errs []error
	for i := len(lines) - 1; i >= 1; i-- {
		if err := undoLine(home, tree, disp, lines[i]); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return "", fmt.Errorf("undoing an interrupted restore (%s) failed: %w; nothing was removed: its staged and displaced paths are still in the home's .homesnap-* directories", filepath.Join(homePath, stage), errors.Join(errs...))
	}
	return name, nil
}

func undoLine(home, tree, disp int, line string) error {
	kind, rest, _ := strings.Cut(line, " ")
	rel, err := strconv.QuotedPrefix(rest)
	if err != nil {
		return nil // the last line, cut short by the kill: its step never ran
	}
	tail := strings.Fields(rest[len(rel):])
	rel, _ = strconv.Unquote(rel)
	tolerate := func(err error) error {
		if err == nil || errors.Is(err, unix.ENOENT) {
			return nil // never taken, or already undone
		}
		return fmt.Errorf("%s: %w", rel, err)
	}
	switch kind {
	case "D":
		if disp < 0 {
			return nil
		}
		return tolerate(unix.Renameat(disp, rel, home, rel))
	case "I":
		return tolerate(unix.Renameat(home, rel, tree, rel))
	case "M":
		var v [5]int64
		if len(tail) != 5 {
			return nil
		}
		for i, s := range tail {
			v[i], _ = strconv.ParseInt(s, 10, 64)
		}
		if os.Geteuid() == 0 {
			if err := unix.Fchownat(home, rel, int(v[0]), int(v[1]), unix.AT_SYMLINK_NOFOLLOW); err != nil {
				return tolerate(err)
			}
		}
		if err := unix.Fchmodat(home, rel, uint32(v[2]), 0); err != nil {
			return tolerate(err)
		}
		ts := []unix.Timespec{unix.NsecToTimespec(v[3]), unix.NsecToTimespec(v[4])}
		return tolerate(unix.UtimesNanoAt(home, rel, ts, unix.AT_SYMLINK_NOFOLLOW))
	}
	return nil
}

func readAt(dir int, rel string) ([]byte, error) {
	fd, err := unix.Openat(dir, rel, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), rel)
	defer f.Close()
	return io.ReadAll(f)
}

// removeEmptyDirs removes a directory tree that holds nothing but
// directories; it reports false (and removes nothing more) if it finds
// anything else.
func removeEmptyDirs(p string) (bool, error) {
	entries, err := os.ReadDir(p)
	if err != nil {
		return false, err
	}
	for _, e := range entries {
		if !e.IsDir() {
			return false, nil
		}
		if ok, err := removeEmptyDirs(filepath.Join(p, e.Name())); !ok || err != nil {
			return false, err
		}
	}
	return true, os.Remove(p)
}

// RecoverInterrupted finishes what a restore killed during its moves left
// in the home: it undoes the moves its journal lists, so the home is as
// that restore found it, and removes its staging directory. Paths an
// earlier restore displaced are never removed, only reported. Restore
// calls it first; a caller that inspects the home before restoring (the
// init container's decisions) should call it before that.
func RecoverInterrupted(home string, log zerolog.Logger) error {
	fd, err := unix.Open(home, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("open home %s: %w", home, err)
	}
	defer unix.Close(fd)
	return recoverLeftovers(fd, home, log)
}

func recoverLeftovers(home int, homePath string, log zerolog.Logger) error {
	old, _ := filepath.Glob(filepath.Join(homePath, stagePrefix+"*"))
	for _, dir := range old {
		stage := filepath.Base(dir)
		disp, err := recoverInterrupted(home, homePath, stage, log)
		if err != nil {
			return err
		}
		if disp != "" {
			// Every displaced path is back: only prepared directories remain.
			if ok, _ := removeEmptyDirs(filepath.Join(homePath, disp)); !ok {
				log.Warn().Str("dir", filepath.Join(homePath, disp)).Msg("an interrupted restore left paths here; review them")
			}
		}
		// What remains is data fetched from the store.
		log.Warn().Str("dir", dir).Msg("removing the staging directory of an interrupted restore")
		if err := removeAll(dir); err != nil {
			return fmt.Errorf("remove leftover staging directory %s: %w", dir, err)
		}
	}
	disp, _ := filepath.Glob(filepath.Join(homePath, displacedPrefix+"*"))
	for _, dir := range disp {
		log.Warn().Str("dir", dir).Msg("paths displaced by an earlier restore are kept here; delete the directory once you no longer need them")
	}
	return nil
}
