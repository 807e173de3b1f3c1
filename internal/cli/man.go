package cli

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"strings"
)

//go:generate go run ./gendocs

// Generated returns the files written from the command table, by path
// from the repository's root: homesnap(1) and a man page per command that
// takes flags, and the bash, zsh and fish completion scripts. They are
// committed (TestGeneratedFilesAreCurrent keeps them so), and the release
// packages ship them as they are: no build step runs the binary.
func Generated() (map[string][]byte, error) {
	files := map[string][]byte{}
	var b bytes.Buffer
	writeMainPage(&b)
	files["docs/man/homesnap.1"] = bytes.Clone(b.Bytes())
	for i := range commands {
		c := &commands[i]
		if c.config == nil {
			continue
		}
		h, err := helpOf(c)
		if err != nil {
			return nil, err
		}
		b.Reset()
		writeCommandPage(&b, c, h)
		files["docs/man/homesnap-"+c.name+".1"] = bytes.Clone(b.Bytes())
	}
	for name, write := range map[string]func(io.Writer){
		"homesnap.bash": bashCompletion, "_homesnap": zshCompletion, "homesnap.fish": fishCompletion,
	} {
		b.Reset()
		write(&b)
		files["docs/completion/"+name] = bytes.Clone(b.Bytes())
	}
	return files, nil
}

// GenerateCommand is the command that rewrites the generated files, for
// the message of a test that finds them stale.
const GenerateCommand = "go generate ./internal/cli"

const manHeader = `.\" Generated from homesnap's command table by ` + GenerateCommand + `: do not edit.
`

// roff escapes text for a man page: a backslash is written \e, a hyphen
// \- (an ASCII minus, so that a flag copied from the page still works), and
// a line that would start with a control character gets a zero-width
// escape in front.
func roff(text string) string {
	text = strings.NewReplacer(`\`, `\e`, "-", `\-`).Replace(text)
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, ".") || strings.HasPrefix(l, "'") {
			lines[i] = `\&` + l
		}
	}
	return strings.Join(lines, "\n")
}

func bold(s string) string   { return `\fB` + roff(s) + `\fR` }
func italic(s string) string { return `\fI` + roff(s) + `\fR` }

// writeTitle writes the header, the title line and NAME. The text is
// neither hyphenated nor justified: a flag or a page name broken at a
// hyphen could not be copied.
func writeTitle(w io.Writer, page, summary string) {
	fmt.Fprint(w, manHeader)
	fmt.Fprintf(w, ".TH %s 1 \"\" \"homesnap\" \"homesnap manual\"\n.nh\n.ad l\n.SH NAME\n%s \\- %s\n", roff(strings.ToUpper(page)), roff(page), roff(summary))
}

// writeExitSection lists the statuses of codes.
func writeExitSection(w io.Writer, codes []int) {
	fmt.Fprint(w, ".SH EXIT STATUS\n")
	for _, s := range exitStatuses {
		if slices.Contains(codes, s.code) {
			fmt.Fprintf(w, ".TP\n%s\n%s\n", bold(fmt.Sprint(s.code)), roff(s.what))
		}
	}
}

// writeSeeAlso writes SEE ALSO: the other pages, and the documentation.
func writeSeeAlso(w io.Writer, except string) {
	var refs []string
	for _, page := range append([]string{"homesnap"}, pageNames()...) {
		if page != except {
			refs = append(refs, bold(page)+"(1)")
		}
	}
	fmt.Fprintf(w, ".SH SEE ALSO\n%s\n.PP\n%s\n", strings.Join(refs, ",\n"),
		roff("The documentation: https://github.com/homesnap/homesnap/tree/main/docs (docs/usage.md: every flag and variable; docs/runbooks.md: what to do on each exit status)."))
}

// pageNames are the commands' pages, in the table's order.
func pageNames() []string {
	var n []string
	for _, c := range commands {
		if c.config != nil {
			n = append(n, "homesnap-"+c.name)
		}
	}
	return n
}

// writeMainPage writes homesnap(1): the commands, what every command
// shares, and every exit status.
func writeMainPage(w io.Writer) {
	writeTitle(w, "homesnap", "keep a Jenkins controller's home in a store across pod restarts")
	fmt.Fprintf(w, ".SH SYNOPSIS\n%s %s [%s]\n.br\n%s %s | %s\n.SH DESCRIPTION\n%s\n.SH COMMANDS\n",
		bold("homesnap"), italic("COMMAND"), italic("flags"), bold("homesnap"), bold("--help"), bold("--version"), roff(intro))
	var all []int
	for _, c := range commands {
		tag := bold(c.name)
		switch c.name {
		case "help":
			tag += " [" + italic("COMMAND") + "]"
		case "completion":
			tag += " " + italic(strings.Join(argsOf(&c), "|"))
		}
		about := roff(c.summary + ".")
		if c.config != nil {
			about += "\nSee " + bold("homesnap-"+c.name) + "(1)."
		}
		fmt.Fprintf(w, ".TP\n%s\n%s\n", tag, about)
		for _, code := range c.exits {
			if !slices.Contains(all, code) {
				all = append(all, code)
			}
		}
	}
	fmt.Fprintf(w, ".SH ENVIRONMENT\n%s\n.PP\n%s\n", roff(notes),
		roff("JENKINS_HOME is the home when neither --home nor HOMESNAP_HOME is given. GOMEMLIMIT overrides the soft memory limit of 80 MiB, which the sidecar raises to keep 48 MiB for snapshots beside a large change journal (about 50 bytes a watched directory)."))
	writeExitSection(w, all)
	writeSeeAlso(w, "homesnap")
}

// writeCommandPage writes homesnap-NAME(1) from the command's help.
func writeCommandPage(w io.Writer, c *command, h commandHelp) {
	page := "homesnap-" + c.name
	writeTitle(w, page, c.summary)
	fmt.Fprintf(w, ".SH SYNOPSIS\n%s %s\n.SH DESCRIPTION\n%s\n.SH OPTIONS\n%s\n",
		bold("homesnap "+c.name), italic(h.synopsis), roff(h.about),
		roff("Each flag is also set by the environment variable in brackets; a flag wins."))
	for _, f := range h.flags {
		var tag string
		switch {
		case f.flag == "":
			tag = bold(f.env) + " (variable only)"
		case f.arg == "":
			tag = bold("--" + f.flag)
		default:
			arg, rest, _ := strings.Cut(f.arg, " ")
			tag = bold("--"+f.flag) + " " + italic(arg)
			if rest != "" {
				tag += " " + roff(rest)
			}
		}
		desc := f.desc
		if n := f.note(); n != "" && f.flag != "" {
			desc += " [" + n + "]"
		}
		fmt.Fprintf(w, ".TP\n%s\n%s\n", tag, roff(desc))
	}
	writeExitSection(w, c.exits)
	writeSeeAlso(w, page)
}
