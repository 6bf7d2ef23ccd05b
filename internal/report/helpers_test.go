package report

import (
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/enaprobe/enaprobe/analyzer"
	"github.com/enaprobe/enaprobe/internal/record"
)

const recordingsDir = "../../testdata/recordings"

// analyzed caches the analysis of each recording: several tests render the
// same ones.
var analyzed sync.Map // name -> func() (Input, error)

// loadInput reads testdata/recordings/NAME.rec.gz and analyzes it with the
// default options. Callers must not modify what it returns (Redact copies).
func loadInput(t testing.TB, name string) Input {
	t.Helper()
	f, _ := analyzed.LoadOrStore(name, sync.OnceValues(func() (Input, error) {
		rec, err := record.ReadFile(filepath.Join(recordingsDir, name+".rec.gz"))
		if err != nil {
			return Input{}, err
		}
		res := analyzer.Analyze(rec, analyzer.DefaultOptions())
		env := record.EnvironmentOf(rec)
		env.CommandLine = "enaprobe trace --duration 8s --bundle /tmp/trace.tar.gz " + strings.Join(res.Trace.Interfaces, " ")
		return Input{Result: res, Recording: rec, Env: env}, nil
	}))
	in, err := f.(func() (Input, error))()
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// allRecordings lists the names of testdata/recordings.
func allRecordings(t testing.TB) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(recordingsDir, "*.rec.gz"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range paths {
		names = append(names, strings.TrimSuffix(filepath.Base(p), ".rec.gz"))
	}
	slices.Sort(names)
	if len(names) < 5 {
		t.Fatalf("only %d recordings in %s", len(names), recordingsDir)
	}
	return names
}
