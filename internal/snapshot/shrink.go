package snapshot

import (
	"errors"
	"fmt"
	"strings"

	"github.com/homesnap/homesnap/internal/archive"
)

// ErrEmpty marks a snapshot refused because the home holds nothing the
// selection selects (a wrong home, an empty volume): a restore would
// apply it by deleting. Options.Force overrides it.
var ErrEmpty = errors.New("empty selection")

// ErrShrunk marks a snapshot refused because the home lost most of what its
// parent had: committing it would bury the good history under an empty or
// half-restored home (a controller that started without its restore, a
// wiped volume). Options.AllowShrink overrides it.
var ErrShrunk = errors.New("the selection shrank sharply since the last snapshot")

// census counts what a snapshot selects, to compare it with its parent.
type census struct {
	files, bytes int64
	top          map[string]int64 // entries under each top-level name
}

func (c *census) add(e *archive.Entry) {
	if e.Type == archive.TypeFile {
		c.files++
		c.bytes += e.Size
	}
	if c.top == nil {
		c.top = map[string]int64{}
	}
	top, _, _ := strings.Cut(e.Path, "/")
	c.top[top]++
}

// addSpan counts the entries a span sums up.
func (c *census) addSpan(sp *archive.Span) {
	c.files += sp.Files
	c.bytes += sp.Bytes
	if c.top == nil {
		c.top = map[string]int64{}
	}
	for top, n := range sp.Tops {
		c.top[top] += n
	}
}

// checkShrink refuses a snapshot that lost more than half of its parent's
// files or bytes, or every entry under one of the vital top-level names
// (secrets/, nodes/ for Jenkins) that the parent had.
func checkShrink(parent, next census, vital []string) error {
	var lost []string
	if parent.files > 0 && next.files*2 < parent.files {
		lost = append(lost, fmt.Sprintf("files %d → %d", parent.files, next.files))
	}
	if parent.bytes > 0 && next.bytes*2 < parent.bytes {
		lost = append(lost, fmt.Sprintf("bytes %d → %d", parent.bytes, next.bytes))
	}
	for _, v := range vital {
		if parent.top[v] > 0 && next.top[v] == 0 {
			lost = append(lost, v+"/ vanished")
		}
	}
	if len(lost) == 0 {
		return nil
	}
	return fmt.Errorf("%w (%s): refusing to commit it over the last good snapshot. If the home was wiped or Jenkins started without its restore, run `restore` first", ErrShrunk, strings.Join(lost, ", "))
}
