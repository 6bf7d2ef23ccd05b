//go:build linux

package capture

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

func TestMissingCapabilities(t *testing.T) {
	bit := func(cs ...int) uint64 {
		var v uint64
		for _, c := range cs {
			v |= 1 << uint(c)
		}
		return v
	}
	for _, tc := range []struct {
		eff  uint64
		want []string
	}{
		{bit(unix.CAP_BPF, unix.CAP_NET_ADMIN, unix.CAP_PERFMON), nil},
		{bit(unix.CAP_SYS_ADMIN, unix.CAP_NET_ADMIN), nil},
		{bit(unix.CAP_BPF, unix.CAP_NET_ADMIN), []string{"CAP_PERFMON"}},
		{bit(unix.CAP_BPF, unix.CAP_PERFMON), []string{"CAP_NET_ADMIN"}},
		{0, []string{"CAP_BPF", "CAP_NET_ADMIN", "CAP_PERFMON"}},
	} {
		if got := missingCapabilities(tc.eff); !slices.Equal(got, tc.want) {
			t.Errorf("effective %#x: missing %v, want %v", tc.eff, got, tc.want)
		}
	}
	if os.Geteuid() == 0 {
		var mc *MissingCapabilitiesError
		if err := CheckCapabilities(); errors.As(err, &mc) {
			t.Errorf("root here: %v", err)
		}
	}
}

// TestRequiredCapabilities: what deploy/ grants is what an empty set lacks.
func TestRequiredCapabilities(t *testing.T) {
	if got := missingCapabilities(0); !slices.Equal(got, RequiredCapabilities) {
		t.Errorf("an empty set lacks %v, RequiredCapabilities says %v", got, RequiredCapabilities)
	}
}

// TestSeccompFiltered reads the seccomp mode of a status file: 2 is a
// filter, 0 none, and a kernel without the line none.
func TestSeccompFiltered(t *testing.T) {
	for status, want := range map[string]bool{
		"Name:\tenaprobe\nSeccomp:\t2\nSeccomp_filters:\t1\n": true,
		"Name:\tenaprobe\nSeccomp:\t0\n":                      false,
		"Name:\tenaprobe\n":                                   false,
	} {
		p := filepath.Join(t.TempDir(), "status")
		if err := os.WriteFile(p, []byte(status), 0o644); err != nil {
			t.Fatal(err)
		}
		if got, err := seccompFiltered(p); err != nil || got != want {
			t.Errorf("%q: %v, %v; want %v", status, got, err, want)
		}
	}
}
