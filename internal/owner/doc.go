// Package owner finds who is behind each flow of a trace: the process,
// cgroup, systemd unit, container and Kubernetes pod.
//
// Three ways, each named in record.Owner.How:
//   - socket: cgroup programs on the cgroup v2 root (bpf/owner.c) record
//     socket cookie -> pid, command and cgroup id as sockets are created,
//     bound, connected and sent or received on; the datapath notes the
//     cookie (and the socket's cgroup id) of a flow's first egress packet.
//     A socket opened before the trace, or accepted by a server, is named
//     by its cgroup alone.
//   - veth: a forwarded packet (no local socket) came in on a veth; the
//     processes of the network namespace of its peer own it.
//   - address: a forwarded packet that came in on a bridge: its source
//     address before NAT (from conntrack) is held by a network namespace,
//     whose processes own it.
//
// A cgroup id is the inode of the cgroup's directory in the v2 hierarchy;
// its path names the unit, container and pod (Describe). A pod's namespace
// and name come from the kubelet's directories, no API server needed.
package owner
