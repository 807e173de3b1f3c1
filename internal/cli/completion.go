package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// completionCommand is `homesnap completion bash|zsh|fish`: a script
// written from the commands table and each command's flag definitions, so
// that it cannot fall behind them.
func completionCommand(_ context.Context, args []string, stdout, _ io.Writer) error {
	if len(args) != 1 {
		return usageError{fmt.Errorf("completion takes one shell: bash, zsh or fish (e.g. homesnap completion bash > /etc/bash_completion.d/homesnap)")}
	}
	var write func(io.Writer)
	switch args[0] {
	case "bash":
		write = bashCompletion
	case "zsh":
		write = zshCompletion
	case "fish":
		write = fishCompletion
	default:
		return usageError{fmt.Errorf("completion %s: want bash, zsh or fish", args[0])}
	}
	write(stdout)
	return nil
}

// flagInfo is one flag as a completion offers it.
type flagInfo struct {
	name, about string
	value       bool // takes a value
}

// flagsOf lists the flags command c takes, as its --help lists them.
func flagsOf(c *command) []flagInfo {
	if c.config == nil {
		return nil
	}
	fs, _, settings := flagSet(c.name, c.config())
	var out []flagInfo
	for _, s := range settings {
		f := fs.Lookup(s.flag)
		b, ok := f.Value.(interface{ IsBoolFlag() bool })
		out = append(out, flagInfo{s.flag, brief(f.Usage), !ok || !b.IsBoolFlag()})
	}
	return append(out, flagInfo{"help", "show this command's flags and exit statuses", false},
		flagInfo{"version", "print the version and build", false})
}

// argsOf lists what a command without flags takes as arguments.
func argsOf(c *command) []string {
	switch c.name {
	case "help":
		return names()
	case "completion":
		return []string{"bash", "zsh", "fish"}
	}
	return nil
}

// brief is a description's first clause, short enough for a menu.
func brief(desc string) string {
	if i := strings.IndexAny(desc, ";("); i > 0 {
		desc = desc[:i]
	}
	desc = strings.TrimSpace(desc)
	if utf8.RuneCountInString(desc) > 70 {
		desc = string([]rune(desc)[:69]) + "…"
	}
	return desc
}

func bashCompletion(w io.Writer) {
	fmt.Fprintf(w, `# bash completion for homesnap: homesnap completion bash > /etc/bash_completion.d/homesnap
_homesnap() {
	local cur=${COMP_WORDS[COMP_CWORD]} words=""
	if [[ $COMP_CWORD -eq 1 ]]; then
		COMPREPLY=($(compgen -W %q -- "$cur"))
		return
	fi
	case ${COMP_WORDS[1]} in
`, strings.Join(names(), " "))
	for i := range commands {
		c := &commands[i]
		words := argsOf(c)
		for _, f := range flagsOf(c) {
			words = append(words, "--"+f.name)
		}
		fmt.Fprintf(w, "\t%s) words=%q ;;\n", c.name, strings.Join(words, " "))
	}
	fmt.Fprint(w, `	esac
	if [[ $cur == -* || ${COMP_WORDS[1]} == help || ${COMP_WORDS[1]} == completion ]]; then
		COMPREPLY=($(compgen -W "$words" -- "$cur"))
	fi
}
complete -o default -F _homesnap homesnap
`)
}

// zshQuote single-quotes s for zsh, a quote inside written as a closing
// quote, an escaped one and an opening one.
func zshQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func zshCompletion(w io.Writer) {
	fmt.Fprint(w, "#compdef homesnap\n# zsh completion for homesnap: homesnap completion zsh > \"${fpath[1]}/_homesnap\"\n_homesnap() {\n\tlocal -a commands flags\n\tcommands=(\n")
	for _, c := range commands {
		fmt.Fprintf(w, "\t\t%s\n", zshQuote(c.name+":"+c.summary))
	}
	fmt.Fprint(w, "\t)\n\tif (( CURRENT == 2 )); then\n\t\t_describe -t commands 'homesnap command' commands\n\t\treturn\n\tfi\n\tcase $words[2] in\n")
	for i := range commands {
		c := &commands[i]
		if a := argsOf(c); a != nil {
			fmt.Fprintf(w, "\t\t%s) compadd -- %s; return ;;\n", c.name, strings.Join(a, " "))
			continue
		}
		fmt.Fprintf(w, "\t\t%s) flags=(", c.name)
		for _, f := range flagsOf(c) {
			fmt.Fprintf(w, " %s", zshQuote("--"+f.name+":"+f.about))
		}
		fmt.Fprint(w, " ) ;;\n")
	}
	fmt.Fprint(w, `	esac
	if [[ $PREFIX == -* ]]; then
		_describe -t flags 'flag' flags
	else
		_files
	fi
}
if [[ $funcstack[1] == _homesnap ]]; then _homesnap "$@"; else compdef _homesnap homesnap; fi
`)
}

// fishQuote single-quotes s for fish, which escapes ' and \ inside.
func fishQuote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

func fishCompletion(w io.Writer) {
	fmt.Fprint(w, "# fish completion for homesnap: homesnap completion fish > ~/.config/fish/completions/homesnap.fish\n")
	for _, c := range commands {
		fmt.Fprintf(w, "complete -c homesnap -f -n __fish_use_subcommand -a %s -d %s\n", c.name, fishQuote(c.summary))
	}
	for i := range commands {
		c := &commands[i]
		cond := fishQuote("__fish_seen_subcommand_from " + c.name)
		if a := argsOf(c); a != nil {
			fmt.Fprintf(w, "complete -c homesnap -f -n %s -a %s\n", cond, fishQuote(strings.Join(a, " ")))
			continue
		}
		for _, f := range flagsOf(c) {
			r := ""
			if f.value {
				r = " -r"
			}
			fmt.Fprintf(w, "complete -c homesnap -n %s -l %s%s -d %s\n", cond, f.name, r, fishQuote(f.about))
		}
	}
}
