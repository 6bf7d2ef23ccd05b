//go:build linux

package loader

import (
	"os/exec"
	"testing"
)

// TestFilterOwner: a filter's name says whose it is; a process that is gone,
// or that got the PID later, is not its owner.
func TestFilterOwner(t *testing.T) {
	me := newFilterOwner("ingress", true)
	got, ok := parseFilterName(me.String())
	if !ok || got != me || !got.alive() {
		t.Fatalf("own filter %s parsed as %+v (%v), alive %v", me, got, ok, got.alive())
	}
	if me.start == 0 || me.pidNS == 0 {
		t.Errorf("own filter %s lacks the start time or PID namespace", me)
	}
	for _, name := range []string{"cilium", "enaprobe", "enaprobe-x-ingress", "enaprobe--1-ingress"} {
		if o, ok := parseFilterName(name); ok {
			t.Errorf("%q parsed as enaprobe's: %+v", name, o)
		}
	}
	if o, ok := parseFilterName("enaprobe-1234-egress"); !ok || o.pid != 1234 || o.hook != "egress" || o.qdisc {
		t.Errorf("an older version's name parsed as %+v (%v)", o, ok)
	}
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	other := filterOwner{pid: cmd.Process.Pid, hook: "ingress", pidNS: ownPIDNS()}
	other.start, _ = processStart(other.pid)
	reused := other
	reused.start-- // the PID's earlier owner
	foreignNS := other
	foreignNS.pidNS++
	if !other.alive() || reused.alive() || !foreignNS.alive() {
		t.Errorf("running: alive %v, PID reused: alive %v (want false), other PID namespace: alive %v", other.alive(), reused.alive(), foreignNS.alive())
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if other.alive() {
		t.Errorf("PID %d alive after it exited", other.pid)
	}
}
