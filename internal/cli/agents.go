package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"

	"github.com/homesnap/homesnap/internal/check"
	"github.com/homesnap/homesnap/internal/homefs"
	"github.com/homesnap/homesnap/internal/jenkins"
	"github.com/homesnap/homesnap/internal/repo"
	"github.com/homesnap/homesnap/internal/selector"
	"github.com/homesnap/homesnap/internal/store"
)

// AgentConfig holds restore's settings for the agent-continuity check and
// for a master.key kept out of the store.
type AgentConfig struct {
	CheckAgents            bool   `ignored:"true" flag:"check-agents" desc:"deprecated: run homesnap check-agents (this flag stops working in the next release; HOMESNAP_CHECK_AGENTS is refused)"`
	Compare                string `envconfig:"HOMESNAP_COMPARE" flag:"compare" desc:"check-agents: the state agents know now (home, head or a snapshot ID), compared node by node with the checked one"`
	ShowSecrets            bool   `envconfig:"HOMESNAP_SHOW_SECRETS" flag:"show-secrets" desc:"check-agents prints every inbound agent's full JENKINS_SECRET (a credential; otherwise a fingerprint)"`
	RequireAgentContinuity bool   `envconfig:"HOMESNAP_REQUIRE_AGENT_CONTINUITY" flag:"require-agent-continuity" desc:"fail the restore, before anything is moved into place, when Jenkins would regenerate keys or an agent could not get back in"`
	MasterKeyFile          string `envconfig:"HOMESNAP_MASTER_KEY_FILE" flag:"master-key-file" desc:"secrets/master.key kept out of the store (a mounted Secret): it must unwrap the snapshot's keys, and is installed into the home after the restore"`
}

// errContinuity is returned once the report has said why (exit status 1).
var errContinuity = errors.New("agent continuity would break")

// agentReport is the JSON form of --check-agents.
type agentReport struct {
	Checked    string              `json:"checked"` // "home PATH" or "snapshot ID"
	State      *jenkins.State      `json:"state"`
	Before     string              `json:"compared_with,omitempty"`
	Comparison *jenkins.Comparison `json:"comparison,omitempty"`
	Continuity bool                `json:"continuity"`
}

// checkAgents is restore --check-agents.
func checkAgents(ctx context.Context, cfg *restoreConfig, st store.Store, stdout io.Writer, log zerolog.Logger) error {
	opts, err := agentOptions(cfg)
	if err != nil {
		return err
	}
	subject := "home"
	if cfg.Snapshot != "" {
		subject = cfg.Snapshot
	}
	rep := &agentReport{}
	if rep.State, rep.Checked, err = loadState(ctx, cfg, st, subject, opts); err != nil {
		log.Error().Err(err).Msg("cannot check agent continuity")
		return err
	}
	rep.Continuity = !rep.State.Breaks()
	if cfg.Compare != "" {
		var before *jenkins.State
		if before, rep.Before, err = loadState(ctx, cfg, st, cfg.Compare, opts); err != nil {
			log.Error().Err(err).Msg("cannot check agent continuity")
			return err
		}
		rep.Comparison = jenkins.Compare(before, rep.State)
		rep.Continuity = rep.Continuity && !rep.Comparison.Breaks
	}
	if cfg.ShowSecrets {
		rep.State.RevealSecrets()
	}
	if cfg.Output == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(stdout, "checked:     %s\n", rep.Checked)
		rep.State.WriteText(stdout)
		if rep.Comparison != nil {
			fmt.Fprintf(stdout, "\ncompared with %s (the state agents know now):\n", rep.Before)
			rep.Comparison.WriteText(stdout)
		}
	}
	if !rep.Continuity {
		return errContinuity
	}
	return nil
}

