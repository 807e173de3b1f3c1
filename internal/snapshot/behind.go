package snapshot

import (
	"errors"
	"fmt"

	"github.com/homesnap/homesnap/internal/homemark"
	"github.com/homesnap/homesnap/internal/repo"
)

// ErrBehind is wrapped by a BehindError.
var ErrBehind = errors.New("the store's head is newer than anything this home has seen")

// BehindError: another writer committed to the store since the home last
// matched it (restored from it, or snapshotted into it). A snapshot of the
// home would make the head a home that lacks that writer's work: a second
// controller on the same store that takes the lease over when the first
// stops, or a copy of an old home.
type BehindError struct {
	Home, Head   string
	HeadSeq      int64
	Mark         string // the snapshot the home last matched
	MarkSeq      int64  // the newest commit the home saw
	OwnCommitted string // what this process committed last, if anything
}

func (e *BehindError) Error() string {
	return fmt.Sprintf("%v: %s was last equal to snapshot %s and saw commit %d, but the head is %s (commit %d): another controller has written to this store since, and a snapshot of this home would replace its work. One controller per store prefix; to continue this home from the store, restore it first",
		ErrBehind, e.Home, e.Mark, e.MarkSeq, e.Head, e.HeadSeq)
}

func (e *BehindError) Unwrap() error { return ErrBehind }

// checkBehind refuses a snapshot over a head committed after anything the
// home's mark has seen, unless the head is this home's all the same (what
// this process committed, or what the mark says was being committed when
// a sidecar stopped before marking it) or o.AllowBehind. A home without a
// mark of this store (never restored, or the mark unwritable) is not
// checked: there is nothing to compare.
func checkBehind(o *Options, head *repo.Head) error {
	if head == nil || o.AllowBehind || head.Snapshot == o.OwnCommitted {
		return nil
	}
	mark, err := homemark.Read(o.Home)
	if err != nil || mark == nil || mark.Store != o.Store.String() || mark.Seq == 0 ||
		head.Seq <= mark.Seq || head.Snapshot == mark.Snapshot || head.Snapshot == mark.Pending {
		return nil
	}
	return &BehindError{Home: o.Home.Path, Head: head.Snapshot, HeadSeq: head.Seq, Mark: mark.Snapshot, MarkSeq: mark.Seq}
}
