package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/homesnap/homesnap/internal/agents"
	"github.com/homesnap/homesnap/internal/restore"
	"github.com/homesnap/homesnap/internal/selector"
	"github.com/homesnap/homesnap/internal/store"
)

type restoreConfig struct {
	Common
	Snapshot   string        `envconfig:"HOMESNAP_SNAPSHOT" flag:"snapshot" desc:"snapshot ID to restore, verify or check, or head (default: the head)"`
	At         string        `envconfig:"HOMESNAP_AT" flag:"at" desc:"choose the newest snapshot taken at or before this time (RFC 3339, e.g. 2026-12-01T14:00:00Z)"`
	AllowEmpty bool          `envconfig:"HOMESNAP_ALLOW_EMPTY" flag:"allow-empty" desc:"succeed without changes when the store has no snapshot yet (first boot)"`
	Timeout    time.Duration `envconfig:"HOMESNAP_TIMEOUT" default:"10m" flag:"timeout" oldflag:"deadline" oldenv:"HOMESNAP_DEADLINE" desc:"give up after this long, naming the store and the step (0: never); verify: only when given"`
	Target     string        `envconfig:"HOMESNAP_TARGET" flag:"target" desc:"restore into this directory instead of the home (inspection); the home is left alone"`
	DryRun     bool          `envconfig:"HOMESNAP_DRY_RUN" flag:"dry-run" oldenv:"HOMESNAP_RESTORE_DRY_RUN" desc:"print what would be written, removed and fetched, change nothing"`
	Force      bool          `envconfig:"HOMESNAP_FORCE" flag:"force" oldenv:"HOMESNAP_RESTORE_FORCE" desc:"restore over a home that holds data the store does not; what it replaces or removes is kept in .homesnap-displaced-*"`
	Chown      string        `envconfig:"HOMESNAP_CHOWN" flag:"chown" desc:"UID:GID owning everything restored (as root), instead of the snapshot's owners"`
	KeepModes  bool          `envconfig:"HOMESNAP_KEEP_MODES" flag:"keep-modes" desc:"restore setuid, setgid and world-writable bits as stored (dropped by default: a Jenkins home needs none)"`
	Only       []string      `envconfig:"HOMESNAP_ONLY" flag:"only" oldflag:"include" oldenv:"HOMESNAP_RESTORE_INCLUDE" desc:"restore only paths matching this glob (one job, a folder); others are neither written nor removed"`
	Skip       []string      `envconfig:"HOMESNAP_SKIP" flag:"skip" oldflag:"exclude" oldenv:"HOMESNAP_RESTORE_EXCLUDE" desc:"leave paths matching this glob alone"`
	List       bool          `ignored:"true" flag:"list" desc:"deprecated: run homesnap list (this flag stops working in the next release; HOMESNAP_LIST is refused)"`
	OutputFormat
	RestoreSelection
	AgentConfig
	VerifyConfig
	ProgressConfig
	AgeIdentity

	ls    bool // the ls command
	at    time.Time
	owner *restore.Owner
	sel   *selector.Selector
}

func (c *restoreConfig) validate() error {
	if err := c.Common.validate(); err != nil {
		return err
	}
	if err := c.OutputFormat.validate(); err != nil {
		return err
	}
	if err := nonNegative("--timeout/HOMESNAP_TIMEOUT", c.Timeout, "0 means none"); err != nil {
		return err
	}
	if c.verifying() && c.List {
		return errVerifyAndList
	}
	if err := c.ProgressConfig.validate(); err != nil {
		return err
	}
	var err error
	if c.sel, err = c.RestoreSelection.selector(); err != nil {
		return err
	}
	if err := checkSnapshotName(c.Snapshot, "--snapshot/HOMESNAP_SNAPSHOT"); err != nil {
		return err
	}
	if c.At != "" {
		if c.Snapshot != "" {
			return usageError{errors.New("--at and --snapshot both choose the snapshot: give one")}
		}
		t, err := time.Parse(time.RFC3339, c.At)
		if err != nil {
			return usageError{fmt.Errorf("--at/HOMESNAP_AT %q: want an RFC 3339 time such as 2026-12-01T14:00:00Z", c.At)}
		}
		c.at = t
	}
	if c.Chown != "" {
		u, g, ok := strings.Cut(c.Chown, ":")
		uid, uerr := strconv.ParseUint(u, 10, 31)
		gid, gerr := strconv.ParseUint(g, 10, 31)
		if !ok || uerr != nil || gerr != nil {
			return usageError{fmt.Errorf("--chown/HOMESNAP_CHOWN %q: want numeric UID:GID such as 1000:1000", c.Chown)}
		}
		c.owner = &restore.Owner{UID: int(uid), GID: int(gid)}
	}
	if c.Target != "" {
		t, err := filepath.Abs(c.Target)
		if err != nil {
			return usageError{fmt.Errorf("--target %q: %w", c.Target, err)}
		}
		c.Target = t
	}
	return nil
}

