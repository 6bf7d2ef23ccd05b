/* Map definitions. Sizes here are placeholders: the loader sets every
 * max_entries on the spec before load, from the trace options. */
#ifndef __ENAPROBE_MAPS_H
#define __ENAPROBE_MAPS_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "types.h"

/* Shared hashes: a per-CPU hash would multiply flow memory by the CPU count
 * (192 on the largest instances). Packets and bytes are added atomically. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct flow_key4);
	__type(value, struct flow_stats);
	__uint(max_entries, 65536);
} flows4 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct flow_key);
	__type(value, struct flow_stats);
	__uint(max_entries, 16384);
} flows6 SEC(".maps");

/* Bucket rings, direction-major: slot = dir * (mask + 1) + (epoch & mask).
 * Memory-mapped so userspace reads and zeroes counters without syscalls. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct bucket);
	__uint(max_entries, 2 * 16384);
	__uint(map_flags, BPF_F_MMAPABLE);
} buckets SEC(".maps");

/* Finished size slices per CPU, direction-major like the buckets. Slices
 * are coarse (100 ms), so userspace reads about one slot per direction per
 * drain; per-CPU keeps the histogram free of atomics. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct size_slice);
	__uint(max_entries, 2 * 64);
} size_slices SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct cpu_state);
	__uint(max_entries, 1);
} cpu_states SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} window_events SEC(".maps");

#endif
