/* Map definitions. Sizes here are placeholders: the loader sets every
 * max_entries on the spec before load, from the trace options. */
#ifndef __ENAPROBE_MAPS_H
#define __ENAPROBE_MAPS_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "types.h"

/* Flow tables, shared by all CPUs: a per-CPU table would multiply flow
 * memory by the CPU count (192 on the largest instances). Counters are added
 * atomically. Memory-mapped so userspace reads every flow without syscalls.
 * max_entries is the number of buckets: regions << region_bits. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct flow_bucket4);
	__uint(max_entries, 8192);
	__uint(map_flags, BPF_F_MMAPABLE);
} flows4 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct flow_bucket6);
	__uint(max_entries, 2048);
	__uint(map_flags, BPF_F_MMAPABLE);
} flows6 SEC(".maps");

/* One lock per region of each table: a memory-mapped array cannot hold a
 * bpf_spin_lock. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct flow_lock);
	__uint(max_entries, 128);
} flow_locks4 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct flow_lock);
	__uint(max_entries, 32);
} flow_locks6 SEC(".maps");

/* Which buckets hold a flow: one word per region, bit b for the region's
 * bucket b, set under the region's lock when a bucket takes its first flow
 * (buckets never empty). Userspace walks only those buckets: a snapshot
 * costs what the flows take, not what the table could hold. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, 128);
	__uint(map_flags, BPF_F_MMAPABLE);
} flow_used4 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, 32);
	__uint(map_flags, BPF_F_MMAPABLE);
} flow_used6 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 64 * 1024);
} flow_evictions SEC(".maps");

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

/* The rings are written with BPF_RB_NO_WAKEUP: userspace reads them on a
 * timer and never sleeps on them, and a wakeup is an irq_work, a self-IPI
 * that costs a VM exit on some hypervisors. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} window_events SEC(".maps");

/* IMDS events (imds_look): a few per IMDS request, and IMDS itself is
 * throttled, so a small ring; a full one counts LOSS_IMDS_EVENTS. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 64 * 1024);
} imds_events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct imds_peek);
	__uint(max_entries, 1);
} imds_scratch SEC(".maps");

#ifdef ENAPROBE_PERCPU_BUCKETS
/* One flush timer per CPU; max_entries is set to the possible CPUs. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct cpu_timer);
	__uint(max_entries, 256);
} cpu_timers SEC(".maps");
#endif

#endif
