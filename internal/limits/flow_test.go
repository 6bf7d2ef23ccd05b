package limits

import (
	"net/netip"
	"strings"
	"testing"
)

func TestFlowLimit(t *testing.T) {
	tests := []struct {
		name       string
		group      string
		srd        uint64
		srdKnown   bool
		override   float64
		want       float64
		reasonHas  []string
		reasonLack []string
		source     string
	}{
		{"default", "", 0, true, 0, 5e9, []string{"5 Gbps"}, []string{"unknown"}, "default"},
		{"default, srd unknown", "", 0, false, 0, 5e9, []string{"ENA Express state unknown"}, nil, "default"},
		{"placement group", "pg-analytics", 0, true, 0, 10e9, []string{`"pg-analytics"`, "cluster", "strategy"}, []string{"unknown"}, "IMDS: placement group pg-analytics"},
		{"placement group, srd unknown", "pg", 0, false, 0, 10e9, []string{"ENA Express state unknown"}, nil, "IMDS: placement group pg"},
		{"ena express bit0", "", 1, true, 0, 25e9, []string{"ENA Express enabled", "ena_srd_mode=0x1"}, nil, "ethtool: ENA Express enabled (ena_srd_mode)"},
		{"ena express with udp bits", "pg", 0b111, true, 0, 25e9, []string{"0x7"}, nil, "ethtool: ENA Express enabled (ena_srd_mode)"},
		{"srd udp bit without bit0", "", 0b10, true, 0, 5e9, nil, nil, "default"},
		{"srd value ignored when unknown", "", 1, false, 0, 5e9, nil, nil, "default"},
		{"override wins", "pg", 1, true, 3e9, 3e9, []string{"3 Gbit/s", "user"}, nil, "options"},
		{"negative override ignored", "", 0, true, -1, 5e9, nil, nil, "default"},
	}
	for _, tc := range tests {
		c := FlowLimit(tc.group, tc.srd, tc.srdKnown, tc.override)
		got, reason := c.Bps, c.Reason
		if got != tc.want || c.Source != tc.source {
			t.Errorf("%s: FlowLimit = %v from %q, want %v from %q (%s)", tc.name, got, c.Source, tc.want, tc.source, reason)
		}
		for _, s := range tc.reasonHas {
			if !strings.Contains(reason, s) {
				t.Errorf("%s: reason %q lacks %q", tc.name, reason, s)
			}
		}
		for _, s := range tc.reasonLack {
			if strings.Contains(reason, s) {
				t.Errorf("%s: reason %q has %q", tc.name, reason, s)
			}
		}
	}
}

func TestGatewayLimitBps(t *testing.T) {
	tests := []struct {
		vcpus int
		inst  float64
		want  float64
	}{
		{0, 100e9, 5e9},    // unknown vCPUs: the smaller cap
		{2, 10e9, 5e9},     // c5.large bursting
		{31, 50e9, 5e9},    // below 32 whatever the bandwidth
		{32, 10e9, 5e9},    // m5.8xlarge: half is 5 Gbps
		{32, 8e9, 5e9},     // half below 5 Gbps: 5 Gbps
		{64, 20e9, 10e9},   // m5.16xlarge example from the AWS docs
		{96, 25e9, 12.5e9}, // c5.24xlarge
	}
	for _, tc := range tests {
		if got, reason := GatewayLimitBps(tc.vcpus, tc.inst); got != tc.want {
			t.Errorf("GatewayLimitBps(%d, %v) = %v (%s), want %v", tc.vcpus, tc.inst, got, reason, tc.want)
		}
	}
}

func TestVPCResolver(t *testing.T) {
	tests := []struct {
		cidr string
		want string // "" for the zero Addr
	}{
		{"10.0.0.0/16", "10.0.0.2"},
		{"172.31.0.0/16", "172.31.0.2"},
		{"10.0.5.7/16", "10.0.0.2"}, // host bits ignored
		{"192.168.4.0/22", "192.168.4.2"},
		{"10.1.2.16/28", "10.1.2.18"},
		{"10.1.2.16/31", ""},
		{"2600:1f18::/56", ""},
	}
	for _, tc := range tests {
		got := VPCResolver(netip.MustParsePrefix(tc.cidr))
		if (tc.want == "" && got.IsValid()) || (tc.want != "" && got != netip.MustParseAddr(tc.want)) {
			t.Errorf("VPCResolver(%s) = %v, want %q", tc.cidr, got, tc.want)
		}
	}
	if got := VPCResolver(netip.Prefix{}); got.IsValid() {
		t.Errorf("VPCResolver(zero) = %v", got)
	}
}
