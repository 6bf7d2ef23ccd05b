//go:build linux

package e2e

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/enaprobe/enaprobe/internal/lab"
	"github.com/enaprobe/enaprobe/internal/testutil/privtest"
)

// The container as the DaemonSet runs it: every capability dropped but
// the three, a read-only root, the runtime's seccomp filter (ours: the
// default one refuses bpf(2), see TestPodmanDefaultSeccomp).
var containerCaps = []string{"--cap-drop=ALL", "--cap-add=BPF,NET_ADMIN,PERFMON", "--read-only"}

// seccompProfile is the profile the DaemonSet installs.
var seccompProfile = filepath.Join("..", "..", "deploy", "seccomp", "enaprobe.json")

var (
	imageOnce sync.Once
	imageName string
	imageErr  error
)

// podmanImage builds the image as `make image` does (make release, then
// scripts/image with buildah) and loads it into podman's storage, once for
// the tests that run it; it is removed after them.
func podmanImage(t *testing.T) string {
	t.Helper()
	privtest.RequireRoot(t, "podman", "buildah", "crun", "make", "unshare")
	imageOnce.Do(func() { imageName, imageErr = buildImage(t) })
	if imageErr != nil {
		t.Fatal(imageErr)
	}
	return imageName
}

func buildImage(t *testing.T) (string, error) {
	dist, err := os.MkdirTemp("", "enaprobe-image")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dist)
	name := "localhost/enaprobe-e2e:" + randomHex()
	if out, err := exec.Command("make", "-C", "../..", "release", "DIST="+dist).CombinedOutput(); err != nil {
		return "", fmt.Errorf("make release: %v\n%s", err, out)
	}
	img := exec.Command("../../scripts/image")
	img.Env = append(os.Environ(), "DIST="+dist, "IMAGE_NAME="+name)
	if out, err := img.CombinedOutput(); err != nil {
		return "", fmt.Errorf("scripts/image: %v\n%s", err, out)
	}
	if out, err := podman(t, "load", "-i", filepath.Join(dist, "enaprobe-image.tar")).CombinedOutput(); err != nil {
		return "", fmt.Errorf("podman load: %v\n%s", err, out)
	}
	atExit = append(atExit, func() {
		_ = podman(t, "rmi", "-f", name).Run()
		_ = exec.Command("buildah", "manifest", "rm", name).Run()
	})
	return name, nil
}

func randomHex() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// podman runs podman in a mount namespace of its own whose /sys/fs/cgroup
// is the cgroup v2 hierarchy alone, as on a unified host (Amazon Linux
// 2023, Bottlerocket): crun refuses this machine's hybrid layout ("cgroups
// in hybrid mode not supported"), and the host's mounts stay as they are.
func podman(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	script := `umount -l /sys/fs/cgroup && mount -t cgroup2 none /sys/fs/cgroup && exec podman --cgroup-manager cgroupfs "$@"`
	return exec.Command("unshare", append([]string{"-m", "--propagation", "private", "sh", "-c", script, "sh"}, args...)...)
}

// sandboxFlags are what this machine needs beyond the DaemonSet's flags,
// with the evidence. Its bounding set lacks CAP_SYS_RESOURCE, so crun can
// neither raise RLIMIT_MEMLOCK to load its cgroup v2 device filter (an
// eBPF program) nor raise podman's default rlimits past the hard limits
// here: the container runs without a cgroup of its own and with the
// rlimits this machine has. On a host with CAP_SYS_RESOURCE, none.
func sandboxFlags(t *testing.T) []string {
	t.Helper()
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	var bnd uint64
	for _, l := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(l, "CapBnd:"); ok {
			bnd, _ = strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		}
	}
	if bnd&(1<<unix.CAP_SYS_RESOURCE) != 0 {
		return nil
	}
	t.Logf("this machine's bounding set %#x lacks CAP_SYS_RESOURCE: the container runs with --cgroups=disabled and lowered rlimits", bnd)
	// Lowering needs no capability; serve holds a few hundred files.
	return []string{"--cgroups=disabled", "--ulimit=nofile=4096:4096", "--ulimit=nproc=4096:4096"}
}

// podmanLaunch runs serve's args in the image, in the lab's instance
// namespace (the host network of a node is the instance namespace here),
// the directories mounted at their own paths.
func podmanLaunch(t *testing.T, image, name string, security ...string) func(l *lab.Lab, args, dirs []string) *exec.Cmd {
	return func(l *lab.Lab, args, dirs []string) *exec.Cmd {
		run := []string{"run", "--rm", "--name", name, "--network", "ns:" + l.InstanceNetnsPath()}
		run = append(run, containerCaps...)
		run = append(run, security...)
		run = append(run, sandboxFlags(t)...)
		for _, d := range dirs {
			run = append(run, "-v", d+":"+d)
		}
		run = append(run, image)
		return podman(t, append(run, args...)...)
	}
}

