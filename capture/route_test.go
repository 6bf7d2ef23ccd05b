package capture

import (
	"strings"
	"testing"
)

func TestDefaultRoute4(t *testing.T) {
	const routes = `Iface	Destination	Gateway 	Flags	RefCnt	Use	Metric	Mask		MTU	Window	IRTT
ens6	00000000	0100A8C0	0003	0	0	200	00000000	0	0	0
ens5	00000000	01001FAC	0003	0	0	100	00000000	0	0	0
ens5	00001FAC	00000000	0001	0	0	100	00F0FFFF	0	0	0
down0	00000000	01001FAC	0002	0	0	1	00000000	0	0	0
`
	got, err := defaultRoute4(strings.NewReader(routes))
	if err != nil || got != "ens5" {
		t.Fatalf("defaultRoute4 = %q, %v; want ens5 (lowest metric, up)", got, err)
	}
	if _, err := defaultRoute4(strings.NewReader("Iface\tDestination\n")); err == nil {
		t.Fatal("no default route: want an error")
	}
}

func TestDefaultRoute6(t *testing.T) {
	const routes = `00000000000000000000000000000000 00 00000000000000000000000000000000 00 fe800000000000000000000000000001 00000400 00000001 00000000 00000003 ens5
00000000000000000000000000000000 00 00000000000000000000000000000000 00 00000000000000000000000000000000 ffffffff 00000001 00000000 00200200 lo
`
	got, err := defaultRoute6(strings.NewReader(routes))
	if err != nil || got != "ens5" {
		t.Fatalf("defaultRoute6 = %q, %v; want ens5", got, err)
	}
}
