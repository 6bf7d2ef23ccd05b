package lab

import (
	"fmt"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// TCP conntrack states (enum tcp_conntrack) that conncount treats as gone.
const (
	tcpConntrackTimeWait = 7
	tcpConntrackClose    = 8
)

// trackedConnections counts the VPC namespace's conntrack entries the way
// nftables' `ct count` does (nf_conncount): confirmed entries, minus TCP
// connections in TIME_WAIT or CLOSE. conncount itself exposes no count (its
// dump shows only the limit) and the per-netns nf_conntrack_count would
// include closed TCP connections for two minutes, so the ctnetlink dump is
// the reading that agrees with what the cap enforces. Link-local service
// traffic is untracked and absent from the dump, as from the cap.
//
// The kernel walks its whole conntrack hash (shared by every namespace,
// 262144 buckets here) per dump, about 13 ms, so both families come from
// one AF_UNSPEC dump.
func (l *Lab) trackedConnections() (uint64, error) {
	flows, err := l.vpcNl.ConntrackTableList(netlink.ConntrackTable, unix.AF_UNSPEC)
	if err != nil {
		return 0, fmt.Errorf("dump conntrack table: %w", err)
	}
	var n uint64
	for _, f := range flows {
		if tcp, ok := f.ProtoInfo.(*netlink.ProtoInfoTCP); ok && (tcp.State == tcpConntrackTimeWait || tcp.State == tcpConntrackClose) {
			continue
		}
		n++
	}
	return n, nil
}