const restoreAbout = `Restores a snapshot of a Jenkins home from a store, before the controller
starts (init container) or by hand (disaster recovery). It first decides
from the home, the mark a restore or snapshot left in it, and the store:
a home marked with the head is left alone, changed since or not (exit 0,
without walking it), a home behind it gets only what changed, and a home whose
data the store does not hold is refused (exit 3) unless --force. Only the
selected paths (nodes/, secrets/, jobs/, identity files by default) are
changed; the home is left as it was if anything fails.`

// Restore is the restore command.
func Restore(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cfg restoreConfig
	log, err := configure("restore", restoreAbout, &cfg, &cfg.Common, args, stderr)
	if err != nil {
		return err
	}
	for _, m := range modeVariables {
		if cfg.given[m.flag] {
			log.Warn().Msgf("restore --%s is deprecated: run `%s` instead (the flag stops working in the next release)", m.flag, m.command)
		}
	}
	return restoreOrInspect(ctx, &cfg, log, stdout, stderr)
}

// restoreOrInspect runs a restore, or the command that inspects the store
// or the home instead (list, verify, check-agents) when cfg selects one.
func restoreOrInspect(ctx context.Context, cfg *restoreConfig, log zerolog.Logger, stdout, stderr io.Writer) error {
	// One deadline for everything, the store's opening included, so that
	// an unreachable endpoint cannot hold a pod in its init phase.
	limit := cfg.Timeout
	if cfg.verifying() && !cfg.given["timeout"] {
		limit = 0 // a check of a whole store is not an init container's step: bounded only when asked
	}
	ctx, cancel := withTimeout(ctx, limit)
	defer cancel()
	var stepMu sync.Mutex
	step := "opening the store"
	setStep := func(s string) { stepMu.Lock(); step = s; stepMu.Unlock() }
	fail := func(msg string, err error) error {
		if errors.Is(err, context.DeadlineExceeded) && limit > 0 {
			stepMu.Lock()
			err = fmt.Errorf("gave up after %v (--timeout) while %s at %s: %w", limit, step, store.Redact(cfg.Store), err)
			stepMu.Unlock()
		}
		log.Error().Err(err).Str("home", cfg.Home).Str("store", store.Redact(cfg.Store)).Msg(msg)
		return reported{err}
	}
	if cfg.CheckAgents && cfg.Store == "" {
		return checkAgents(ctx, cfg, nil, stdout, log) // the home alone
	}
	st, err := store.Open(ctx, cfg.Store)
	if err != nil {
		return fail("cannot open the store", err)
	}
	defer st.Close()
	if cfg.List { // records are never encrypted: a key only verifies them
		setStep("listing snapshots")
		if err := list(ctx, &cfg.AgeIdentity, st, cfg.Output, stdout, log); err != nil {
			return fail("cannot list snapshots", err)
		}
		return nil
	}
	if cfg.verifying() {
		setStep("verifying snapshots")
		return verify(ctx, cfg, st, stdout, stderr, log)
	}
	// An encrypted store is read through age from here on; a missing or
	// wrong identity fails now, naming the recipients it needs.
	// --at is resolved there, on authenticated records, so that the
	// encryption, the agent check and the master key are checked on the
	// snapshot it chooses, not the head.
	setStep("checking the store's encryption and choosing the snapshot")
	snapshot := cfg.Snapshot
	if snapshot == "head" {
		snapshot = ""
	}
	dec, snapshot, err := restoreStack(ctx, &cfg.AgeIdentity, st, snapshot, cfg.at, log)
	if err != nil {
		if cfg.ls || cfg.CheckAgents {
			return fail("cannot read the snapshot", err)
		}
		return fail("restore failed; nothing was changed in the home", err)
	}
	if cfg.Snapshot != "head" || !cfg.at.IsZero() { // the agent check compares "head" by name
		cfg.Snapshot = snapshot // "" for an empty store: the decision says what that means
	}
	st = dec.Store
	if cfg.ls {
		setStep("listing the snapshot's files")
		if err := listFiles(ctx, st, snapshot, cfg.json(), stdout); err != nil {
			return fail("cannot list the snapshot's files", err)
		}
		return nil
	}
	if cfg.CheckAgents {
		return checkAgents(ctx, cfg, st, stdout, log)
	}
	path := cfg.Home
	if cfg.Target != "" {
		path = cfg.Target
	}
	if path == "" {
		return usageError{errors.New("no home given: set --home, HOMESNAP_HOME or JENKINS_HOME (or --target)")}
	}
	key, err := cfg.masterKey()
	if err != nil {
		log.Error().Err(err).Msg("restore refused; nothing was changed in the home")
		return reported{err}
	}
	// Opened once, here: created on a first boot, never by a dry run.
	home, err := openHome(path, !cfg.DryRun, cfg.DryRun)
	if err != nil {
		return fail("restore failed", err)
	}
	defer home.Close()
	now := home // the home as it is now, compared with the staged one
	if cfg.Target != "" {
		if now, err = openHome(cfg.Home, false, false); err == nil {
			defer now.Close()
		}
	}
	check := agents.NewRestoreCheck(now, key, cfg.RequireAgentContinuity, log)
	opts := restore.Options{
		Home: home, Store: st, Snapshot: snapshot, Jobs: cfg.Jobs, AllowEmpty: cfg.AllowEmpty, Selector: cfg.sel,
		Include: cfg.Only, Exclude: cfg.Skip, Force: cfg.Force, DryRun: cfg.DryRun, Chown: cfg.owner, KeepModes: cfg.KeepModes, Log: log,
		Step: setStep, AllowOlderHead: cfg.AllowUnauthenticated,
		BeforeCommit: check.BeforeCommit, // agent continuity, on the staged tree
	}
	if cfg.DryRun && !cfg.json() { // the JSON result has the counts only
		opts.OnChange = func(c restore.Change) { fmt.Fprintf(stdout, "%s\t%s\t%d\n", c.Kind, c.Path, c.Size) }
	}
	var progress reporter
	if !cfg.DryRun {
		progress = newProgress(cfg.Progress, "restore", stderr, log)
		opts.Progress = progressOf(progress)
	}
	res, err := restore.Restore(ctx, opts)
	if progress != nil {
		progress.stop()
	}
	if err == nil && !cfg.DryRun {
		err = check.AfterCommit(ctx, home, res.Decision.Action == restore.ActFirstBoot)
	}
	if err != nil {
		return fail("restore failed", err)
	}
	if res.Restore != nil && !cfg.DryRun {
		warnModes(log, res.Restore, cfg.KeepModes)
	}
	logOutcome(log, path, st.String(), res)
	if len(cfg.Only) > 0 && res.Restore != nil && res.Restore.Entries <= 1 { // the home's root alone
		return usageError{fmt.Errorf("--only %s matched nothing in snapshot %s: nothing was restored. Patterns match paths below the home, such as jobs/NAME; a --dry-run restore into an empty --target lists what the snapshot holds",
			strings.Join(cfg.Only, " --only "), res.Snapshot)}
	}
	if cfg.json() {
		return writeJSON(stdout, newRestoreReport(path, cfg.DryRun, res, check.Outcome()))
	}
	if !cfg.DryRun {
		fmt.Fprintf(stdout, "%s\t%s\n", res.Decision.Action, res.Snapshot)
	}
	return nil
}

