package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
)

// commandHelp is what a command's --help says: its description and flags.
// The man pages (man.go) are written from the same value.
type commandHelp struct {
	name     string
	synopsis string // what follows the command's name: "[flags]", or its arguments too
	about    string
	flags    []flagHelp
}

// flagHelp is one setting as --help lists it.
type flagHelp struct {
	flag string   // "": a variable without a flag
	arg  string   // the value's name; "" for a switch
	desc string   // what it does
	env  string   // its variable; "" for --version and the deprecated mode flags
	def  string   // its default, if any
	was  []string // its old names, still read for one release
}

// note is what follows the description in brackets: the variable, the
// default and the old names.
func (f flagHelp) note() string {
	if f.env == "" {
		return ""
	}
	n := f.env
	if f.def != "" {
		n += ", default " + f.def
	}
	if len(f.was) > 0 {
		n += "; deprecated: " + strings.Join(f.was, ", ")
	}
	return n
}

// writeHelp prints h as --help does, ending with the exit statuses. A
// helpCapture receives h itself instead.
func writeHelp(w io.Writer, h commandHelp) {
	if c, ok := w.(*helpCapture); ok {
		c.help = &h
		return
	}
	fmt.Fprintf(w, "Usage: homesnap %s %s\n\n%s\n\nFlags (each also set by its environment variable; a flag wins):\n", h.name, h.synopsis, h.about)
	for _, f := range h.flags {
		name := "(variable only)"
		if f.flag != "" {
			name = "--" + f.flag
			if f.arg != "" {
				name += " " + f.arg
			}
		}
		desc := f.desc
		if n := f.note(); n != "" {
			desc += " [" + n + "]"
		}
		fmt.Fprintf(w, "  %s\n        %s\n", name, desc)
	}
	writeExits(w, h.name)
}

// helpCapture is the standard error a command's --help is asked with when
// its help is wanted as a value: the man pages read it so, through the
// path --help takes, so that they cannot say anything else.
type helpCapture struct {
	io.Writer // anything else the command writes is dropped
	help      *commandHelp
}

// helpOf returns the help of c, a command that takes flags.
func helpOf(c *command) (commandHelp, error) {
	capture := &helpCapture{Writer: io.Discard}
	err := c.run(context.Background(), []string{"--help"}, io.Discard, capture)
	if capture.help == nil {
		return commandHelp{}, fmt.Errorf("%s --help printed no help: %v", c.name, err)
	}
	return *capture.help, nil
}
