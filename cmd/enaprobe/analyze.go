package main

import (
	"errors"
	"io/fs"
	"time"

	"github.com/spf13/cobra"

	"github.com/enaprobe/enaprobe/internal/record"
	"github.com/enaprobe/enaprobe/loader"
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
.tar.gz, or the bare recording.json.gz out of one) and reports on it again. With no flags it reproduces the bundle's own report: the
recording keeps every limit its analysis used and where it came from. A flag
(another instance type, per-flow cap, baseline or fine window) overrides the
recorded value, and the report notes it. Nothing is traced.`,
		Example: `  enaprobe analyze /tmp/ena.tar.gz
  enaprobe analyze /tmp/ena --instance-type c5n.large --format json
  enaprobe analyze /tmp/ena.tar.gz --redact -o /tmp/ticket.tar.gz`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := f.out.validate(); err != nil {
				return err
			}
			// Flags first: a bad flag is a usage error whatever the bundle.
			if err := f.analysis.check(); err != nil {
				return err
			}
			rec, env, err := record.ReadBundle(args[0])
			var nb *record.NotBundleError
			var bound *record.BoundError
			if errors.Is(err, fs.ErrNotExist) || errors.As(err, &nb) || errors.As(err, &bound) {
				return usageError{err}
			}
			if err != nil {
				return err
			}
			aopts, err := f.analysis.overRecording(rec)
			if err != nil {
				return err
			}
			if err := checkBundlePath(f.out.output); err != nil {
				return err
			}
			log := newLogger(cmd.ErrOrStderr(), "info", false)
			// The analysis applies the datapath's window rule to the
			// recording's bucket; say so when it raises the window.
			bucket := time.Duration(rec.GridBucketNs())
			w := loader.FineWindow(bucket, aopts.FineWindow)
			sayRaised(log, aopts.FineWindow, w, bucket, "the recording's ")
			aopts.FineWindow = w
			return writeReports(cmd.OutOrStdout(), rec, aopts, f.out, env, log)
		},
	}
	f.analysis.register(cmd.Flags())
	f.out.register(cmd.Flags())
	return cmd
}
