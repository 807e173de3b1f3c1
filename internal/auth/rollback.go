package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/homesnap/homesnap/internal/repo"
	"github.com/homesnap/homesnap/internal/store"
)

// ErrRollback means the head is older than a snapshot the store proves
// was committed after it.
var ErrRollback = errors.New("the head was rolled back")

// RollbackError names the head and the newer snapshot that proves it old.
type RollbackError struct {
	Store       string
	Head        string
	HeadSeq     int64
	Newer       string
	NewerSeq    int64
	NewerParent string
}

func (e *RollbackError) Error() string {
	return fmt.Sprintf("%s: %v: it names snapshot %s (commit %d), but the authenticated record of snapshot %s (commit %d, parent %s) shows that a newer snapshot was committed after it; a bucket writer may have put an old head back",
		e.Store, ErrRollback, e.Head, e.HeadSeq, e.Newer, e.NewerSeq, e.NewerParent)
}

func (e *RollbackError) Unwrap() error { return ErrRollback }

// CheckRollback refuses a head that an authenticated record in st proves
// old. st must verify records (a Store with keys); records that fail are
// ignored here, since only a key holder's record is evidence.
//
// A record's Seq is its parent head's plus one, so a record with Seq
// above head.Seq+1, or Seq head.Seq+1 and another parent, was written
// over a head newer than this one: that head was committed and this one
// is older. A record with Seq head.Seq+1 and this head as parent is a
// snapshot taken on it that may never have been committed (a crash before
// the head moved), so a rollback by exactly one snapshot is not proved
// (the limit docs/encryption.md states). It costs one LIST of snapshots/ and reads
// only the records whose IDs sort after the head's (IDs sort by time; a
// writer whose clock ran backwards is missed).
func CheckRollback(ctx context.Context, st store.Store, head *repo.Head) error {
	if head == nil {
		return nil
	}
	var newer []string
	err := repo.List(ctx, st, func(h repo.Handle, _ store.Object) error {
		if h.ID > head.Snapshot {
			newer = append(newer, h.ID)
		}
		return nil
	}, repo.KindRecord)
	if err != nil {
		return err
	}
	for _, id := range newer {
		data, _, err := st.Load(ctx, repo.RecordKey(id))
		var ae *Error
		if errors.As(err, &ae) || errors.Is(err, store.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		var r repo.Record
		if json.Unmarshal(data, &r) != nil || r.ID != id {
			continue
		}
		if r.Seq > head.Seq+1 || r.Seq == head.Seq+1 && r.Parent != head.Snapshot {
			return &RollbackError{Store: st.String(), Head: head.Snapshot, HeadSeq: head.Seq, Newer: id, NewerSeq: r.Seq, NewerParent: r.Parent}
		}
	}
	return nil
}
