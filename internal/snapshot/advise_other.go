//go:build !linux

package snapshot

// willNeed: no read-ahead advice here; the file is read when asked.
func (f *regularFile) willNeed(int64) {}
