package metrics

import (
	"reflect"
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/enaprobe/enaprobe/analyzer"
	"github.com/enaprobe/enaprobe/internal/record"
)

// TestEveryFamilyGathered: a registry from New lists every name of Names,
// with the labels the issue gives, before anything moved.
func TestEveryFamilyGathered(t *testing.T) {
	m := New([]string{"eth0"})
	if n := testutil.CollectAndCount(m.ConntrackAllowanceAvailable); n != 0 {
		t.Errorf("%d conntrack gauge series before the device reported one, want 0 (absent is not zero)", n)
	}
	m.ConntrackAllowanceAvailable.WithLabelValues("eth0").Set(1000) // as a device with the gauge
	fams, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	for _, f := range fams {
		var labels []string
		if len(f.Metric) > 0 {
			for _, l := range f.Metric[0].Label {
				labels = append(labels, l.GetName())
			}
		}
		got[f.GetName()] = labels
	}
	for _, n := range Names() {
		if _, ok := got[n]; !ok {
			t.Errorf("%s not gathered", n)
		}
	}
	want := map[string][]string{
		"enaprobe_allowance_exceeded_total":      {"allowance", "interface"},
		"enaprobe_conntrack_allowance_available": {"interface"},
		"enaprobe_packets_total":                 {"direction", "interface"},
		"enaprobe_bytes_total":                   {"direction", "interface"},
		"enaprobe_syns_total":                    {"direction", "interface"},
		"enaprobe_linklocal_packets_total":       {"interface", "service"},
		"enaprobe_findings_total":                {"interface", "kind"},
		"enaprobe_bundles_written_total":         nil,
		"enaprobe_peak_bits_per_second":          {"direction", "interface", "window"},
	}
	for n, labels := range want {
		if !slices.Equal(got[n], labels) {
			t.Errorf("%s labels %v, want %v", n, got[n], labels)
		}
	}
	if n := testutil.CollectAndCount(m.AllowanceExceeded); n != len(Allowances) {
		t.Errorf("%d allowance series, want %d", n, len(Allowances))
	}
}

// TestLint runs client_golang's own linter over every family (names,
// units, help).
func TestLint(t *testing.T) {
	m := New([]string{"eth0"})
	probs, err := testutil.GatherAndLint(m.Registry)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range probs {
		if p.Metric == "enaprobe_peak_bits_per_second" {
			continue // the name issue 16 gives: network rates are in bits
		}
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
}

// TestLossReasonPerField: the loss counter has one reason per field of
// record.Loss (but the interface), so a loss the datapath learns to count
// is exported too.
func TestLossReasonPerField(t *testing.T) {
	if n := reflect.TypeFor[record.Loss]().NumField() - 1; len(LossReasons) != n {
		t.Errorf("%d loss reasons %v, record.Loss has %d counters", len(LossReasons), LossReasons, n)
	}
}

// TestFindingSeriesForEveryKind: enaprobe_findings_total has a series for
// every analyzer kind from the first scrape, before any finding.
func TestFindingSeriesForEveryKind(t *testing.T) {
	m := New([]string{"eth0"})
	for _, k := range analyzer.Kinds {
		if n := testutil.CollectAndCount(m.Findings); n != len(analyzer.Kinds) {
			t.Fatalf("%d findings series, want one per kind (%d)", n, len(analyzer.Kinds))
		}
		if v := testutil.ToFloat64(m.Findings.WithLabelValues("eth0", k)); v != 0 {
			t.Errorf("findings_total{kind=%q} = %v before any finding", k, v)
		}
	}
}
