package restore

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"

	"github.com/homesnap/homesnap/internal/archive"
	"github.com/homesnap/homesnap/internal/fetch"
	"github.com/homesnap/homesnap/internal/homefs"
	"github.com/homesnap/homesnap/internal/homemark"
	"github.com/homesnap/homesnap/internal/repo"
	"github.com/homesnap/homesnap/internal/scan"
	"github.com/homesnap/homesnap/internal/selector"
	"github.com/homesnap/homesnap/internal/store"
)

// Options are every input of a restore (Restore): the command passes
// them all, and nothing else steers it.
type Options struct {
	// Home is the home (or --target) the command opened (homefs.Home), a
	// homefs.Missing one for a dry run into a directory that does not
	// exist. The restore works beneath it and never closes it.
	Home  *homefs.Home
	Store store.Store
	// Snapshot is the snapshot chosen (--snapshot, or --at resolved by
	// the caller on the store's history), empty for the head.
	Snapshot string
	Jobs     int // runs read and decoded at once; 0 means 8 (fetch.OpenAhead more may have their request sent)
	// AllowEmpty makes a store without snapshots a successful no-op (first
	// boot of an init container) instead of an error.
	AllowEmpty bool
	// Selector is what this restore may change: its own configuration,
	// never the store's (nil: the jenkins preset). The snapshot's recorded
	// selection only narrows it.
	Selector *selector.Selector
	// Include and Exclude narrow the restore further (a partial restore of
	// one job or folder); paths outside them are neither written nor
	// removed.
	Include, Exclude []string
	// Force allows a restore that would remove most of the home's selected
	// paths (ErrWouldRemoveMost otherwise), and keeps every local path it
	// replaces or removes in Result.Displaced instead of deleting it.
	Force bool
	// DryRun plans the restore and reports what it would change, without
	// creating, fetching or moving anything (BeforeCommit is not called).
	// It refuses what the real restore would refuse; with Force it reports
	// the full plan instead of ErrWouldRemoveMost.
	DryRun bool
	// OnChange, when set, is called for every path the restore writes,
	// replaces, removes or fixes the metadata of, as it is planned (also
	// in a dry run). A directory removed whole is reported once, not
	// every path below it.
	OnChange func(Change)
	// Chown makes everything the restore writes owned by these ids instead
	// of the snapshot's (needs root, or the ids of the process).
	Chown *Owner
	// KeepModes applies the snapshot's modes as stored. Without it,
	// setuid and setgid bits (setgid directories excepted) and
	// world-writable bits are dropped, and counted in ModesDropped.
	KeepModes bool
	// BeforeCommit is called once everything is staged and verified, before
	// the first path of the home changes. staged shows the home as it will
	// be after the commit (see overlayFS); an error aborts the restore and
	// leaves the home as it was.
	BeforeCommit func(ctx context.Context, staged fs.FS) error
	// Progress, when set, is told about every file the restore writes
	// (not in a dry run).
	Progress fetch.Progress
	Log      zerolog.Logger
	// AllowOlderHead restores, with a warning, a head older than the last
	// commit the home's mark saw (see checkMark): the admin's override,
	// after putting an older copy of the store back on purpose.
	AllowOlderHead bool
	// Step, when set, is told what the restore is doing, for the message
	// of a deadline that expires.
	Step func(string)
}

// staged is what the decision (Restore) hands the staged restore
// (restoreSnapshot) besides the Options: derived inputs, never the
// caller's.
type staged struct {
	// delta fetches and replaces only what differs from the home: a file
	// whose size, mode, mtime (and owner, as root) match is left alone,
	// and one whose size matches but metadata does not is hashed first.
	// Without it every selected path is written afresh.
	delta     bool
	recovered bool           // an interrupted restore was recovered already
	record    *pendingRecord // the snapshot's record, read meanwhile (nil: not needed)
	hooks     *restoreHooks  // tests inject failures here
}

// Owner is a numeric owner and group.
type Owner struct{ UID, GID int }

