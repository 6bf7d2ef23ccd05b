// Package bpf holds the eBPF datapath (C sources under this directory) and
// its bpf2go-generated Go bindings. Only the loader uses it.
package bpf

//go:generate go tool bpf2go -tags linux -cc clang -cflags "-O2 -g -Wall -Werror" -target bpfel -type flow_key -type flow_key4 -type flow_stats -type flow_slot4 -type flow_slot6 -type flow_bucket4 -type flow_bucket6 -type flow_eviction -type bucket -type size_slice -type cpu_state -type dir_totals -type window_event -type direction -type proto_class -type ll_service -type loss_kind Probe probe.c -- -I./headers