// containerProcess finds serve's process in the container, by its command
// line, which names the bundle directory.
func containerProcess(t *testing.T, dir string) int {
	t.Helper()
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if len(args) > 2 && args[0] == "/enaprobe" && args[1] == "serve" && strings.Contains(string(b), dir) {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
			return pid
		}
	}
	t.Fatalf("no /enaprobe serve process for %s", dir)
	return 0
}

// TestServeInPodman: the image under a real runtime (podman with crun,
// rootful) as the DaemonSet runs it: three capabilities, a read-only root,
// a seccomp filter. serve attaches in a lab namespace, /healthz answers,
// a real Prometheus scrapes it, and a burst gives a bundle on the mounted
// directory that analyze reads to the same findings.
func TestServeInPodman(t *testing.T) {
	image := podmanImage(t)
	name := "enaprobe-e2e-" + randomHex()
	s := startServedLabWith(t, serveOptions{launch: podmanLaunch(t, image, name, "--security-opt", "seccomp="+seccompProfile)},
		"--history", "5s", "--after", "2s", "--min-gap", "0")
	pid := containerProcess(t, s.dir)
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	want := uint64(1)<<unix.CAP_BPF | 1<<unix.CAP_NET_ADMIN | 1<<unix.CAP_PERFMON
	for _, l := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(l, "CapEff:"); ok {
			if eff, _ := strconv.ParseUint(strings.TrimSpace(v), 16, 64); eff != want {
				t.Errorf("serve's effective capabilities %#x, want %#x (BPF, NET_ADMIN, PERFMON only)", eff, want)
			}
		}
		if v, ok := strings.CutPrefix(l, "Seccomp:"); ok && strings.TrimSpace(v) != "2" {
			t.Errorf("serve's seccomp mode %s, want 2 (a filter)", strings.TrimSpace(v))
		}
	}
	mounts, err := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(mounts), "\n") {
		if f := strings.Fields(l); len(f) > 5 && f[4] == "/" && !strings.HasPrefix(f[5], "ro") {
			t.Errorf("the container's root is mounted %s, want read-only", f[5])
		}
	}
	if code, body := s.get(t, "/healthz"); code != 200 {
		t.Fatalf("/healthz %d: %s", code, body)
	}
	prom := startPrometheus(t, s)
	waitFor(t, 30*time.Second, "Prometheus scraping serve in the container", func() bool {
		return prom.query(t, `up{job="enaprobe"}`, "job")["enaprobe"] == 1
	})
	burstOverAllowance(t, s)
	waitFor(t, 30*time.Second, "an incident bundle on the mounted directory", func() bool { return len(bundles(t, s.dir)) > 0 })
	checkSameFindings(t, bundles(t, s.dir)[0])
	s.stop(t)
}

// runInPodman runs one short trace in the image, in a lab's instance
// namespace, and returns its exit code and stderr.
func runInPodman(t *testing.T, image string, l *lab.Lab, flags ...string) (int, string) {
	t.Helper()
	args := append([]string{"run", "--rm", "--network", "ns:" + l.InstanceNetnsPath(), "--read-only"}, flags...)
	args = append(args, sandboxFlags(t)...)
	args = append(args, image, "trace", "-i", l.InstanceInterface(), "-d", "1s", "--no-imds", "--no-owners")
	cmd := podman(t, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	return exitCodeOf(err), stderr.String()
}

// TestPodmanRefusals: without CAP_PERFMON, and under the runtime's default
// seccomp profile (which refuses bpf(2) without CAP_SYS_ADMIN), the
// container exits 3 and names what it lacks.
func TestPodmanRefusals(t *testing.T) {
	image := podmanImage(t)
	privtest.RequireRoot(t, "ip", "nft")
	l, err := lab.Up(t.Context(), lab.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	code, stderr := runInPodman(t, image, l, "--cap-drop=ALL", "--cap-add=BPF,NET_ADMIN", "--security-opt", "seccomp="+seccompProfile)
	if code != 3 || !strings.Contains(stderr, "CAP_PERFMON") {
		t.Errorf("without CAP_PERFMON: exit %d, %q; want 3 naming CAP_PERFMON", code, stderr)
	}
	code, stderr = runInPodman(t, image, l, containerCaps[:2]...)
	if code != 3 || !strings.Contains(stderr, "seccomp") || !strings.Contains(stderr, "deploy/seccomp/enaprobe.json") {
		t.Errorf("under the default seccomp profile: exit %d, %q; want 3 naming seccomp and the profile", code, stderr)
	}
	t.Logf("default profile: %s", strings.TrimSpace(stderr))
}
