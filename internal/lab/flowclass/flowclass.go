// Package flowclass loads the lab's per-flow classifier: a cls_bpf program
// that maps each flow (by its skb hash) to one of N htb leaf classes.
package flowclass

//go:generate go tool bpf2go -tags linux -target bpfel -cc clang -cflags "-O2 -g -Wall -Werror" flowclass flowclass.c -- -I../../../bpf/headers

import (
	"fmt"

	"github.com/cilium/ebpf"
)

// Load returns the classifier set to return classids
// major:firstMinor+(hash%buckets). The caller attaches it to an htb qdisc as
// a classic (non direct-action) cls_bpf filter and closes the program once
// attached: the filter keeps its own reference.
func Load(major, firstMinor uint16, buckets uint32) (*ebpf.Program, error) {
	if buckets == 0 || uint32(firstMinor)+buckets > 0xffff {
		return nil, fmt.Errorf("flowclass: %d buckets from minor %#x do not fit a classid", buckets, firstMinor)
	}
	spec, err := loadFlowclass()
	if err != nil {
		return nil, fmt.Errorf("flowclass: load spec: %w", err)
	}
	for name, v := range map[string]uint32{flowclassVarMajor: uint32(major), flowclassVarFirstMinor: uint32(firstMinor), flowclassVarNbuckets: buckets} {
		if err := spec.Variables[name].Set(v); err != nil {
			return nil, fmt.Errorf("flowclass: set %s: %w", name, err)
		}
	}
	var objs flowclassObjects
	if err := spec.LoadAndAssign(&objs, nil); err != nil {
		return nil, fmt.Errorf("flowclass: load program: %w", err)
	}
	return objs.Flowclass, nil
}
