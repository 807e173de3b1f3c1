package cli

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/homesnap/homesnap/internal/testenv"
)

const repoRoot = "../.."

// The man pages and completion scripts the packages ship are the committed
// files: each must be what the code generates now, and nothing else may
// lie beside them.
func TestGeneratedFilesAreCurrent(t *testing.T) {
	files, err := Generated()
	if err != nil {
		t.Fatal(err)
	}
	dirs := map[string]bool{}
	for name, want := range files {
		dirs[filepath.Dir(name)] = true
		got, err := os.ReadFile(filepath.Join(repoRoot, name))
		if err != nil {
			t.Errorf("%v: run `%s` and commit the result", err, GenerateCommand)
		} else if !bytes.Equal(got, want) {
			t.Errorf("%s is not what the code generates: run `%s` and commit the result", name, GenerateCommand)
		}
	}
	for dir := range dirs {
		entries, err := os.ReadDir(filepath.Join(repoRoot, dir))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if _, ok := files[dir+"/"+e.Name()]; !ok {
				t.Errorf("%s/%s is not generated any more: run `%s`, which removes it", dir, e.Name(), GenerateCommand)
			}
		}
	}
	if len(files) < 4 {
		t.Errorf("%d files generated, want the man pages and three completion scripts", len(files))
	}
}

// unroff undoes the escapes a page's text is written with.
var unroff = strings.NewReplacer(`\-`, "-", `\e`, `\`, `\&`, "", `\fB`, "", `\fI`, "", `\fR`, "")

// Each command's page lists every flag and variable its --help lists, the
// command's exit statuses and no other, and homesnap(1) every command.
func TestManPagesSayWhatHelpSays(t *testing.T) {
	files, err := Generated()
	if err != nil {
		t.Fatal(err)
	}
	flagOrVar := regexp.MustCompile(`(?m)^  --[a-z0-9-]+|HOMESNAP_[A-Z0-9_]*[A-Z0-9]`)
	main := unroff.Replace(string(files["docs/man/homesnap.1"]))
	for _, c := range commands {
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(c.name) + `\b`).MatchString(main) {
			t.Errorf("homesnap(1) does not list the command %s", c.name)
		}
		if c.config == nil {
			continue
		}
		page, ok := files["docs/man/homesnap-"+c.name+".1"]
		if !ok {
			t.Errorf("no page homesnap-%s.1", c.name)
			continue
		}
		text := unroff.Replace(string(page))
		r := homesnapRun("homesnap", c.name, "--help")
		names := flagOrVar.FindAllString(r.stderr, -1)
		if r.code != 0 || len(names) < 3 {
			t.Fatalf("%s --help: exit %d, %d flags and variables\n%s", c.name, r.code, len(names), r.stderr)
		}
		for _, n := range names {
			if !strings.Contains(text, strings.TrimSpace(n)) {
				t.Errorf("homesnap-%s(1) does not mention %s, which --help lists", c.name, strings.TrimSpace(n))
			}
		}
		_, exits, _ := strings.Cut(text, ".SH EXIT STATUS\n")
		exits, _, _ = strings.Cut(exits, ".SH")
		var listed []int
		for _, s := range exitStatuses {
			if strings.Contains(exits, ".TP\n"+strconv.Itoa(s.code)+"\n") {
				listed = append(listed, s.code)
			}
		}
		if !slices.Equal(listed, c.exits) {
			t.Errorf("homesnap-%s(1) lists the exit statuses %v, want %v", c.name, listed, c.exits)
		}
	}
}

// groff reads every page without a warning, and a flag on the rendered
// page is spelled with ASCII hyphens, so that it works when copied.
func TestManPagesRender(t *testing.T) {
	groff := testenv.Tool(t, "groff")
	files, err := Generated()
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range files {
		if !strings.HasPrefix(name, "docs/man/") {
			continue
		}
		cmd := exec.Command(groff, "-man", "-Tutf8", "-ww", "-P-cbou")
		cmd.Stdin = bytes.NewReader(data)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil || stderr.Len() > 0 {
			t.Errorf("groff -man %s: %v\n%s", name, err, stderr.String())
		}
		if !strings.Contains(string(out), "--help") && !strings.Contains(string(out), "--store") {
			t.Errorf("%s rendered has neither --help nor --store with ASCII hyphens:\n%s", name, out)
		}
	}
}
