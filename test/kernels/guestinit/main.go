//go:build linux

// Command guestinit is PID 1 of a kernel-matrix guest: it mounts what the
// tests need, loads the modules the cloud kernels build as modules, runs
// the test binaries of its plan as children (never in PID 1 itself: a
// crashing test must still leave a verdict), runs the trace check, writes
// the results on the console and powers the machine off.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/enaprobe/enaprobe/test/kernels/console"
	"github.com/enaprobe/enaprobe/test/kernels/plan"
	"github.com/enaprobe/enaprobe/test/kernels/tracecheck"
)

// path is the guests' PATH: the kernel starts init without one.
const path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

func main() {
	defer powerOff()
	os.Setenv("PATH", path)
	if err := mountAll(); err != nil {
		say(console.CheckLine("boot", console.Fail, err.Error()))
		return
	}
	reopenConsole()
	var u unix.Utsname
	_ = unix.Uname(&u)
	fmt.Printf("%s kernel %s %s\n", console.Marker, unix.ByteSliceToString(u.Release[:]), unix.ByteSliceToString(u.Machine[:]))
	p, err := readPlan()
	if err != nil {
		say(console.CheckLine("boot", console.Fail, err.Error()))
		return
	}
	if err := setup(p); err != nil {
		say(console.CheckLine("boot", console.Fail, err.Error()))
		return
	}
	say(console.CheckLine("boot", console.Pass, ""))
	for _, t := range p.Tests {
		if !runTest(t) && t.Gate {
			say(console.CheckLine("gate", console.Fail, t.Name+" failed: the checks after it did not run"))
			say(console.DoneLine())
			return
		}
	}
	if p.Trace != nil {
		res, err := tracecheck.Run(tracecheck.Options{
			Enaprobe: p.Trace.Enaprobe, Packets: p.Trace.Packets, Payload: p.Trace.Payload,
			Duration: p.Trace.Duration, Deadline: p.Trace.Deadline, TempDir: "/tmp",
		})
		if err != nil {
			say(console.CheckLine("trace", console.Fail, err.Error()))
		} else {
			say(console.CheckLine("trace", console.Pass, fmt.Sprintf("attach=%s egress=%d packets owner=%s", res.AttachMode, res.Egress, res.Owner)))
		}
	}
	say(console.DoneLine())
}

func say(line string) { fmt.Println(line) }

type mount struct {
	source, target, fstype string
	flags                  uintptr
}

// mountAll mounts /proc first: cilium/ebpf reads it (memlock, CPUs) before
// any BPF call.
func mountAll() error {
	for _, m := range []mount{
		{"proc", "/proc", "proc", 0},
		{"devtmpfs", "/dev", "devtmpfs", 0},
		{"sysfs", "/sys", "sysfs", 0},
		{"bpf", "/sys/fs/bpf", "bpf", 0},
		{"cgroup2", "/sys/fs/cgroup", "cgroup2", 0},
		{"debugfs", "/sys/kernel/debug", "debugfs", 0},
		{"tmpfs", "/run", "tmpfs", 0},
		{"tmpfs", "/tmp", "tmpfs", 0},
	} {
		if err := os.MkdirAll(m.target, 0o755); err != nil {
			return fmt.Errorf("mkdir %s: %w", m.target, err)
		}
		if err := unix.Mount(m.source, m.target, m.fstype, m.flags, ""); err != nil && err != unix.EBUSY {
			return fmt.Errorf("mount %s on %s: %w", m.fstype, m.target, err)
		}
	}
	return nil
}

// reopenConsole gives PID 1 and its children the console as stdin, stdout
// and stderr, whether or not the kernel found /dev/console in the initramfs.
func reopenConsole() {
	fd, err := unix.Open("/dev/console", unix.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		return
	}
	for i := 0; i < 3; i++ {
		_ = unix.Dup2(fd, i)
	}
	if fd > 2 {
		unix.Close(fd)
	}
}

func readPlan() (*plan.Plan, error) {
	data, err := os.ReadFile(plan.Path)
	if err != nil {
		return nil, fmt.Errorf("read plan: %w", err)
	}
	var p plan.Plan
	if err := json.Unmarshal(data, &p); err != nil {
		return nil, fmt.Errorf("parse plan: %w", err)
	}
	return &p, nil
}

// setup loads the modules in order, brings lo up, and lets sockets have
// the 16 MiB buffers the tests' UDP sinks ask for (the kernel's default
// cap, 208 KiB, drops datagrams a guest slowed by TCG reads late).
func setup(p *plan.Plan) error {
	for _, key := range []string{"net/core/rmem_max", "net/core/wmem_max"} {
		if err := os.WriteFile("/proc/sys/"+key, []byte("16777216"), 0o644); err != nil {
			return fmt.Errorf("raise %s: %w", key, err)
		}
	}
	for _, path := range p.Modules {
		f, err := os.Open(path)
		if err != nil {
			return fmt.Errorf("load module: %w", err)
		}
		err = unix.FinitModule(int(f.Fd()), "", 0)
		f.Close()
		if err != nil && err != unix.EEXIST {
			return fmt.Errorf("load module %s: %w", path, err)
		}
	}
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("find lo: %w", err)
	}
	if err := netlink.LinkSetUp(lo); err != nil {
		return fmt.Errorf("bring lo up: %w", err)
	}
	return nil
}

// runTest runs one test binary as a child, its output on the console, and
// says how it ended: the host reads the tests' own result lines. It
// returns whether the binary exited 0.
func runTest(t plan.Test) bool {
	ctx, cancel := context.WithTimeout(context.Background(), t.Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, t.Path, t.Args...)
	cmd.Dir = t.Dir
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.Env = []string{"PATH=" + path, "HOME=/root", "TMPDIR=/tmp", "CI=true"}
	start := time.Now()
	err := cmd.Run()
	result, detail := console.Pass, ""
	if err != nil {
		result, detail = console.Fail, err.Error()
		if ctx.Err() != nil {
			detail = fmt.Sprintf("killed after %v", t.Timeout)
		}
	}
	say(console.CheckLine("run:"+t.Name, result, fmt.Sprintf("%s %.1fs", detail, time.Since(start).Seconds())))
	return err == nil
}

// powerOff ends the guest: qemu exits (it runs with -no-reboot, so a
// reboot would do too, which is the fallback).
func powerOff() {
	unix.Sync()
	_ = unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF)
	_ = unix.Reboot(unix.LINUX_REBOOT_CMD_RESTART)
	select {}
}
