package snapshot

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/homesnap/homesnap/internal/homefs"
)

// errVanished means a path disappeared or stopped being a regular file
// between the walk and the read: Jenkins deleted a build or renamed a temp
// file away. The snapshot leaves it out.
var errVanished = errors.New("vanished")

// regularFile is a regular file of the home open for reading, with its
// metadata as of the open. It holds a raw descriptor: an os.File costs
// three more system calls per file (non-blocking checks and a poller
// registration that regular files refuse), which a million-file snapshot
// pays a million times.
type regularFile struct {
	fd   int
	path string
	st   unix.Stat_t
}

// openRegular opens a regular file of the home beneath its descriptor,
// with no symlink in any component: a directory swapped for a link since
// the walk reads as vanished, never as the file it leads to.
func openRegular(home homefs.Dir, rel, path string) (*regularFile, error) {
	f := &regularFile{path: path}
	fd, err := home.OpenRegular(rel, &f.st)
	if err != nil {
		switch {
		case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ELOOP), errors.Is(err, unix.ENOTDIR),
			errors.Is(err, unix.EXDEV), errors.Is(err, homefs.ErrNotRegular):
			return nil, errVanished
		case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM):
			return nil, fmt.Errorf("cannot read %s: permission denied; run homesnap as the home's owner (uid 1000 in the Jenkins image) or fix the file's mode", path)
		}
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	f.fd = fd
	return f, nil
}

func (f *regularFile) Close() error { return unix.Close(f.fd) }

// readFull fills p from the file. Bytes missing because the file was
// truncated while read are zeros, which keeps the tar stream whole, and
// truncated says so.
func (f *regularFile) readFull(p []byte) (truncated bool, err error) {
	for len(p) > 0 {
		n, err := unix.Read(f.fd, p)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			return false, fmt.Errorf("read %s: %w", f.path, err)
		case n == 0:
			clear(p)
			return true, nil
		}
		p = p[n:]
	}
	return false, nil
}

// changed reports whether the file changed after it was opened.
func (f *regularFile) changed() bool {
	var now unix.Stat_t
	if err := unix.Fstat(f.fd, &now); err != nil {
		return true
	}
	return now.Size != f.st.Size || now.Mtim != f.st.Mtim || now.Ctim != f.st.Ctim
}

// linkGuard keeps a sidecar running as root from storing what the home's
// user could not read. That user can link into the home any file of the
// home's filesystem it can reach (where fs.protected_hardlinks=0, even
// one it cannot read); stored, a root-only file would be handed to it by
// the next restore with --chown. Jenkins makes no hard links, so a
// regular file with more than one link is stored only when the home's
// user owns it: the owner of the home directory or, where root owns that
// (a volume given to the pod through fsGroup), any user but root. A
// sidecar running as another uid reads only what that uid may read, and
// stores every file.
//
// The walk's stat decides: a read stores only the inode the walk saw
// (device and inode checked on the opened descriptor), and a link made to
// that inode afterwards exposes nothing the home did not already hold.
type linkGuard struct {
	on      bool
	homeUID uint32
}

func newLinkGuard(home homefs.Dir) (linkGuard, error) {
	if os.Geteuid() != 0 {
		return linkGuard{}, nil
	}
	var st unix.Stat_t
	if err := unix.Fstat(home.Fd(), &st); err != nil {
		return linkGuard{}, fmt.Errorf("inspect the home: %w", err)
	}
	return linkGuard{on: true, homeUID: st.Uid}, nil
}

// refuses reports whether a regular file with links links, owned by uid,
// is left out of the snapshot.
func (g linkGuard) refuses(links, uid uint32) bool {
	if !g.on || links <= 1 {
		return false
	}
	if g.homeUID == 0 {
		return uid == 0
	}
	return uid != g.homeUID
}
