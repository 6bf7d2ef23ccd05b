package ena

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/enaprobe/enaprobe/internal/ena/counters"
)

// writeAtomically replaces path by a complete file, as a lab writer should.
func writeAtomically(t *testing.T, path, text string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func TestFileSourceRereads(t *testing.T) {
	path := filepath.Join(t.TempDir(), "eth0.stats")
	src := NewFileSource(path)
	if src.Kind() != "file" || src.Path() != path {
		t.Errorf("kind %q path %q", src.Kind(), src.Path())
	}

	// Not there yet: a failed read, not a crash.
	if _, err := src.Read(); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("read of a missing file: %v", err)
	}

	writeAtomically(t, path, "NIC statistics:\n     pps_allowance_exceeded: 4\n     bw_in_allowance_exceeded: 0\n")
	v, err := src.Read()
	if err != nil {
		t.Fatal(err)
	}
	if len(v) != 2 || v[counters.PPSAllowanceExceeded] != 4 {
		t.Errorf("first read %v", v)
	}

	// The file changes: the next read sees it, in the new order and set.
	writeAtomically(t, path, "NIC statistics:\n     bw_in_allowance_exceeded: 2\n     pps_allowance_exceeded: 9\n     total_resets: 0\n")
	v, err = src.Read()
	if err != nil {
		t.Fatal(err)
	}
	if len(v) != 3 || v[counters.PPSAllowanceExceeded] != 9 || v[counters.BwInAllowanceExceeded] != 2 {
		t.Errorf("second read %v", v)
	}

	// A file with no statistics is a failed read.
	writeAtomically(t, path, "Cannot get stats strings information: Operation not supported\n")
	if _, err := src.Read(); !errors.Is(err, counters.ErrNoStatistics) {
		t.Errorf("read of an error text: %v", err)
	}
}

func TestFileSourceFixture(t *testing.T) {
	v, err := NewFileSource("../../testdata/ethtool/ena-2.8.x.txt").Read()
	if err != nil {
		t.Fatal(err)
	}
	if v[counters.ConntrackAllowanceAvailable] != 136812 || v[counters.SRDMode] != 3 {
		t.Errorf("read %d values; conntrack_allowance_available %d, ena_srd_mode %d",
			len(v), v[counters.ConntrackAllowanceAvailable], v[counters.SRDMode])
	}
}
