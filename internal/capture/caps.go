//go:build linux

package capture

import (
	"fmt"
	"strings"

	"golang.org/x/sys/unix"
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

// CheckCapabilities reads the process's effective capability set and
// returns a *MissingCapabilitiesError naming what the load and attach need
// and it lacks. Checked for root too: a container or `setpriv` may have
// dropped any of them, and without CAP_PERFMON the verifier rejects the
// programs with a misleading "invalid read from stack".
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
	return nil
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
