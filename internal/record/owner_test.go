package record

import "testing"

func TestOwnerString(t *testing.T) {
	cases := []struct {
		o    *Owner
		want string
	}{
		{&Owner{}, ""},
		{&Owner{PID: 4121, Comm: "java", Cgroup: "/system.slice/payments.service", Unit: "payments.service", How: "socket"},
			"java[4121] payments.service"},
		{&Owner{Comm: "coredns", Container: "3f4c1e0d9b2a8c7e6f5d", Pod: "kube-system/coredns-5d78c9869d-x7k2p", How: "veth"},
			"coredns pod kube-system/coredns-5d78c9869d-x7k2p (by veth)"},
		{&Owner{Container: "3f4c1e0d9b2a8c7e6f5d", How: "address"}, "container 3f4c1e0d9b2a (by address)"},
		{&Owner{PID: 9, Cgroup: "/enaprobe-test/dns", How: "socket"}, "pid 9 cgroup /enaprobe-test/dns"},
	}
	for _, c := range cases {
		if got := c.o.String(); got != c.want {
			t.Errorf("%+v.String() = %q, want %q", c.o, got, c.want)
		}
	}
}
