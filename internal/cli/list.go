package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/rs/zerolog"

	"github.com/homesnap/homesnap/internal/auth"
	"github.com/homesnap/homesnap/internal/repo"
	"github.com/homesnap/homesnap/internal/store"
)

// listEntry is one snapshot in `restore --list --output json`.
type listEntry struct {
	*repo.Record
	Head bool `json:"head,omitempty"`
	// Unverified: see listStore; a restore does not choose it without
	// --allow-unauthenticated.
	Unverified bool `json:"unverified,omitempty"`
}

// list prints the snapshots the head's history reaches, oldest first (the
// head last, nearest the prompt).
// Snapshots no commit reached (a lost race, a failed commit) are left out:
// restoring one would bring back a state the store never committed.
func list(ctx context.Context, a *AgeIdentity, raw store.Store, output string, stdout io.Writer, log zerolog.Logger) error {
	st, suspect, err := listStore(ctx, a, raw, log)
	if err != nil {
		return err
	}
	h, err := repo.LoadHistory(ctx, st)
	if err != nil {
		return err
	}
	// Newest first: below a record that did not verify, the history is
	// reached through a parent nobody vouches for.
	unverified, tainted, n := map[string]bool{}, false, 0
	for _, r := range h.Snapshots {
		tainted = tainted || suspect != nil && suspect(r)
		if tainted {
			unverified[r.ID] = true
			n++
		}
	}
	if n > 0 {
		log.Warn().Int("count", n).Str("store", raw.String()).Msg("snapshots marked unverified: their records, or the history leading to them, are not authenticated; a restore refuses them unless --allow-unauthenticated")
	}
	if n := len(h.Unreferenced); n > 0 {
		log.Info().Int("count", n).Strs("snapshots", h.Unreferenced).Msg("snapshots the head's history does not reach are not listed (discarded; prune removes them)")
	}
	if output == "json" {
		out := make([]listEntry, 0, len(h.Snapshots))
		for _, r := range h.Oldest() {
			out = append(out, listEntry{Record: r, Head: r.ID == h.Head, Unverified: unverified[r.ID]})
		}
		return writeJSON(stdout, out)
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
		if unverified[r.ID] {
			id += " (unverified)"
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

// listStore returns what --list reads through, and which records it
// marks unverified (nil: none). With a key, records are verified and a
// rolled-back head is refused as a restore refuses it; a record that
// fails, or one rebuilt from a manifest's unverified header, is listed
// marked rather than refused (all of them when the head itself fails), so
// that the listing shows a store's pre-upgrade history and a tampered one
// for what they are. Without a key, an
// authenticated store is listed with everything marked; a plain store
// without authentication has nothing to verify.
func listStore(ctx context.Context, a *AgeIdentity, raw store.Store, log zerolog.Logger) (store.Store, func(*repo.Record) bool, error) {
	ids, err := a.identities()
	if err != nil {
		return nil, nil, err
	}
	keys, err := a.authKeys(ids)
	if err != nil {
		return nil, nil, err
	}
	all := func(*repo.Record) bool { return true }
	if len(keys) == 0 {
		m, _, err := repo.LoadMarker(ctx, raw)
		if err != nil || m == nil || !m.Authenticated {
			return raw, nil, err
		}
		log.Warn().Str("store", raw.String()).Msg("the store is authenticated and this command holds no key: nothing listed is verified (give it the age identity or the auth key file)")
		return raw, all, nil
	}
	strict, _, err := authenticated(ctx, a, ids, raw, false, log)
	if err == nil {
		err = checkRollback(ctx, a, strict, log)
	}
	var ae *auth.Error
	if errors.As(err, &ae) {
		// The head (or its record) does not verify: a store from before
		// authentication, or a planted head. Nothing reached from it is
		// vouched for.
		log.Warn().Err(err).Msg("the head does not verify: every snapshot listed is marked unverified")
	} else if err != nil {
		return nil, nil, err
	}
	var mu sync.Mutex
	failed := map[string]bool{}
	marking := auth.Wrap(raw, auth.Options{Keys: keys, Allow: true, Warn: func(err error) {
		var ae *auth.Error
		if errors.As(err, &ae) {
			mu.Lock()
			failed[ae.Object] = true
			mu.Unlock()
		}
	}})
	if ae != nil {
		return marking, all, nil
	}
	return marking, func(r *repo.Record) bool {
		mu.Lock()
		defer mu.Unlock()
		return r.Partial || failed[repo.Name(raw, repo.RecordKey(r.ID))]
	}, nil
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
