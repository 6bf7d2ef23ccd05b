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

func TestENACounters(t *testing.T) {
	if len(ENACounters) != 12 || len(DeviceCounters) != 11 || len(AllowanceExceeded) != 5 {
		t.Fatalf("lists: %d ENA, %d device, %d exceeded", len(ENACounters), len(DeviceCounters), len(AllowanceExceeded))
	}
	seen := map[string]bool{}
	for _, name := range ENACounters {
		if seen[name] {
			t.Errorf("%s listed twice", name)
		}
		seen[name] = true
	}
	for _, name := range AllowanceExceeded {
		if !seen[name] || IsGauge(name) {
			t.Errorf("%s: listed %v, gauge %v", name, seen[name], IsGauge(name))
		}
	}
}

func TestParseQueueName(t *testing.T) {
	tests := []struct {
		name  string
		queue int
		stat  string
		ok    bool
	}{
		{"queue_0_tx_cnt", 0, QueueTxCnt, true},
		{"queue_7_tx_bytes", 7, QueueTxBytes, true},
		{"queue_31_rx_cnt", 31, QueueRxCnt, true},
		{"queue_2_rx_bytes", 2, QueueRxBytes, true},
		{"queue_12_tx_queue_stop", 12, QueueTxQueueStop, true},
		{"queue_0_tx_doorbells", 0, "", false},
		{"queue_4_xdp_tx_cnt", 0, "", false}, // XDP queue
		{"queue__tx_cnt", 0, "", false},
		{"queue_x_tx_cnt", 0, "", false},
		{"queue_01_tx_cnt", 0, "", false},
		{"queue_-1_tx_cnt", 0, "", false},
		{"queue_1", 0, "", false},
		{"rx_queue_0_xdp_packets", 0, "", false},
		{"total_tx_cnt", 0, "", false},
	}
	for _, tt := range tests {
		q, stat, ok := ParseQueueName(tt.name)
		if q != tt.queue || stat != tt.stat || ok != tt.ok {
			t.Errorf("ParseQueueName(%q) = %d, %q, %v; want %d, %q, %v", tt.name, q, stat, ok, tt.queue, tt.stat, tt.ok)
		}
		if tt.ok && QueueName(q, stat) != tt.name {
			t.Errorf("QueueName(%d, %q) = %q, want %q", q, stat, QueueName(q, stat), tt.name)
		}
	}
}

func TestQueueNamesInFixture(t *testing.T) {
	// Every queue of the 2.10 layout has the five stats, found by name.
	values, err := parseFixture(t, "ena-2.10.txt")
	if err != nil {
		t.Fatal(err)
	}
	found := map[int]int{}
	for name := range values {
		if q, _, ok := ParseQueueName(name); ok {
			found[q]++
		}
	}
	if len(found) != 2 || found[0] != len(QueueStats) || found[1] != len(QueueStats) {
		t.Errorf("queue stats found per queue: %v", found)
	}
}
