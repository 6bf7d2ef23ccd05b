//go:build linux

package loader

import (
	"testing"

	"github.com/enaprobe/enaprobe/internal/privtest"
)

// TestVerifierStats loads the datapath this kernel gets, in each bucket mode
// it can run, and logs what the verifier processed for every program (the
// kernel matrix prints these lines). A program must stay well under the
// verifier's limit of 1,000,000 processed instructions, which the verifiers
// of 5.10 and 6.1 reached before the programs were shaped for them.
func TestVerifierStats(t *testing.T) {
	privtest.RequireRoot(t)
	for _, mode := range bucketModes(t) {
		opts := DefaultOptions()
		opts.Buckets = mode
		stats, err := ProgramStats(opts)
		if err != nil {
			t.Fatalf("%s buckets: %v", mode, err)
		}
		for _, s := range stats {
			t.Logf("%s (%s buckets)", s, mode)
			if s.Insns > verifierBudget {
				t.Errorf("%s: %d processed instructions, over the budget of %d", s.Program, s.Insns, verifierBudget)
			}
		}
	}
}
