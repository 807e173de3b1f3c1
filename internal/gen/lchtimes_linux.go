package gen

import (
	"os"
	"syscall"
	"time"
	"unsafe"
)

// lchtimes sets the mtime (and atime) of a symlink itself, not its target;
// os.Chtimes follows links and fails on dangling ones.
func lchtimes(p string, t time.Time) error {
	ts := [2]syscall.Timespec{syscall.NsecToTimespec(t.UnixNano()), syscall.NsecToTimespec(t.UnixNano())}
	b, err := syscall.BytePtrFromString(p)
	if err != nil {
		return err
	}
	const atSymlinkNoFollow = 0x100
	dirfd := -100 // AT_FDCWD: p is absolute or relative to the working directory
	_, _, e := syscall.Syscall6(syscall.SYS_UTIMENSAT, uintptr(dirfd),
		uintptr(unsafe.Pointer(b)), uintptr(unsafe.Pointer(&ts)), atSymlinkNoFollow, 0, 0)
	if e != 0 {
		return &os.PathError{Op: "utimensat", Path: p, Err: e}
	}
	return nil
}
