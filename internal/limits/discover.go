package limits

import (
	"context"
	"net/netip"
)

// ENAInterface tells whether the ENA driver drives an interface and, if so,
// reads its ena_srd_mode; srdKnown is false when the driver does not report
// it. ena.ExpressMode is the one that asks the kernel; tests pass their own.
type ENAInterface func(iface string) (isENA bool, srdMode uint64, srdKnown bool)

// Host says how to discover the instance a trace runs on.
type Host struct {
	Interfaces []string     // the traced interfaces
	ENA        ENAInterface // required
	NoIMDS     bool         // never ask IMDS
	IMDS       *IMDS        // a new IMDS with the defaults when nil
	// FlowLimitOverride > 0 is the user's per-flow cap; it wins.
	FlowLimitOverride float64
}

// Discovery is what the trace knows about the instance before it starts.
type Discovery struct {
	Instance Instance // zero when IMDS was not asked or failed
	// AskedIMDS is true when an ENA interface is traced and IMDS is
	// allowed: only then is the instance an EC2 instance worth asking.
	AskedIMDS bool
	IMDSErr   error
	FlowCap   FlowCap
	// VPCResolver is the VPC DNS address (base + 2 of the first VPC CIDR),
	// zero when IMDS did not say the CIDR.
	VPCResolver netip.Addr
}

// Discover asks IMDS once, only when an ENA interface is traced (so only on
// EC2) and never with NoIMDS, reads ENA Express's state from the first traced
// ENA interface that reports it, and derives the per-flow cap and the VPC
// resolver from both.
func Discover(ctx context.Context, h Host) Discovery {
	var d Discovery
	onEC2 := false
	var srd uint64
	srdKnown := false
	for _, name := range h.Interfaces {
		isENA, mode, known := h.ENA(name)
		onEC2 = onEC2 || isENA
		if isENA && known && !srdKnown {
			srd, srdKnown = mode, true
		}
	}
	if onEC2 && !h.NoIMDS {
		imds := h.IMDS
		if imds == nil {
			imds = &IMDS{}
		}
		d.AskedIMDS = true
		inst, err := imds.Discover(ctx)
		if err != nil {
			d.IMDSErr = err
		} else {
			d.Instance = inst
		}
	}
	d.FlowCap = FlowLimit(d.Instance.PlacementGroup, srd, srdKnown, h.FlowLimitOverride)
	if len(d.Instance.VPCCIDRs) > 0 {
		d.VPCResolver = VPCResolver(d.Instance.VPCCIDRs[0])
	}
	return d
}
