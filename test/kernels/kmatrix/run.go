//go:build linux

package main

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/enaprobe/enaprobe/test/kernels/console"
	"github.com/enaprobe/enaprobe/test/kernels/debian"
	"github.com/enaprobe/enaprobe/test/kernels/initramfs"
	"github.com/enaprobe/enaprobe/test/kernels/plan"
	"github.com/enaprobe/enaprobe/test/kernels/tracecheck"
)

// guests are the kernels booted under qemu.
var guests = map[string]debian.Kernel{
	"5.10":      {Name: "5.10", Suite: "bullseye", Arch: "amd64"},
	"6.1":       {Name: "6.1", Suite: "bookworm", Arch: "amd64"},
	"6.12":      {Name: "6.12", Suite: "trixie", Arch: "amd64"},
	"6.1-arm64": {Name: "6.1-arm64", Suite: "bookworm", Arch: "arm64"},
}

// guestModules are built as modules by Debian's cloud kernels and needed by
// the tests: veth pairs, the clsact qdisc, and cls_bpf filters.
var guestModules = []string{"veth", "sch_ingress", "cls_bpf"}

// toolsSuite is the Debian release the guests' ip, tc, bpftool and sysctl
// come from, whatever the kernel: they are the same tools on every row.
const toolsSuite = "bookworm"

// The trace check's traffic: small and exact.
var traceCheck = plan.Trace{Packets: 300, Payload: 200, Duration: 6 * time.Second}

// outcome is one kernel's column of the table.
type outcome struct {
	kernel  string
	release string
	accel   string
	elapsed time.Duration
	rep     console.Report
	err     error // the row could not run at all (fetch, build, boot)
}

// binaries built for one architecture.
type binaries struct {
	test, enaprobe, init string
	testdata             string // the package's testdata directory, "" if none
}

func runMatrix(c config) (bool, error) {
	if err := os.MkdirAll(c.logs, 0o755); err != nil {
		return false, err
	}
	if c.fetchOnly {
		for _, k := range c.kernels {
			if g, ok := guests[k]; ok {
				kern, _, err := fetchGuest(c, g)
				if err != nil {
					return false, err
				}
				step("%s: %s %s (%s), %d modules", k, kern.Package, kern.Version, kern.Release, len(kern.Modules))
			}
		}
		return true, nil
	}
	work, err := os.MkdirTemp(c.cache, "build-")
	if err != nil {
		return false, fmt.Errorf("build directory: %w", err)
	}
	defer os.RemoveAll(work)
	arches := map[string]bool{runtime.GOARCH: true}
	for _, k := range c.kernels {
		if g, ok := guests[k]; ok {
			arches[g.Arch] = true
		}
	}
	bins := map[string]binaries{}
	for arch := range arches {
		step("build the tests of %s for %s", c.repo, arch)
		b, err := build(c, arch, filepath.Join(work, arch))
		if err != nil {
			return false, err
		}
		bins[arch] = b
	}
	expected, err := listTests(bins[runtime.GOARCH].test, c.run)
	if err != nil {
		return false, err
	}
	if len(expected) == 0 {
		return false, fmt.Errorf("no test of %s matches -run %q", c.pkg, c.run)
	}
	var outcomes []outcome
	for _, k := range c.kernels {
		start := time.Now()
		var o outcome
		if k == "host" {
			o = runHost(c, bins[runtime.GOARCH], work, phases(c.pkg, expected))
		} else {
			o = runGuest(c, guests[k], bins[guests[k].Arch], work, phases(c.pkg, expected))
		}
		o.kernel = k
		o.elapsed = time.Since(start)
		if o.err != nil {
			step("%s: %v", k, o.err)
		}
		step("%s: done in %.0f s", k, o.elapsed.Seconds())
		outcomes = append(outcomes, o)
	}
	return printTable(os.Stdout, c, expected, phases(c.pkg, expected), outcomes), nil
}

func step(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "kmatrix: "+format+"\n", args...)
}

// verifierTest is TestVerifierStats for trees from before the loader had
// its own (loader/verifier_test.go): it logs each program's processed
// instructions in the line format package console reads.
//
//go:embed verifier_test.go.in
var verifierTest []byte

