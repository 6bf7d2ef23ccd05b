package lab

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/enaprobe/enaprobe/internal/ena/counters"
)

func TestFormatEthtool(t *testing.T) {
	got := FormatEthtool(map[string]uint64{
		counters.ConntrackAllowanceAvailable: 7, counters.BwInAllowanceExceeded: 1, counters.BwOutAllowanceExceeded: 2,
		counters.PPSAllowanceExceeded: 3, counters.ConntrackAllowanceExceeded: 4, counters.LinklocalAllowanceExceeded: 5,
	})
	want := "NIC statistics:\n" +
		"     bw_in_allowance_exceeded: 1\n" +
		"     bw_out_allowance_exceeded: 2\n" +
		"     pps_allowance_exceeded: 3\n" +
		"     conntrack_allowance_exceeded: 4\n" +
		"     linklocal_allowance_exceeded: 5\n" +
		"     conntrack_allowance_available: 7\n"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if got := FormatEthtool(map[string]uint64{counters.PPSAllowanceExceeded: 9}); got != "NIC statistics:\n     pps_allowance_exceeded: 9\n" {
		t.Errorf("absent names must be left out, got %q", got)
	}
}

func TestWriteCountersFile(t *testing.T) {
	l := upLab(t, Config{ConntrackMax: 77})
	path := filepath.Join(t.TempDir(), "ena.stats")
	if err := l.WriteCountersFile(path); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if !sc.Scan() || sc.Text() != "NIC statistics:" {
		t.Fatalf("first line %q", sc.Text())
	}
	got := map[string]uint64{}
	for sc.Scan() {
		name, val, ok := strings.Cut(strings.TrimPrefix(sc.Text(), "     "), ": ")
		v, err := strconv.ParseUint(val, 10, 64)
		if !ok || err != nil || !strings.HasPrefix(sc.Text(), "     ") {
			t.Fatalf("line %q is not ethtool's '     name: value'", sc.Text())
		}
		got[name] = v
	}
	if len(got) != len(CounterNames) || got[counters.ConntrackAllowanceAvailable] != 77 {
		t.Errorf("file holds %v", got)
	}
	if entries, _ := os.ReadDir(filepath.Dir(path)); len(entries) != 1 {
		t.Errorf("temporary files left beside the counters file: %v", entries)
	}
}
