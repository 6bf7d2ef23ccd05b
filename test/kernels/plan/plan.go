// Package plan is what the host asks a kernel-matrix guest to do, written
// into the initramfs as JSON for the guest's init to read.
package plan

import "time"

// Path is where the plan lies in the initramfs.
const Path = "/kmatrix/plan.json"

// Plan of one guest run.
type Plan struct {
	Modules []string // module files, in load order (dependencies first)
	Tests   []Test
	Trace   *Trace // nil: no trace check
}

// Test is one test binary (go test -c) and its arguments.
type Test struct {
	Name    string
	Path    string
	Dir     string // working directory: holds the package's testdata
	Args    []string
	Timeout time.Duration
	// Gate: when this test binary fails, nothing after it runs (the
	// verifier test: when the datapath does not load, every later check
	// would spend minutes of TCG in the verifier only to fail the same way).
	Gate bool
}

// Trace is the enaprobe trace check (package tracecheck).
type Trace struct {
	Enaprobe string
	Packets  int
	Payload  int
	Duration time.Duration
	Deadline time.Duration
}
