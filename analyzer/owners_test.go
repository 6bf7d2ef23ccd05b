package analyzer

import (
	"net/netip"
	"strconv"
	"testing"

	"github.com/enaprobe/enaprobe/internal/record"
)

func key(src, dst string) record.FlowKey {
	return record.FlowKey{Proto: 6, Src: netip.MustParseAddrPort(src), Dst: netip.MustParseAddrPort(dst)}
}

// TestOwnersRankPodsAsOne: ten processes of one pod, each with a small
// flow, are one owner ahead of a process with the largest single flow;
// the pod's owner keeps only what its processes share.
func TestOwnersRankPodsAsOne(t *testing.T) {
	var owners []record.FlowOwner
	var tallies []flowTally
	for i := range 10 {
		k := key("10.0.3.17:"+strconv.Itoa(41000+i), "10.0.9.9:443")
		owners = append(owners, record.FlowOwner{Interface: "eth0", Key: k, Owner: record.Owner{
			PID: uint32(4000 + i), Comm: "worker", Cgroup: "/kubepods.slice/pod-a/cri-containerd-" + strconv.Itoa(i) + ".scope",
			Container: strconv.Itoa(i), Pod: "shop/api-1", How: "socket"}})
		tallies = append(tallies, flowTally{ref: flowRef{"eth0", k}, bytes: 500})
	}
	big := key("10.0.3.18:5000", "10.0.9.9:443")
	owners = append(owners, record.FlowOwner{Interface: "eth0", Key: big, Owner: record.Owner{PID: 77, Comm: "backup",
		Cgroup: "/system.slice/backup.service", Unit: "backup.service", How: "socket"}})
	tallies = append(tallies, flowTally{ref: flowRef{"eth0", big}, bytes: 3000})
	tallies = append(tallies, flowTally{ref: flowRef{"eth0", key("10.0.3.19:1", "10.0.9.9:443")}, bytes: 2000}) // no owner

	a := &analysis{rec: &record.Recording{Owners: owners}, opt: withDefaults(Options{})}
	a.owners = buildOwnerIndex(owners)
	got := a.ownersFromTallies(tallies, rankBytes)
	if len(got) != 2 {
		t.Fatalf("owners %+v, want the pod and the backup process", got)
	}
	pod := got[0]
	if pod.Owner.Pod != "shop/api-1" || pod.Flows != 10 || pod.Bytes != 5000 || pod.Share != 0.5 {
		t.Errorf("first owner %+v, want pod shop/api-1 with 10 flows, 5000 bytes, half of 10000", pod)
	}
	if pod.Owner.PID != 0 || pod.Owner.Container != "" || pod.Owner.Comm != "worker" || pod.Owner.How != "socket" {
		t.Errorf("pod owner %+v: want the shared fields only (comm, pod, how)", pod.Owner)
	}
	if got[1].Owner.Unit != "backup.service" || got[1].Share != 0.3 {
		t.Errorf("second owner %+v, want backup.service at 0.3", got[1])
	}

	// The reverse direction of an owned flow has the same owner, and a
	// row summing one source's flows to one destination has theirs when
	// they agree.
	if o := a.owners.of(flowRef{"eth0", key("10.0.9.9:443", "10.0.3.18:5000")}); o == nil || o.PID != 77 {
		t.Errorf("reply flow owner %+v, want the backup process", o)
	}
	row := FlowShare{Proto: "tcp", Src: "10.0.3.18:*", Dst: "10.0.9.9:443"}
	if o := a.owners.ofRow("eth0", row); o == nil || o.PID != 77 {
		t.Errorf("row %s owner %+v, want the backup process", row.Src, o)
	}
	row.Src = "10.0.3.17:*" // ten processes: no one owner
	if o := a.owners.ofRow("eth0", row); o != nil {
		t.Errorf("row of ten processes' flows: owner %+v, want none", o)
	}
}
