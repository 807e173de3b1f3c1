// Command storestat shows where a store's bytes go: archives against
// manifests and records, and per archive the byte ranges the head's files
// lie in, those only older snapshots still use, those no snapshot uses
// (stored until no snapshot points into the archive), and an estimate of
// the bytes the head's files fill (ranges are whole frames shared by many
// small files; maint.LiveBytes).
//
//	go run ./scripts/bench/storestat STORE
package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"text/tabwriter"

	"github.com/homesnap/homesnap/internal/maint"
	"github.com/homesnap/homesnap/internal/repo"
	"github.com/homesnap/homesnap/internal/store"
	_ "github.com/homesnap/homesnap/internal/store/all"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: storestat STORE")
		os.Exit(2)
	}
	if err := run(context.Background(), os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "storestat:", err)
		os.Exit(1)
	}
}

type archiveUse struct {
	size       int64
	head, kept maint.Ranges // used by the head; by any committed snapshot
	refs       int          // snapshots pointing into it
}

func run(ctx context.Context, raw string) error {
	st, err := store.Open(ctx, raw)
	if err != nil {
		return err
	}
	defer st.Close()
	var archives, manifests, records, other int64
	use := map[string]*archiveUse{}
	err = st.List(ctx, "", func(o store.Object) error {
		_, archive, owned := repo.Owner(o.Key)
		switch {
		case owned && archive:
			archives += o.Size
			if h, ok := repo.ParseKey(o.Key); ok {
				use[h.ID] = &archiveUse{size: o.Size}
			}
		case repo.IsManifestKey(o.Key):
			manifests += o.Size
		case owned: // records, and manifests' tags
			records += o.Size
		default:
			other += o.Size
		}
		return nil
	})
	if err != nil {
		return err
	}
	h, err := repo.LoadHistory(ctx, st)
	if err != nil {
		return err
	}
	for _, r := range h.Snapshots {
		live, err := maint.LiveRanges(ctx, st, r.ID)
		if err != nil {
			return err
		}
		for a, rg := range live {
			u := use[a]
			if u == nil {
				return fmt.Errorf("snapshot %s points into archive %s, which is missing", r.ID, a)
			}
			u.refs++
			u.kept = u.kept.Union(rg)
			if r.ID == h.Head {
				u.head = rg
			}
		}
	}
	est := map[string]int64{}
	if h.Head != "" {
		if est, err = maint.LiveBytes(ctx, st, h.Head); err != nil {
			return err
		}
	}
	total := archives + manifests + records + other
	fmt.Printf("store %s: %d snapshots, head %s\n", st, len(h.Snapshots), h.Head)
	fmt.Printf("total %d bytes: archives %d (%.1f%%), manifests %d (%.1f%%), records %d, other %d\n",
		total, archives, pct(archives, total), manifests, pct(manifests, total), records, other)
	ids := make([]string, 0, len(use))
	for id := range use {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "archive\tbytes\thead uses\tonly older use\tnone uses\tsnapshots\thead live (est.)\t")
	var head, older, dead, live int64
	for _, id := range ids {
		u := use[id]
		hb, kb := u.head.Bytes(), u.kept.Bytes()
		head, older, dead, live = head+hb, older+kb-hb, dead+u.size-kb, live+est[id]
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t\n", id, u.size, hb, kb-hb, u.size-kb, u.refs, est[id])
	}
	tw.Flush()
	fmt.Printf("archive bytes: the head's ranges cover %d (%.1f%%), only older snapshots' %d (%.1f%%), none %d (%.1f%%); the head's files fill about %d (%.1f%%)\n",
		head, pct(head, archives), older, pct(older, archives), dead, pct(dead, archives), live, pct(live, archives))
	return nil
}

func pct(a, b int64) float64 {
	if b == 0 {
		return 0
	}
	return 100 * float64(a) / float64(b)
}