// Result describes a finished restore.
type Result struct {
	ID      string
	Empty   bool // the store had no snapshot and AllowEmpty was set
	Entries int64
	Files   int64
	Bytes   int64
	// Fetched counts the files read from the store, FetchedBytes the
	// compressed bytes that took.
	Fetched      int64
	FetchedBytes int64
	Written      int64 // paths written from the snapshot (new or replaced)
	WrittenBytes int64 // their file bytes
	Unchanged    int64 // paths a delta restore left as they were
	MetaFixed    int64 // paths whose content matched but metadata was set
	Removed      int64 // selected paths of the home the snapshot does not have
	// ModesDropped counts the paths whose setuid, setgid or
	// world-writable bits were dropped (see KeepModes), ModesExample
	// names the first.
	ModesDropped int64
	ModesExample string
	// OwnersAsStored: the restore ran as root without Chown, so it gave
	// paths the snapshot's owners, uid 0 included.
	OwnersAsStored bool
	// Displaced is the directory inside the home holding every path a
	// forced restore replaced or removed ("" if none).
	Displaced string
	DryRun    bool
	Elapsed   time.Duration
}

// ChangeKind says what a restore does to a path.
type ChangeKind string

const (
	ChangeWrite   ChangeKind = "write"   // created from the snapshot
	ChangeReplace ChangeKind = "replace" // a local path replaced by the snapshot's
	ChangeRemove  ChangeKind = "remove"  // a local path the snapshot does not have
	ChangeMeta    ChangeKind = "meta"    // same content, metadata set
)

// Change is one planned change, reported through OnChange.
type Change struct {
	Kind ChangeKind
	Path string // relative to the home
	Size int64  // bytes to fetch for a file write or replace
}

// ErrWouldRemoveMost is wrapped by a RemoveMostError: the snapshot lacks
// most of what the home holds (an empty or foreign snapshot, or a home
// much newer than the store).
var ErrWouldRemoveMost = errors.New("restore would remove most of the home's selected paths")

// RemoveMostError refuses a restore that would remove Removed of the
// home's Selected paths without Force.
type RemoveMostError struct {
	Snapshot         string
	Removed, Present int64
}

func (e *RemoveMostError) Error() string {
	return fmt.Sprintf("%v: snapshot %s lacks %d of the %d selected paths in the home; nothing was changed (a forced restore keeps what it replaces or removes in %s*)",
		ErrWouldRemoveMost, e.Snapshot, e.Removed, e.Present, displacedPrefix)
}

func (e *RemoveMostError) Unwrap() error { return ErrWouldRemoveMost }

// EmptyStoreError refuses a restore from a store without snapshots
// (Options.AllowEmpty makes that a successful no-op instead).
type EmptyStoreError struct{ Store string }

func (e *EmptyStoreError) Error() string {
	return fmt.Sprintf("%v in %s yet", repo.ErrNoSnapshot, e.Store)
}

func (e *EmptyStoreError) Unwrap() error { return repo.ErrNoSnapshot }

// ErrInTheWay marks a restore refused because an unselected home path
// stands where the snapshot needs to write; nothing was changed.
var ErrInTheWay = errors.New("a path outside the selection is in the way")

// ErrRollbackFailed marks a commit that failed and could not be fully
// undone: the home is partly restored, and the error names the
// directories holding the staged and displaced paths (nothing deleted).
var ErrRollbackFailed = errors.New("rolling back the restore failed")

// stagePrefix names the staging directory a restore builds inside the home,
// on the same volume, before anything is moved into place;
// displacedPrefix the directory that receives the paths it moves aside.
const (
	stagePrefix     = scan.ReservedPrefix + "restore-"
	displacedPrefix = scan.ReservedPrefix + "displaced-"
)

