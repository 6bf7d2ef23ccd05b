//go:build ignore

// SPDX-License-Identifier: (MIT OR GPL-2.0)
/* enaprobe datapath: counts wire packets, bytes and new TCP connections per
 * time bucket, per flow and per link-local service on tc ingress and egress.
 * It never alters, redirects or drops a packet: every path returns
 * TC_ACT_UNSPEC, which is also TCX_NEXT, so other programs keep running.
 *
 * Built twice for the product (gen.go): without ENAPROBE_PERCPU_BUCKETS
 * every packet is added to the shared bucket ring, and the object needs
 * nothing newer than Linux 5.10; with it, each CPU keeps open buckets that
 * a pinned BPF timer hands over (6.7+). The loader picks one by a feature
 * probe. A third build, with ENAPROBE_BENCH, is the benchmarks' object:
 * the shared-ring datapath plus the floor programs they measure it against
 * and the atomic_adds knob (loader.BenchSpec).
 *
 * Shaped for the verifiers of 5.10 and 6.1, which give up at 1,000,000
 * processed instructions and prune less than newer ones: the parse is a
 * global function, checked once (parse_packet), and wherever paths would
 * carry different constants into the code after them (header offsets, the
 * way of a flow table bucket) the value is read back through memory
 * (reload32), so the verifier goes on with one state instead of checking
 * the rest once per path. TestVerifierStats logs the counts per kernel. */

#include "include/config.h"
#include "include/maps.h"
#include "include/parse.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

#define VERDICT_NEXT (-1) /* TCX_NEXT == TC_ACT_UNSPEC */
#ifdef ENAPROBE_PERCPU_BUCKETS
#define EBUSY 16
#define CLOCK_MONOTONIC 1
#ifndef BPF_F_TIMER_CPU_PIN
#define BPF_F_TIMER_CPU_PIN (1ULL << 1) /* Linux 6.7; the vendored uapi is 6.1 */
#endif
#endif

/* Forced into the ELF so bpf2go -type can emit the Go constants. */
const enum direction *unused_direction __attribute__((unused));
const enum proto_class *unused_proto_class __attribute__((unused));
const enum ll_service *unused_ll_service __attribute__((unused));
const enum loss_kind *unused_loss_kind __attribute__((unused));
const enum origin *unused_origin __attribute__((unused));
const struct window_event *unused_window_event __attribute__((unused));
const struct flow_key4 *unused_flow_key4 __attribute__((unused));
const struct flow_eviction *unused_flow_eviction __attribute__((unused));
const enum imds_kind *unused_imds_kind __attribute__((unused));
const struct imds_event *unused_imds_event __attribute__((unused));

#include "include/linklocal.h"
#include "include/impact.h"
#include "include/buckets.h"
#include "include/flowtable.h"

/* parse_packet parses skb into this CPU's state (cs->pkt) and names the
 * link-local service of its addresses. A global function: the verifier
 * checks it once, on its own, and the counting after it sees the parse's
 * result as plain numbers in memory, one state for every path the parse
 * took. Inlined, the counting was checked again for every parse path: over
 * the 1,000,000-instruction limit on 5.10 and 6.1. Returns 0 when the state
 * is missing, which the verifier makes us check. */
__attribute__((noinline)) int parse_packet(struct __sk_buff *skb)
{
	__u32 zero = 0;
	struct cpu_state *cs = bpf_map_lookup_elem(&cpu_states, &zero);
	if (!cs)
		return 0;
	struct packet *p = &cs->pkt;
	parse(skb, p);
	__u8 svc = LL_NONE;
	if (p->is_ip == 4) {
		svc = ll_service_of4(p->key4.daddr);
		if (svc == LL_NONE)
			svc = ll_service_of4(p->key4.saddr);
	} else if (p->is_ip == 6) {
		svc = ll_service_of(p->key6.daddr);
		if (svc == LL_NONE)
			svc = ll_service_of(p->key6.saddr);
	}
	p->service = svc;
	return 1;
}

#include "include/imds.h"
#include "include/llpayload.h"

/* begin_count is how every counting program starts, the benchmarks' floor
 * included: the clock, the parsed frame, this CPU's state. NULL when the
 * state is missing. */
static __always_inline struct cpu_state *begin_count(struct __sk_buff *skb, __u64 *now)
{
	*now = bpf_ktime_get_ns();
	if (!parse_packet(skb))
		return NULL;
	__u32 zero = 0;
	return bpf_map_lookup_elem(&cpu_states, &zero);
}