// loadState inspects "home", "head" or a snapshot ID.
func loadState(ctx context.Context, cfg *restoreConfig, st store.Store, ref string, opts jenkins.Options) (*jenkins.State, string, error) {
	if ref == "home" {
		if cfg.Home == "" {
			return nil, "", usageError{errors.New("no home given: set --home, HOMESNAP_HOME or JENKINS_HOME")}
		}
		s, err := inspectHome(cfg.Home, opts)
		if err != nil {
			return nil, "", fmt.Errorf("home %s: %w", cfg.Home, err)
		}
		return s, "home " + cfg.Home, nil
	}
	if st == nil {
		return nil, "", usageError{fmt.Errorf("checking snapshot %q needs --store", ref)}
	}
	id := ref
	if ref == "head" {
		id = ""
	}
	sfs, err := check.OpenSnapshotFS(ctx, st, id, jenkins.Needed)
	if err != nil {
		return nil, "", err
	}
	s, err := jenkins.Inspect(sfs, opts)
	if err != nil {
		return nil, "", fmt.Errorf("snapshot %s: %w", sfs.ID(), err)
	}
	return s, "snapshot " + sfs.ID(), nil
}

// agentOptions reads the master key file, if one is set.
func agentOptions(cfg *restoreConfig) (jenkins.Options, error) {
	if cfg.MasterKeyFile == "" {
		return jenkins.Options{}, nil
	}
	key, err := readMasterKeyFile(cfg.MasterKeyFile)
	return jenkins.Options{MasterKey: key}, err
}

// readMasterKeyFile reads a mounted master.key. Its contents never appear
// in a message.
func readMasterKeyFile(p string) ([]byte, error) {
	key, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("master key file: %w (mount the Secret holding secrets/master.key there, or unset --master-key-file)", err)
	}
	if len(bytes.TrimSpace(key)) == 0 {
		return nil, fmt.Errorf("master key file %s is empty: it must hold the contents of the controller's secrets/master.key", p)
	}
	return key, nil
}

// agentCheck is the check a restore runs on the home as it will be, before
// anything is moved into place: a log line per problem and a summary line.
// current is the home as it is now when it already holds keys (a
// persistent volume): then every node and the identity are compared with
// it. The check fails when a supplied master key does not unwrap the keys
// (Jenkins would silently regenerate them all), and when require is set
// and continuity would break.
func agentCheck(c agentCheckOptions, log zerolog.Logger) func(ctx context.Context, staged fs.FS) error {
	masterKey, require, current := c.masterKey, c.require, c.current
	return func(ctx context.Context, staged fs.FS) error {
		s, err := jenkins.Inspect(staged, jenkins.Options{MasterKey: masterKey})
		if err != nil {
			return fmt.Errorf("agent check: %w", err)
		}
		for _, p := range s.Problems {
			ev := log.Info()
			if p.Breaks {
				ev = log.Warn()
			}
			ev.Str("path", p.Path).Bool("breaks_continuity", p.Breaks).Msg(p.Message)
		}
		breaks, summary := s.Breaks(), s.Summary()
		if current != nil {
			c := jenkins.Compare(current, s)
			logComparison(log, c, "compared with the home as it is now")
			breaks = breaks || c.Breaks
			if c.Breaks {
				summary = c.Summary() + " (compared with the home as it is now); " + summary
			}
		}
		if breaks {
			log.Warn().Int("nodes", len(s.Nodes)).Msg(summary)
		} else {
			log.Info().Int("nodes", len(s.Nodes)).Msg(summary)
		}
		if masterKey != nil {
			for _, k := range s.Keys {
				if !k.OK {
					return fmt.Errorf("the master key file does not unwrap %s (%s): it is not the master.key of this home; Jenkins would start, silently regenerate its keys and break every agent and credential", k.Path, k.Error)
				}
			}
		}
		if require && breaks {
			return fmt.Errorf("%w (--require-agent-continuity): %s", errContinuity, summary)
		}
		return nil
	}
}

type agentCheckOptions struct {
	masterKey []byte         // from --master-key-file: it must unwrap every key
	require   bool           // --require-agent-continuity
	current   *jenkins.State // the home before the restore, when it has keys
}

// logComparison logs every node that will not get back in as before, and
// the identity when it changes.
func logComparison(log zerolog.Logger, c *jenkins.Comparison, what string) {
	for _, n := range c.Nodes {
		if n.Breaks {
			log.Warn().Str("node", n.Name).Str("kind", string(n.Kind)).Str("verdict", string(n.Verdict)).
				Str("before", n.Before).Str("after", n.After).Msg(n.Message + " (" + what + ")")
		}
	}
	if c.Identity == "changes" {
		log.Warn().Str("before", c.IdentityBefore).Str("after", c.IdentityAfter).
			Msg("the controller's instance identity changes: agents that pin it refuse the controller (" + what + ")")
	}
}

