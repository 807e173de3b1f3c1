package snapshot

import "golang.org/x/sys/unix"

// willNeed asks the kernel to start reading the file's first n bytes. It
// is advice: a file the kernel does not read ahead is read when asked.
func (f *regularFile) willNeed(n int64) { _ = unix.Fadvise(f.fd, 0, n, unix.FADV_WILLNEED) }
