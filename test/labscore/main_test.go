package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestScore scores a kept lab recording (testdata/lab) as a run: right
// with its truth both ways, and wrong once the truth's burst is moved
// 10 ms later, its finding then starting too early.
func TestScore(t *testing.T) {
	dir := t.TempDir()
	const name = "impact-inbound-bunch-gap"
	run := filepath.Join(dir, "ig")
	if err := os.MkdirAll(run, 0o755); err != nil {
		t.Fatal(err)
	}
	rec, err := os.ReadFile(filepath.Join("../../testdata/lab", name+".rec.gz"))
	if err != nil {
		t.Fatal(err)
	}
	env := `{"command_line": "enaprobe lab run impact-inbound --allowance given -o ig"}`
	for path, b := range map[string][]byte{
		filepath.Join(run, "recording.json.gz"): rec,
		filepath.Join(run, "environment.json"):  []byte(env),
	} {
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	truth, err := os.ReadFile(filepath.Join("../../testdata/lab", name+".truth.json"))
	if err != nil {
		t.Fatal(err)
	}
	writeTruth := func(b []byte) {
		if err := os.WriteFile(filepath.Join(dir, "ig.truth.json"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeTruth(truth)
	if names, err := bundles(dir); err != nil || len(names) != 1 || names[0] != "ig" {
		t.Fatalf("bundles = %v, %v; want [ig]", names, err)
	}
	for _, mode := range []string{"recorded", "unknown"} {
		v, err := score(dir, "ig", mode)
		if err != nil {
			t.Fatal(err)
		}
		if !v.right || v.lagClass != "within" {
			t.Errorf("%s: %s, want right, the lag within 5 ms", mode, v.line())
		}
	}
	var moved map[string]any
	if err := json.Unmarshal(truth, &moved); err != nil {
		t.Fatal(err)
	}
	b := moved["Bursts"].([]any)[0].(map[string]any)
	b["StartNs"] = b["StartNs"].(float64) + 10e6
	out, _ := json.Marshal(moved)
	writeTruth(out)
	v, err := score(dir, "ig", "recorded")
	if err != nil {
		t.Fatal(err)
	}
	if v.right || !strings.Contains(v.line(), "missed (nearest -10.") {
		t.Errorf("the burst moved 10 ms later: %s, want it missed, the finding 10 ms early", v.line())
	}
}
