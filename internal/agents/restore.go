package agents

import (
	"context"
	"fmt"
	"io/fs"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"

	"github.com/homesnap/homesnap/internal/homefs"
	"github.com/homesnap/homesnap/internal/jenkins"
)

// RestoreCheck is the agent check of one restore: on the home as it will
// be, before the commit (BeforeCommit, for restore.Options.BeforeCommit),
// then installing a master key kept out of the store after it
// (AfterCommit).
type RestoreCheck struct {
	masterKey []byte         // from --master-key-file: it must unwrap every key
	require   bool           // --require-agent-continuity
	current   *jenkins.State // the home before the restore, when it has keys
	log       zerolog.Logger
	outcome   *Outcome // the last check's, for the restore's result
}

// Outcome is what a restore's check found on the tree it judged (the
// staged one, or a first boot's home).
type Outcome struct {
	Nodes      int    // the nodes Jenkins will load
	Continuity bool   // every agent gets back in as before
	Summary    string // the summary line the check logged
}

// Outcome returns what the check found, nil when it did not run (nothing
// was restored).
func (c *RestoreCheck) Outcome() *Outcome { return c.outcome }

// NewRestoreCheck reads now, the home as it is before the restore (nil or
// without keys: nothing to compare with). masterKey, when set, must
// unwrap the restored keys and is installed after the commit; require
// fails the restore when continuity would break.
func NewRestoreCheck(now *homefs.Home, masterKey []byte, require bool, log zerolog.Logger) *RestoreCheck {
	return &RestoreCheck{masterKey: masterKey, require: require, current: keyedState(now), log: log}
}

// keyedState inspects a home that already holds keys (a persistent
// volume), so that the restore can say what changes for its agents.
func keyedState(home *homefs.Home) *jenkins.State {
	if !home.Exists() {
		return nil
	}
	var st unix.Stat_t
	if home.Dir.Lstat(jenkins.MasterKeyPath, &st) != nil {
		return nil
	}
	s, err := jenkins.Inspect(homefs.FS(home.Dir), jenkins.Options{})
	if err != nil {
		return nil
	}
	return s
}

// BeforeCommit checks staged, the home as the restore will leave it: a
// log line per problem and a summary line. When the home already held
// keys, every node and the identity are compared with it. It fails when
// the master key does not unwrap the keys (Jenkins would silently
// regenerate them all), and, with require, when continuity would break.
func (c *RestoreCheck) BeforeCommit(ctx context.Context, staged fs.FS) error {
	return c.check(staged, c.current)
}

func (c *RestoreCheck) check(tree fs.FS, current *jenkins.State) error {
	s, err := jenkins.Inspect(tree, jenkins.Options{MasterKey: c.masterKey})
	if err != nil {
		return fmt.Errorf("agent check: %w", err)
	}
	for _, p := range s.Problems {
		ev := c.log.Info()
		if p.Breaks {
			ev = c.log.Warn()
		}
		ev.Str("path", p.Path).Bool("breaks_continuity", p.Breaks).Msg(p.Message)
	}
	breaks, summary := s.Breaks(), s.Summary()
	if current != nil {
		cmp := jenkins.Compare(current, s)
		logComparison(c.log, cmp, "compared with the home as it is now")
		breaks = breaks || cmp.Breaks
		if cmp.Breaks {
			summary = cmp.Summary() + " (compared with the home as it is now); " + summary
		}
	}
	c.outcome = &Outcome{Nodes: len(s.Nodes), Continuity: !breaks, Summary: summary}
	if breaks {
		c.log.Warn().Int("nodes", len(s.Nodes)).Msg(summary)
	} else {
		c.log.Info().Int("nodes", len(s.Nodes)).Msg(summary)
	}
	if c.masterKey != nil {
		for _, k := range s.Keys {
			if !k.OK {
				return fmt.Errorf("the master key file does not unwrap %s (%s): it is not the master.key of this home; Jenkins would start, silently regenerate its keys and break every agent and credential", k.Path, k.Error)
			}
		}
	}
	if c.require && breaks {
		return fmt.Errorf("%w (--require-agent-continuity): %s", ErrContinuity, summary)
	}
	return nil
}

// AfterCommit installs the master key into home, the restored one. On a
// first boot (nothing restored) the key is first checked against the keys
// the home has.
func (c *RestoreCheck) AfterCommit(ctx context.Context, home *homefs.Home, firstBoot bool) error {
	if c.masterKey == nil {
		return nil
	}
	if firstBoot && home.Exists() {
		if err := c.check(homefs.FS(home.Dir), nil); err != nil {
			return err
		}
	}
	return InstallMasterKey(home, c.masterKey, c.log)
}
