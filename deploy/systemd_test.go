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
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/enaprobe/enaprobe/internal/capture"
	"github.com/enaprobe/enaprobe/internal/testutil/privtest"
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
// attach, answer /healthz and detach on SIGTERM with exit 0; and every
// system call it made (strace) must pass the unit's SystemCallFilter.
func TestServeWithUnitPrivileges(t *testing.T) {
	privtest.RequireRoot(t, "setpriv", "go", "strace", "systemd-analyze")
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
	bin := buildEnaprobe(t, dir)
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
	syscalls := filepath.Join(state, "syscalls")
	cmd := exec.Command("setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups", "--no-new-privs",
		"--inh-caps", set, "--ambient-caps", set, "--bounding-set", set, "--",
		"strace", "-f", "-qq", "-c", "-o", syscalls, "--", bin, "serve", "-i", "lo", "--counters-file", "lo="+counters, "--no-imds",
		"--bundle-dir", filepath.Join(state, "bundles"), "--listen", "127.0.0.1:0", "--ready-file", ready)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	// setpriv execs strace, which runs serve as its child: signals go to
	// serve (strace detaches from its tracees when signalled itself).
	servePID := 0
	defer func() {
		if cmd.ProcessState == nil {
			if servePID > 0 {
				_ = syscall.Kill(servePID, syscall.SIGKILL)
			}
			_ = cmd.Process.Kill()
			select {
			case <-exited:
			case <-time.After(10 * time.Second):
			}
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
	children := fmt.Sprintf("/proc/%d/task/%d/children", cmd.Process.Pid, cmd.Process.Pid)
	if b, err := os.ReadFile(children); err != nil || len(strings.Fields(string(b))) != 1 {
		t.Fatalf("serve's pid from %s: %q %v", children, b, err)
	} else if servePID, err = strconv.Atoi(strings.Fields(string(b))[0]); err != nil {
		t.Fatal(err)
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
	_ = syscall.Kill(servePID, syscall.SIGTERM)
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("serve after SIGTERM: %v, want exit 0\n%s", err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("serve still running 30 s after SIGTERM\n%s", stderr.String())
	}

	allowed := syscallFilter(t, d["SystemCallFilter"])
	used := straceSummary(t, syscalls)
	if len(used) < 20 {
		t.Fatalf("strace counted %d system calls: %v", len(used), used)
	}
	t.Logf("serve's system calls: %v", used)
	for _, name := range used {
		if !allowed[name] {
			t.Errorf("serve calls %s, which SystemCallFilter=%v refuses (EPERM)", name, d["SystemCallFilter"])
		}
	}
}

// syscallFilter expands the unit's SystemCallFilter lines (names and
// @groups, as systemd-analyze syscall-filter lists them) into the set of
// allowed system calls.
func syscallFilter(t *testing.T, lines []string) map[string]bool {
	t.Helper()
	out, err := exec.Command("systemd-analyze", "syscall-filter").Output()
	if err != nil {
		t.Fatalf("systemd-analyze syscall-filter: %v", err)
	}
	groups := map[string][]string{}
	group := ""
	for _, l := range strings.Split(string(out), "\n") {
		switch f := strings.TrimSpace(l); {
		case f == "" || strings.HasPrefix(f, "#"):
		case !strings.HasPrefix(l, " "):
			group = f
		default:
			groups[group] = append(groups[group], f)
		}
	}
	allowed := map[string]bool{}
	var add func(string)
	add = func(name string) {
		if !strings.HasPrefix(name, "@") {
			allowed[name] = true
			return
		}
		members, ok := groups[name]
		if !ok {
			t.Fatalf("systemd knows no syscall group %s", name)
		}
		for _, m := range members {
			add(m)
		}
	}
	add("@default") // always allowed
	for _, l := range lines {
		for _, name := range strings.Fields(l) {
			if strings.HasPrefix(name, "~") {
				t.Fatalf("a deny list (%s) is not expected here", l)
			}
			add(name)
		}
	}
	return allowed
}

// straceSummary reads the system call names of an `strace -c` table.
func straceSummary(t *testing.T, path string) []string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, l := range strings.Split(string(raw), "\n") {
		f := strings.Fields(l)
		if len(f) < 5 || strings.HasPrefix(f[0], "-") || f[0] == "%" || f[len(f)-1] == "total" {
			continue
		}
		names = append(names, f[len(f)-1])
	}
	return names
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

// buildEnaprobe builds the enaprobe command into dir.
func buildEnaprobe(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "enaprobe")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/enaprobe").CombinedOutput(); err != nil {
		t.Fatalf("build enaprobe: %v\n%s", err, out)
	}
	return bin
}

// TestDeployedArgs: serve accepts the arguments the unit and the DaemonSet
// give it (`serve ARGS --help` exits 0 only when every flag parses).
func TestDeployedArgs(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		privtest.Unavailable(t, "go")
	}
	bin := buildEnaprobe(t, t.TempDir())
	execStart := unitDirectives(t, unitPath)["ExecStart"]
	if len(execStart) != 1 {
		t.Fatalf("ExecStart %v", execStart)
	}
	var ds appsv1.DaemonSet
	decodeStrict(t, "kubernetes/daemonset.yaml", &ds)
	c := ds.Spec.Template.Spec.Containers[0]
	for where, args := range map[string][]string{
		"the unit":      strings.Fields(execStart[0])[1:],
		"the DaemonSet": append(slices.Clone(c.Command), c.Args...),
	} {
		cmd := exec.Command(bin, append(args, "--help")...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("%s: enaprobe %s: %v\n%s", where, strings.Join(args, " "), err, out)
		}
	}
}
