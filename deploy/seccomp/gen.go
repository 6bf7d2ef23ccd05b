//go:build ignore

// gen writes enaprobe.json: the container runtimes' default seccomp profile
// (Debian's containers-common, the moby-derived profile podman, CRI-O and,
// nearly to the rule, containerd and Docker ship), resolved for the
// capabilities enaprobe's container holds (CAP_BPF, CAP_NET_ADMIN,
// CAP_PERFMON) on amd64 and arm64, with one rule added: bpf(2) is allowed.
// The default profiles allow bpf(2) only to a container holding
// CAP_SYS_ADMIN (moby/moby#43374, open since 2022), so a container granted
// CAP_BPF alone, as the DaemonSet is, gets EPERM for every map it creates.
//
// The output is in the OCI runtime spec's LinuxSeccomp form (no includes or
// excludes left to resolve), which podman's --security-opt seccomp=FILE,
// Docker's, and the kubelet's Localhost profiles all read.
//
//	go generate ./deploy/seccomp   # reads /usr/share/containers/seccomp.json
//	go run gen.go OUT              # writes OUT instead of enaprobe.json
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"

	"github.com/enaprobe/enaprobe/deploy/seccomp"
)

var (
	caps   = []string{"CAP_BPF", "CAP_NET_ADMIN", "CAP_PERFMON"}
	arches = []string{"amd64", "arm64"}
)

type filter struct {
	Caps   []string `json:"caps,omitempty"`
	Arches []string `json:"arches,omitempty"`
	// MinKernel gates a rule on the running kernel; the profile is for
	// every kernel of the fleet, so gen refuses such a rule (none yet).
	MinKernel string `json:"minKernel,omitempty"`
}

type rule struct {
	Names    []string          `json:"names"`
	Action   string            `json:"action"`
	Args     []json.RawMessage `json:"args,omitempty"`
	ErrnoRet *uint             `json:"errnoRet,omitempty"`
	Includes *filter           `json:"includes,omitempty"`
	Excludes *filter           `json:"excludes,omitempty"`
}

type profile struct {
	DefaultAction   string `json:"defaultAction"`
	DefaultErrnoRet *uint  `json:"defaultErrnoRet,omitempty"`
	ArchMap         []struct {
		Architecture     string   `json:"architecture"`
		SubArchitectures []string `json:"subArchitectures"`
	} `json:"archMap,omitempty"`
	Syscalls []rule `json:"syscalls"`
}

// out is the OCI form.
type out struct {
	DefaultAction   string    `json:"defaultAction"`
	DefaultErrnoRet *uint     `json:"defaultErrnoRet,omitempty"`
	Architectures   []string  `json:"architectures"`
	Syscalls        []outRule `json:"syscalls"`
}

type outRule struct {
	Names    []string          `json:"names"`
	Action   string            `json:"action"`
	Args     []json.RawMessage `json:"args,omitempty"`
	ErrnoRet *uint             `json:"errnoRet,omitempty"`
}

func main() {
	b, err := os.ReadFile(seccomp.Source)
	if err != nil {
		fail("read the runtimes' default profile: %v (install golang-github-containers-common: ./.ci/deps)", err)
	}
	var p profile
	if err := json.Unmarshal(b, &p); err != nil {
		fail("decode %s: %v", seccomp.Source, err)
	}
	o := out{DefaultAction: p.DefaultAction, DefaultErrnoRet: p.DefaultErrnoRet}
	for _, a := range p.ArchMap {
		if a.Architecture == "SCMP_ARCH_X86_64" || a.Architecture == "SCMP_ARCH_AARCH64" {
			o.Architectures = append(o.Architectures, a.Architecture)
			o.Architectures = append(o.Architectures, a.SubArchitectures...)
		}
	}
	for _, r := range p.Syscalls {
		if !applies(r) {
			continue
		}
		if slices.Contains(r.Names, "bpf") && r.Action != "SCMP_ACT_ALLOW" {
			// The rule that refuses bpf(2) without CAP_SYS_ADMIN; any other
			// syscall it names keeps it.
			rest := slices.DeleteFunc(slices.Clone(r.Names), func(n string) bool { return n == "bpf" })
			if len(rest) == 0 {
				continue
			}
			r.Names = rest
		}
		o.Syscalls = append(o.Syscalls, outRule{Names: r.Names, Action: r.Action, Args: r.Args, ErrnoRet: r.ErrnoRet})
	}
	o.Syscalls = append(o.Syscalls, outRule{Names: []string{"bpf"}, Action: "SCMP_ACT_ALLOW"})
	enc, err := json.MarshalIndent(o, "", "  ")
	if err != nil {
		fail("encode: %v", err)
	}
	dest := "enaprobe.json"
	if len(os.Args) > 1 {
		dest = os.Args[1]
	}
	if err := os.WriteFile(dest, append(enc, '\n'), 0o644); err != nil {
		fail("write %s: %v", dest, err)
	}
}

// applies resolves a rule's includes and excludes for the container's
// capabilities and either architecture, as the runtimes do when they turn
// the profile into the container's spec: includes.caps wants every cap it
// lists, excludes.caps none of them.
func applies(r rule) bool {
	if in := r.Includes; in != nil {
		for _, c := range in.Caps {
			if !slices.Contains(caps, c) {
				return false
			}
		}
		if len(in.Arches) > 0 && !slices.ContainsFunc(in.Arches, func(a string) bool { return slices.Contains(arches, a) }) {
			return false
		}
		if in.MinKernel != "" {
			fail("rule %v is gated on kernel %s: resolve it for the fleet's kernels by hand", r.Names, in.MinKernel)
		}
	}
	if ex := r.Excludes; ex != nil {
		for _, c := range ex.Caps {
			if slices.Contains(caps, c) {
				return false
			}
		}
	}
	return true
}

func fail(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "gen: "+format+"\n", a...)
	os.Exit(1)
}
