//go:build linux

package capture

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/enaprobe/enaprobe/loader"
)

// RequiredCapabilities are the capabilities a trace or serve needs, in the
// effective set: what the systemd unit and the DaemonSet in deploy/ grant.
var RequiredCapabilities = []string{"CAP_BPF", "CAP_NET_ADMIN", "CAP_PERFMON"}

// MissingCapabilitiesError names the capabilities a trace needs that the
// process's effective set lacks.
type MissingCapabilitiesError struct {
	Missing []string
	// Command is the command line that was run ("enaprobe serve"), filled
	// in by the command that got the error; empty says "enaprobe".
	Command string
}

func (e *MissingCapabilitiesError) Error() string {
	command := e.Command
	if command == "" {
		command = "enaprobe"
	}
	return fmt.Sprintf("%s needs %s, which this process lacks: run it with sudo, or grant CAP_BPF, CAP_NET_ADMIN and CAP_PERFMON",
		command, strings.Join(e.Missing, " and "))
}

// SeccompError says a seccomp filter refuses bpf(2) to a process that
// holds the capabilities: the default profiles of the container runtimes
// (containerd, CRI-O, podman, Docker) allow bpf(2) only with CAP_SYS_ADMIN.
type SeccompError struct{ Err error }

func (e *SeccompError) Error() string {
	return fmt.Sprintf("bpf(2) is refused by this process's seccomp filter although it holds CAP_BPF (%v): "+
		"the container runtimes' default profiles allow bpf(2) only with CAP_SYS_ADMIN; run the container with the profile deploy/seccomp/enaprobe.json (docs/deploy.md)", e.Err)
}

func (e *SeccompError) Unwrap() error { return e.Err }

// CheckCapabilities reads the process's effective capability set and
// returns a *MissingCapabilitiesError naming what the load and attach need
// and it lacks. Checked for root too: a container or `setpriv` may have
// dropped any of them, and without CAP_PERFMON the verifier rejects the
// programs with a misleading "invalid read from stack". Under a seccomp
// filter it also makes one map, so that a filter refusing bpf(2) is named
// (a *SeccompError) rather than reported as the memlock limit, which is
// what the first failed map creation otherwise looks like.
func CheckCapabilities() error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("read capabilities: %w", err)
	}
	eff := uint64(data[0].Effective) | uint64(data[1].Effective)<<32
	if m := missingCapabilities(eff); len(m) > 0 {
		return &MissingCapabilitiesError{Missing: m}
	}
	if filtered, err := seccompFiltered("/proc/self/status"); err != nil || !filtered {
		return err
	}
	if err := loader.ProbeBPF(); errors.Is(err, unix.EPERM) {
		return &SeccompError{Err: err}
	}
	return nil
}

// seccompFiltered says whether a status file (/proc/PID/status) shows a
// seccomp filter (mode 2).
func seccompFiltered(status string) (bool, error) {
	f, err := os.Open(status)
	if err != nil {
		return false, fmt.Errorf("read seccomp mode: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "Seccomp:"); ok {
			return strings.TrimSpace(v) == "2", nil
		}
	}
	return false, sc.Err()
}

// missingCapabilities lists what an effective set lacks. CAP_SYS_ADMIN
// stands in for CAP_BPF and CAP_PERFMON, as on kernels before 5.8.
func missingCapabilities(eff uint64) []string {
	has := func(c int) bool { return eff&(1<<uint(c)) != 0 }
	admin := has(unix.CAP_SYS_ADMIN)
	var missing []string
	if !has(unix.CAP_BPF) && !admin {
		missing = append(missing, "CAP_BPF")
	}
	if !has(unix.CAP_NET_ADMIN) {
		missing = append(missing, "CAP_NET_ADMIN")
	}
	if !has(unix.CAP_PERFMON) && !admin {
		missing = append(missing, "CAP_PERFMON")
	}
	return missing
}
