//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/enaprobe/enaprobe/internal/record"
	"github.com/enaprobe/enaprobe/internal/testutil/privtest"
)

// TestLabRunWindow: lab run --window reaches the datapath and the lab's
// analysis alike (the analysis once kept the 1 ms default).
func TestLabRunWindow(t *testing.T) {
	privtest.RequireRoot(t, "ip", "nft", "tc")
	bundle := filepath.Join(t.TempDir(), "bundle")
	root := newRootCommand()
	var stdout, stderr bytes.Buffer
	root.SetOut(&stdout)
	root.SetErr(&stderr)
	root.SetArgs([]string{"lab", "run", "clean", "--window", "2ms", "--format", "json", "-o", bundle})
	if err := root.ExecuteContext(context.Background()); err != nil {
		t.Fatalf("lab run: %v\n%s", err, stderr.String())
	}
	var res struct {
		Trace struct {
			FineWindowUs int64 `json:"fine_window_us"`
		} `json:"trace"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("decode the JSON report: %v\n%.3000s", err, stdout.String())
	}
	const want = 2 * time.Millisecond
	if got := time.Duration(res.Trace.FineWindowUs) * time.Microsecond; got != want {
		t.Errorf("the report's fine window is %v, want %v", got, want)
	}
	rec, _, err := record.ReadBundle(bundle)
	if err != nil {
		t.Fatal(err)
	}
	if got := time.Duration(rec.Meta.WindowNs); got != want {
		t.Errorf("the datapath's window is %v, want %v", got, want)
	}
	if a := rec.Meta.Analysis; a == nil || time.Duration(a.FineWindowNs) != want {
		t.Errorf("the recorded analysis window is %+v, want %v", a, want)
	}
}
