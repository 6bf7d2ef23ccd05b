package deploy

import (
	"bufio"
	"bytes"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/enaprobe/enaprobe/capture"
	"github.com/enaprobe/enaprobe/internal/privtest"
)

const unitPath = "systemd/enaprobe.service"

// unitDirectives reads a unit file into its [Service] directives: the values
// of each key in order.
func unitDirectives(t *testing.T, path string) map[string][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]string{}
	section := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "["):
			section = strings.Trim(line, "[]")
		case section == "Service":
			k, v, ok := strings.Cut(line, "=")
			if !ok {
				t.Fatalf("%s: %q is not KEY=VALUE", path, line)
			}
			out[k] = append(out[k], v)
		}
	}
	return out
}

// TestSystemdUnit checks the unit the way systemd reads it (`systemd-analyze
// verify`, which only warns: any output fails), its exposure with
// `systemd-analyze security --offline`, and that it grants exactly the
// capabilities enaprobe checks for, with the hardening that matters.
func TestSystemdUnit(t *testing.T) {
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		privtest.Unavailable(t, "systemd-analyze (Debian: systemd)")
	}
	// ExecStart must name an executable that exists: a copy of the unit
	// pointing at a stand-in.
	dir := t.TempDir()
	bin := filepath.Join(dir, "enaprobe")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(unitPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(raw, []byte("ExecStart=/usr/local/bin/enaprobe serve ")) {
		t.Fatalf("%s: ExecStart is not /usr/local/bin/enaprobe serve", unitPath)
	}
	unit := filepath.Join(dir, "enaprobe.service")
	if err := os.WriteFile(unit, bytes.ReplaceAll(raw, []byte("/usr/local/bin/enaprobe"), []byte(bin)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("systemd-analyze", "verify", unit).CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
	// 0 is fully locked down, 10 is unprotected; this unit scores 2.1 (a
	// service that loads BPF programs cannot go much lower).
	out, err = exec.Command("systemd-analyze", "security", "--offline=yes", "--threshold=25", unit).CombinedOutput()
	if err != nil {
		t.Errorf("systemd-analyze security: %v\n%s", err, out)
	}

	d := unitDirectives(t, unitPath)
	want := strings.Join(capture.RequiredCapabilities, " ")
	for _, k := range []string{"CapabilityBoundingSet", "AmbientCapabilities"} {
		if !slices.Equal(d[k], []string{want}) {
			t.Errorf("%s=%v, want %s (capture.RequiredCapabilities)", k, d[k], want)
		}
	}
	for k, v := range map[string]string{
		"NoNewPrivileges": "yes", "ProtectSystem": "strict", "ProtectHome": "yes", "PrivateTmp": "yes",
		"DynamicUser": "yes", "StateDirectory": "enaprobe", "ReadWritePaths": "/var/lib/enaprobe",
		"RestartPreventExitStatus": "2 3", "LimitMEMLOCK": "infinity",
	} {
		if !slices.Equal(d[k], []string{v}) {
			t.Errorf("%s=%v, want %s", k, d[k], v)
		}
	}
	if _, ok := d["User"]; ok {
		t.Error("User= set: the unit runs as a dynamic user")
	}
}

// TestServeWithUnitPrivileges runs `enaprobe serve` as the unit does: a user
// that is not root, no new privileges, and only the unit's ambient
// capabilities (setpriv, since systemd does not run this machine). It must
// attach, answer /healthz and detach on SIGTERM with exit 0.
func TestServeWithUnitPrivileges(t *testing.T) {
	privtest.RequireRoot(t, "setpriv", "go")
	d := unitDirectives(t, unitPath)
	var caps []string
	for _, c := range strings.Fields(d["AmbientCapabilities"][0]) {
		caps = append(caps, "+"+strings.ToLower(strings.TrimPrefix(c, "CAP_")))
	}
	set := "-all," + strings.Join(caps, ",")

	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} { // nobody reaches the binary
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(dir, "enaprobe")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/enaprobe").CombinedOutput(); err != nil {
		t.Fatalf("build enaprobe: %v\n%s", err, out)
	}
	// lo has no ENA counters: a file in ethtool -S format stands in.
	counters := filepath.Join(dir, "counters")
	if err := os.WriteFile(counters, []byte("NIC statistics:\n     bw_in_allowance_exceeded: 0\n     bw_out_allowance_exceeded: 0\n     pps_allowance_exceeded: 0\n     conntrack_allowance_exceeded: 0\n     linklocal_allowance_exceeded: 0\n     conntrack_allowance_available: 1000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "state") // StateDirectory, owned by the user
	if err := os.Mkdir(state, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(state, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	ready := filepath.Join(state, "ready")
	cmd := exec.Command("setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups", "--no-new-privs",
		"--inh-caps", set, "--ambient-caps", set, "--bounding-set", set, "--",
		bin, "serve", "-i", "lo", "--counters-file", "lo="+counters, "--no-imds",
		"--bundle-dir", filepath.Join(state, "bundles"), "--listen", "127.0.0.1:0", "--ready-file", ready)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-exited
		}
	}()
	addr := ""
	for deadline := time.Now().Add(60 * time.Second); addr == ""; {
		select {
		case err := <-exited:
			t.Fatalf("serve exited before it was ready: %v\n%s", err, stderr.String())
		default:
		}
		if b, err := os.ReadFile(ready); err == nil && bytes.HasSuffix(b, []byte("\n")) {
			addr = strings.TrimSpace(string(b))
		} else if time.Now().After(deadline) {
			t.Fatalf("serve not ready within 60 s\n%s", stderr.String())
		} else {
			time.Sleep(50 * time.Millisecond)
		}
	}
	healthy := false
	for deadline := time.Now().Add(20 * time.Second); !healthy && time.Now().Before(deadline); {
		if code, err := get("http://" + addr + "/healthz"); err == nil && code == http.StatusOK {
			healthy = true
		} else {
			time.Sleep(100 * time.Millisecond)
		}
	}
	if !healthy {
		t.Errorf("/healthz never answered 200 under the unit's privileges\n%s", stderr.String())
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("serve after SIGTERM: %v, want exit 0\n%s", err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("serve still running 30 s after SIGTERM\n%s", stderr.String())
	}
}

func get(url string) (int, error) {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, fmt.Errorf("%s: %s", url, resp.Status)
	}
	return resp.StatusCode, nil
}
