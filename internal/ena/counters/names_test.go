package counters

import "testing"

func TestIsGauge(t *testing.T) {
	gauges := map[string]bool{ConntrackAllowanceAvailable: true, SRDMode: true, SRDResourceUtilization: true}
	for _, name := range append(ENACounters, "queue_0_tx_cnt", "peer_ifindex", "") {
		if got := IsGauge(name); got != gauges[name] {
			t.Errorf("IsGauge(%q) = %v, want %v", name, got, gauges[name])
		}
	}
}

// TestENACounters: the names are the driver's (the 2.10 fixture is built
// from amzn-drivers' string tables, not from this file), each listed once.
func TestENACounters(t *testing.T) {
	values, err := parseFixture(t, "ena-2.10.txt")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, name := range ENACounters {
		if seen[name] {
			t.Errorf("%s listed twice", name)
		}
		seen[name] = true
	}
	for _, name := range append([]string{ConntrackAllowanceAvailable, TotalResets}, AllowanceExceeded...) {
		if _, ok := values[name]; !ok || !seen[name] {
			t.Errorf("%s: in ENACounters %v, in a 2.10 driver's ethtool -S %v", name, seen[name], ok)
		}
	}
	for _, name := range AllowanceExceeded {
		if IsGauge(name) {
			t.Errorf("%s is a count, not a gauge", name)
		}
	}
}
