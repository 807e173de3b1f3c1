//go:build !linux

package journal

import "github.com/homesnap/homesnap/internal/selector"

// Journal is not available on this platform: Open always fails, and the
// snapshot walks.
type Journal struct{}

// Open fails with a *FullWalkError: there is no change journal here.
func Open(home string, sel *selector.Selector) (*Journal, error) {
	return nil, &FullWalkError{Reason: ReasonUnsupported, Detail: "no change journal on this platform"}
}

// Take always asks for a full walk.
func (j *Journal) Take() (*Changes, error) {
	return nil, &FullWalkError{Reason: ReasonUnsupported, Detail: "no change journal on this platform"}
}

// Stats returns no counts.
func (j *Journal) Stats() Stats { return Stats{} }

// Close does nothing.
func (j *Journal) Close() error { return nil }