// currentHome inspects the home before a restore when it already holds
// keys, so that the restore can say what changes for its agents.
func currentHome(home string) *jenkins.State {
	d, err := homefs.Open(home)
	if err != nil {
		return nil
	}
	defer d.Close()
	var st unix.Stat_t
	if d.Lstat(jenkins.MasterKeyPath, &st) != nil {
		return nil
	}
	s, err := jenkins.Inspect(homefs.FS(d), jenkins.Options{})
	if err != nil {
		return nil
	}
	return s
}

// inspectHome runs the agent check on a home on disk, through homefs: no
// symlink is followed, no file but a regular one is read.
func inspectHome(home string, opts jenkins.Options) (*jenkins.State, error) {
	d, err := homefs.Open(home)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return jenkins.Inspect(homefs.FS(d), opts)
}

// ownsMasterKey reports whether a snapshot's selection covers master.key
// (a restore then makes the home's equal to the snapshot's, even absent).
func ownsMasterKey(sfs *check.SnapshotFS) bool {
	sel, err := selector.New(selector.Spec(sfs.Header.Selection))
	return err != nil || sel.Selected(jenkins.MasterKeyPath)
}

// installMasterKey puts the supplied master key at secrets/master.key (mode
// 0600, owned like secrets/ when running as root). A different key already
// there is moved aside, never deleted. It writes through homefs: a symlink
// planted at secrets/, at master.key or at the temporary name is never
// written through.
func installMasterKey(home string, key []byte, log zerolog.Logger) error {
	dst := filepath.Join(home, filepath.FromSlash(jenkins.MasterKeyPath))
	if err := writeMasterKey(home, key, log); err != nil {
		return fmt.Errorf("install master key into %s: %w", dst, err)
	}
	log.Info().Str("path", dst).Msg("master key installed from the master key file")
	return nil
}

func writeMasterKey(home string, key []byte, log zerolog.Logger) error {
	d, err := homefs.Open(home)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Mkdir(jenkins.SecretsDir, 0o700); err != nil {
		return err
	}
	var owner *homefs.Owner
	if os.Geteuid() == 0 {
		var st unix.Stat_t
		if err := d.Lstat(jenkins.SecretsDir, &st); err != nil {
			return err
		}
		owner = &homefs.Owner{UID: int(st.Uid), GID: int(st.Gid)}
	}
	old, err := d.ReadFile(jenkins.MasterKeyPath, jenkins.MaxKeyFile)
	switch {
	case err == nil && bytes.Equal(old, key):
		return nil
	case errors.Is(err, unix.ENOENT):
	default: // another key, or something that is not one: kept aside
		aside := jenkins.MasterKeyPath + ".homesnap-replaced-" + time.Now().UTC().Format("20060102T150405Z")
		if err := d.Rename(jenkins.MasterKeyPath, d, aside); err != nil {
			return err
		}
		log.Warn().Str("moved_to", filepath.Join(home, filepath.FromSlash(aside))).Msg("secrets/master.key differed from the master key file; the old one was moved aside")
	}
	return d.WriteFile(jenkins.MasterKeyPath, ".master.key.homesnap-tmp", key, 0o600, owner)
}

// restoreCheck is the agent check of one restore: on the home as it will
// be, before the commit (restore.Options.BeforeCommit), then installing a
// supplied master key after it.
type restoreCheck struct {
	opts agentCheckOptions
	log  zerolog.Logger
}

// prepareAgentCheck reads the master key file and the home as it is now,
// before the restore changes it.
func prepareAgentCheck(cfg *restoreConfig, log zerolog.Logger) (*restoreCheck, error) {
	opts, err := agentOptions(cfg)
	if err != nil {
		log.Error().Err(err).Msg("restore refused; nothing was changed in the home")
		return nil, err
	}
	return &restoreCheck{
		opts: agentCheckOptions{masterKey: opts.MasterKey, require: cfg.RequireAgentContinuity, current: currentHome(cfg.Home)},
		log:  log,
	}, nil
}

