//go:build !linux

package journal

import (
	"context"

	"github.com/homesnap/homesnap/internal/archive"
	"github.com/homesnap/homesnap/internal/homefs"
	"github.com/homesnap/homesnap/internal/selector"
)

// Journal is not available on this platform: Open always fails, and the
// snapshot walks.
type Journal struct{}

var errUnsupported = &FullWalkError{Reason: ReasonUnsupported, Detail: "no change journal on this platform"}

// Open fails with a *FullWalkError: there is no change journal here.
func Open(home *homefs.Home, sel *selector.Selector) (*Journal, error) { return nil, errUnsupported }

// Take always asks for a full walk.
func (j *Journal) Take() (*Changes, error) { return nil, errUnsupported }

// Seen reports nothing: there are no changes.
func (j *Journal) Seen(path string) bool { return false }

// Invalidate does nothing: every Take asks for a full walk already.
func (j *Journal) Invalidate(why string) {}

// Stats returns no counts.
func (j *Journal) Stats() Stats { return Stats{} }

// Close does nothing.
func (j *Journal) Close() error { return nil }

// Rescan is never called without a journal's changes.
func Rescan(ctx context.Context, home *homefs.Home, sel *selector.Selector, base Base, ch *Changes, skipped func(rel, why string), fn func(*archive.Entry) error) error {
	return errUnsupported
}

// Linked does nothing: nothing is watched.
func (j *Journal) Linked(rel string, ino uint64, ctime int64) {}
