// Package bpf holds the eBPF datapath (C sources under this directory) and
// its bpf2go-generated Go bindings. Only the loader uses it.
//
// probe.c is built twice for the product: Probe adds every packet to the
// shared bucket ring (any kernel from 5.10), ProbePerCPU keeps per-CPU open
// buckets that pinned BPF timers hand over (6.7+). The loader picks one by a
// feature probe. A third build, ProbeBench, is for benchmarks only: the
// shared-ring datapath with the floor programs (enaprobe_empty, _clock,
// _minimal) and the atomic_adds knob; nothing in a trace loads it. The
// shared C types are generated from Probe alone.
//
// owner.c (Owner) holds the cgroup programs that record who each socket
// belongs to, for owner attribution; it is loaded once per trace.
package bpf

//go:generate go tool bpf2go -tags linux -cc clang -cflags "-O2 -g -Wall -Werror" -target bpfel -type flow_key -type flow_key4 -type flow_stats -type flow_slot4 -type flow_slot6 -type flow_bucket4 -type flow_bucket6 -type flow_eviction -type bucket -type size_slice -type cpu_state -type dir_totals -type window_event -type direction -type proto_class -type ll_service -type loss_kind -type origin -type impact_flag -type imds_kind -type imds_event -type ll_payload_event Probe probe.c -- -I./headers
//go:generate go tool bpf2go -tags linux -cc clang -cflags "-O2 -g -Wall -Werror -DENAPROBE_PERCPU_BUCKETS" -target bpfel -no-global-types ProbePerCPU probe.c -- -I./headers
//go:generate go tool bpf2go -tags linux -cc clang -cflags "-O2 -g -Wall -Werror -DENAPROBE_BENCH" -target bpfel -no-global-types ProbeBench probe.c -- -I./headers
//go:generate go tool bpf2go -tags linux -cc clang -cflags "-O2 -g -Wall -Werror" -target bpfel -type sock_owner -type owner_counts Owner owner.c -- -I./headers