// restoreSnapshot makes the selected paths of the home equal to snapshot
// o.Snapshot (the head when empty). Every file is written into a staging
// directory on the home's volume and checked against its hash; only then
// are paths moved into place. Any failure before that leaves the home
// exactly as it was; a failure while moving rolls the moves back.
func restoreSnapshot(ctx context.Context, o Options, s staged) (*Result, error) {
	start := time.Now()
	if o.Home == nil {
		return nil, homemark.ErrNoHome
	}
	if o.Jobs <= 0 {
		o.Jobs = 8
	}
	if _, err := fetch.LocalSelector(o.Selector, o.Include, o.Exclude); err != nil {
		return nil, err
	}
	if s.hooks == nil {
		s.hooks = &restoreHooks{}
	}
	id := o.Snapshot
	if id == "" {
		head, _, err := repo.LoadHead(ctx, o.Store)
		if err != nil {
			return nil, err
		}
		if head == nil {
			if o.AllowEmpty {
				return &Result{Empty: true, Elapsed: time.Since(start)}, nil
			}
			return nil, &EmptyStoreError{Store: o.Store.String()}
		}
		id = head.Snapshot
	} else if err := repo.CheckID(id); err != nil {
		return nil, err
	}
	r := &restorer{o: o, s: s, id: id, res: Result{ID: id, DryRun: o.DryRun}}
	r.fetch = &fetch.Fetcher{Store: o.Store, Fetched: &r.fetched, Verb: "restore", Note: "; nothing was changed in the home",
		File: func(e *archive.Entry, src io.Reader) error { return r.writeFile(e.Path, e, src) }}
	if err := r.run(ctx); err != nil {
		return nil, err
	}
	r.res.FetchedBytes = r.fetched.Load()
	r.res.Elapsed = time.Since(start)
	return &r.res, nil
}

// restoreHooks let tests fail a commit at a chosen point.
type restoreHooks struct {
	beforeAction func(a *action) error
	// kill simulates the process dying before step a: the commit stops
	// where it is, with no rollback and no cleanup.
	kill func(a *action) bool
	// rename replaces renameat for the commit and its rollback (nil: the
	// system call), to simulate a volume out of inodes or space.
	rename func(fromDir int, from string, toDir int, to string) error
	// killCleanup simulates the process dying while it removes the
	// staging directory after a commit, stage being that directory's
	// descriptor: true stops the cleanup there.
	killCleanup func(stage int) bool
	// writebackEvery replaces the staged bytes between early writebacks
	// (0: writebackEvery), and wroteBack is told of each one's end.
	writebackEvery int64
	wroteBack      func(error)
}

type restorer struct {
	o       Options
	s       staged
	id      string
	res     Result
	root    bool // running as root: restore numeric owners
	umask   fs.FileMode
	fetched atomic.Int64
	fetch   *fetch.Fetcher // the staging pass's ranged reads

	home      int    // descriptor of the home: every path is opened relative to it
	stageDir  string // .homesnap-restore-<id>-<token>, at the home's root
	stageFD   int    // its descriptor
	stageID   unix.Stat_t
	tree      int    // descriptor of stage/tree: the snapshot's changes as they will be
	dispName  string // .homesnap-displaced-<id>-<time>, once something is displaced
	disp      int    // its descriptor, -1 until then
	plan      plan
	filter    *fetch.Filter   // the staging pass's
	removeSet map[string]bool // paths the commit removes (for BeforeCommit's view)
	manifests *manifestCopies // the manifest as the staging pass read it (nil in a dry run)
	wb        *writeback      // of the staging tree (nil in a dry run)
}

