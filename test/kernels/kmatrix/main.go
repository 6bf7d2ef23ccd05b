//go:build linux

// Command kmatrix is `make kernels`: it boots each kernel of the matrix
// under qemu with an initramfs holding the tests of the tree under test,
// runs the same checks on the host's own kernel, and prints one table of
// kernel x check x result with the verifier's instruction counts. It exits
// 1 when any check on any kernel did not pass.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Matrix is every kernel the matrix knows: Debian's cloud kernels of the
// lines EC2's distributions run (5.10: Amazon Linux 2; 6.1: AL2023,
// Bottlerocket, EKS; 6.12: AL2023's newer line; arm64 for Graviton), and the
// host's own.
var Matrix = []string{"5.10", "6.1", "6.12", "6.1-arm64", "host"}

// DefaultTests are the loader's tests run on every kernel: program test
// runs against the Go reference, the flow table, the bucket modes, and real
// traffic through a veth pair with tc and tcx attach, all counting exactly.
// Left out: tests that time traffic (TestVethBurstTiming) or fill tables
// for statistics (TestFlowTableLoad, TestFlowTableConcurrentInserts), which
// TCG makes slow without telling anything about the kernel.
const DefaultTests = `^(TestVerifierStats|TestDatapath.*|FuzzDatapath|TestMinimalProgram|TestBucketModeResolves|TestFlushTimer|TestNoTimerFlushesAtOnce|TestFlowTable(Full|Eviction|LateEviction)|TestWindowEvents|TestVeth(UDPExact|SYNsExact|LinkLocalExact|SizeClasses|NonLinearHeaders)|TestLargestTestRunFrame|TestStaleFilterRemoved|TestBesideCNIVerdicts|TestTwoEnaprobe|TestForeignFilterAtOurPlace|TestReanchorUnderTraffic)$`

// ShortTests are CI's form of the matrix: the verifier's counts, the parser
// against the reference, the bucket modes, and exact counts through tc and
// tcx on a veth pair with detach, and enaprobe beside a CNI's program (every
// verdict, before and after it, and two enaprobe at once: on kernels before
// 6.6 that is legacy tc, where CNIs attach); what the long form adds (more program test
// runs, the flow table, the fuzz corpus) exercises the same verified
// programs and is covered on the host by the regular tests.
const ShortTests = `^(TestVerifierStats|TestDatapathParsePaths|TestBucketModeResolves|TestFlushTimer|TestNoTimerFlushesAtOnce|TestVethUDPExact|TestVethSYNsExact|TestVethNonLinearHeaders|TestStaleFilterRemoved|TestBesideCNIVerdicts|TestTwoEnaprobe|TestDatapathOrigin)$`

type config struct {
	repo      string // tree under test
	self      string // the tree kmatrix and guestinit are built from
	cache     string
	kernels   []string
	run       string
	pkg       string
	trace     bool
	timeout   time.Duration
	memory    string
	logs      string
	fetchOnly bool
}

func main() {
	var c config
	var kernels string
	flag.StringVar(&c.repo, "repo", ".", "the enaprobe tree (repository or worktree) whose tests and binary run in the guests")
	flag.StringVar(&c.cache, "cache", "/var/cache/enaprobe/kernels", "where kernels, guest tools and builds are kept between runs")
	flag.StringVar(&kernels, "kernels", strings.Join(Matrix, ","), "comma-separated kernels to run: "+strings.Join(Matrix, ", "))
	flag.StringVar(&c.run, "run", DefaultTests, "regular expression of the tests to run (go test -run)")
	flag.StringVar(&c.pkg, "pkg", "./loader", "the package of the tree whose tests run (go test -c)")
	flag.BoolVar(&c.trace, "trace", true, "also run enaprobe trace on a veth pair and check its counts")
	flag.DurationVar(&c.timeout, "timeout", 10*time.Minute, "bound on one guest, boot to power-off (the test binaries get 3 minutes less, so a hung test still prints its goroutines)")
	flag.StringVar(&c.memory, "memory", "2048", "guest memory in MiB")
	flag.StringVar(&c.logs, "logs", "", "directory for the consoles' logs (default: CACHE/logs/<base name of -repo>)")
	short := flag.Bool("short", false, "CI's short form: -run "+ShortTests+" unless -run is given")
	flag.BoolVar(&c.fetchOnly, "fetch-only", false, "only bring the kernels and guest tools into the cache")
	flag.Parse()
	runGiven := false
	flag.Visit(func(f *flag.Flag) { runGiven = runGiven || f.Name == "run" })
	if *short && !runGiven {
		c.run = ShortTests
	}
	if flag.NArg() > 0 {
		usage("unexpected arguments %q", flag.Args())
	}
	for _, k := range strings.Split(kernels, ",") {
		if k = strings.TrimSpace(k); k == "" {
			continue
		}
		if !known(k) {
			usage("unknown kernel %q: want one of %s", k, strings.Join(Matrix, ", "))
		}
		c.kernels = append(c.kernels, k)
	}
	var err error
	if c.repo, err = filepath.Abs(c.repo); err != nil {
		fail(err)
	}
	if _, err := os.Stat(filepath.Join(c.repo, "go.mod")); err != nil {
		usage("--repo %s: not an enaprobe tree (no go.mod)", c.repo)
	}
	if c.self, err = os.Getwd(); err != nil {
		fail(err)
	}
	if _, err := os.Stat(filepath.Join(c.self, "test/kernels/guestinit")); err != nil {
		usage("run kmatrix from the root of its own tree (test/kernels/guestinit not found under %s)", c.self)
	}
	if c.logs == "" {
		c.logs = filepath.Join(c.cache, "logs", filepath.Base(c.repo))
	}
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "kmatrix: needs root (private apt downloads into the cache, the host row loads BPF): run it through sudo or `make kernels`")
		os.Exit(3)
	}
	ok, err := runMatrix(c)
	if err != nil {
		fail(err)
	}
	if !ok {
		os.Exit(1)
	}
}

func known(k string) bool {
	for _, m := range Matrix {
		if m == k {
			return true
		}
	}
	return false
}

func usage(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "kmatrix: "+format+" (see kmatrix -h)\n", args...)
	os.Exit(2)
}

func fail(err error) {
	fmt.Fprintf(os.Stderr, "kmatrix: %v\n", err)
	os.Exit(1)
}
