package snapshot

// The commit protocol: what a snapshot does once its archive and manifest
// are stored. The record is written first, then the head moves with a
// compare-and-swap (the single-writer fence); a failure anywhere before
// the swap leaves the previous snapshot the head and removes what this one
// stored. The home's mark follows the head: pending before the swap, the
// new snapshot after it.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"github.com/homesnap/homesnap/internal/archive"
	"github.com/homesnap/homesnap/internal/homemark"
	"github.com/homesnap/homesnap/internal/repo"
	"github.com/homesnap/homesnap/internal/store"
)

// commitRun commits a snapshot whose objects are stored (res): the
// caller's last check (Options.BeforeCommit), the record, the head, the
// home's mark. On failure what it stored is discarded.
func (s *snapshotter) commitRun(ctx context.Context, res *Result, parent *archive.ChainReader, headVersion store.Version, start time.Time) error {
	if s.o.BeforeCommit != nil && !s.src.headTree() {
		if err := s.o.BeforeCommit(ctx); err != nil {
			s.discard(ctx, err)
			return err
		}
	}
	rec := &repo.Record{
		ID: s.id, Parent: s.parentID, Time: start.UTC(), Host: hostname(), Trigger: s.o.Trigger,
		Entries: res.Totals.Entries, Files: res.Totals.Files, Bytes: res.Totals.Bytes,
		NewEntries: res.Totals.New, NewBytes: res.Totals.NewBytes, Stored: res.Stored, Archives: res.Totals.Archives,
	}
	if s.base != "" {
		below, ok := parent.DeltaLines(s.cut)
		if !ok {
			below = s.deltaLines // the parent's chain: at least as long
		}
		rec.Manifests, rec.DeltaLines = s.chain, below+res.Totals.Lines
		rec.CoveredEntries, rec.SpannedEntries = parent.Coverage()
	}
	if err := homemark.SetPending(s.o.Home, s.id); err != nil {
		s.o.Log.Warn().Err(err).Msg("could not mark the home with the snapshot it commits")
	}
	if err := s.commit(ctx, rec, headVersion, start); err != nil {
		return err
	}
	s.markHome(s.id, start.UTC())
	return nil
}

// markHome records in the home that it matched snapshot id when the walk
// ran: anything changed since has a newer ctime than the walk saw, so a
// restore can tell that the home is newer than the store. A source that
// did not walk the home learned nothing about it: its snapshot holds the
// parent's tree, so a mark naming the parent moves to id with the
// fingerprint of the walk that made it. A home the sidecar cannot write
// to stays unmarked (restore then treats its data as unknown).
func (s *snapshotter) markHome(id string, at time.Time) {
	var err error
	switch {
	case !s.src.headTree():
		err = homemark.Write(s.o.Home, &homemark.Mark{Store: s.o.Store.String(), Snapshot: id, Time: at, Selection: s.o.Selector.Spec(), Print: s.print, Seq: s.seq + 1})
	case id != s.parentID:
		_, err = homemark.Carry(s.o.Home, s.parentID, id, at, s.seq+1)
	}
	if err != nil {
		s.o.Log.Warn().Err(err).Msg("could not mark the home with its snapshot; a restore into it will have to be forced")
	}
}

// writer commits what a snapshot or an import stored: the new snapshot's
// ID and parent, the objects stored so far (removed again when it is not
// committed), and the head it moves.
type writer struct {
	st         store.Store
	log        zerolog.Logger
	recipients []string // recorded in the head
	id         string
	parentID   string
	seq        int64    // the parent's Seq
	written    []string // keys stored so far, removed if the snapshot is not committed
}

// commit writes the snapshot's record, which must precede the head, and
// moves the head to it; on failure what the snapshot stored is discarded.
func (s *writer) commit(ctx context.Context, rec *repo.Record, headVersion store.Version, start time.Time) error {
	rec.Seq = s.seq + 1
	if err := repo.WriteRecord(ctx, s.st, rec); err != nil {
		s.discard(ctx, err)
		return err
	}
	s.written = append(s.written, repo.RecordKey(s.id))
	return s.moveHead(ctx, headVersion, start)
}

// moveHead commits the snapshot. When the head cannot be moved, what the
// snapshot stored is removed again, unless the head may already point at
// it (an answer lost after the write was applied).
func (s *writer) moveHead(ctx context.Context, headVersion store.Version, start time.Time) error {
	st := s.st
	data, _ := json.Marshal(repo.Head{Snapshot: s.id, Parent: s.parentID, Time: start.UTC(), Recipients: s.recipients, Seq: s.seq + 1})
	_, err := store.CompareAndSwap(ctx, st, repo.HeadKey, data, headVersion)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, store.ErrPrecondition):
		err = fmt.Errorf("another writer moved %s while snapshot %s was taken; this snapshot was discarded: make sure only one snapshot process writes to this store", repo.Name(st, repo.HeadKey), s.id)
		s.discard(ctx, err)
		return err
	}
	err = fmt.Errorf("move head to snapshot %s: %w", s.id, err)
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), discardTimeout)
	defer cancel()
	if head, _, lerr := repo.LoadHead(cctx, st); lerr == nil && head != nil && head.Snapshot == s.id {
		return nil // the write was applied; only its answer was lost
	} else if lerr == nil {
		s.discard(ctx, err)
	}
	return err
}

// discardTimeout bounds the clean-up after a failed snapshot, so that it
// cannot eat the final snapshot's SIGTERM grace or outlast --timeout much.
const discardTimeout = 3 * time.Second

// discard removes, best effort and bounded, the objects an uncommitted
// snapshot stored (a full store rejecting the manifest or the head must
// not keep the archive that filled it); prune collects what remains.
func (s *writer) discard(ctx context.Context, why error) {
	if len(s.written) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), discardTimeout)
	defer cancel()
	if err := s.st.Delete(ctx, s.written...); err != nil {
		s.log.Warn().Err(err).Strs("keys", s.written).Msg("could not remove the objects of the discarded snapshot; prune will")
		return
	}
	s.log.Info().Str("snapshot", s.id).AnErr("cause", why).Strs("keys", s.written).Msg("removed the objects of the snapshot that was not committed")
}
