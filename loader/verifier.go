//go:build linux

package loader

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"

	"github.com/cilium/ebpf"
)

// VerifierStats is what the kernel's verifier reports for one program: the
// instructions it processed (the limit is 1,000,000 on every kernel since
// 5.2) and the states it explored.
type VerifierStats struct {
	Program     string
	Insns       int // processed instructions
	TotalStates int
	PeakStates  int
}

func (s VerifierStats) String() string {
	return fmt.Sprintf("verifier: %s processed %d insns, %d states (peak %d)", s.Program, s.Insns, s.TotalStates, s.PeakStates)
}

// The last line of a verifier log at LogLevelStats, the same since 5.2.
var statsLine = regexp.MustCompile(`processed (\d+) insns \(limit \d+\) max_states_per_insn \d+ total_states (\d+) peak_states (\d+)`)

// parseVerifierStats reads the statistics line of a program's verifier log.
func parseVerifierStats(prog, log string) (VerifierStats, error) {
	m := statsLine.FindAllStringSubmatch(log, -1)
	if len(m) == 0 {
		return VerifierStats{}, fmt.Errorf("verifier log of %s has no statistics line", prog)
	}
	last := m[len(m)-1]
	s := VerifierStats{Program: prog}
	s.Insns, _ = strconv.Atoi(last[1])
	s.TotalStates, _ = strconv.Atoi(last[2])
	s.PeakStates, _ = strconv.Atoi(last[3])
	return s, nil
}

// ProgramStats loads every program of the datapath that Load would pick for
// opts on this kernel, with the verifier's statistics, and returns them by
// program name. It is how the kernel matrix measures how far each kernel's
// verifier is from its limit.
func ProgramStats(opts Options) ([]VerifierStats, error) {
	spec, err := Spec(opts)
	if err != nil {
		return nil, err
	}
	coll, err := ebpf.NewCollectionWithOptions(spec, ebpf.CollectionOptions{
		Programs: ebpf.ProgramOptions{LogLevel: ebpf.LogLevelStats},
	})
	if err != nil {
		return nil, explainLoadError(err)
	}
	defer coll.Close()
	var out []VerifierStats
	for name, p := range coll.Programs {
		s, err := parseVerifierStats(name, p.VerifierLog)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Program < out[j].Program })
	return out, nil
}

// verifierBudget is how many instructions a program may cost the verifier
// on any kernel: a fifth of the limit, headroom for older verifiers that
// prune less and for the program to grow.
const verifierBudget = 200_000
