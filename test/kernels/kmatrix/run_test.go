package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/enaprobe/enaprobe/test/kernels/console"
)

// TestDiedBeforeInit: a guest whose kernel oopsed before kmatrix's init
// reported its boot is booted again; one whose init reported its boot,
// passed or failed, or that finished its plan, is not.
func TestDiedBeforeInit(t *testing.T) {
	stopped := errors.New("guest stopped before the end of its plan")
	for _, c := range []struct {
		name, console string
		err           error
		want          bool
	}{
		{"oops in early boot", "[    2.496638] Oops: int3: 0000 [#1] PREEMPT SMP NOPTI\n[    2.499967] Kernel panic - not syncing: Fatal exception in interrupt\n", stopped, true},
		{"init's boot failed", console.CheckLine("boot", console.Fail, "mount /proc: no such device") + "\n", stopped, false},
		{"a check hung after boot", console.CheckLine("boot", console.Pass, "") + "\n--- PASS: TestFlushTimer (0.10s)\n", stopped, false},
		{"plan done", console.CheckLine("boot", console.Pass, "") + "\n" + console.DoneLine() + "\n", nil, false},
	} {
		rep, err := console.Parse(strings.NewReader(c.console))
		if err != nil {
			t.Fatal(err)
		}
		if got := diedBeforeInit(rep, c.err); got != c.want {
			t.Errorf("%s: diedBeforeInit %v, want %v (checks %v, done %v)", c.name, got, c.want, rep.Checks, rep.Done)
		}
	}
}
