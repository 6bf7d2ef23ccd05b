package limits

import (
	"context"
	"net/http"
	"net/netip"
	"testing"
)

// fakeENA answers as ena.ExpressMode would for a host whose interfaces map
// to their ena_srd_mode; -1 is an ENA interface without the counter, an
// absent name is not ENA.
func fakeENA(srd map[string]int) ENAInterface {
	return func(iface string) (bool, uint64, bool) {
		v, ok := srd[iface]
		if !ok {
			return false, 0, false
		}
		if v < 0 {
			return true, 0, false
		}
		return true, uint64(v), true
	}
}

func TestDiscoverHost(t *testing.T) {
	f := newFakeIMDS()
	f.meta["placement/group-name"] = "pg-low-latency"
	for _, c := range []struct {
		name      string
		ifaces    []string
		ena       map[string]int
		noIMDS    bool
		override  float64
		wantAsked bool
		wantBps   float64
		wantType  string
		wantDNS   string
	}{
		{"not ENA: IMDS not asked", []string{"veth0"}, nil, false, 0, false, FlowDefaultBps, "", ""},
		{"ENA: IMDS says the group and the VPC", []string{"veth0", "ens5"}, map[string]int{"ens5": 0}, false, 0, true, FlowPlacementGroupBps, "c6i.large", "10.0.0.2"},
		{"--no-imds on ENA", []string{"ens5"}, map[string]int{"ens5": 0}, true, 0, false, FlowDefaultBps, "", ""},
		{"ENA Express on the second interface", []string{"ens5", "ens6"}, map[string]int{"ens5": -1, "ens6": 0b101}, true, 0, false, FlowENAExpressBps, "", ""},
		{"override wins", []string{"ens5"}, map[string]int{"ens5": 1}, false, 7e9, true, 7e9, "c6i.large", "10.0.0.2"},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := f.count()
			d := Discover(context.Background(), Host{Interfaces: c.ifaces, ENA: fakeENA(c.ena), NoIMDS: c.noIMDS,
				IMDS: startIMDS(t, f), FlowLimitOverride: c.override})
			if d.AskedIMDS != c.wantAsked || (f.count() > before) != c.wantAsked {
				t.Errorf("asked IMDS %v (%d requests), want %v", d.AskedIMDS, f.count()-before, c.wantAsked)
			}
			if d.IMDSErr != nil || d.FlowCap.Bps != c.wantBps || d.Instance.InstanceType != c.wantType {
				t.Errorf("got %v, cap %v (%s), type %q; want cap %v, type %q", d.IMDSErr, d.FlowCap.Bps, d.FlowCap.Reason, d.Instance.InstanceType, c.wantBps, c.wantType)
			}
			if want, _ := netip.ParseAddr(c.wantDNS); d.VPCResolver != want {
				t.Errorf("VPC resolver %v, want %v", d.VPCResolver, want)
			}
		})
	}
}

// TestDiscoverHostIMDSDown: a failed IMDS is reported, not fatal; the cap
// falls back to the default.
func TestDiscoverHostIMDSDown(t *testing.T) {
	m := startIMDS(t, http.NotFoundHandler())
	d := Discover(context.Background(), Host{Interfaces: []string{"ens5"}, ENA: fakeENA(map[string]int{"ens5": 0}), IMDS: m})
	if !d.AskedIMDS || d.IMDSErr == nil || d.FlowCap.Bps != FlowDefaultBps || d.VPCResolver.IsValid() {
		t.Errorf("IMDS down: %+v", d)
	}
}
