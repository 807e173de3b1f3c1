// Package docs holds homesnap's documentation, one page per reader task
// (the README links them). These tests keep it whole: every relative link
// and #anchor resolves as GitHub renders it, every page is linked from
// somewhere, and every flag and variable the binaries' --help lists is
// documented here.
package docs

import (
	"bufio"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// pages are the Markdown files whose links must resolve, relative to the
// repository root.
func pages(t *testing.T) []string {
	t.Helper()
	files := []string{"README.md", "SECURITY.md", "CHANGELOG.md", "BENCHMARKS.md"}
	err := filepath.WalkDir(".", func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".md") {
			files = append(files, filepath.Join("docs", p))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// prose is a Markdown file's lines with fenced and indented code blocks
// blanked, so that neither a link nor a heading is taken from them.
func prose(text string) []string {
	var out []string
	fence, inCode, prevBlank := "", false, true
	for line := range strings.SplitSeq(text, "\n") {
		trimmed := strings.TrimLeft(line, " ")
		blank := trimmed == ""
		switch {
		case fence != "":
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			line = ""
		case strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~"):
			fence, line = trimmed[:3], ""
		case inCode && (blank || strings.HasPrefix(line, "    ")):
			line = ""
		case !blank && strings.HasPrefix(line, "    ") && prevBlank:
			inCode, line = true, ""
		default:
			inCode = false
		}
		prevBlank = blank
		out = append(out, line)
	}
	return out
}

var (
	codeSpan = regexp.MustCompile("`[^`]*`")
	heading  = regexp.MustCompile(`^ {0,3}#{1,6}\s+(.*?)(?:\s+#+)?\s*$`)
	link     = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	refDef   = regexp.MustCompile(`^ {0,3}\[[^\]]+\]:\s*(\S+)`)
	inline   = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
	scheme   = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
)

// slug is GitHub's anchor for a heading: the rendered text lowercased,
// spaces to hyphens, and every character but letters, digits, hyphens
// and underscores dropped.
func slug(text string) string {
	text = inline.ReplaceAllString(text, "$1")
	text = strings.NewReplacer("`", "", "*", "").Replace(text)
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// anchors lists a page's heading anchors; a repeated heading gets -1, -2…
func anchors(t *testing.T, file string) map[string]bool {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", file))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	out := map[string]bool{}
	for _, line := range prose(string(data)) {
		m := heading.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		s := slug(m[1])
		if n := seen[s]; n > 0 {
			out[fmt.Sprintf("%s-%d", s, n)] = true
		} else {
			out[s] = true
		}
		seen[s]++
	}
	return out
}

// TestLinksResolve: every relative link in the README, SECURITY.md,
// CHANGELOG.md, BENCHMARKS.md and docs/ names a file or directory that
// exists, every #anchor into a Markdown page names one of its headings,
// and every page under docs/ is linked from another page.
func TestLinksResolve(t *testing.T) {
	files := pages(t)
	headings := map[string]map[string]bool{}
	linked := map[string]bool{}
	for _, file := range files {
		data, err := os.ReadFile(filepath.Join("..", file))
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range prose(string(data)) {
			line = codeSpan.ReplaceAllString(line, "``")
			var dests []string
			for _, m := range link.FindAllStringSubmatch(line, -1) {
				dests = append(dests, m[1])
			}
			if m := refDef.FindStringSubmatch(line); m != nil {
				dests = append(dests, m[1])
			}
			for _, dest := range dests {
				if scheme.MatchString(dest) || strings.HasPrefix(dest, "//") {
					continue // not relative
				}
				where := fmt.Sprintf("%s:%d: %s", file, i+1, dest)
				path, frag, _ := strings.Cut(dest, "#")
				if p, err := url.PathUnescape(path); err == nil {
					path = p
				}
				target := file
				if path != "" {
					target = filepath.Clean(filepath.Join(filepath.Dir(file), path))
					if strings.HasPrefix(target, "..") {
						t.Errorf("%s: points outside the repository", where)
						continue
					}
					if _, err := os.Stat(filepath.Join("..", target)); err != nil {
						t.Errorf("%s: no such file or directory", where)
						continue
					}
					if target != file {
						linked[target] = true
					}
				}
				if frag == "" || !strings.HasSuffix(target, ".md") {
					continue
				}
				if headings[target] == nil {
					headings[target] = anchors(t, target)
				}
				if !headings[target][frag] {
					t.Errorf("%s: %s has no heading with the anchor #%s", where, target, frag)
				}
			}
		}
	}
	for _, file := range files {
		if strings.HasPrefix(file, "docs"+string(filepath.Separator)) && !linked[file] {
			t.Errorf("%s: no page links to it", file)
		}
	}
}

// TestSlug pins the anchor rules the link check relies on to headings
// these pages have.
func TestSlug(t *testing.T) {
	for text, want := range map[string]string{
		"master.key out of the store":                              "masterkey-out-of-the-store",
		"Migrating from the operator's backups":                    "migrating-from-the-operators-backups",
		"`scale.sh` on a copied home (2026-12-05)":                 "scalesh-on-a-copied-home-2026-12-05",
		"No manifest pass after a full snapshot (2026-12-04/05)":   "no-manifest-pass-after-a-full-snapshot-2026-12-0405",
		"Will my agents reconnect?":                                "will-my-agents-reconnect",
		"Design: the store format, the commit protocol":            "design-the-store-format-the-commit-protocol",
		"The [Jenkins operator](https://example.com) and HOME_DIR": "the-jenkins-operator-and-home_dir",
	} {
		if got := slug(text); got != want {
			t.Errorf("slug(%q) = %q, want %q", text, got, want)
		}
	}
	got := anchors(t, "docs/usage.md")
	for _, want := range []string{"flags-and-variables", "store-urls"} {
		if !got[want] {
			t.Errorf("docs/usage.md: no anchor %s among %v", want, got)
		}
	}
}

// TestHelpIsDocumented: every flag (--name) and every variable
// (HOMESNAP_*) that a homesnap command lists in --help appears somewhere
// under docs/, and so does every command `homesnap --help` lists. The
// lists come from the binary itself, so a command, flag or variable added
// or renamed in the code must be documented under its new name.
func TestHelpIsDocumented(t *testing.T) {
	var docs strings.Builder
	for _, f := range pages(t) {
		if strings.HasPrefix(f, "docs"+string(filepath.Separator)) {
			data, err := os.ReadFile(filepath.Join("..", f))
			if err != nil {
				t.Fatal(err)
			}
			docs.Write(data)
			docs.WriteByte('\n')
		}
	}
	text := docs.String()
	bin := t.TempDir()
	build := exec.Command("go", "build", "-trimpath", "-o", bin, "../cmd/homesnap")
	build.Env = append(os.Environ(), "CGO_ENABLED=0") // as the release: its compiles are reused
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	flagLine := regexp.MustCompile(`(?m)^\s+--([a-z0-9][a-z0-9-]*)`)
	variable := regexp.MustCompile(`HOMESNAP_[A-Z0-9_]*[A-Z0-9]`)
	documented := func(name, word string) bool {
		re := regexp.MustCompile(`(^|[^` + word + `])` + regexp.QuoteMeta(name) + `($|[^` + word + `])`)
		return re.MatchString(text)
	}
	usage, err := exec.Command(filepath.Join(bin, "homesnap"), "--help").Output()
	if err != nil {
		t.Fatalf("homesnap --help: %v\n%s", err, usage)
	}
	_, list, _ := strings.Cut(string(usage), "\nCommands:\n")
	commands := regexp.MustCompile(`(?m)^  ([a-z-]+) `).FindAllStringSubmatch(list, -1)
	if len(commands) < 6 {
		t.Fatalf("homesnap --help lists %d commands: cannot read its command list\n%s", len(commands), usage)
	}
	for _, c := range commands {
		program := c[1]
		if !documented("homesnap "+program, "a-z0-9-") {
			t.Errorf("homesnap --help lists the command %s, which nothing under docs/ mentions as `homesnap %s`", program, program)
		}
		out, err := exec.Command(filepath.Join(bin, "homesnap"), program, "--help").CombinedOutput()
		if err != nil {
			t.Fatalf("%s --help: %v\n%s", program, err, out)
		}
		if !strings.Contains(string(out), "\nFlags (") {
			continue // version, help, completion: no flags
		}
		flags := flagLine.FindAllStringSubmatch(string(out), -1)
		if len(flags) < 5 {
			t.Fatalf("%s --help lists %d flags: cannot read its flag list\n%s", program, len(flags), out)
		}
		var missing []string
		for _, m := range flags {
			if !documented("--"+m[1], "a-z0-9-") {
				missing = append(missing, "--"+m[1])
			}
		}
		for _, v := range variable.FindAllString(string(out), -1) {
			if !documented(v, "A-Z0-9_") {
				missing = append(missing, v)
			}
		}
		slices.Sort(missing)
		for _, m := range slices.Compact(missing) {
			t.Errorf("%s --help lists %s, which nothing under docs/ mentions (add it to docs/usage.md's table)", program, m)
		}
	}
}

// TestReadmeCommands: the README's first command runs the main job on the
// local store (the quickstart), its second is the test command CI runs,
// and both scripts exist.
func TestReadmeCommands(t *testing.T) {
	f, err := os.Open("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var commands []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if c, ok := strings.CutPrefix(sc.Text(), "    ./"); ok {
			commands = append(commands, "./"+c)
		}
	}
	if len(commands) < 2 || commands[0] != "./scripts/quickstart.sh" || commands[1] != "./scripts/test.sh" {
		t.Fatalf("the README's first two commands are %q, want ./scripts/quickstart.sh then ./scripts/test.sh", commands)
	}
	ci, err := os.ReadFile("../.ci/run")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(ci), "bash scripts/test.sh") {
		t.Error(".ci/run does not run scripts/test.sh, the README's test command")
	}
	for _, c := range commands[:2] {
		if _, err := os.Stat(filepath.Join("..", c)); err != nil {
			t.Error(err)
		}
	}
}