// build compiles the tree's test binary and enaprobe for arch, and the
// guest's init from kmatrix's own tree. A tree without the verifier test
// (a branch older than the matrix) gets it through a build overlay, so its
// instruction counts still reach the table.
func build(c config, arch, dir string) (binaries, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return binaries{}, err
	}
	env := append(os.Environ(), "GOOS=linux", "GOARCH="+arch, "CGO_ENABLED=0")
	name := filepath.Base(c.pkg)
	b := binaries{
		test:     filepath.Join(dir, name+".test"),
		enaprobe: filepath.Join(dir, "enaprobe"),
		init:     filepath.Join(dir, "init"),
	}
	testArgs := []string{"test", "-c", "-o", b.test}
	if c.pkg == "./loader" {
		theirs := filepath.Join(c.repo, "loader/verifier_test.go")
		if _, err := os.Stat(theirs); err != nil {
			own := filepath.Join(dir, "verifier_test.go")
			if err := os.WriteFile(own, verifierTest, 0o644); err != nil {
				return b, err
			}
			overlay := filepath.Join(dir, "overlay.json")
			data, _ := json.Marshal(map[string]any{"Replace": map[string]string{theirs: own}})
			if err := os.WriteFile(overlay, data, 0o644); err != nil {
				return b, err
			}
			testArgs = append(testArgs, "-overlay", overlay)
		}
	}
	testArgs = append(testArgs, c.pkg)
	for _, s := range []struct {
		dir  string
		args []string
	}{
		{c.repo, testArgs},
		{c.repo, []string{"build", "-o", b.enaprobe, "./cmd/enaprobe"}},
		{c.self, []string{"build", "-o", b.init, "./test/kernels/guestinit"}},
	} {
		cmd := exec.Command("go", s.args...)
		cmd.Dir, cmd.Env = s.dir, env
		if out, err := cmd.CombinedOutput(); err != nil {
			return b, fmt.Errorf("go %s in %s (GOARCH=%s): %w\n%s", strings.Join(s.args, " "), s.dir, arch, err, out)
		}
	}
	if td := filepath.Join(c.repo, c.pkg, "testdata"); isDir(td) {
		b.testdata = td
	}
	return b, nil
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

// listTests is the top-level tests (and fuzz targets) the pattern selects.
func listTests(bin, pattern string) ([]string, error) {
	out, err := exec.Command(bin, "-test.list", pattern).Output()
	if err != nil {
		return nil, fmt.Errorf("list tests of %s: %w", bin, err)
	}
	var names []string
	for _, l := range strings.Split(string(out), "\n") {
		if l = strings.TrimSpace(l); strings.HasPrefix(l, "Test") || strings.HasPrefix(l, "Fuzz") {
			names = append(names, l)
		}
	}
	return names, nil
}

// testArgs runs the pattern's tests verbosely (the table reads their
// result lines), bounded by timeout instead of go test's default 10 minutes.
func testArgs(pattern string, timeout time.Duration) []string {
	return []string{"-test.v", "-test.count=1", "-test.timeout", timeout.String(), "-test.run", pattern}
}

// gateTest runs first, alone: when the datapath does not load, the checks
// after it are reported blocked instead of each spending minutes of TCG in
// the verifier to fail the same way.
const gateTest = "TestVerifierStats"

// phase is one run of the test binary.
type phase struct {
	name    string // the table's run:NAME row
	pattern string
	gate    bool
}

func phases(pkg string, tests []string) []phase {
	var rest []string
	gated := false
	for _, t := range tests {
		if t == gateTest {
			gated = true
		} else {
			rest = append(rest, regexp.QuoteMeta(t))
		}
	}
	var ps []phase
	if gated {
		ps = append(ps, phase{name: "verifier", pattern: "^" + gateTest + "$", gate: true})
	}
	if len(rest) > 0 {
		ps = append(ps, phase{name: filepath.Base(pkg), pattern: "^(" + strings.Join(rest, "|") + ")$"})
	}
	return ps
}

