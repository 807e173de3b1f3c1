package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/rs/zerolog"

	"github.com/homesnap/homesnap/internal/repo"
	"github.com/homesnap/homesnap/internal/store"
)

// listEntry is one snapshot in `restore --list --output json`.
type listEntry struct {
	*repo.Record
	Head bool `json:"head,omitempty"`
}

// list prints the snapshots the head's history reaches, oldest first (the
// head last, nearest the prompt).
// Snapshots no commit reached (a lost race, a failed commit) are left out:
// restoring one would bring back a state the store never committed.
func list(ctx context.Context, st store.Store, output string, stdout io.Writer, log zerolog.Logger) error {
	h, err := repo.LoadHistory(ctx, st)
	if err != nil {
		return err
	}
	if n := len(h.Unreferenced); n > 0 {
		log.Info().Int("count", n).Strs("snapshots", h.Unreferenced).Msg("snapshots the head's history does not reach are not listed (discarded; prune removes them)")
	}
	if output == "json" {
		out := make([]listEntry, 0, len(h.Snapshots))
		for _, r := range h.Oldest() {
			out = append(out, listEntry{Record: r, Head: r.ID == h.Head})
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tTIME\tFILES\tSIZE\tNEW\tARCHIVES\tMANIFESTS\tPARENT\t")
	for _, r := range h.Oldest() {
		files, size, added, archives := "?", "?", "?", "?"
		if !r.Partial {
			files, size, added, archives = fmt.Sprint(r.Files), humanBytes(r.Bytes), humanBytes(r.NewBytes), fmt.Sprint(len(r.Archives))
		}
		id := r.ID
		if id == h.Head {
			id += " (head)"
		}
		parent := r.Parent
		if parent == "" {
			parent = "-"
		}
		// The manifests a restore merges: 1 for a full one, more for a delta.
		manifests := fmt.Sprint(len(r.Layers()))
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", id, r.Time.UTC().Format(time.RFC3339), files, size, added, archives, manifests, parent)
	}
	return tw.Flush()
}

// humanBytes formats a byte count with a binary unit.
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
