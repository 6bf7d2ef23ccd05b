/* Runtime knobs, set by the loader with spec.Variables[...].Set before load. */
#ifndef __ENAPROBE_CONFIG_H
#define __ENAPROBE_CONFIG_H

#include "types.h"

/* Width of a time bucket, 10 us to 10 ms. */
volatile const __u64 bucket_ns = 100000;
/* Bucket ring slots per direction, a power of two (mask = slots - 1). */
volatile const __u32 bucket_mask = 16383;
/* Width of a fine window for the heavy-flow events. */
volatile const __u64 window_ns = 1000000;
/* A flow that moves at least this many wire bytes in one fine window is
 * reported with a window event. */
volatile const __u64 heavy_bytes = 62500;
/* Width of a packet-size slice, and the slice ring mask per direction. */
volatile const __u64 slice_ns = 100000000;
volatile const __u32 slice_mask = 63;
/* The VPC DNS resolver (VPC base + 2), IPv4 in network byte order; 0 when
 * unknown. 169.254.169.253 is always recognised. */
volatile const __u32 vpc_resolver = 0;

/* Flow tables: regions (one lock each) of 1 << region_bits buckets, the
 * hash seed the loader draws at random so that nobody can aim flows at one
 * bucket, and how long a flow must be idle before a full bucket may evict
 * it. */
volatile const __u32 flow_regions4 = 128;
volatile const __u32 flow_region_bits4 = 6;
volatile const __u32 flow_regions6 = 32;
volatile const __u32 flow_region_bits6 = 6;
volatile const __u64 flow_seed = 0;
volatile const __u64 flow_idle_ns = 10000000000ULL;
/* Note each flow's origin (socket cookie, cgroup, ingress interface) from
 * its first egress packet, for owner attribution; 0 turns it off. */
volatile const __u8 note_origins = 1;

#ifdef ENAPROBE_PERCPU_BUCKETS
/* The flush timer's delay: an idle CPU's last open bucket reaches the
 * shared ring at most this long after it ends. */
volatile const __u64 flush_delay_ns = 10000000;
#endif

/* Shared counters are added with atomic instructions. 0 makes them plain
 * read-modify-write adds, which lose counts when CPUs race: it exists only
 * so the benchmarks can measure what the atomics cost. */
volatile const __u8 atomic_adds = 1;

/* Written by userspace through the memory-mapped .bss: the newest bucket
 * and size-slice epochs up to which it has read everything. A slot reused
 * while its old epoch is newer than these still held unread counts: those
 * packets are counted as lost. */
volatile __u64 bucket_drained = 0;
volatile __u64 slice_drained = 0;

#endif
