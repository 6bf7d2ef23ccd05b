//go:build linux

package loader

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"

	"github.com/enaprobe/enaprobe/internal/testutil/privtest"
)

// TestVerifierStats loads each program of the datapath object this kernel
// gets, and of the shared-ring object where that is not it, and logs what
// the verifier processed, accepted or not, as
//
//	verifier: program=NAME insns=N result=loaded|rejected
//
// for the default object (the kernel matrix collects these lines) and as
// "verifier (MODE buckets): ..." for the other. A program must load, and
// stay well under the verifier's limit of 1,000,000 processed instructions,
// which the verifiers of 5.10 and 6.1 reached before the programs were
// shaped for them.
func TestVerifierStats(t *testing.T) {
	privtest.RequireRoot(t)
	def := DefaultOptions().resolved().Buckets
	for _, mode := range bucketModes(t) {
		opts := DefaultOptions()
		opts.Buckets = mode
		stats, err := ProgramStats(opts)
		if err != nil {
			t.Fatalf("%s buckets: %v", mode, err)
		}
		prefix := "verifier:"
		if mode != def {
			prefix = "verifier (" + mode.String() + " buckets):"
		}
		for _, s := range stats {
			t.Logf("%s program=%s insns=%d result=%s states=%d peak_states=%d buckets=%s",
				prefix, s.Program, s.Insns, s.Result(), s.TotalStates, s.PeakStates, mode)
			if s.Err != nil {
				t.Errorf("%s buckets: %v", mode, s.Err)
				var r *VerifierRejection
				if errors.As(s.Err, &r) {
					// The whole log: a few lines at the stats level.
					t.Logf("verifier log of %s:\n%s", s.Program, strings.Join(r.Log, "\n"))
				}
			} else if s.Insns > verifierBudget {
				t.Errorf("%s (%s buckets): %d processed instructions, over the budget of %d", s.Program, mode, s.Insns, verifierBudget)
			}
		}
	}
}

// TestLoadLogsOnlyOnRejection: a load that succeeds asks the verifier for
// no log (the instruction-level one took seconds); a program the verifier
// rejects (here one that reads a register it never wrote) comes back as a
// one-line error naming the program and the reason, holding the whole log.
func TestLoadLogsOnlyOnRejection(t *testing.T) {
	privtest.RequireRoot(t)
	p, err := Load(DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	for _, prog := range []*ebpf.Program{p.objs.EnaprobeIngress, p.objs.EnaprobeEgress} {
		if prog.VerifierLog != "" {
			t.Errorf("a load that succeeded has a verifier log of %d bytes", len(prog.VerifierLog))
		}
	}
	p.Close()

	opts := DefaultOptions().resolved()
	spec, err := Spec(opts)
	if err != nil {
		t.Fatal(err)
	}
	spec.Programs["enaprobe_egress"].Instructions = asm.Instructions{
		asm.Mov.Reg(asm.R0, asm.R2), // R2 was never written
		asm.Return(),
	}
	_, err = load(spec, opts)
	var vr *VerifierRejection
	if !errors.As(err, &vr) {
		t.Fatalf("load of a program that reads a register never written: %v, want a VerifierRejection", err)
	}
	msg := err.Error()
	t.Log(msg)
	if strings.Contains(msg, "\n") || !strings.Contains(msg, "enaprobe_egress") || !strings.Contains(msg, "R2 !read_ok") {
		t.Errorf("error %q: want one line naming the program and the reason", msg)
	}
	if vr.Program != "enaprobe_egress" {
		t.Errorf("rejected program %q, want enaprobe_egress", vr.Program)
	}
	if !slices.ContainsFunc(vr.Log, func(l string) bool { return strings.Contains(l, "r0 = r2") }) ||
		!strings.Contains(msg, fmt.Sprintf("%d lines", len(vr.Log))) {
		t.Errorf("log of %d lines without the rejected instruction or not counted in the error: %q", len(vr.Log), vr.Log)
	}
}