// runHost runs the same checks on the machine's own kernel.
func runHost(c config, b binaries, work string, ps []phase) outcome {
	o := outcome{accel: "native"}
	o.release = hostRelease()
	logf, err := os.Create(filepath.Join(c.logs, "host.log"))
	if err != nil {
		o.err = err
		return o
	}
	defer logf.Close()
	var out bytes.Buffer
	tee := io.MultiWriter(&out, logf)
	blocked := false
	for _, p := range ps {
		ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
		cmd := exec.CommandContext(ctx, b.test, testArgs(p.pattern, c.timeout)...)
		cmd.Dir = filepath.Join(c.repo, c.pkg)
		cmd.Stdout, cmd.Stderr = tee, tee
		start := time.Now()
		runErr := cmd.Run()
		cancel()
		result, detail := console.Pass, ""
		if runErr != nil {
			result, detail = console.Fail, runErr.Error()
		}
		fmt.Fprintln(tee, console.CheckLine("run:"+p.name, result, fmt.Sprintf("%s %.1fs", detail, time.Since(start).Seconds())))
		if runErr != nil && p.gate {
			blocked = true
			break
		}
	}
	if c.trace && !blocked {
		opts := tracecheck.Options{Enaprobe: b.enaprobe, Packets: traceCheck.Packets, Payload: traceCheck.Payload,
			Duration: traceCheck.Duration, Deadline: 30 * time.Second, TempDir: work}
		if res, err := tracecheck.Run(opts); err != nil {
			fmt.Fprintln(tee, console.CheckLine("trace", console.Fail, err.Error()))
		} else {
			fmt.Fprintln(tee, console.CheckLine("trace", console.Pass, fmt.Sprintf("attach=%s egress=%d packets owner=%s", res.AttachMode, res.Egress, res.Owner)))
		}
	}
	fmt.Fprintln(tee, console.DoneLine())
	o.rep, o.err = console.Parse(&out)
	o.rep.Checks["boot"] = console.Pass
	return o
}

func hostRelease() string {
	data, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		return "?"
	}
	return strings.TrimSpace(string(data))
}

// runGuest fetches the kernel, builds its initramfs, boots it and reads the
// console.
func runGuest(c config, k debian.Kernel, b binaries, work string, ps []phase) outcome {
	var o outcome
	kern, tools, err := fetchGuest(c, k)
	if err != nil {
		o.err = err
		return o
	}
	o.release = kern.Release
	initrd := filepath.Join(work, k.Name+".cpio")
	if err := writeInitramfs(initrd, c, kern, tools, b, ps); err != nil {
		o.err = err
		return o
	}
	o.accel = accelerator(k.Arch)
	step("%s: boot %s (%s) under %s", k.Name, kern.Release, kern.Package+" "+kern.Version, o.accel)
	logPath := filepath.Join(c.logs, k.Name+".log")
	o.rep, o.err = boot(c, k.Arch, o.accel, kern.Image, initrd, logPath)
	if diedBeforeInit(o.rep, o.err) {
		// Nothing of enaprobe ran: under TCG a guest kernel can die in
		// its own early boot (6.12, once in a CI run: an int3 oops in
		// sched_clock_cpu during cpu_latency_qos_init, 2.5 s in). Boot
		// once more; the first console is kept beside the second.
		first := strings.TrimSuffix(logPath, ".log") + ".before-init.log"
		if err := os.Rename(logPath, first); err != nil {
			o.err = errors.Join(o.err, err)
			return o
		}
		step("%s: the kernel stopped before its init ran (console: %s); booting once more", k.Name, first)
		o.rep, o.err = boot(c, k.Arch, o.accel, kern.Image, initrd, logPath)
	}
	return o
}

// diedBeforeInit tells a guest whose kernel stopped before kmatrix's init
// reported its boot, pass or fail: the kernel failed, not a check.
func diedBeforeInit(rep console.Report, err error) bool {
	return err != nil && !rep.Done && rep.Checks["boot"] == ""
}

// fetchGuest brings the kernel and the guest tools into the cache, or finds
// them there.
func fetchGuest(c config, k debian.Kernel) (*debian.Fetched, string, error) {
	step("%s: fetch Debian %s %s kernel", k.Name, k.Suite, k.Arch)
	unlock, err := lockCache(c.cache)
	if err != nil {
		return nil, "", err
	}
	defer unlock()
	kapt, err := debian.NewApt(c.cache, k.Suite, k.Arch)
	if err == nil {
		err = kapt.Update(6 * time.Hour)
	}
	if err != nil {
		return nil, "", err
	}
	kern, err := k.Fetch(c.cache, kapt, guestModules)
	if err != nil {
		return nil, "", err
	}
	tapt, err := debian.NewApt(c.cache, toolsSuite, k.Arch)
	if err == nil {
		err = tapt.Update(6 * time.Hour)
	}
	var tools string
	if err == nil {
		tools, err = debian.Userland(c.cache, tapt, debian.GuestTools)
	}
	if err != nil {
		return nil, "", fmt.Errorf("guest tools: %w", err)
	}
	return kern, tools, nil
}

// lockCache serialises fetching between matrix runs sharing the cache (two
// worktrees tested at once): apt runs there without its own locks.
func lockCache(cache string) (func(), error) {
	f, err := os.OpenFile(filepath.Join(cache, "lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock the kernel cache: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock the kernel cache: %w", err)
	}
	var once sync.Once
	return func() { once.Do(func() { f.Close() }) }, nil
}

