package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/homesnap/homesnap/internal/check"
	"github.com/homesnap/homesnap/internal/prune"
	"github.com/homesnap/homesnap/internal/snapshot"
)

// The results of verify, prune and `snapshot --once` with --output json
// (json.go has restore's, ls's and diff's):
// one object each on standard output, its fields documented in
// docs/usage.md ("JSON results") and kept stable: fields may be added,
// none renamed or removed within a format version.

// OutputFormat is the --output setting of the commands that print a
// result: every command but the sidecar, version, help and completion.
type OutputFormat struct {
	Output string `envconfig:"HOMESNAP_OUTPUT" default:"text" flag:"output" desc:"format of the result on standard output: text (a table for list), or json, one documented object (docs/usage.md: JSON results; on a failure, nothing unless the result says what failed)"`
}

func (o OutputFormat) validate() error {
	switch o.Output {
	case "text", "table", "json":
		return nil
	}
	return usageError{fmt.Errorf("--output/HOMESNAP_OUTPUT %q: want text (or table) or json", o.Output)}
}

func (o OutputFormat) json() bool { return o.Output == "json" }

// writeJSON prints v as one indented JSON document.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// verifyReport is verify's result.
type verifyReport struct {
	Mode      string          `json:"mode"` // "full" or "structure"
	OK        bool            `json:"ok"`   // no problem found
	Snapshots []verifyVerdict `json:"snapshots"`
	Problems  []verifyProblem `json:"problems"`
	Objects   int             `json:"objects"`
	Files     int64           `json:"files"`
	BytesRead int64           `json:"bytes_read"`
}

type verifyVerdict struct {
	ID string `json:"id"`
	OK bool   `json:"ok"`
}

type verifyProblem struct {
	Snapshot string `json:"snapshot"`
	Object   string `json:"object"`
	Error    string `json:"error"`
}

// problems collects what a check reports, from its workers.
type problems struct {
	mu   sync.Mutex
	list []verifyProblem
}

func (p *problems) add(pr check.Problem) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.list = append(p.list, verifyProblem{pr.Snapshot, pr.Object, withHint(pr.Err).Error()})
}

func newVerifyReport(mode string, res *check.Result, found *problems) verifyReport {
	damaged := map[string]bool{}
	for _, id := range res.Damaged {
		damaged[id] = true
	}
	r := verifyReport{Mode: mode, OK: res.Problems == 0 && len(res.Damaged) == 0, Snapshots: []verifyVerdict{}, Problems: []verifyProblem{},
		Objects: res.Objects, Files: res.Files, BytesRead: res.Bytes}
	for _, id := range res.Snapshots {
		r.Snapshots = append(r.Snapshots, verifyVerdict{id, !damaged[id]})
	}
	found.mu.Lock()
	r.Problems = append(r.Problems, found.list...)
	found.mu.Unlock()
	return r
}

// pruneReport is prune's result.
type pruneReport struct {
	DryRun     bool            `json:"dry_run"` // nothing was deleted
	Policy     string          `json:"policy"`
	Snapshots  []pruneDecision `json:"snapshots"` // newest first
	Kept       int             `json:"kept"`
	Deleted    []pruneDeletion `json:"deleted"` // or, dry_run, would be
	FreedBytes int64           `json:"freed_bytes"`
}

type pruneDecision struct {
	ID      string    `json:"id"`
	Time    time.Time `json:"time"`
	Keep    bool      `json:"keep"`
	Reasons []string  `json:"reasons"` // the rules that keep it
}

type pruneDeletion struct {
	Key  string `json:"key"`
	Size int64  `json:"size"`
	Why  string `json:"why"`
}

func newPruneReport(p *prune.Plan, dryRun bool) pruneReport {
	r := pruneReport{DryRun: dryRun, Policy: p.Policy.String(), Snapshots: []pruneDecision{}, Kept: p.Kept(), Deleted: []pruneDeletion{}, FreedBytes: p.Freed()}
	for _, d := range p.Decisions {
		reasons := d.Reasons
		if reasons == nil {
			reasons = []string{}
		}
		r.Snapshots = append(r.Snapshots, pruneDecision{d.ID, d.Time.UTC(), d.Keep, reasons})
	}
	for _, d := range p.Delete {
		r.Deleted = append(r.Deleted, pruneDeletion{d.Key, d.Size, d.Why})
	}
	return r
}

// snapshotReport is the result of `snapshot --once`.
type snapshotReport struct {
	Snapshot       string  `json:"snapshot"` // "" when nothing changed
	Parent         string  `json:"parent"`
	Unchanged      bool    `json:"unchanged"`              // nothing changed since parent: none taken
	Consolidated   string  `json:"consolidated,omitempty"` // the snapshot that merged it with older archives, now the head
	Entries        int64   `json:"entries"`
	Files          int64   `json:"files"`
	Bytes          int64   `json:"bytes"`
	NewEntries     int64   `json:"new_entries"`
	NewBytes       int64   `json:"new_bytes"`
	Deleted        int64   `json:"deleted"`
	StoredBytes    int64   `json:"stored_bytes"`
	ElapsedSeconds float64 `json:"elapsed_seconds"`
}

func newSnapshotReport(res *snapshot.Result, consolidated string) snapshotReport {
	return snapshotReport{Snapshot: res.ID, Consolidated: consolidated, Parent: res.Parent, Unchanged: res.Unchanged,
		Entries: res.Totals.Entries, Files: res.Totals.Files, Bytes: res.Totals.Bytes,
		NewEntries: res.Totals.New, NewBytes: res.Totals.NewBytes, Deleted: res.Deleted,
		StoredBytes: res.Stored, ElapsedSeconds: res.Elapsed.Seconds()}
}
