package seccomp

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/enaprobe/enaprobe/internal/testutil/privtest"
)

// TestProfileGenerated: enaprobe.json is what gen.go makes of the
// runtimes' default profile installed here, so a new containers-common
// shows as a diff to commit.
func TestProfileGenerated(t *testing.T) {
	if _, err := os.Stat(Source); err != nil {
		privtest.Unavailable(t, Source+" (./.ci/deps installs golang-github-containers-common)")
	}
	gen, err := filepath.Abs("gen.go")
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "enaprobe.json")
	if b, err := exec.Command("go", "run", gen, out).CombinedOutput(); err != nil {
		t.Fatalf("go run gen.go: %v\n%s", err, b)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, Profile) {
		t.Error("enaprobe.json differs from what gen.go makes of " + Source + ": run go generate ./deploy/seccomp and commit it")
	}
}

// TestProfileAllowsBPF: the profile refuses by default, allows bpf(2)
// unconditionally (the capabilities still gate it), and keeps every other
// refusal of the default profile, perf_event_open's among them.
func TestProfileAllowsBPF(t *testing.T) {
	var p struct {
		DefaultAction string `json:"defaultAction"`
		Syscalls      []struct {
			Names  []string          `json:"names"`
			Action string            `json:"action"`
			Args   []json.RawMessage `json:"args"`
		} `json:"syscalls"`
	}
	if err := json.Unmarshal(Profile, &p); err != nil {
		t.Fatal(err)
	}
	if p.DefaultAction != "SCMP_ACT_ERRNO" {
		t.Errorf("default action %s, want SCMP_ACT_ERRNO", p.DefaultAction)
	}
	action := map[string]string{}
	for _, r := range p.Syscalls {
		for _, n := range r.Names {
			if len(r.Args) == 0 {
				action[n] = r.Action
			}
		}
	}
	for n, want := range map[string]string{"bpf": "SCMP_ACT_ALLOW", "read": "SCMP_ACT_ALLOW",
		"perf_event_open": "SCMP_ACT_ERRNO", "kexec_load": "SCMP_ACT_ERRNO"} {
		if action[n] != want {
			t.Errorf("%s: %q, want %q ", n, action[n], want)
		}
	}
}
