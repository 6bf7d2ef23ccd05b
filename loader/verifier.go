//go:build linux

package loader

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/rlimit"
)

// VerifierStats is what the kernel's verifier reports for one program: the
// instructions it processed (the limit is 1,000,000 on every kernel since
// 5.2) and the states it explored, whether it accepted the program or not.
type VerifierStats struct {
	Program     string
	Insns       int // processed instructions; -1 when the log has no count
	TotalStates int
	PeakStates  int
	Err         error // the rejection; nil when the program loaded
}

// Result is "loaded" or "rejected".
func (s VerifierStats) Result() string {
	if s.Err != nil {
		return "rejected"
	}
	return "loaded"
}

// The last line of a verifier log at LogLevelStats, the same since 5.2.
var statsLine = regexp.MustCompile(`processed (\d+) insns \(limit \d+\) max_states_per_insn \d+ total_states (\d+) peak_states (\d+)`)

// parseVerifierStats reads the statistics line of a program's verifier log.
func parseVerifierStats(prog, log string) VerifierStats {
	s := VerifierStats{Program: prog, Insns: -1}
	m := statsLine.FindAllStringSubmatch(log, -1)
	if len(m) == 0 {
		return s
	}
	last := m[len(m)-1]
	s.Insns, _ = strconv.Atoi(last[1])
	s.TotalStates, _ = strconv.Atoi(last[2])
	s.PeakStates, _ = strconv.Atoi(last[3])
	return s
}

// ProgramStats loads each program of the datapath object that Load would
// pick for opts on this kernel, one at a time with the maps it uses, with
// the verifier's statistics, and returns them sorted by program name. A
// program the verifier rejects is reported with the count it reached. It
// is how the kernel matrix measures how far each kernel's verifier is from
// its limit.
func ProgramStats(opts Options) ([]VerifierStats, error) {
	if err := rlimit.RemoveMemlock(); err != nil { // maps count against it before 5.11
		return nil, fmt.Errorf("remove memlock limit: %w", err)
	}
	spec, err := Spec(opts)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(spec.Programs))
	for name := range spec.Programs {
		names = append(names, name)
	}
	sort.Strings(names)
	out := make([]VerifierStats, 0, len(names))
	for _, name := range names {
		out = append(out, programStats(spec, name))
	}
	return out, nil
}

// programStats loads the one program name of spec with the verifier's
// statistics.
func programStats(spec *ebpf.CollectionSpec, name string) VerifierStats {
	holder := reflect.New(reflect.StructOf([]reflect.StructField{{
		Name: "Program",
		Type: reflect.TypeFor[*ebpf.Program](),
		Tag:  reflect.StructTag(`ebpf:"` + name + `"`),
	}}))
	opts := &ebpf.CollectionOptions{Programs: ebpf.ProgramOptions{
		LogLevel:     ebpf.LogLevelStats,
		LogSizeStart: 1 << 16,
	}}
	err := spec.LoadAndAssign(holder.Interface(), opts)
	if err != nil {
		// The statistics line is the log's last: a rejection's Error
		// leaves it out, its Log holds it.
		var ve *ebpf.VerifierError
		log := ""
		if errors.As(err, &ve) {
			log = strings.Join(ve.Log, "\n")
		}
		s := parseVerifierStats(name, log)
		s.Err = explainLoadError(err)
		return s
	}
	prog := holder.Elem().Field(0).Interface().(*ebpf.Program)
	defer prog.Close()
	return parseVerifierStats(name, prog.VerifierLog)
}

// verifierBudget is how many instructions a program may cost the verifier
// on any kernel: a fifth of the limit, headroom for older verifiers that
// prune less and for the program to grow.
const verifierBudget = 200_000
