package main

import (
	"io"

	"github.com/rs/zerolog"

	"github.com/enaprobe/enaprobe/analyzer"
	"github.com/enaprobe/enaprobe/record"
	"github.com/enaprobe/enaprobe/report"
)

// environment describes the trace for the bundle.
func environment(rec *record.Recording, commandLine string) report.Environment {
	env := report.EnvironmentOf(rec)
	env.CommandLine = commandLine
	return env
}

// writeReports analyzes rec and writes the report to w in the chosen
// format, and the bundle when asked.
func writeReports(w io.Writer, rec *record.Recording, opts analyzer.Options, out outputFlags, env report.Environment, log zerolog.Logger) error {
	in := report.Input{Result: analyzer.Analyze(rec, opts), Recording: rec, Env: env}
	if out.redact {
		in = report.Redact(in)
	}
	if out.output != "" {
		if err := report.WriteBundle(out.output, in); err != nil {
			return err
		}
		log.Info().Str("bundle", out.output).Msg("bundle written")
	}
	if out.format == "json" {
		return report.JSON(w, in.Result)
	}
	return report.Text(w, in)
}