func (r *restorer) run(ctx context.Context) (err error) {
	r.root = os.Geteuid() == 0
	r.res.OwnersAsStored = r.root && r.o.Chown == nil
	r.umask = processUmask()
	r.home, r.stageFD, r.tree, r.disp = -1, -1, -1, -1
	defer r.closeFDs()
	switch {
	case r.o.Home.Exists():
		// A descriptor of its own: its flock is this restore's.
		home, err := r.o.Home.Dir.Reopen()
		if err != nil {
			return fmt.Errorf("open home %s: %w", r.o.Home.Path, errors.Unwrap(err))
		}
		r.home = home.Fd()
	case r.o.DryRun:
		r.home = -1 // a dry run into a home that does not exist yet
	default:
		return fmt.Errorf("open home %s: %w", r.o.Home.Path, unix.ENOENT)
	}
	if !r.o.DryRun {
		if err := lockHome(r.home, r.o.Home.Path); err != nil {
			return err
		}
		if !r.s.recovered {
			if err := recoverLeftovers(r.home, r.o.Home.Path, r.o.Selector, r.o.Log); err != nil {
				return err
			}
		}
		if err := r.makeStage(); err != nil {
			return err
		}
	}
	committed := false
	keep := false // set when a failed rollback leaves data in the staging areas
	defer func() {
		if !r.o.DryRun {
			r.cleanup(committed, keep)
		}
	}()
	if !r.o.DryRun {
		r.wb = &writeback{fd: r.tree, every: cmp.Or(r.s.hooks.writebackEvery, writebackEvery), done: r.s.hooks.wroteBack}
		defer r.wb.wait() // before the cleanup and the descriptors' close
	}
	if err := r.stage(ctx); err != nil {
		return err
	}
	if err := r.findExtras(ctx); err != nil {
		return err
	}
	if r.o.DryRun {
		return nil
	}
	r.wb.wait()
	if err := syncFS(r.tree); err != nil {
		return fmt.Errorf("sync staged files: %w", err)
	}
	if r.o.BeforeCommit != nil {
		if err := r.o.BeforeCommit(ctx, r.overlay()); err != nil {
			return fmt.Errorf("check before commit: %w; nothing was changed in the home", err)
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := r.commit(); err != nil {
		var rb *rollbackError
		keep = errors.As(err, &rb) || errors.Is(err, errSimulatedKill)
		return err
	}
	committed = true
	if r.o.Force && r.disp >= 0 {
		r.res.Displaced = r.abs(r.dispName)
		r.o.Log.Warn().Str("dir", r.res.Displaced).Msg("the local paths this forced restore replaced or removed are kept here; delete the directory once you no longer need them")
	}
	return syncFS(r.home)
}

// makeStage creates the staging directory and its tree, and keeps a
// descriptor of each: everything staged is written through them, so the
// home's user renaming the directory or swapping it for a symlink cannot
// redirect a write. (The commit log (commitlog.go) explains what makes it the restore's own.)
func (r *restorer) makeStage() error {
	var token [8]byte
	if _, err := rand.Read(token[:]); err != nil {
		return err
	}
	r.stageDir = stagePrefix + r.id + "-" + hex.EncodeToString(token[:])
	if err := unix.Mkdirat(r.home, r.stageDir, 0o700); err != nil {
		return fmt.Errorf("create staging directory %s: %w (is the home writable and is there space?)", r.abs(r.stageDir), err)
	}
	fd, err := openDirAt(r.home, r.stageDir)
	if err != nil {
		return fmt.Errorf("create staging directory: %w", err)
	}
	r.stageFD = fd
	if err := unix.Fstat(fd, &r.stageID); err != nil {
		return err
	}
	if int(r.stageID.Uid) != os.Geteuid() || r.stageID.Mode&0o077 != 0 {
		r.stageFD = -1
		unix.Close(fd)
		return fmt.Errorf("staging directory %s was replaced while it was created; nothing was changed", r.abs(r.stageDir))
	}
	if err := unix.Mkdirat(r.stageFD, "tree", 0o700); err != nil {
		return fmt.Errorf("create staging directory: %w", err)
	}
	r.tree, err = openDirAt(r.stageFD, "tree")
	r.manifests = newManifestCopies(r.o.Store, r.stageFD)
	return err
}

// removeStage removes the staging directory if the name still holds the
// one this restore made.
func (r *restorer) removeStage() error {
	if r.stageFD < 0 {
		return nil
	}
	var st unix.Stat_t
	if err := unix.Fstatat(r.home, r.stageDir, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return err
	}
	if st.Dev != r.stageID.Dev || st.Ino != r.stageID.Ino {
		return errors.New("it was replaced by something this restore did not make; left alone")
	}
	return homefs.Dir(r.home).RemoveAll(r.stageDir)
}

// cleanup removes the staging area; after a commit, the displaced paths
// too unless the restore was forced (then they are the user's to keep).
// Before or without a commit the displaced directory holds only the
// directories prepared for it, and is removed only if that is so. After a
// failed rollback nothing is removed: the error names where the paths are.
func (r *restorer) cleanup(committed, keep bool) {
	if keep {
		return
	}
	if committed && r.stageFD >= 0 {
		// The commit is complete: its log goes first. A process killed
		// while the rest is removed (the tree half gone) must leave no log
		// for the next restore to undo: the moves it lists can no longer
		// all be taken back, and the home is already what was asked for.
		if err := unix.Unlinkat(r.stageFD, commitLogName, 0); err != nil && !errors.Is(err, unix.ENOENT) {
			r.o.Log.Warn().Err(err).Str("dir", r.abs(r.stageDir)).Msg("could not remove the commit log of a completed restore")
		}
		if r.s.hooks.killCleanup != nil && r.s.hooks.killCleanup(r.stageFD) {
			return
		}
	}
	if err := r.removeStage(); err != nil {
		r.o.Log.Warn().Err(err).Str("dir", r.abs(r.stageDir)).Msg("could not remove the staging directory")
	}
	if r.disp < 0 {
		return
	}
	disp := r.abs(r.dispName)
	switch {
	case committed && r.o.Force:
	case committed:
		// Not forced: what was displaced is the previous state of paths
		// the caller chose to overwrite.
		if err := homefs.Dir(r.home).RemoveAll(r.dispName); err != nil {
			r.o.Log.Warn().Err(err).Str("dir", disp).Msg("could not remove the displaced paths' directory")
		}
	default:
		if ok, err := homefs.Dir(r.home).RemoveEmptyDirs(r.dispName); !ok || err != nil {
			r.o.Log.Warn().Err(err).Str("dir", disp).Msg("paths were left here by a restore that did not complete; review them")
		}
	}
}

// ErrHomeBusy means another restore holds the home.
var ErrHomeBusy = errors.New("another restore is running in this home")

// lockHome takes an exclusive lock on the home directory for as long as
// its descriptor stays open: a second restore (or recovery) must not undo
// or remove the staging of one that is running.
func lockHome(fd int, homePath string) error {
	err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
	if errors.Is(err, unix.EWOULDBLOCK) {
		return fmt.Errorf("%w (%s); wait for it to finish", ErrHomeBusy, homePath)
	}
	if err != nil && !errors.Is(err, unix.ENOLCK) && !errors.Is(err, unix.ENOTSUP) {
		return fmt.Errorf("lock home %s: %w", homePath, err)
	}
	return nil // a filesystem without locks: proceed unguarded
}

func (r *restorer) closeFDs() {
	r.manifests.close()
	for _, fd := range []int{r.home, r.stageFD, r.tree, r.disp} {
		if fd >= 0 {
			unix.Close(fd)
		}
	}
}

func (r *restorer) abs(rel string) string { return r.o.Home.Join(rel) }

func (r *restorer) openPlan(ctx context.Context) (*fetch.Plan, error) {
	st := r.o.Store
	if r.manifests != nil {
		st = r.manifests
	}
	var layers []string // the chain, when the record is at hand: its layers are requested at once
	if r.s.record != nil {
		if rec, err := r.s.record.get(); err == nil {
			layers = rec.Layers()
		}
	}
	pr, err := fetch.OpenPlan(ctx, st, r.id, r.o.Selector, r.o.Include, r.o.Exclude, layers...)
	if err == nil {
		pr.Filter.KeepModes = r.o.KeepModes
	}
	return pr, err
}