// beforeCommit is the restore's hook: staged shows the home as the restore
// will leave it.
func (c *restoreCheck) beforeCommit(ctx context.Context, staged fs.FS) error {
	return agentCheck(c.opts, c.log)(ctx, staged)
}

// afterCommit installs the supplied master key. On a first boot (nothing
// restored) the key is first checked against the keys the home has.
func (c *restoreCheck) afterCommit(ctx context.Context, home string, empty bool) error {
	if c.opts.masterKey == nil {
		return nil
	}
	if empty {
		if d, err := homefs.Open(home); err == nil {
			first := agentCheckOptions{masterKey: c.opts.masterKey, require: c.opts.require}
			err := agentCheck(first, c.log)(ctx, homefs.FS(d))
			d.Close()
			if err != nil {
				return err
			}
		}
	}
	return installMasterKey(home, c.opts.masterKey, c.log)
}

// guardKeys runs before every snapshot: it compares the home with the head
// snapshot, and refuses to replace the head when the home's keys were
// regenerated (a controller that started without its restore), so a good
// head is never replaced silently. Nodes added or removed are normal
// administration and pass. accept commits anyway, still loudly.
func guardKeys(ctx context.Context, home string, st store.Store, accept bool, log zerolog.Logger) error {
	if home == "" {
		return nil // the snapshot says what is missing
	}
	err := compareWithHead(ctx, home, st, accept, log)
	if err != nil && !errors.Is(err, errContinuity) {
		log.Error().Err(err).Str("home", home).Str("store", st.String()).Msg("agent check before the snapshot failed")
	}
	return err
}

func compareWithHead(ctx context.Context, home string, st store.Store, accept bool, log zerolog.Logger) error {
	d, err := homefs.Open(home)
	if err != nil {
		return fmt.Errorf("agent check of %s: %w", home, err)
	}
	defer d.Close()
	var secrets unix.Stat_t
	if err := d.Lstat(jenkins.SecretsDir, &secrets); errors.Is(err, unix.ENOENT) {
		return nil // secrets/ vanished: the snapshot's shrink guard refuses it, naming it
	}
	now, err := jenkins.Inspect(homefs.FS(d), jenkins.Options{})
	if err != nil {
		return fmt.Errorf("agent check of %s: %w", home, err)
	}
	sfs, err := check.OpenSnapshotFS(ctx, st, "", jenkins.Needed)
	if errors.Is(err, repo.ErrNoSnapshot) {
		for _, p := range now.Problems {
			if p.Breaks {
				log.Warn().Str("path", p.Path).Msg(p.Message)
			}
		}
		return nil
	}
	if err != nil {
		return err
	}
	var opts jenkins.Options
	if !ownsMasterKey(sfs) {
		opts.MasterKey, _ = d.ReadFile(jenkins.MasterKeyPath, jenkins.MaxKeyFile)
	}
	head, err := jenkins.Inspect(sfs, opts)
	if err != nil {
		return fmt.Errorf("agent check of snapshot %s: %w", sfs.ID(), err)
	}
	c := jenkins.Compare(head, now)
	// A secret or the identity changed, or keys the head could read no
	// longer unwrap. (A missing agent key alone is not refused: Jenkins
	// creates it lazily for the first inbound node.)
	if !c.KeysChanged && !(now.KeysUnreadable() && !head.KeysUnreadable()) {
		return nil
	}
	what := "compared with head snapshot " + sfs.ID()
	for _, p := range now.Problems {
		if p.Breaks {
			log.Error().Str("path", p.Path).Msg(p.Message)
		}
	}
	logComparison(log, c, what)
	if accept {
		log.Error().Str("head", sfs.ID()).Msg("the home's keys changed since the head snapshot; committing anyway (--accept-key-change)")
		return nil
	}
	err = fmt.Errorf("%w: the home's keys changed since the head snapshot %s (%s); the head is kept: restore it before Jenkins starts, or pass --accept-key-change if the keys were rotated on purpose", errContinuity, sfs.ID(), c.Summary())
	log.Error().Err(err).Msg("snapshot refused")
	return err
}
