package cli

import (
	"github.com/homesnap/homesnap/internal/selector"
)

// RestoreSelection is what a restore may change: the same settings, and
// the same variables, as the snapshot's selection, so that one ConfigMap
// feeding both containers keeps them equal. The snapshot's own recorded
// selection narrows it further; --only/--skip narrow it to a partial
// restore.
//
// Its flags are the one exception to "the variable is the flag's name":
// --select-include and --select-exclude read the snapshot's HOMESNAP_INCLUDE
// and HOMESNAP_EXCLUDE, and cannot be called --include/--exclude while those
// are the deprecated names of --only/--skip.
type RestoreSelection struct {
	Preset        string   `envconfig:"HOMESNAP_PRESET" default:"jenkins" flag:"preset" desc:"selection the restore may change, as the snapshot's: jenkins (agents and jobs), controller (the whole state of a controller configured by hand), all or none"`
	SelectInclude []string `envconfig:"HOMESNAP_INCLUDE" flag:"select-include" desc:"glob of extra paths in the selection, as the snapshot's --include (not a partial restore: see --only)"`
	SelectExclude []string `envconfig:"HOMESNAP_EXCLUDE" flag:"select-exclude" desc:"glob of paths out of the selection, as the snapshot's --exclude"`
}

// selector builds the restore's selection.
func (s RestoreSelection) selector() (*selector.Selector, error) {
	sel, err := selector.New(selector.Spec{Preset: s.Preset, Include: s.SelectInclude, Exclude: s.SelectExclude})
	if err != nil {
		return nil, usageError{err}
	}
	return sel, nil
}
