package lab

import (
	"fmt"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/enaprobe/enaprobe/internal/lab/flowclass"
)

// Each direction is shaped on the egress of the veth end that sends it:
//
//	root tbf 1:       aggregate bandwidth with its burst bucket; its
//	                  overlimits and drops count toward bw_*, with the
//	                  packets an nftables limit of the same rate and bucket
//	                  saw offered over it (nftables.go)
//	  htb 10: (1:1)   per-flow caps, not counted
//	    10:100+i      one leaf class per flow-hash bucket, rate = ceil =
//	                  FlowRate; flowclass (cls_bpf) picks the class
//
// Per-flow shaping comes first, so the aggregate sees traffic that already
// respects the flow caps. Outbound sits on the instance end (after the
// instance's tcx egress hook, so a tracer sees what was offered, as on an
// ENA whose shaping happens beyond the NIC). Inbound sits on the VPC end
// toward the instance, so the instance, like on EC2, only ever receives what
// passed.
const (
	tbfMajor       = 0x1
	htbMajor       = 0x10
	firstFlowMinor = 0x100
	maxFlowBuckets = 4096
	flowQuantum    = 1 << 16 // explicit, so htb does not warn about r2q
)

type shaperSpec struct {
	rate, peak uint64 // bit/s
	burst      uint32 // bytes
}

func (l *Lab) setupShaping() error {
	prog, err := flowclass.Load(htbMajor, firstFlowMinor, uint32(l.cfg.FlowBuckets))
	if err != nil {
		return err
	}
	// The filters keep the program loaded; our fd is not needed after.
	defer prog.Close()
	out := shaperSpec{rate: l.cfg.OutRate, peak: l.cfg.OutPeakRate, burst: l.cfg.OutBurst}
	if err := l.installShaper(l.instNl, l.instLink, out, prog.FD()); err != nil {
		return fmt.Errorf("outbound shaper on %s: %w", instanceIfc, err)
	}
	in := shaperSpec{rate: l.cfg.InRate, peak: l.cfg.InPeakRate, burst: l.cfg.InBurst}
	if err := l.installShaper(l.vpcNl, l.vpcLink, in, prog.FD()); err != nil {
		return fmt.Errorf("inbound shaper on %s: %w", vpcIfc, err)
	}
	return nil
}

func (l *Lab) installShaper(h *netlink.Handle, link netlink.Link, s shaperSpec, progFD int) error {
	idx := link.Attrs().Index
	tbf := &netlink.Tbf{
		QdiscAttrs: netlink.QdiscAttrs{LinkIndex: idx, Handle: netlink.MakeHandle(tbfMajor, 0), Parent: netlink.HANDLE_ROOT},
		Rate:       s.rate / 8,
		Buffer:     netlink.Xmittime(s.rate/8, s.burst),
		// Only sizes tbf's default child, which htb replaces below.
		Limit: uint32(l.cfg.QueuePackets * maxPacketBytes),
	}
	if s.peak != 0 {
		tbf.Peakrate = s.peak / 8
		tbf.Minburst = maxPacketBytes
	}
	if err := h.QdiscAdd(tbf); err != nil {
		return fmt.Errorf("add tbf: %w", err)
	}
	htb := netlink.NewHtb(netlink.QdiscAttrs{LinkIndex: idx, Handle: netlink.MakeHandle(htbMajor, 0), Parent: netlink.MakeHandle(tbfMajor, 1)})
	if err := h.QdiscAdd(htb); err != nil {
		return fmt.Errorf("add htb: %w", err)
	}
	for i := 0; i < l.cfg.FlowBuckets; i++ {
		cl := netlink.NewHtbClass(
			netlink.ClassAttrs{LinkIndex: idx, Parent: netlink.MakeHandle(htbMajor, 0), Handle: netlink.MakeHandle(htbMajor, uint16(firstFlowMinor+i))},
			netlink.HtbClassAttrs{Rate: l.cfg.FlowRate, Ceil: l.cfg.FlowRate, Buffer: l.cfg.FlowBurst, Cbuffer: l.cfg.FlowBurst},
		)
		cl.Quantum = flowQuantum
		if err := h.ClassAdd(cl); err != nil {
			return fmt.Errorf("add htb class %x:%x: %w", htbMajor, firstFlowMinor+i, err)
		}
	}
	filter := &netlink.BpfFilter{
		FilterAttrs: netlink.FilterAttrs{LinkIndex: idx, Parent: netlink.MakeHandle(htbMajor, 0), Priority: 1, Protocol: unix.ETH_P_ALL},
		Fd:          progFD,
		Name:        "enalab_flowclass",
	}
	if err := h.FilterAdd(filter); err != nil {
		return fmt.Errorf("attach flowclass to htb: %w", err)
	}
	return nil
}

// shaperHeldBack reads what the aggregate shaper on one link held back: the
// tbf's overlimits (a dequeue held back because the bucket was empty, in
// practice one per packet arriving while throttled: "queued") plus the
// tbf's own drops. tbf also counts drops of its child, which are per-flow
// queue overflows, so those are subtracted: the per-flow cap moves nothing.
func shaperHeldBack(h *netlink.Handle, link netlink.Link) (uint64, error) {
	qdiscs, err := h.QdiscList(link)
	if err != nil {
		return 0, fmt.Errorf("list qdiscs of %s: %w", link.Attrs().Name, err)
	}
	var tbf, htb *netlink.QdiscStatistics
	for _, q := range qdiscs {
		a := q.Attrs()
		switch {
		case q.Type() == "tbf" && a.Handle == netlink.MakeHandle(tbfMajor, 0):
			tbf = a.Statistics
		case q.Type() == "htb" && a.Handle == netlink.MakeHandle(htbMajor, 0):
			htb = a.Statistics
		}
	}
	if tbf == nil || htb == nil || tbf.Queue == nil || htb.Queue == nil {
		return 0, fmt.Errorf("shaper qdiscs or their statistics missing on %s", link.Attrs().Name)
	}
	own := uint64(0)
	if tbf.Queue.Drops > htb.Queue.Drops {
		own = uint64(tbf.Queue.Drops - htb.Queue.Drops)
	}
	return uint64(tbf.Queue.Overlimits) + own, nil
}
