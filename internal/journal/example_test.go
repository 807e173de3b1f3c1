package journal_test

import (
	"context"
	"errors"
	"log"

	"github.com/homesnap/homesnap/internal/archive"
	"github.com/homesnap/homesnap/internal/homefs"
	"github.com/homesnap/homesnap/internal/journal"
	"github.com/homesnap/homesnap/internal/scan"
	"github.com/homesnap/homesnap/internal/selector"
)

// How a sidecar's snapshots use the journal: each interval takes the
// changes and rescans them onto what the previous snapshot saw, or walks
// everything when the journal says it cannot be trusted.
func Example() {
	ctx := context.Background()
	home, err := homefs.OpenHome("/var/jenkins_home") // the command opens the home, once
	if err != nil {
		log.Fatal(err)
	}
	defer home.Close()
	sel, err := selector.New(selector.Spec{Preset: "jenkins"})
	if err != nil {
		log.Fatal(err)
	}
	j, err := journal.Open(home, sel)
	if err != nil {
		log.Printf("snapshots walk the whole home: %v", err) // the watches do not fit
		return
	}
	defer j.Close()
	var base []*archive.Entry // what the previous snapshot saw, in walk order
	for range 3 {             // each scheduled snapshot
		var seen []*archive.Entry
		collect := func(e *archive.Entry) error { seen = append(seen, e); return nil }
		ch, err := j.Take()
		var full *journal.FullWalkError
		switch {
		case errors.As(err, &full):
			log.Printf("full walk: %v", full) // full.Reason labels the fallback metric
			err = scan.Walk(ctx, home, sel, nil, collect)
		case err == nil:
			if ch, err = ch.ResolveInodes(journal.Entries(base)); err == nil { // the other names of changed hard-linked files
				err = journal.Rescan(ctx, home, sel, journal.Entries(base), ch, nil, collect)
			}
		}
		// ... the snapshot stores seen, as it stores a walk's entries ...
		if err != nil {
			j.Invalidate("the snapshot failed: " + err.Error()) // its changes were taken, not applied
			continue
		}
		base = seen
	}
}
