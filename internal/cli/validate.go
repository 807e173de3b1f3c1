package cli

import (
	"fmt"
	"time"
)

// MaxJobs bounds --jobs. Each snapshot worker holds a compressor and a few
// MiB of frames, so thousands of them exhaust memory long before they help;
// a restore's ranged reads stop gaining well before this many.
const MaxJobs = 64

// validator is implemented by every command's configuration: it checks the
// values the parser accepted but the engine cannot use.
type validator interface{ validate() error }

func (c *Common) validate() error {
	if c.Jobs < 0 || c.Jobs > MaxJobs {
		return usageError{fmt.Errorf("--jobs/HOMESNAP_JOBS %d: want 0 (automatic) or a count of parallel workers of at most %d", c.Jobs, MaxJobs)}
	}
	return nil
}

func (c *snapshotConfig) validate() error {
	if err := c.Common.validate(); err != nil {
		return err
	}
	if err := c.Retention.validate(); err != nil {
		return err
	}
	if err := nonNegative("--timeout/HOMESNAP_TIMEOUT", c.Timeout, "0 means no timeout"); err != nil {
		return err
	}
	if err := c.OutputFormat.validate(); err != nil {
		return err
	}
	if c.ConsolidateMax < 0 {
		return usageError{fmt.Errorf("--consolidate-max-archives/HOMESNAP_CONSOLIDATE_MAX_ARCHIVES %d: want 0 (never) or more", c.ConsolidateMax)}
	}
	if err := positive("--interval/HOMESNAP_INTERVAL", c.Interval); err != nil {
		return err
	}
	if err := nonNegative("--final-wait-quiet/HOMESNAP_FINAL_WAIT_QUIET", c.WaitQuiet, "0 means no wait"); err != nil {
		return err
	}
	if err := positive("--lease-ttl/HOMESNAP_LEASE_TTL", c.LeaseTTL); err != nil {
		return err
	}
	if err := c.Sidecar.validate(); err != nil {
		return err
	}
	return positive("--final-timeout/HOMESNAP_FINAL_TIMEOUT", c.Grace)
}

// positive refuses a zero or negative duration.
func positive(name string, d time.Duration) error {
	if d <= 0 {
		return usageError{fmt.Errorf("%s %v: want a positive duration such as 30s or 5m", name, d)}
	}
	return nil
}

// nonNegative refuses a negative duration; zero carries meaning.
func nonNegative(name string, d time.Duration, zero string) error {
	if d < 0 {
		return usageError{fmt.Errorf("%s %v: want a duration of 0 or more (%s)", name, d, zero)}
	}
	return nil
}
