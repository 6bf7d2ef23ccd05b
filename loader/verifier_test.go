//go:build linux

package loader

import (
	"errors"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/enaprobe/enaprobe/internal/privtest"
)

// processedInsns is the verifier's statistics line ("processed 1234 insns
// (limit 1000000) ..."), which it writes at LogLevelStats whether it
// accepts the program or gives up on it.
var processedInsns = regexp.MustCompile(`processed (\d+) insns`)

// TestVerifierStats: the datapath loads the way a trace loads it, and each
// program of the object is logged with the number of instructions the
// verifier processed on this kernel, accepted or not, as
// "verifier: program=NAME insns=N result=loaded|rejected": the kernel
// matrix (kernels/) collects these lines into its table.
func TestVerifierStats(t *testing.T) {
	privtest.RequireRoot(t)
	p, loadErr := Load(DefaultOptions(), false)
	if loadErr == nil {
		p.Close()
	}
	spec, err := Spec(DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, 0, len(spec.Programs))
	for name := range spec.Programs {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		insns, result := verifierStats(t, spec, name)
		t.Logf("verifier: program=%s insns=%d result=%s", name, insns, result)
	}
	if loadErr != nil {
		t.Fatalf("load the datapath as a trace does: %v", loadErr)
	}
}

// verifierStats loads the one program name of spec (and the maps it uses)
// and returns the verifier's processed-instruction count, -1 when the log
// has none.
func verifierStats(t *testing.T, spec *ebpf.CollectionSpec, name string) (int, string) {
	t.Helper()
	holder := reflect.New(reflect.StructOf([]reflect.StructField{{
		Name: "Program",
		Type: reflect.TypeFor[*ebpf.Program](),
		Tag:  reflect.StructTag(`ebpf:"` + name + `"`),
	}}))
	opts := &ebpf.CollectionOptions{Programs: ebpf.ProgramOptions{LogLevel: ebpf.LogLevelStats}}
	err := spec.LoadAndAssign(holder.Interface(), opts)
	log, result := "", "loaded"
	if err != nil {
		result = "rejected"
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			log = strings.Join(ve.Log, "\n")
		}
		t.Logf("program %s rejected: %v", name, err)
	} else {
		prog := holder.Elem().Field(0).Interface().(*ebpf.Program)
		log = prog.VerifierLog
		prog.Close()
	}
	m := processedInsns.FindStringSubmatch(log)
	if m == nil {
		return -1, result
	}
	n, _ := strconv.Atoi(m[1])
	return n, result
}
