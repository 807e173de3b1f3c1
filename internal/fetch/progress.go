package fetch

import "github.com/homesnap/homesnap/internal/archive"

// Progress is told how a restore or a verify advances, so that the caller
// can show it (a bar, log lines); this package draws nothing. Totals grow
// while the manifest pass runs ahead of the ranged reads. Calls come from
// several goroutines.
type Progress interface {
	// Planned adds files, and their bytes, that the pass found to write
	// (or to check).
	Planned(files, bytes int64)
	// Done adds files written (or checked) and their bytes.
	Done(files, bytes int64)
}

// Planned and Done report a file to p, if there is one.
func Planned(p Progress, e *archive.Entry) {
	if p != nil && e.Type == archive.TypeFile {
		p.Planned(1, e.Size)
	}
}

// Done: see Planned.
func Done(p Progress, e *archive.Entry) {
	if p != nil {
		p.Done(1, e.Size)
	}
}
