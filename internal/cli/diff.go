package cli

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"iter"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/homesnap/homesnap/internal/archive"
	"github.com/homesnap/homesnap/internal/fetch"
	"github.com/homesnap/homesnap/internal/homefs"
	"github.com/homesnap/homesnap/internal/repo"
	"github.com/homesnap/homesnap/internal/scan"
	"github.com/homesnap/homesnap/internal/selector"
	"github.com/homesnap/homesnap/internal/store"
)

type diffConfig struct{ RestoreSettings }

func (diffConfig) takes() []string { return append([]string{"timeout", "output"}, keyFlags...) }

func (diffConfig) synopsis() string { return "A [B] [flags]" }

const diffAbout = `Shows what differs between two snapshots, from their manifests alone:
homesnap diff A B, each an ID, head, or an RFC 3339 time (the newest
snapshot taken at or before it). With one snapshot, compares it with the
home (--home), walked over the snapshot's selection without following
symlinks: size, modification time, mode, owner and link target, as a
snapshot detects changes (contents are not read). One line per path in
walk order: "+ path" (only in B, or the home), "- path" (only in A),
"M path (what)" where what lists type, size, mode, owner, mtime, link and
content (when both manifests hold its hash). Exits 0 whether or not they
differ. Nothing is changed.`

// Diff is the diff command.
func Diff(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cfg diffConfig
	refs, args := positional("diff", &diffConfig{}, args)
	log, err := configure("diff", diffAbout, &cfg, &cfg.Common, args, stderr)
	if err != nil {
		return err
	}
	if len(refs) == 0 || len(refs) > 2 {
		return usageError{fmt.Errorf("diff takes one or two snapshots, got %d: homesnap diff A B compares two, homesnap diff A --home H a snapshot with the home (see homesnap diff --help)", len(refs))}
	}
	if len(refs) == 1 && cfg.Home == "" {
		return usageError{errors.New("diff with one snapshot compares it with the home: set --home, HOMESNAP_HOME or JENKINS_HOME, or name a second snapshot")}
	}
	for _, ref := range refs {
		if _, err := time.Parse(time.RFC3339, ref); err != nil {
			if err := checkSnapshotName(ref, "diff A B (each an ID, head, or an RFC 3339 time such as 2026-12-01T14:00:00Z)"); err != nil {
				return err
			}
		}
	}
	ctx, cancel := withTimeout(ctx, cfg.Timeout)
	defer cancel()
	fail := func(err error) error {
		if errors.Is(err, context.DeadlineExceeded) && cfg.Timeout > 0 {
			err = fmt.Errorf("gave up after %v (--timeout) at %s: %w", cfg.Timeout, store.Redact(cfg.Store), err)
		}
		log.Error().Err(err).Str("store", store.Redact(cfg.Store)).Msg("diff failed")
		return reported{err}
	}
	st, err := store.Open(ctx, cfg.Store)
	if err != nil {
		return fail(err)
	}
	defer st.Close()
	reader, err := openReader(ctx, &cfg.AgeIdentity, st, log)
	if err != nil {
		return fail(err)
	}
	old, err := openRef(ctx, reader, refs[0])
	if err != nil {
		return fail(err)
	}
	defer old.plan.Close()
	head := diffHead{Old: diffSide{Snapshot: old.id, Time: snapshotTime(old.id)}}
	var newer iter.Seq2[*archive.Entry, error]
	content := false
	if len(refs) == 2 {
		n, err := openRef(ctx, reader, refs[1])
		if err != nil {
			return fail(err)
		}
		defer n.plan.Close()
		head.New = diffSide{Snapshot: n.id, Time: snapshotTime(n.id)}
		newer, content = n.plan.All(ctx), true
	} else {
		home, err := openHome(cfg.Home, false, false)
		if err != nil {
			return fail(err)
		}
		defer home.Close()
		// The snapshot's own selection: what it would have recorded.
		sel, err := selector.New(selector.Spec(old.plan.Header().Selection))
		if err != nil {
			return fail(fmt.Errorf("snapshot %s: %w", old.id, err))
		}
		head.New = diffSide{Home: cfg.Home}
		newer = walkHome(ctx, home, sel, log)
	}
	changes := diffEntries(old.plan.All(ctx), newer, content)
	var counts [3]int
	counted := func(yield func(diffChange, error) bool) {
		for c, err := range changes {
			if err == nil {
				counts[c.kind]++
			}
			if !yield(c, err) {
				return
			}
		}
	}
	if cfg.json() {
		err = writeJSONStream(stdout, head, "changes", counted)
	} else {
		err = writeDiff(stdout, counted)
	}
	if err != nil {
		return fail(err)
	}
	log.Info().Str("old", old.id).Str("new", head.New.Snapshot+head.New.Home).
		Int("added", counts[added]).Int("removed", counts[removed]).Int("modified", counts[modified]).Msg("diff complete")
	return nil
}

