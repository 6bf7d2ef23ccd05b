package main

import (
	"github.com/spf13/cobra"

	"github.com/enaprobe/enaprobe/report"
)

type analyzeFlags struct {
	analysis analysisFlags
	out      outputFlags
}

func newAnalyzeCommand() *cobra.Command {
	f := &analyzeFlags{}
	cmd := &cobra.Command{
		Use:   "analyze BUNDLE",
		Short: "Analyze a saved bundle again, with other limits or thresholds (no root needed)",
		Long: `analyze reads the recording of a bundle written by "trace -o" (a directory or a
.tar.gz) and reports on it again: with another instance type, per-flow cap,
baseline or fine window. Nothing is traced.`,
		Example: `  enaprobe analyze /tmp/ena.tar.gz
  enaprobe analyze /tmp/ena --instance-type c5n.large --format json
  enaprobe analyze /tmp/ena.tar.gz --redact -o /tmp/ticket.tar.gz`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := f.out.validate(); err != nil {
				return err
			}
			aopts, err := f.analysis.options()
			if err != nil {
				return err
			}
			rec, env, err := report.ReadBundle(args[0])
			if err != nil {
				return err
			}
			log := newLogger(cmd.ErrOrStderr(), "info", false)
			return writeReports(cmd.OutOrStdout(), rec, aopts, f.out, env, log)
		},
	}
	f.analysis.register(cmd.Flags())
	f.out.register(cmd.Flags())
	return cmd
}
