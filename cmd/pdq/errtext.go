package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"pdq/internal/termsafe"
)

// internalPrefixes are the names of pdq's own packages that start their error messages. They
// say where in the code an error arose, which means nothing to a person running a command, so
// errorLine drops them from the front of a message.
var internalPrefixes = []string{"reportview", "rules", "synth", "quantize", "kernels", "publish", "store", "convert"}

// errorLine is the line main prints for err, returned by command cmd: "pdq CMD: message". Leading
// "name: " prefixes that repeat the command's name or name an internal package are dropped, so
// the message speaks of the user's command and files: "pdq report: open x.json: no such file or
// directory" rather than "pdq: reportview: open x.json: ...".
func errorLine(cmd *cobra.Command, err error) string {
	msg := err.Error()
	name := "pdq"
	if cmd != nil && cmd.HasParent() {
		name = cmd.CommandPath()
	}
	own := strings.Fields(strings.TrimPrefix(name, "pdq"))
	for range 3 {
		trimmed := false
		for _, p := range append(own, internalPrefixes...) {
			if rest, ok := strings.CutPrefix(msg, p+": "); ok {
				msg, trimmed = rest, true
			}
		}
		if !trimmed {
			break
		}
	}
	// Messages quote names read from files; what a terminal would act on is escaped still.
	return termsafe.String(name + ": " + msg)
}

// exactArgs is cobra.ExactArgs that reports a usage error (exit status 2) naming the arguments
// the command wants, as its Use line spells them.
func exactArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) == n {
			return nil
		}
		usage := fmt.Sprintf("\n\nUsage: %s\nRun '%s --help' for examples.", cmd.UseLine(), cmd.CommandPath())
		if n == 0 {
			return usagef("takes no arguments, got %d (%s)%s", len(args), strings.Join(quoteAll(args), " "), usage)
		}
		want := strings.Join(argNames(cmd.Use), " ")
		plural := "s"
		if n == 1 {
			plural = ""
		}
		got := "none"
		if len(args) > 0 {
			got = fmt.Sprintf("%d (%s)", len(args), strings.Join(quoteAll(args), " "))
		}
		return usagef("want %d argument%s (%s), got %s%s", n, plural, want, got, usage)
	}
}

// argNames are the positional argument names of a Use line: "convert SRC --out DIR" gives SRC.
func argNames(use string) []string {
	var names []string
	for _, f := range strings.Fields(use)[1:] {
		if strings.HasPrefix(f, "-") || strings.HasPrefix(f, "[") {
			break
		}
		names = append(names, f)
	}
	return names
}

func quoteAll(args []string) []string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = fmt.Sprintf("%q", a)
	}
	return q
}

// flagError makes a flag parsing error a usage error and, for an unknown long flag, suggests the
// nearest one the command has ("did you mean --out?"), as cobra does for misspelled commands.
func flagError(cmd *cobra.Command, err error) error {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "unknown flag: --"); ok {
		if s := nearestFlag(cmd, name); s != "" {
			return usagef("%s\n\nDid you mean this?\n\t--%s\n\nRun '%s --help' for the flags.", msg, s, cmd.CommandPath())
		}
		return usagef("%s\n\nRun '%s --help' for the flags.", msg, cmd.CommandPath())
	}
	return usageError{err}
}

// nearestFlag is the flag of cmd (its own and inherited, hidden ones left out) closest to name by
// edit distance, when it is close enough to be a misspelling; "" otherwise.
func nearestFlag(cmd *cobra.Command, name string) string {
	best, bestD := "", 0
	visit := func(f *pflag.Flag) {
		if f.Hidden {
			return
		}
		d := editDistance(name, f.Name)
		if strings.HasPrefix(f.Name, name) && len(name) >= 3 {
			d = min(d, 1)
		}
		if best == "" || d < bestD || d == bestD && f.Name < best {
			best, bestD = f.Name, d
		}
	}
	cmd.Flags().VisitAll(visit)
	cmd.InheritedFlags().VisitAll(visit)
	if best == "" || bestD > max(1, len(name)/3) {
		return ""
	}
	return best
}

// editDistance is the optimal-string-alignment distance of a and b (bytes): insertions,
// deletions, substitutions and swaps of neighbours ("--otu" is one edit from "--out").
func editDistance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}