func writeInitramfs(path string, c config, kern *debian.Fetched, tools string, b binaries, ps []phase) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := initramfs.NewWriter(f)
	w.Tree(tools, "")
	w.Symlink("var/run", "/run")
	w.CharDev("dev/console", 5, 1)
	w.Dir("root")
	w.CopyFile("init", b.init)
	w.CopyFile("kmatrix/bin/"+filepath.Base(b.test), b.test)
	w.CopyFile("kmatrix/bin/enaprobe", b.enaprobe)
	p := plan.Plan{}
	for _, m := range kern.Modules {
		name := "kmatrix/modules/" + filepath.Base(m)
		w.CopyFile(name, m)
		p.Modules = append(p.Modules, "/"+name)
	}
	work := "/kmatrix/work"
	w.Dir(work)
	if b.testdata != "" {
		w.Tree(b.testdata, work+"/testdata")
	}
	for _, ph := range ps {
		p.Tests = append(p.Tests, plan.Test{
			Name: ph.name, Path: "/kmatrix/bin/" + filepath.Base(b.test), Dir: work,
			Args: testArgs(ph.pattern, c.timeout-3*time.Minute), Timeout: c.timeout - 2*time.Minute, Gate: ph.gate,
		})
	}
	if c.trace {
		t := traceCheck
		t.Enaprobe = "/kmatrix/bin/enaprobe"
		t.Deadline = 2 * time.Minute
		p.Trace = &t
	}
	data, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return err
	}
	w.File(plan.Path, 0o644, data)
	if err := w.Close(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// accelerator is KVM only where the CPU has hardware virtualisation for
// the guest's architecture: a /dev/kvm on top of a software nested
// hypervisor cannot run stock kernels. TCG otherwise.
func accelerator(arch string) string {
	if arch != runtime.GOARCH {
		return "tcg"
	}
	if _, err := os.Stat("/dev/kvm"); err != nil {
		return "tcg"
	}
	data, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "tcg"
	}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "flags") {
			for _, f := range strings.Fields(line) {
				if f == "vmx" || f == "svm" {
					return "kvm"
				}
			}
			break
		}
	}
	return "tcg"
}

func qemuCommand(arch, accel, mem, image, initrd string) (string, []string) {
	common := []string{"-accel", accel, "-smp", "2", "-m", mem, "-kernel", image, "-initrd", initrd,
		"-nodefaults", "-display", "none", "-serial", "stdio", "-no-reboot", "-monitor", "none"}
	cmdline := "panic=-1 quiet loglevel=3 rdinit=/init"
	if arch == "arm64" {
		cpu := "max"
		if accel == "tcg" {
			cpu = "max,pauth-impdef=on" // an implementation-defined pointer-auth hash: far cheaper to emulate
		}
		return "qemu-system-aarch64", append([]string{"-M", "virt", "-cpu", cpu, "-append", "console=ttyAMA0 " + cmdline}, common...)
	}
	cpu := "max"
	if accel == "kvm" {
		cpu = "host"
	}
	return "qemu-system-x86_64", append([]string{"-cpu", cpu, "-append", "console=ttyS0 " + cmdline}, common...)
}

// boot runs the guest to power-off (or the timeout) and reads its verdict
// from the console: qemu's exit status says nothing about the guest.
func boot(c config, arch, accel, image, initrd, logPath string) (console.Report, error) {
	bin, args := qemuCommand(arch, accel, c.memory, image, initrd)
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	logf, err := os.Create(logPath)
	if err != nil {
		return console.Report{}, err
	}
	defer logf.Close()
	fmt.Fprintf(logf, "# %s %s\n", bin, strings.Join(args, " "))
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout = io.MultiWriter(&out, logf)
	cmd.Stderr = cmd.Stdout
	cmd.WaitDelay = 5 * time.Second
	runErr := cmd.Run()
	rep, err := console.Parse(bytes.NewReader(out.Bytes()))
	if err != nil {
		return rep, err
	}
	switch {
	case ctx.Err() != nil:
		return rep, fmt.Errorf("guest still running after %v (console: %s)", c.timeout, logPath)
	case runErr != nil:
		return rep, fmt.Errorf("%s: %w (console: %s)", bin, runErr, logPath)
	case !rep.Done:
		return rep, fmt.Errorf("guest stopped before the end of its plan (console: %s)", logPath)
	}
	return rep, nil
}
