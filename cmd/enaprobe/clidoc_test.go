package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

var updateCLIReference = flag.Bool("update-cli-reference", false, "write ../../docs/cli.md from the commands (go generate ./cmd/enaprobe)")

const cliReferencePath = "../../docs/cli.md"

// TestCLIReference: docs/cli.md is what the commands generate, so a flag
// added, renamed or reworded without regenerating fails here.
func TestCLIReference(t *testing.T) {
	var want bytes.Buffer
	if err := writeCLIReference(&want, newRootCommand()); err != nil {
		t.Fatal(err)
	}
	if *updateCLIReference {
		if err := os.WriteFile(cliReferencePath, want.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(cliReferencePath)
	if err != nil {
		t.Fatalf("%v: run `go generate ./cmd/enaprobe`", err)
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("docs/cli.md differs from what the commands generate (first difference: %s): run `go generate ./cmd/enaprobe`",
			firstDifference(string(got), want.String()))
	}
}

// TestCLIReferenceCatchesAFlag: the reference changes when a flag is added,
// so TestCLIReference cannot pass over a stale file.
func TestCLIReferenceCatchesAFlag(t *testing.T) {
	var before, after bytes.Buffer
	if err := writeCLIReference(&before, newRootCommand()); err != nil {
		t.Fatal(err)
	}
	root := newRootCommand()
	for _, c := range root.Commands() {
		if c.Name() == "trace" {
			c.Flags().Bool("no-such-flag", false, "a flag added without regenerating")
		}
	}
	if err := writeCLIReference(&after, root); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(after.String(), "`--no-such-flag`") || bytes.Equal(before.Bytes(), after.Bytes()) {
		t.Error("a new trace flag does not change the reference")
	}
}

// firstDifference names the first line where the two texts differ.
func firstDifference(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := 0; i < len(g) || i < len(w); i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			return fmt.Sprintf("line %d is %q, the commands give %q", i+1, gl, wl)
		}
	}
	return "none"
}

// writeCLIReference renders every available command, its help text and a
// table of its flags, as one Markdown file. It walks the cobra tree itself
// rather than using github.com/spf13/cobra/doc: that package writes a file
// per command with a generated-on footer, and it would bring
// github.com/cpuguy83/go-md2man and its Markdown parser into go.mod for man
// pages we do not make; a walk of 60 lines gives one file with anchors and
// flag tables, from the same strings --help prints.
func writeCLIReference(w io.Writer, root *cobra.Command) error {
	root.InitDefaultCompletionCmd()
	var b strings.Builder
	b.WriteString("# Command-line reference\n\n")
	b.WriteString("Generated from the commands by `go generate ./cmd/enaprobe`; do not edit (a test fails when this file and the commands differ). `enaprobe COMMAND --help` prints the same.\n\n")
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		writeCommand(&b, c)
		if c.Name() == "completion" {
			return // cobra's own per-shell commands: enaprobe completion SHELL --help
		}
		for _, sub := range c.Commands() {
			if sub.IsAvailableCommand() {
				walk(sub)
			}
		}
	}
	walk(root)
	_, err := io.WriteString(w, b.String())
	return err
}

func writeCommand(b *strings.Builder, c *cobra.Command) {
	fmt.Fprintf(b, "## %s\n\n", c.CommandPath())
	if c.Short != "" {
		fmt.Fprintf(b, "%s.\n\n", strings.TrimSuffix(c.Short, "."))
	}
	if c.Long != "" {
		fmt.Fprintf(b, "```text\n%s\n```\n\n", strings.TrimSpace(c.Long))
	}
	if c.Runnable() {
		fmt.Fprintf(b, "```text\n%s\n```\n\n", c.UseLine())
	}
	if c.Example != "" {
		fmt.Fprintf(b, "Examples:\n\n```sh\n%s\n```\n\n", dedent(c.Example))
	}
	var subs []string
	for _, sub := range c.Commands() {
		switch {
		case !sub.IsAvailableCommand():
		case c.Name() == "completion":
			subs = append(subs, "`"+sub.Name()+"`")
		default:
			subs = append(subs, fmt.Sprintf("[`%s`](#%s)", sub.Name(), strings.ReplaceAll(sub.CommandPath(), " ", "-")))
		}
	}
	if len(subs) > 0 {
		fmt.Fprintf(b, "Commands: %s.\n\n", strings.Join(subs, ", "))
	}
	writeFlags(b, "", c.LocalFlags())
	writeFlags(b, "Inherited flags", c.InheritedFlags())
}

func writeFlags(b *strings.Builder, title string, flags *pflag.FlagSet) {
	var rows []string
	flags.VisitAll(func(f *pflag.Flag) {
		if f.Hidden || f.Name == "help" {
			return
		}
		typ, usage := pflag.UnquoteUsage(f)
		name := "--" + f.Name
		if f.Shorthand != "" {
			name = "-" + f.Shorthand + ", " + name
		}
		if typ != "" {
			name += " " + typ
		}
		def := ""
		if !zeroDefault(f) {
			def = "`" + f.DefValue + "`"
		}
		rows = append(rows, fmt.Sprintf("| `%s` | %s | %s |", name, def, strings.ReplaceAll(usage, "|", `\|`)))
	})
	if len(rows) == 0 {
		return
	}
	if title != "" {
		fmt.Fprintf(b, "%s:\n\n", title)
	}
	b.WriteString("| flag | default | meaning |\n|---|---|---|\n")
	b.WriteString(strings.Join(rows, "\n"))
	b.WriteString("\n\n")
}

// dedent removes the indent cobra's examples share (two spaces, by convention).
func dedent(text string) string {
	lines := strings.Split(strings.TrimRight(text, "\n "), "\n")
	indent := -1
	for _, l := range lines {
		if strings.TrimSpace(l) == "" {
			continue
		}
		if n := len(l) - len(strings.TrimLeft(l, " ")); indent < 0 || n < indent {
			indent = n
		}
	}
	for i, l := range lines {
		if len(l) >= indent {
			lines[i] = l[indent:]
		}
	}
	return strings.Join(lines, "\n")
}

// zeroDefault: a default --help leaves out (pflag prints none for these).
func zeroDefault(f *pflag.Flag) bool {
	switch f.DefValue {
	case "", "false", "0", "0s", "[]", "<nil>":
		return true
	}
	return false
}