static __always_inline int count(struct __sk_buff *skb, __u32 dir)
{
	__u64 now;
	struct cpu_state *cs = begin_count(skb, &now);
	if (!cs)
		return VERDICT_NEXT;
	struct packet *p = &cs->pkt;

	struct wire w;
	wire_of(skb, p, &w);

	__u32 syn = p->class == CLASS_TCP &&
		    (p->tcp_flags & (TCP_FLAG_SYN | TCP_FLAG_ACK)) == TCP_FLAG_SYN;
	__u32 svc = p->service;

	struct dir_totals *t = &cs->totals[dir];
	t->packets[p->class & (NUM_CLASSES - 1)] += w.packets;
	t->bytes[p->class & (NUM_CLASSES - 1)] += w.bytes;
	t->syns += syn;

	count_bucket(cs, now, dir, &w, syn, svc);
	count_sizes(cs, now, dir, &w);
	struct flow_stats *v = NULL;
	if (p->is_ip == 4) {
		v = find_flow(cs, &flows4, flow_regions4, flow_region_bits4,
			      (const __u64 *)&p->key4, KEY_WORDS4, sizeof(struct flow_slot4), now, svc, &w);
	} else if (p->is_ip == 6) {
		complete_key6(p);
		v = find_flow(cs, &flows6, flow_regions6, flow_region_bits6,
			      (const __u64 *)&p->key6, KEY_WORDS6, sizeof(struct flow_slot6), now, svc, &w);
	}
	if (v) {
		/* A TCP flow's packet before this one, for its silence (another
		 * CPU's may be later than now: no silence then); read before
		 * count_flow makes this one the last. */
		__u32 tcp = measure_impact && p->class == CLASS_TCP;
		__u64 gap_ns = 0;
		if (tcp) {
			__u64 seen = v->last_seen_ns;
			gap_ns = seen && (__s64)(now - seen) > 0 ? now - seen : 0;
		}
		count_flow(cs, now, dir, v, p, &w, syn);
		if (tcp)
			count_impact(skb, cs, dir, v, w.packets, gap_ns, now);
		if (note_origins && dir == DIR_EGRESS && !v->origin)
			note_origin(skb, v);
	}
	if (svc != LL_NONE)
		ll_look(skb, dir, svc);
	return VERDICT_NEXT;
}

SEC("tc")
int enaprobe_ingress(struct __sk_buff *skb)
{
	return count(skb, DIR_INGRESS);
}

SEC("tc")
int enaprobe_egress(struct __sk_buff *skb)
{
	return count(skb, DIR_EGRESS);
}

#ifdef ENAPROBE_PERCPU_BUCKETS
/* Feature probe, run once by the loader with BPF_PROG_TEST_RUN: 0 when this
 * kernel starts a BPF timer pinned to the current CPU (Linux 6.7+). */
SEC("tc")
int enaprobe_probe_timer_pin(struct __sk_buff *skb)
{
	__u32 cpu = bpf_get_smp_processor_id();
	struct cpu_timer *t = bpf_map_lookup_elem(&cpu_timers, &cpu);
	if (!t)
		return 1;
	long err = bpf_timer_init(&t->timer, &cpu_timers, CLOCK_MONOTONIC);
	if (err && err != -EBUSY)
		return 2;
	if (bpf_timer_set_callback(&t->timer, flush_timer_fired))
		return 3;
	if (bpf_timer_start(&t->timer, 1000000000ULL, BPF_F_TIMER_CPU_PIN))
		return 4;
	bpf_timer_cancel(&t->timer);
	return 0;
}

#endif

#ifdef ENAPROBE_BENCH
/* The benchmark object's floors, never in the product object. */

/* The baseline of the benchmarks: an empty program measured in the same run. */
SEC("tc")
int enaprobe_empty(struct __sk_buff *skb)
{
	return VERDICT_NEXT;
}

/* Reading the clock alone, for scale in the benchmarks. */
SEC("tc")
int enaprobe_clock(struct __sk_buff *skb)
{
	return bpf_ktime_get_ns() ? VERDICT_NEXT : 0;
}

/* The least a counting probe does, for scale in the benchmarks: read the
 * clock, parse the frame and add it to this CPU's totals, by class, with the
 * clock's parity as its SYN count so that the read is used. */
SEC("tc")
int enaprobe_minimal(struct __sk_buff *skb)
{
	__u64 now;
	struct cpu_state *cs = begin_count(skb, &now);
	if (!cs)
		return VERDICT_NEXT;
	struct dir_totals *t = &cs->totals[DIR_EGRESS];
	t->packets[cs->pkt.class & (NUM_CLASSES - 1)] += 1;
	t->bytes[cs->pkt.class & (NUM_CLASSES - 1)] += skb->len;
	t->syns += now & 1;
	return VERDICT_NEXT;
}
#endif /* ENAPROBE_BENCH */