// snapshotRef is a snapshot diff reads, its manifest open.
type snapshotRef struct {
	id   string
	plan *fetch.Plan
}

// openRef resolves ref (an ID, head, or an RFC 3339 time; checked by
// checkSnapshotName) as ls and a
// restore resolve --snapshot and --at, and opens its manifest through
// the stack a restore reads it through: authenticated, decrypted.
func openRef(ctx context.Context, r *storeReader, ref string) (*snapshotRef, error) {
	id, at := ref, time.Time{}
	if t, err := time.Parse(time.RFC3339, ref); err == nil {
		id, at = "", t
	} else if ref == "head" {
		id = ""
	}
	setup, id, err := r.choose(ctx, id, at)
	if err != nil {
		return nil, err
	}
	if id == "" && !at.IsZero() {
		return nil, fmt.Errorf("%w in %s yet", repo.ErrNoSnapshot, r.st)
	}
	id, plan, err := openSnapshot(ctx, setup.Store, id)
	if err != nil {
		return nil, err
	}
	return &snapshotRef{id, plan}, nil
}

// walkHome is the home's walk over sel, as a snapshot walks it.
func walkHome(ctx context.Context, home *homefs.Home, sel *selector.Selector, log zerolog.Logger) iter.Seq2[*archive.Entry, error] {
	return func(yield func(*archive.Entry, error) bool) {
		stopped := errors.New("stopped")
		skipped := func(rel, why string) { log.Debug().Str("path", rel).Msg("skipped: " + why) }
		err := scan.Walk(ctx, home, sel, skipped, func(e *archive.Entry) error {
			if !yield(e, nil) {
				return stopped
			}
			return nil
		})
		if err != nil && !errors.Is(err, stopped) {
			yield(nil, err)
		}
	}
}

type changeKind int

const (
	added changeKind = iota
	removed
	modified
)

// diffChange is one path that differs (the JSON form of a diff line).
type diffChange struct {
	Change string    `json:"change"`         // added, removed or modified
	Path   string    `json:"path"`           //
	What   []string  `json:"what,omitempty"` // modified: what differs
	Old    *fileJSON `json:"old,omitempty"`  // the path in A (removed, modified)
	New    *fileJSON `json:"new,omitempty"`  // in B or the home (added, modified)
	kind   changeKind
}

// diffSide is one side of a diff: a snapshot, or the home.
type diffSide struct {
	Snapshot string     `json:"snapshot,omitempty"`
	Time     *time.Time `json:"time,omitempty"`
	Home     string     `json:"home,omitempty"`
}

// diffHead is the start of diff's result; its "changes" follow.
type diffHead struct {
	Old diffSide `json:"old"`
	New diffSide `json:"new"`
}

