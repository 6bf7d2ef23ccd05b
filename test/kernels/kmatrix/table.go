//go:build linux

package main

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/enaprobe/enaprobe/test/kernels/console"
)

// printTable writes the table: one row per check, one column per kernel,
// then the verifier's processed instructions per program, then the failures'
// details. It returns whether every check passed on every kernel.
func printTable(w io.Writer, c config, tests []string, ps []phase, outcomes []outcome) bool {
	checks := append([]string{"boot"}, tests...)
	for _, p := range ps {
		checks = append(checks, "run:"+p.name)
	}
	if c.trace {
		checks = append(checks, "trace")
	}
	ok := true
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, "CHECK")
	for _, o := range outcomes {
		fmt.Fprintf(tw, "\t%s", o.kernel)
	}
	fmt.Fprint(tw, "\n")
	row := func(name string, cell func(o outcome) string) {
		fmt.Fprint(tw, name)
		for _, o := range outcomes {
			fmt.Fprintf(tw, "\t%s", cell(o))
		}
		fmt.Fprint(tw, "\n")
	}
	row("release", func(o outcome) string { return o.release })
	row("accelerator", func(o outcome) string { return o.accel })
	row("seconds", func(o outcome) string { return fmt.Sprintf("%.0f", o.elapsed.Seconds()) })
	for _, name := range checks {
		row(name, func(o outcome) string {
			r, found := o.rep.Checks[name]
			if !found {
				r = console.Missing
				if o.rep.Checks["gate"] == console.Fail || o.rep.Checks["run:verifier"] == console.Fail {
					r = console.Blocked
				}
			}
			if r != console.Pass && r != console.Skip {
				ok = false
			}
			if name == "trace" && r == console.Pass {
				if d := o.rep.Details[name]; strings.HasPrefix(d, "attach=") {
					r += " (" + strings.Fields(d)[0] + ")"
				}
			}
			return r
		})
	}
	programs := map[string]bool{}
	for _, o := range outcomes {
		for _, v := range o.rep.Verifier {
			programs[v.Program] = true
		}
	}
	var names []string
	for p := range programs {
		names = append(names, p)
	}
	sort.Strings(names)
	for _, p := range names {
		row("insns "+p, func(o outcome) string {
			for _, v := range o.rep.Verifier {
				if v.Program == p {
					if v.Insns < 0 {
						return v.Result
					}
					if v.Result == "loaded" {
						return fmt.Sprint(v.Insns)
					}
					return fmt.Sprintf("%d %s", v.Insns, v.Result)
				}
			}
			return "-"
		})
	}
	tw.Flush()
	for _, o := range outcomes {
		if o.err != nil {
			ok = false
			fmt.Fprintf(w, "%s: %v\n", o.kernel, o.err)
		}
		for _, name := range checks {
			if d := o.rep.Details[name]; d != "" && o.rep.Checks[name] == console.Fail {
				fmt.Fprintf(w, "%s: %s: %s\n", o.kernel, name, d)
			}
		}
	}
	if ok {
		fmt.Fprintln(w, "kernel matrix: every check passed on every kernel")
	} else {
		fmt.Fprintln(w, "kernel matrix: FAILED (consoles under "+c.logs+")")
	}
	return ok
}
