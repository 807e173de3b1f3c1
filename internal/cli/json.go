package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"iter"
	"time"

	"github.com/homesnap/homesnap/internal/agents"
	"github.com/homesnap/homesnap/internal/archive"
	"github.com/homesnap/homesnap/internal/repo"
	"github.com/homesnap/homesnap/internal/restore"
)

// The results of restore, ls and diff with --output json, beside those of
// report.go and under the same rules: one object on standard output, its
// fields documented in docs/usage.md ("JSON results") and kept stable.

// writeJSONStream prints one JSON object: head's fields, then a field
// named list holding what items yields, written as it comes, so that a
// listing of a million paths is never held in memory. An error from items
// ends the list and becomes the object's "error" field, so that standard
// output stays one valid document; it is returned too.
func writeJSONStream[T any](w io.Writer, head any, list string, items iter.Seq2[T, error]) error {
	b, err := json.MarshalIndent(head, "", "  ")
	if err != nil {
		return err
	}
	// head is an object: its closing brace makes room for the list.
	b = bytes.TrimRight(bytes.TrimSuffix(b, []byte("}")), "\n")
	bw := bufio.NewWriter(w)
	bw.Write(b)
	if len(b) > 1 {
		bw.WriteString(",")
	}
	fmt.Fprintf(bw, "\n  %q: [", list)
	n := 0
	var failed error
	for it, err := range items {
		var line []byte
		if err == nil {
			line, err = json.Marshal(it)
		}
		if err != nil {
			failed = err
			break
		}
		if n > 0 {
			bw.WriteString(",")
		}
		bw.WriteString("\n    ")
		bw.Write(line)
		n++
	}
	if n > 0 {
		bw.WriteString("\n  ")
	}
	bw.WriteString("]")
	if failed != nil {
		msg, _ := json.Marshal(withHint(failed).Error())
		fmt.Fprintf(bw, ",\n  \"error\": %s", msg)
	}
	bw.WriteString("\n}\n")
	if err := bw.Flush(); failed == nil {
		return err
	}
	return failed
}

// fileJSON is one path of a snapshot or of the home (ls, diff).
type fileJSON struct {
	Path   string    `json:"path"`
	Type   string    `json:"type"` // f, d or l (symlink)
	Mode   string    `json:"mode"` // octal: permission, setuid, setgid and sticky bits
	UID    int       `json:"uid"`
	GID    int       `json:"gid"`
	Size   int64     `json:"size"`
	MTime  time.Time `json:"mtime"`
	Link   string    `json:"link,omitempty"`   // a symlink's target
	SHA256 string    `json:"sha256,omitempty"` // a file's content hash, when the manifest has it
}

func newFileJSON(e *archive.Entry) *fileJSON {
	if e == nil {
		return nil
	}
	f := &fileJSON{Path: e.Path, Type: string(e.Type), Mode: octal(e.Mode), UID: e.UID, GID: e.GID, Size: e.Size,
		MTime: time.Unix(0, e.MTime).UTC(), Link: e.Link}
	if e.Hash != nil {
		f.SHA256 = e.Hash.String()
	}
	return f
}

// octal writes a mode as chmod takes it: 0644, 4755.
func octal(m fs.FileMode) string {
	n := uint32(m.Perm())
	for i, bit := range []fs.FileMode{fs.ModeSticky, fs.ModeSetgid, fs.ModeSetuid} {
		if m&bit != 0 {
			n |= 0o1000 << i
		}
	}
	return fmt.Sprintf("%04o", n)
}

// snapshotTime is when a snapshot was taken, as its ID says; nil for none.
func snapshotTime(id string) *time.Time {
	t := repo.IDTime(id)
	if t.IsZero() {
		return nil
	}
	return &t
}

// lsHead is the start of ls's result; its "entries" follow.
type lsHead struct {
	Snapshot string     `json:"snapshot"`
	Time     *time.Time `json:"time"`
}

// restoreReport is restore's result.
type restoreReport struct {
	Decision       string         `json:"decision"` // restore, delta, forced-delta, nothing, first-boot
	Reason         string         `json:"reason"`
	Snapshot       string         `json:"snapshot"` // "" on a first boot
	Time           *time.Time     `json:"time"`
	Home           string         `json:"home"` // the directory restored into: the home, or --target
	DryRun         bool           `json:"dry_run"`
	Walked         bool           `json:"walked"`
	Marked         bool           `json:"marked"`
	Entries        int64          `json:"entries"`
	Files          int64          `json:"files"`
	Bytes          int64          `json:"bytes"`
	Fetched        int64          `json:"fetched"`
	FetchedBytes   int64          `json:"fetched_bytes"`
	Written        int64          `json:"written"`
	WrittenBytes   int64          `json:"written_bytes"`
	Unchanged      int64          `json:"unchanged"`
	MetaFixed      int64          `json:"meta_fixed"`
	Removed        int64          `json:"removed"`
	ModesDropped   int64          `json:"modes_dropped"`
	Displaced      string         `json:"displaced"`
	ElapsedSeconds float64        `json:"elapsed_seconds"`
	Agents         *restoreAgents `json:"agents"` // null when no check ran (nothing was restored)
}

// restoreAgents is the agent-continuity check a restore ran on what it
// restored.
type restoreAgents struct {
	Nodes      int    `json:"nodes"`
	Continuity bool   `json:"continuity"`
	Summary    string `json:"summary"`
}

func newRestoreReport(path string, dryRun bool, res *restore.HomeResult, checked *agents.Outcome) restoreReport {
	r := restoreReport{Decision: string(res.Decision.Action), Reason: res.Decision.Reason, Snapshot: res.Snapshot,
		Time: snapshotTime(res.Snapshot), Home: path, DryRun: dryRun, Walked: res.Walked, Marked: res.Marked}
	if x := res.Restore; x != nil {
		r.Entries, r.Files, r.Bytes = x.Entries, x.Files, x.Bytes
		r.Fetched, r.FetchedBytes, r.Written, r.WrittenBytes = x.Fetched, x.FetchedBytes, x.Written, x.WrittenBytes
		r.Unchanged, r.MetaFixed, r.Removed, r.ModesDropped = x.Unchanged, x.MetaFixed, x.Removed, x.ModesDropped
		r.Displaced, r.ElapsedSeconds = x.Displaced, x.Elapsed.Seconds()
	}
	if checked != nil {
		r.Agents = &restoreAgents{checked.Nodes, checked.Continuity, checked.Summary}
	}
	return r
}
