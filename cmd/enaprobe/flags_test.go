package main

import (
	"context"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/enaprobe/enaprobe/analyzer"
	"github.com/enaprobe/enaprobe/internal/ena"
	"github.com/enaprobe/enaprobe/internal/record"
	"github.com/enaprobe/enaprobe/internal/testutil/privtest"
)

// refreshArgs are values of --counter-refresh and the option each gives.
var refreshArgs = []struct {
	arg  string
	want time.Duration
}{
	{"auto", 0},
	{"0", analyzer.RefreshEveryRead},
	{"100ms", 100 * time.Millisecond},
	{"1s", time.Second},
}

// TestCounterRefreshFlag: --counter-refresh auto learns the refresh, 0
// says every read, a period up to 1 s is taken as given; analyze over a
// recording notes what it overrides, and the option round-trips through
// the recording's inputs.
func TestCounterRefreshFlag(t *testing.T) {
	parse := func(args ...string) *analysisFlags {
		t.Helper()
		var a analysisFlags
		fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
		a.register(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		return &a
	}
	for _, c := range refreshArgs {
		o, err := parse("--counter-refresh", c.arg).options()
		if err != nil || o.CounterRefresh != c.want {
			t.Errorf("--counter-refresh %s: %v, %v; want %v", c.arg, o.CounterRefresh, err, c.want)
		}
		if got := autoDurationName(c.want, analyzer.RefreshEveryRead); got != c.arg {
			t.Errorf("autoDurationName(%v) = %q, want %q", c.want, got, c.arg)
		}
	}
	if o, err := parse().options(); err != nil || o.CounterRefresh != 0 {
		t.Errorf("no --counter-refresh: %v, %v; want auto (0)", o.CounterRefresh, err)
	}
	for _, bad := range []string{"1.5s", "-1ms", "often"} {
		if _, err := parse("--counter-refresh", bad).options(); err == nil {
			t.Errorf("--counter-refresh %s: no error", bad)
		}
	}

	opt := analyzer.DefaultOptions()
	opt.CounterRefresh = analyzer.RefreshEveryRead
	rec := &record.Recording{Meta: record.Meta{Analysis: analyzer.Inputs(&analyzer.Result{}, opt)}}
	if got, ok := analyzer.RecordedOptions(rec); !ok || got.CounterRefresh != analyzer.RefreshEveryRead {
		t.Fatalf("recorded --counter-refresh 0 read back as %v (%v)", got.CounterRefresh, ok)
	}
	o, err := parse("--counter-refresh", "100ms").overRecording(rec)
	if err != nil || o.CounterRefresh != 100*time.Millisecond {
		t.Fatalf("analyze --counter-refresh 100ms over a recording of 0: %v, %v", o.CounterRefresh, err)
	}
	if !slices.Contains(o.Notes, "analyze --counter-refresh 100ms overrides the recorded 0") {
		t.Errorf("notes %q: want the override said", o.Notes)
	}
}

// TestCounterRefreshReachesCapture: trace's --counter-refresh reaches the
// capture's configuration (which gives it to each counter sampler,
// capture's TestSetUpGivesRefresh) and the analysis, as given.
func TestCounterRefreshReachesCapture(t *testing.T) {
	privtest.RequireRoot(t)
	for _, c := range refreshArgs {
		f := &traceFlags{}
		cmd := &cobra.Command{}
		cmd.SetErr(io.Discard)
		f.registerCapture(cmd.Flags(), ena.DefaultInterval, "")
		if err := cmd.Flags().Parse([]string{"-i", "lo", "--no-imds", "--no-owners", "--counter-refresh", c.arg}); err != nil {
			t.Fatal(err)
		}
		cfg, aopts, _, err := prepareCapture(context.Background(), cmd, f, func() error { return nil })
		if err != nil {
			t.Fatalf("--counter-refresh %s: %v", c.arg, err)
		}
		if cfg.CounterRefresh != c.want || aopts.CounterRefresh != c.want {
			t.Errorf("--counter-refresh %s: the capture's %v, the analysis's %v; want %v", c.arg, cfg.CounterRefresh, aopts.CounterRefresh, c.want)
		}
	}
}
