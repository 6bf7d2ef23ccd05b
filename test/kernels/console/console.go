// Package console is what a kernel-matrix guest says on its console and how
// the host reads it back: go test -v result lines, the verifier statistics
// the loader's tests log, and the guest's own lines, which start with
// Marker. qemu exits 0 whatever the guest did, so this is the only verdict.
package console

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
)

// Marker starts every line the guest's init writes for the host.
const Marker = "KMATRIX"

// Results of a check.
const (
	Pass    = "pass"
	Fail    = "fail"
	Skip    = "skip"
	Missing = "missing" // asked for, never reported: the guest died or hung
	Blocked = "blocked" // not run: a gate before it failed (a failure too)
)

// CheckLine is the line reporting a check the init ran itself.
func CheckLine(name, result, detail string) string {
	return fmt.Sprintf("%s check %s %s %s", Marker, name, result, strings.ReplaceAll(detail, "\n", " | "))
}

// DoneLine ends a guest's run: the init got through its plan.
func DoneLine() string { return Marker + " done" }

// Verifier is one program's processed-instruction count on one kernel.
type Verifier struct {
	Program string
	Insns   int    // -1: the log had no count (rejected before the verifier ran)
	Result  string // loaded or rejected
}

// VerifierLine is what the loader's verifier test logs per program.
func VerifierLine(v Verifier) string {
	return fmt.Sprintf("verifier: program=%s insns=%d result=%s", v.Program, v.Insns, v.Result)
}

// Report is what a console said.
type Report struct {
	Checks   map[string]string // check name -> result
	Details  map[string]string // check name -> why it failed
	Verifier []Verifier
	Done     bool
}

var (
	testLine     = regexp.MustCompile(`^--- (PASS|FAIL|SKIP): (\S+) `)
	verifierLine = regexp.MustCompile(`verifier: program=(\S+) insns=(-?\d+) result=(\S+)`)
	checkLine    = regexp.MustCompile(`^` + Marker + ` check (\S+) (\S+) ?(.*)$`)
)

// Parse reads a console log (or go test -v output). Only top-level tests
// count as checks: their subtests are part of them.
func Parse(r io.Reader) (Report, error) {
	rep := Report{Checks: map[string]string{}, Details: map[string]string{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		if m := testLine.FindStringSubmatch(line); m != nil {
			rep.Checks[m[2]] = strings.ToLower(m[1])
			continue
		}
		if m := checkLine.FindStringSubmatch(line); m != nil {
			rep.Checks[m[1]] = m[2]
			if m[3] != "" {
				rep.Details[m[1]] = m[3]
			}
			continue
		}
		if m := verifierLine.FindStringSubmatch(line); m != nil {
			n, _ := strconv.Atoi(m[2])
			rep.Verifier = append(rep.Verifier, Verifier{Program: m[1], Insns: n, Result: m[3]})
			continue
		}
		if line == DoneLine() {
			rep.Done = true
		}
	}
	return rep, sc.Err()
}
