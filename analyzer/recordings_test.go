package analyzer

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/enaprobe/enaprobe/analyzer/internal/synth"
	"github.com/enaprobe/enaprobe/internal/record"
)

var update = flag.Bool("update", false, "rewrite testdata/recordings from the scenarios")

const recordingsDir = "../testdata/recordings"

func recordingPath(name string) string { return filepath.Join(recordingsDir, name+".rec.gz") }

// roundTrip passes a recording through the file format, as a file read back
// would be.
func roundTrip(t testing.TB, rec *record.Recording) *record.Recording {
	t.Helper()
	var buf bytes.Buffer
	if err := record.Write(&buf, rec); err != nil {
		t.Fatal(err)
	}
	out, err := record.Read(&buf)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestGenerateRecordings checks that every recording in testdata is what its
// scenario generates; with -update it rewrites them.
func TestGenerateRecordings(t *testing.T) {
	cases := synth.Cases()
	if *update {
		if err := os.MkdirAll(recordingsDir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range sortedNames(cases) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			rec, _ := synth.Generate(cases[name].Spec)
			if *update {
				if err := record.WriteFile(recordingPath(name), rec); err != nil {
					t.Fatal(err)
				}
				return
			}
			got, err := record.ReadFile(recordingPath(name))
			if err != nil {
				t.Fatalf("%v (run go test ./analyzer -run TestGenerateRecordings -update)", err)
			}
			if !reflect.DeepEqual(got, roundTrip(t, rec)) {
				t.Fatalf("%s differs from what scenario %q generates (run go test ./analyzer -run TestGenerateRecordings -update)",
					recordingPath(name), name)
			}
		})
	}
}

func sortedNames[V any](m map[string]V) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