// warnModes says, once, what a restore did not take from the store as
// stored, and what a root restore without --chown did take: its owners.
func warnModes(log zerolog.Logger, r *restore.Result, keep bool) {
	modes := fmt.Sprintf("%d paths lost setuid, setgid or world-writable bits (--keep-modes keeps them)", r.ModesDropped)
	if keep {
		modes = "modes were applied as stored (--keep-modes), setuid, setgid and world-writable bits included"
	}
	ev := log.Warn().Int64("modes_dropped", r.ModesDropped)
	if r.ModesExample != "" {
		ev = ev.Str("example", r.ModesExample)
	}
	switch {
	case r.OwnersAsStored:
		ev.Msg("restoring as root without --chown: paths got the snapshot's owners as stored, uid 0 included (set --chown 1000:1000 to give them to the Jenkins user); " + modes)
	case r.ModesDropped > 0:
		ev.Msg(modes + ": a Jenkins home needs none, and a store must not grant privileges")
	}
}

// logOutcome says what the restore decided and did, in one line.
func logOutcome(log zerolog.Logger, home, storeName string, res *restore.HomeResult) {
	ev := log.Info().Str("decision", string(res.Decision.Action)).Str("reason", res.Decision.Reason).
		Str("snapshot", res.Snapshot).Str("home", home).Str("store", storeName).Bool("walked", res.Walked)
	r := res.Restore
	if r == nil {
		msg := map[restore.Action]string{
			restore.ActNothing:   "nothing to do: the home is left as it is",
			restore.ActFirstBoot: "the store has no snapshot yet; nothing restored (first boot)",
		}[res.Decision.Action]
		ev.Msg(msg)
		return
	}
	ev = ev.Int64("entries", r.Entries).Int64("files", r.Files).Int64("bytes", r.Bytes).
		Int64("fetched", r.Fetched).Int64("fetched_bytes", r.FetchedBytes).Int64("written", r.Written).
		Int64("unchanged", r.Unchanged).Int64("meta_fixed", r.MetaFixed).Int64("removed", r.Removed).
		Str("displaced", r.Displaced).Bool("marked", res.Marked).Dur("elapsed", r.Elapsed)
	switch {
	case r.DryRun:
		ev.Msg("dry run: nothing was changed")
	case r.Displaced != "":
		ev.Msg("restore complete; the local paths it replaced or removed are in " + r.Displaced)
	default:
		ev.Msg("restore complete")
	}
}
