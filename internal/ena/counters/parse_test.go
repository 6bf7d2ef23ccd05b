package counters

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const fixtures = "../../../testdata/ethtool"

func parseFixture(t *testing.T, name string) (map[string]uint64, error) {
	t.Helper()
	f, err := os.Open(filepath.Join(fixtures, name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return ParseEthtoolS(f)
}

func TestParseEthtoolSFixtures(t *testing.T) {
	tests := []struct {
		file    string
		count   int               // number of statistics
		want    map[string]uint64 // a selection of values
		absent  []string          // ENA counters the driver lacks
		wantErr error
	}{
		{
			file:  "ena-2.2.10.txt",
			count: 7 + 5 + 2*(15+19) + 5,
			want: map[string]uint64{
				BwInAllowanceExceeded: 0, LinklocalAllowanceExceeded: 0, "interface_up": 1,
				"queue_1_tx_cnt": 185337, "queue_0_rx_bytes": 301550922, "ena_admin_q_submitted_cmd": 48,
			},
			absent: []string{ConntrackAllowanceAvailable, SRDMode, SRDTxPkts, SRDEligibleTxPkts, SRDRxPkts, SRDResourceUtilization, TotalResets},
		},
		{
			file:  "ena-2.8.x.txt",
			count: 8 + 6 + 5 + 4*(15+22) + 5,
			want: map[string]uint64{
				BwInAllowanceExceeded: 1207, BwOutAllowanceExceeded: 53, PPSAllowanceExceeded: 9,
				ConntrackAllowanceExceeded: 0, LinklocalAllowanceExceeded: 4, ConntrackAllowanceAvailable: 136812,
				SRDMode: 3, SRDTxPkts: 7120334, SRDEligibleTxPkts: 7311902, SRDRxPkts: 6998170, SRDResourceUtilization: 2,
				"queue_2_tx_queue_stop": 3, "queue_3_rx_bytes": 11541804745,
			},
			absent: []string{TotalResets},
		},
		{
			file:  "ena-2.10.txt",
			count: 23 + 6 + 5 + 2*(15+22),
			want: map[string]uint64{
				TotalResets: 1, BwOutAllowanceExceeded: 31877, PPSAllowanceExceeded: 1190,
				LinklocalAllowanceExceeded: 2061, ConntrackAllowanceAvailable: 452189,
				"queue_0_tx_queue_stop": 12, "queue_1_tx_cnt": 4412823,
			},
			absent: []string{SRDMode, SRDTxPkts, SRDEligibleTxPkts, SRDRxPkts, SRDResourceUtilization},
		},
		{
			file:  "ena-docs-order.txt",
			count: 6,
			want: map[string]uint64{
				BwInAllowanceExceeded: 0, BwOutAllowanceExceeded: 0, PPSAllowanceExceeded: 0,
				ConntrackAllowanceExceeded: 0, LinklocalAllowanceExceeded: 0, ConntrackAllowanceAvailable: 136812,
			},
			absent: []string{SRDMode, SRDTxPkts, SRDEligibleTxPkts, SRDRxPkts, SRDResourceUtilization, TotalResets},
		},
		{
			file:   "ena-truncated.txt",
			count:  9, // 7 global stats, bw_in and bw_out
			want:   map[string]uint64{BwInAllowanceExceeded: 17, BwOutAllowanceExceeded: 0, "interface_up": 1},
			absent: []string{PPSAllowanceExceeded, ConntrackAllowanceExceeded, LinklocalAllowanceExceeded, ConntrackAllowanceAvailable, SRDMode, SRDTxPkts, SRDEligibleTxPkts, SRDRxPkts, SRDResourceUtilization, TotalResets},
		},
		{
			file:   "virtio_net.txt",
			count:  20,
			want:   map[string]uint64{"rx0_drops": 0, "tx_tx_timeouts": 0},
			absent: ENACounters,
		},
		{
			file:   "veth.txt",
			count:  10,
			want:   map[string]uint64{"peer_ifindex": 2, "rx_queue_0_xdp_packets": 20, "rx_queue_0_xdp_bytes": 620},
			absent: ENACounters,
		},
		{file: "malformed-unsupported.txt", wantErr: ErrNoStatistics},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			got, err := parseFixture(t, tt.file)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("error = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != tt.count {
				t.Errorf("parsed %d statistics, want %d", len(got), tt.count)
			}
			for name, want := range tt.want {
				v, ok := got[name]
				if !ok {
					t.Errorf("%s absent, want %d", name, want)
				} else if v != want {
					t.Errorf("%s = %d, want %d", name, v, want)
				}
			}
			for _, name := range tt.absent {
				if v, ok := got[name]; ok {
					t.Errorf("%s present (%d), want absent", name, v)
				}
			}
			for _, name := range ENACounters {
				if !contains(tt.absent, name) {
					if _, ok := got[name]; !ok {
						t.Errorf("%s absent, want present", name)
					}
				}
			}
		})
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestParseEthtoolSByNameNotPosition(t *testing.T) {
	// The same counters in two orders must give the same map.
	a := "NIC statistics:\n     pps_allowance_exceeded: 7\n     bw_in_allowance_exceeded: 3\n"
	b := "NIC statistics:\n     bw_in_allowance_exceeded: 3\n     pps_allowance_exceeded: 7\n"
	ma, err := ParseEthtoolS(strings.NewReader(a))
	if err != nil {
		t.Fatal(err)
	}
	mb, err := ParseEthtoolS(strings.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if len(ma) != 2 || ma[PPSAllowanceExceeded] != 7 || ma[BwInAllowanceExceeded] != 3 {
		t.Errorf("parsed %v", ma)
	}
	for k, v := range ma {
		if mb[k] != v {
			t.Errorf("%s: %d in one order, %d in the other", k, v, mb[k])
		}
	}
}

func TestParseEthtoolSEdgeCases(t *testing.T) {
	tests := []struct {
		name    string
		text    string
		want    map[string]uint64
		wantErr bool
	}{
		{name: "empty", text: "", wantErr: true},
		{name: "header only", text: "NIC statistics:\n", wantErr: true},
		{name: "no stats available", text: "no stats available\n", wantErr: true},
		{name: "no trailing newline", text: "NIC statistics:\n     tx_timeout: 4", want: map[string]uint64{"tx_timeout": 4}},
		{name: "max uint64", text: " x: 18446744073709551615\n", want: map[string]uint64{"x": 18446744073709551615}},
		{name: "duplicate keeps first", text: " x: 1\n x: 2\n", want: map[string]uint64{"x": 1}},
		{name: "name with spaces and colon", text: " rx bytes: 5\n port:rx: 6\n", want: map[string]uint64{"rx bytes": 5, "port:rx": 6}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseEthtoolS(strings.NewReader(tt.text))
			if tt.wantErr {
				if err == nil {
					t.Fatalf("no error, parsed %v", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tt.want) {
				t.Errorf("parsed %v, want %v", got, tt.want)
			}
			for k, v := range tt.want {
				if got[k] != v {
					t.Errorf("%s = %d, want %d", k, got[k], v)
				}
			}
		})
	}
}

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, errors.New("disk on fire") }

func TestParseEthtoolSReadError(t *testing.T) {
	_, err := ParseEthtoolS(failingReader{})
	if err == nil || !strings.Contains(err.Error(), "disk on fire") {
		t.Fatalf("error = %v, want the reader's error", err)
	}
}

func TestCheckEthtoolS(t *testing.T) {
	for _, f := range []string{"ena-2.10.txt", "ena-2.2.10.txt", "ena-2.8.x.txt", "veth.txt", "virtio_net.txt"} {
		b, err := os.ReadFile(filepath.Join(fixtures, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := CheckEthtoolS(bytes.NewReader(b)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	for _, tc := range []struct{ text, want string }{
		{"hello world\n", "line 1"},
		{"NIC statistics:\n     a: 1\n     b: x\n", "line 3"},
		{"\x1f\x8b\x08\x00\x00\x00", "not text"},
		{"Cannot get stats strings information: Operation not supported\n", "line 1"},
		{"NIC statistics:\n", "no statistics"},
	} {
		err := CheckEthtoolS(strings.NewReader(tc.text))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want an error with %q", tc.text, err, tc.want)
		}
	}
}