// diffEntries merges two entry streams in walk order (archive.ComparePaths,
// the order of manifests and of the home's walk) into their differences,
// holding one entry of each at a time. content compares the files' hashes
// where both sides have one.
func diffEntries(old, new iter.Seq2[*archive.Entry, error], content bool) iter.Seq2[diffChange, error] {
	return func(yield func(diffChange, error) bool) {
		nextOld, stopOld := iter.Pull2(old)
		defer stopOld()
		nextNew, stopNew := iter.Pull2(new)
		defer stopNew()
		// pull skips the home's root, which a walk does not report.
		pull := func(next func() (*archive.Entry, error, bool)) (*archive.Entry, error) {
			for {
				e, err, ok := next()
				if !ok || err != nil || e.Path != "" {
					return e, err
				}
			}
		}
		o, err := pull(nextOld)
		if err != nil {
			yield(diffChange{}, err)
			return
		}
		n, err := pull(nextNew)
		for err == nil && (o != nil || n != nil) {
			var c *diffChange
			order := 0
			switch {
			case o == nil:
				order = 1
			case n == nil:
				order = -1
			default:
				order = archive.ComparePaths(o.Path, n.Path)
			}
			switch {
			case order > 0:
				c = &diffChange{Change: "added", Path: n.Path, New: newFileJSON(n), kind: added}
			case order < 0:
				c = &diffChange{Change: "removed", Path: o.Path, Old: newFileJSON(o), kind: removed}
			default:
				if what := differences(o, n, content); len(what) > 0 {
					c = &diffChange{Change: "modified", Path: o.Path, What: what, Old: newFileJSON(o), New: newFileJSON(n), kind: modified}
				}
			}
			if c != nil && !yield(*c, nil) {
				return
			}
			if order <= 0 {
				if o, err = pull(nextOld); err != nil {
					break
				}
			}
			if order >= 0 {
				n, err = pull(nextNew)
			}
		}
		if err != nil {
			yield(diffChange{}, err)
		}
	}
}

// differences says what differs between two entries of one path. A
// directory's mtime changes with its entries, which the diff lists, and a
// symlink's is not restored: only a file's counts.
func differences(o, n *archive.Entry, content bool) []string {
	if o.Type != n.Type {
		return []string{"type"}
	}
	var what []string
	add := func(differs bool, name string) {
		if differs {
			what = append(what, name)
		}
	}
	add(o.Size != n.Size, "size")
	add(o.Mode != n.Mode, "mode")
	add(o.UID != n.UID || o.GID != n.GID, "owner")
	add(o.Type == archive.TypeFile && o.MTime != n.MTime, "mtime")
	add(o.Link != n.Link, "link")
	add(content && o.Hash != nil && n.Hash != nil && *o.Hash != *n.Hash, "content")
	return what
}

// writeDiff prints one line per change.
func writeDiff(stdout io.Writer, changes iter.Seq2[diffChange, error]) error {
	w := bufio.NewWriter(stdout)
	for c, err := range changes {
		if err != nil {
			w.Flush()
			return err
		}
		switch c.kind {
		case added:
			fmt.Fprintf(w, "+ %s\n", c.Path)
		case removed:
			fmt.Fprintf(w, "- %s\n", c.Path)
		default:
			fmt.Fprintf(w, "M %s (%s)\n", c.Path, strings.Join(c.What, ", "))
		}
	}
	return w.Flush()
}

// positional separates a command's arguments from its flags wherever they
// stand (homesnap diff A B --store S, or diff --store S A B): the flag
// package stops at the first argument. cfg is a fresh configuration of
// the command, for its flags.
func positional(name string, cfg any, args []string) (pos, flags []string) {
	fs, _, _ := flagSet(name, cfg)
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(pos, args[i+1:]...), flags
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			pos = append(pos, a)
			continue
		}
		flags = append(flags, a)
		f := fs.Lookup(strings.TrimLeft(a, "-"))
		if f != nil && !isBoolFlag(f) && i+1 < len(args) { // --flag VALUE (not --flag=VALUE: no such name)
			i++
			flags = append(flags, args[i])
		}
	}
	return pos, flags
}

func isBoolFlag(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// checkSnapshotName refuses, before the store is read, what cannot name a
// snapshot: a mistake on the command line (exit 2), not a damaged store.
// where says what took it.
func checkSnapshotName(name, where string) error {
	if name == "" || name == "head" {
		return nil
	}
	if err := repo.CheckID(name); err != nil {
		return usageError{fmt.Errorf("%s: %w; `homesnap list` shows the store's snapshots", where, err)}
	}
	return nil
}
