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

/* The link-local service an address belongs to, or LL_NONE. Most packets
 * are neither 169.254.0.0/16 nor fd00:ec2::/32: one comparison rejects them. */
static __always_inline __u8 ll_service_of(const __u8 *addr)
{
	__u32 w[4];
	__builtin_memcpy(w, addr, 16);
	if (w[0] == 0) {
		if (vpc_resolver && w[3] == vpc_resolver && w[1] == 0 && w[2] == bpf_htonl(0xffff))
			return LL_DNS;
		if ((w[3] & bpf_htonl(0xffff0000)) != bpf_htonl(0xa9fe0000) || w[1] != 0 ||
		    w[2] != bpf_htonl(0xffff))
			return LL_NONE;
		if (w[3] == bpf_htonl(0xa9fea9fe)) /* 169.254.169.254 */
			return LL_IMDS;
		if (w[3] == bpf_htonl(0xa9fea9fd)) /* 169.254.169.253 */
			return LL_DNS;
		if (w[3] == bpf_htonl(0xa9fea97b)) /* 169.254.169.123 */
			return LL_NTP;
		return LL_NONE;
	}
	if (w[0] != bpf_htonl(0xfd000ec2) || w[1] != 0 || w[2] != 0)
		return LL_NONE;
	if (w[3] == bpf_htonl(0x254)) /* fd00:ec2::254 */
		return LL_IMDS;
	if (w[3] == bpf_htonl(0x253))
		return LL_DNS;
	if (w[3] == bpf_htonl(0x123))
		return LL_NTP;
	return LL_NONE;
}

/* The link-local service of an IPv4 address (network byte order). */
static __always_inline __u8 ll_service_of4(__u32 a)
{
	if ((a & bpf_htonl(0xffff0000)) != bpf_htonl(0xa9fe0000)) {
		if (vpc_resolver && a == vpc_resolver)
			return LL_DNS;
		return LL_NONE;
	}
	if (a == bpf_htonl(0xa9fea9fe)) /* 169.254.169.254 */
		return LL_IMDS;
	if (a == bpf_htonl(0xa9fea9fd)) /* 169.254.169.253 */
		return LL_DNS;
	if (a == bpf_htonl(0xa9fea97b)) /* 169.254.169.123 */
		return LL_NTP;
	return LL_NONE;
}

/* complete_key6 fills an IPv6 packet's key beyond its addresses. */
static __always_inline void complete_key6(struct packet *p)
{
	p->key6.sport = p->key4.sport;
	p->key6.dport = p->key4.dport;
	p->key6.proto = p->key4.proto;
	p->key6.present = 1;
	p->key6.pad[0] = 0;
	p->key6.pad[1] = 0;
}

/* keycopy widens a stored key to the flow_key userspace sees. */
static __always_inline void keycopy4(struct flow_key *dst, const struct flow_key4 *k)
{
	__builtin_memset(dst, 0, sizeof(*dst));
	dst->saddr[10] = 0xff;
	dst->saddr[11] = 0xff;
	dst->daddr[10] = 0xff;
	dst->daddr[11] = 0xff;
	__builtin_memcpy(&dst->saddr[12], &k->saddr, 4);
	__builtin_memcpy(&dst->daddr[12], &k->daddr, 4);
	dst->sport = k->sport;
	dst->dport = k->dport;
	dst->proto = k->proto;
	dst->present = 1;
}

/* full_key is the flow as userspace and window events see it: IPv4
 * v4-mapped into the IPv6 key. An IPv6 key must be complete. */
static __always_inline void full_key(const struct packet *p, struct flow_key *k)
{
	if (p->is_ip == 6) {
		*k = p->key6;
		return;
	}
	keycopy4(k, &p->key4);
}

static __always_inline __u32 size_class(__u32 size)
{
	if (size <= 64)
		return 0;
	if (size <= 128)
		return 1;
	if (size <= 256)
		return 2;
	if (size <= 512)
		return 3;
	if (size <= 1024)
		return 4;
	if (size <= 1500)
		return 5;
	if (size <= 9001)
		return 6;
	return 7;
}

/* What one skb stands for on the wire. A GSO/GRO super-packet is segs wire
 * packets, each repeating the l2+l3+l4 headers; every segment but the last
 * carries gso_size bytes of payload. */
struct wire {
	__u32 packets;
	__u32 bytes;
	__u32 seg_size;  /* layer-3 size of the full segments */
	__u32 last_size; /* layer-3 size of the last segment */
};

static __always_inline void wire_of(struct __sk_buff *skb, const struct packet *p, struct wire *w)
{
	__u32 len = skb->len;
	__u32 size = len - p->l2_len;
	__u32 gso_size = skb->gso_size;

	w->packets = 1;
	w->bytes = len;
	w->seg_size = size;
	w->last_size = size;
	if (!gso_size || len <= p->hdr_len)
		return;

	__u32 payload = len - p->hdr_len;
	__u32 segs = skb->gso_segs;
	if (!segs)
		segs = (payload + gso_size - 1) / gso_size;
	if (segs <= 1)
		return;
	__u32 hdr3 = p->hdr_len - p->l2_len; /* l3+l4 headers */
	__u32 full = (segs - 1) * gso_size;
	w->packets = segs;
	w->bytes = len + (segs - 1) * p->hdr_len;
	w->seg_size = gso_size + hdr3;
	w->last_size = (payload > full ? payload - full : gso_size) + hdr3;
}

/* epoch_of is now / width, divided only when now has left the cached
 * interval [*start, *start + width). */
static __always_inline __u64 epoch_of(__u64 now, __u64 width, __u64 *epoch, __u64 *start)
{
	if (now - *start < width)
		return *epoch;
	__u64 e = now / width;
	*epoch = e;
	*start = e * width;
	return e;
}

/* zero_counts empties a bucket's counters; its epoch stays. */
static __always_inline void zero_counts(struct bucket *b)
{
	b->packets = 0;
	b->bytes = 0;
	b->syns = 0;
	b->link_local[0] = 0;
	b->link_local[1] = 0;
	b->link_local[2] = 0;
}

/* add_to_slot adds counts of bucket epoch to its slot of the shared ring,
 * taking the slot over from an older epoch first. */
static __always_inline void add_to_slot(struct cpu_state *cs, __u32 dir, __u64 epoch,
					__u64 packets, __u64 bytes, __u32 syns, const __u32 *ll)
{
	__u32 slot = dir * (bucket_mask + 1) + ((__u32)epoch & bucket_mask);
	struct bucket *b = bpf_map_lookup_elem(&buckets, &slot);
	if (!b)
		return;
	__u64 old = b->epoch;
	if (old != epoch) {
		if (old > epoch) {
			/* A bucket so late that its slot holds a newer one. */
			cs->loss[LOSS_BUCKET_OVERWRITTEN] += packets;
			return;
		}
		b->epoch = epoch;
		/* Userspace swaps counters to zero as it reads them. A slot whose
		 * old epoch it has not read yet still holds those packets. */
		if (old > bucket_drained) {
			/* Plain loads and stores, not an exchange: BPF_XCHG needs
			 * Linux 5.12 and Amazon Linux 2 runs 5.10. This path is loss
			 * already; a race here only blurs how much. */
			cs->loss[LOSS_BUCKET_OVERWRITTEN] += b->packets;
			zero_counts(b);
		}
	}
	if (atomic_adds) {
		__sync_fetch_and_add(&b->packets, packets);
		__sync_fetch_and_add(&b->bytes, bytes);
	} else {
		b->packets += packets;
		b->bytes += bytes;
	}
	if (syns)
		__sync_fetch_and_add(&b->syns, syns);
	if (ll[0])
		__sync_fetch_and_add(&b->link_local[0], ll[0]);
	if (ll[1])
		__sync_fetch_and_add(&b->link_local[1], ll[1]);
	if (ll[2])
		__sync_fetch_and_add(&b->link_local[2], ll[2]);
}

#ifdef ENAPROBE_PERCPU_BUCKETS
/* flush_open moves a CPU's open bucket of one direction to the shared ring
 * and empties it. */
static __attribute__((noinline)) void flush_open(struct cpu_state *cs, __u32 dir)
{
	if (dir >= NUM_DIRECTIONS)
		return;
	struct bucket *o = &cs->open[dir];
	if (o->packets)
		add_to_slot(cs, dir, o->epoch, o->packets, o->bytes, o->syns, o->link_local);
	zero_counts(o);
}

/* flush_timer_fired runs on the CPU that armed it (BPF_F_TIMER_CPU_PIN):
 * it flushes the open buckets whose time is over, so a CPU that went idle
 * does not hold its last bucket back, and stays armed while a bucket is
 * open. Timer callbacks run in softirq context and tc programs with
 * softirqs off, so the two never interleave on one CPU. */
static int flush_timer_fired(void *map, __u32 *key, struct cpu_timer *t)
{
	__u32 zero = 0;
	struct cpu_state *cs = bpf_map_lookup_elem(&cpu_states, &zero);
	if (!cs)
		return 0;
	__u64 cur = bpf_ktime_get_ns() / bucket_ns;
	int open = 0;
#pragma unroll
	for (__u32 d = 0; d < NUM_DIRECTIONS; d++) {
		if (!cs->open[d].packets)
			continue;
		if (cs->open[d].epoch < cur)
			flush_open(cs, d);
		else
			open = 1;
	}
	if (open && !bpf_timer_start(&t->timer, flush_delay_ns, BPF_F_TIMER_CPU_PIN))
		return 0;
	cs->timer_armed = 0;
	return 0;
}

/* arm_flush_timer starts this CPU's flush timer, setting it up on first
 * use; it returns whether the timer is armed. */
static __attribute__((noinline)) int arm_flush_timer(struct cpu_state *cs)
{
	__u32 cpu = bpf_get_smp_processor_id();
	struct cpu_timer *t = bpf_map_lookup_elem(&cpu_timers, &cpu);
	if (!t)
		return 0;
	if (!cs->timer_ready) {
		long err = bpf_timer_init(&t->timer, &cpu_timers, CLOCK_MONOTONIC);
		if (err && err != -EBUSY)
			return 0;
		if (bpf_timer_set_callback(&t->timer, flush_timer_fired))
			return 0;
		cs->timer_ready = 1;
	}
	if (bpf_timer_start(&t->timer, flush_delay_ns, BPF_F_TIMER_CPU_PIN))
		return 0;
	cs->timer_armed = 1;
	return 1;
}

/* count_bucket counts a packet in this CPU's open bucket with plain adds;
 * the open bucket goes to the shared ring once, when the CPU moves to a
 * later bucket or its timer fires: no cache line is shared by every CPU's
 * packets. */
static __always_inline void count_bucket(struct cpu_state *cs, __u64 now, __u32 dir,
					 const struct wire *w, __u32 syn, __u32 svc)
{
	__u64 epoch = epoch_of(now, bucket_ns, &cs->bucket_epoch, &cs->bucket_start_ns);
	struct bucket *o = &cs->open[dir & 1];
	if (o->epoch != epoch) {
		if (o->packets)
			flush_open(cs, dir);
		o->epoch = epoch;
	}
	o->packets += w->packets;
	o->bytes += w->bytes;
	o->syns += syn;
	if (svc - LL_IMDS < NUM_LL_SERVICES)
		o->link_local[svc - LL_IMDS] += w->packets;
	/* Without a timer nothing would hand an idle CPU's bucket over: a CPU
	 * whose timer does not start hands each packet over at once. */
	if (!cs->timer_armed && !arm_flush_timer(cs))
		flush_open(cs, dir);
}
#else
/* count_bucket adds a packet to the shared ring with atomics (kernels
 * without pinned BPF timers: an open per-CPU bucket would have nothing to
 * hand it over when the CPU goes idle). */
static __always_inline void count_bucket(struct cpu_state *cs, __u64 now, __u32 dir,
					 const struct wire *w, __u32 syn, __u32 svc)
{
	__u64 epoch = epoch_of(now, bucket_ns, &cs->bucket_epoch, &cs->bucket_start_ns);
	/* Constant stack offsets: 5.10 refuses a variable one. */
	__u32 ll[NUM_LL_SERVICES] = {};
	if (svc == LL_IMDS)
		ll[0] = w->packets;
	else if (svc == LL_DNS)
		ll[1] = w->packets;
	else if (svc == LL_NTP)
		ll[2] = w->packets;
	add_to_slot(cs, dir, epoch, w->packets, w->bytes, syn, ll);
}
#endif

/* retire_slice moves a finished slice to its ring slot, unless userspace
 * already read it from the state (a CPU that was idle retires late). A slot
 * still holding a slice userspace has not read (newer than slice_drained) is
 * overwritten, and its packets counted as lost. */
static __attribute__((noinline)) void retire_slice(struct cpu_state *cs, __u32 dir,
						  const struct size_slice *s)
{
	if (s->epoch <= slice_drained)
		return;
	__u32 slot = dir * (slice_mask + 1) + ((__u32)s->epoch & slice_mask);
	struct size_slice *r = bpf_map_lookup_elem(&size_slices, &slot);
	if (!r)
		return;
	if (r->epoch > slice_drained && r->epoch != s->epoch) {
		__u64 lost = 0;
#pragma unroll
		for (int i = 0; i < NUM_SIZE_CLASSES; i++)
			lost += r->counts[i];
		cs->loss[LOSS_SLICE_OVERWRITTEN] += lost;
	}
	*r = *s;
}

/* The current slice of each direction lives in the per-CPU state, next to
 * the totals the packet touches anyway; a finished slice is copied to the
 * per-CPU ring when the CPU sees its first packet of a later slice.
 * Userspace reads a slice from the ring, or from the state while no later
 * packet has moved it there. */
static __always_inline void count_sizes(struct cpu_state *cs, __u64 now, __u32 dir,
					const struct wire *w)
{
	__u64 epoch = epoch_of(now, slice_ns, &cs->slice_epoch, &cs->slice_start_ns);
	struct size_slice *s = &cs->slices[dir];
	if (s->epoch != epoch) {
		if (s->epoch)
			retire_slice(cs, dir, s);
		__builtin_memset(s, 0, sizeof(*s));
		s->epoch = epoch;
	}
	s->counts[size_class(w->last_size) & (NUM_SIZE_CLASSES - 1)] += 1;
	if (w->packets > 1) {
		s->counts[size_class(w->seg_size) & (NUM_SIZE_CLASSES - 1)] += w->packets - 1;
		s->super_packets += 1;
	}
}

static __attribute__((noinline)) void emit_window(struct cpu_state *cs, const struct packet *p,
					const struct flow_stats *v)
{
	struct window_event ev;
	__builtin_memset(&ev, 0, sizeof(ev));
	full_key(p, &ev.key);
	ev.win_start_ns = v->win_start_ns;
	ev.bytes = v->win_bytes;
	ev.packets = v->win_packets;
	ev.dir = v->win_dir;
	if (bpf_ringbuf_output(&window_events, &ev, sizeof(ev), BPF_RB_NO_WAKEUP))
		cs->loss[LOSS_RINGBUF_FULL] += 1;
}

/* The flow tables. A key hashes to a region of buckets (one lock each)
 * and to two buckets in it; a new flow goes to the emptier of the two. Two
 * choices keep buckets evenly filled: a table three quarters full loses
 * about one new flow in ten thousand to full buckets, where one choice
 * loses one in twenty (BENCHMARKS.md). Each bucket's ways fill in order and
 * are never emptied, so a search ends at the first free way. */

#define KEY_WORDS4 (sizeof(struct flow_key4) / 8)
#define KEY_WORDS6 (sizeof(struct flow_key) / 8)

/* flow_hash mixes a key's 64-bit words with the loader's random seed:
 * multiply and xor-shift, a few instructions where the kernel's hash maps
 * run jhash and memcmp through a helper call. */
static __always_inline __u64 mix(__u64 h, __u64 w)
{
	h = (h ^ w) * 0x9e3779b97f4a7c15ULL;
	return h ^ (h >> 29);
}

/* Written out for the two key sizes: clang leaves a loop over a word count
 * known only after inlining as a loop. */
static __always_inline __u64 flow_hash(const __u64 *w, int words)
{
	__u64 h = mix(mix(flow_seed, w[0]), w[1]);
	if (words == KEY_WORDS6)
		h = mix(mix(mix(h, w[2]), w[3]), w[4]);
	return h * 0xbf58476d1ce4e5b9ULL;
}

static __always_inline int key_equal(const __u64 *a, const __u64 *b, int words)
{
	__u64 diff = (a[0] ^ b[0]) | (a[1] ^ b[1]);
	if (words == KEY_WORDS6)
		diff |= (a[2] ^ b[2]) | (a[3] ^ b[3]) | (a[4] ^ b[4]);
	return diff == 0;
}

/* The verifier checks the code after a scan once for every way the scan
 * could have stopped at, when the way is a constant of the path: each
 * result is therefore read back through memory (reload32) and so unknown
 * to the verifier, which goes on with one state. */

/* scan_bucket returns the way of key in bucket (below FLOW_WAYS), or
 * FLOW_WAYS plus the number of ways taken when key is not there. A free
 * way's key is all zeroes; a packet's key has present = 1 in its last
 * word. */
static __always_inline __u32 scan_bucket(void *bucket, const __u64 *key, int words,
					 int slot_size, __u32 *scratch)
{
	__u32 r = 2 * FLOW_WAYS;
#pragma unroll
	for (int i = 0; i < FLOW_WAYS; i++) {
		__u64 *k = bucket + i * slot_size;
		if (key_equal(k, key, words)) {
			r = i;
			break;
		}
		if (k[words - 1] == 0) {
			r = FLOW_WAYS + i;
			break;
		}
	}
	*scratch = r;
	return reload32(scratch);
}

/* way_stats is the flow stats of way of bucket (way below FLOW_WAYS). */
static __always_inline struct flow_stats *way_stats(void *bucket, __u32 way, int words,
						    int slot_size)
{
	return bucket + (way & (FLOW_WAYS - 1)) * slot_size + words * 8;
}

/* oldest_way finds, of the ways of bucket (numbered from base), the one
 * whose flow was seen longest ago. */
static __always_inline void oldest_way(void *bucket, __u32 base, int words, int slot_size,
				       __u64 *oldest, __u32 *victim)
{
#pragma unroll
	for (int i = 0; i < FLOW_WAYS; i++) {
		struct flow_stats *v = bucket + i * slot_size + words * 8;
		if (v->last_seen_ns < *oldest) {
			*oldest = v->last_seen_ns;
			*victim = base + i;
		}
	}
}

/* What the miss path needs besides the buckets and the key: packed, as a
 * BPF function takes five arguments at most. */
struct miss_args {
	__u64 now;
	__u32 region;
	__u32 packets;
	__u8 svc;
	__u8 bit1, bit2; /* the two buckets' places in the region */
	__u8 pad[5];
};

/* claim_slot settles a miss under the region's lock: the key may have
 * arrived meanwhile; else it takes the first free way of the emptier
 * bucket (marking the bucket used when it is its first); else, both
 * buckets full, the way idle longest if idle for flow_idle_ns (its key and
 * final counters are copied to ev). The new
 * flow's counters start at zero and the packet is then counted like any
 * other, so a CPU that sees the key before the rest of the slot (weakly
 * ordered CPUs) only adds to zeroes. NULL when both buckets are full of
 * live flows. */
static __always_inline struct flow_stats *claim_slot(void *fb1, void *fb2, struct flow_lock *l,
						     __u64 *used, const struct miss_args *m,
						     const __u64 *key, int words, int slot_size,
						     void *ev_key, struct flow_stats *ev_stats,
						     int *evicted, __u32 *scratch)
{
	void *slot = NULL;
	struct flow_stats *v = NULL;
	__u64 now = m->now;

	bpf_spin_lock(&l->lock);
	__u32 r1 = scan_bucket(fb1, key, words, slot_size, scratch);
	if (r1 < FLOW_WAYS) {
		v = way_stats(fb1, r1, words, slot_size);
		goto out;
	}
	__u32 r2 = scan_bucket(fb2, key, words, slot_size, scratch);
	if (r2 < FLOW_WAYS) {
		v = way_stats(fb2, r2, words, slot_size);
		goto out;
	}
	__u32 used1 = r1 - FLOW_WAYS, used2 = r2 - FLOW_WAYS;
	if (used1 < FLOW_WAYS && used1 <= used2) {
		slot = fb1 + (used1 & (FLOW_WAYS - 1)) * slot_size;
		if (!used1)
			*used |= 1ULL << (m->bit1 & 63);
	} else if (used2 < FLOW_WAYS) {
		slot = fb2 + (used2 & (FLOW_WAYS - 1)) * slot_size;
		if (!used2)
			*used |= 1ULL << (m->bit2 & 63);
	} else {
		__u64 oldest = ~0ULL;
		__u32 victim = 2 * FLOW_WAYS;
		oldest_way(fb1, 0, words, slot_size, &oldest, &victim);
		oldest_way(fb2, FLOW_WAYS, words, slot_size, &oldest, &victim);
		*scratch = victim;
		victim = reload32(scratch);
		if (victim >= 2 * FLOW_WAYS || now - oldest <= flow_idle_ns)
			goto out;
		slot = (victim < FLOW_WAYS ? fb1 : fb2) + (victim & (FLOW_WAYS - 1)) * slot_size;
		__builtin_memcpy(ev_key, slot, words * 8);
		*ev_stats = *(struct flow_stats *)(slot + words * 8);
		*evicted = 1;
	}
	v = slot + words * 8;
	__builtin_memset(v, 0, sizeof(*v));
	v->first_seen_ns = now;
	v->win_start_ns = now - now % window_ns;
	v->min_size = 0xffff;
	v->service = m->svc;
	__builtin_memcpy(slot, key, words * 8);
out:
	bpf_spin_unlock(&l->lock);
	return v;
}

/* settle_miss claims a slot for a key found in neither bucket, under the
 * region's lock, sends an evicted flow's final counters to userspace, and
 * counts a flow with no slot as loss. */
static __always_inline struct flow_stats *settle_miss(struct cpu_state *cs, void *locks,
						      void *used_map, void *fb1, void *fb2,
						      const __u64 *key, int words, int slot_size,
						      const struct miss_args *m)
{
	__u32 region = m->region;
	struct flow_lock *l = bpf_map_lookup_elem(locks, &region);
	__u64 *used = bpf_map_lookup_elem(used_map, &region);
	if (!l || !used)
		return NULL;
	struct flow_eviction ev;
	int evicted = 0;
	__builtin_memset(&ev, 0, sizeof(ev));
	struct flow_stats *v = claim_slot(fb1, fb2, l, used, m, key, words, slot_size, &ev.key,
					  &ev.stats, &evicted, &cs->pkt.scratch);
	if (evicted) {
		if (words == KEY_WORDS4) {
			struct flow_key4 k4;
			__builtin_memcpy(&k4, &ev.key, sizeof(k4));
			keycopy4(&ev.key, &k4);
		}
		if (bpf_ringbuf_output(&flow_evictions, &ev, sizeof(ev), BPF_RB_NO_WAKEUP))
			cs->loss[LOSS_RINGBUF_FULL] += 1;
	}
	if (!v)
		cs->loss[LOSS_FLOW_MAP_FULL] += m->packets;
	return v;
}

/* The miss paths are functions of their own: new flows are rare next to
 * packets of known ones, and out of line they keep the established path's
 * code short, which the per-packet cost in the real path follows. */
static __attribute__((noinline)) struct flow_stats *
miss4(struct cpu_state *cs, void *fb1, void *fb2, const __u64 *key, const struct miss_args *m)
{
	return settle_miss(cs, &flow_locks4, &flow_used4, fb1, fb2, key, KEY_WORDS4,
			   sizeof(struct flow_slot4), m);
}

static __attribute__((noinline)) struct flow_stats *
miss6(struct cpu_state *cs, void *fb1, void *fb2, const __u64 *key, const struct miss_args *m)
{
	return settle_miss(cs, &flow_locks6, &flow_used6, fb1, fb2, key, KEY_WORDS6,
			   sizeof(struct flow_slot6), m);
}

/* find_flow returns the flow's stats in its table, claiming a slot for a
 * new flow; NULL when both its buckets are full of live flows (counted as
 * loss). Only a miss takes a lock. */
static __always_inline struct flow_stats *find_flow(struct cpu_state *cs, void *table,
						    __u32 regions, __u32 region_bits,
						    const __u64 *key, int words, int slot_size,
						    __u64 now, __u8 svc, const struct wire *w)
{
	__u64 h = flow_hash(key, words);
	__u32 region = ((h >> 32) * regions) >> 32;
	__u32 mask = (1U << region_bits) - 1;
	__u32 b1 = (region << region_bits) | ((__u32)h & mask);
	__u32 b2 = (region << region_bits) | (((__u32)h >> 16) & mask);

	void *fb1 = bpf_map_lookup_elem(table, &b1);
	if (!fb1)
		return NULL;
	__u32 r = scan_bucket(fb1, key, words, slot_size, &cs->pkt.scratch);
	if (r < FLOW_WAYS)
		return way_stats(fb1, r, words, slot_size);
	void *fb2 = bpf_map_lookup_elem(table, &b2);
	if (!fb2)
		return NULL;
	r = scan_bucket(fb2, key, words, slot_size, &cs->pkt.scratch);
	if (r < FLOW_WAYS)
		return way_stats(fb2, r, words, slot_size);

	struct miss_args m = {.now = now,
			      .region = region,
			      .packets = w->packets,
			      .svc = svc,
			      .bit1 = b1 & mask,
			      .bit2 = b2 & mask};
	if (words == KEY_WORDS4)
		return miss4(cs, fb1, fb2, key, &m);
	return miss6(cs, fb1, fb2, key, &m);
}

/* count_flow adds the packet to its flow's stats. */
static __always_inline void count_flow(struct cpu_state *cs, __u64 now, __u32 dir,
				       struct flow_stats *v, const struct packet *p,
				       const struct wire *w, __u32 syn)
{
	__u16 min_size = w->last_size, max_size = w->seg_size;
	if (min_size > max_size) {
		min_size = w->seg_size;
		max_size = w->last_size;
	}

	if (atomic_adds) {
		__sync_fetch_and_add(&v->packets, w->packets);
		__sync_fetch_and_add(&v->bytes, w->bytes);
	} else {
		v->packets += w->packets;
		v->bytes += w->bytes;
	}
	if (syn)
		__sync_fetch_and_add(&v->syns, 1);
	v->last_seen_ns = now;
	if ((v->tcp_flags | p->tcp_flags) != v->tcp_flags)
		v->tcp_flags |= p->tcp_flags;
	if (!(v->dirs & (1 << dir)))
		v->dirs |= 1 << dir;
	if (min_size < v->min_size)
		v->min_size = min_size;
	if (max_size > v->max_size)
		v->max_size = max_size;

	/* Fine windows: compare instead of dividing on every packet. A window
	 * start set by another CPU slightly ahead of our clock is not a
	 * rollover, hence the signed comparison. */
	if ((__s64)(now - v->win_start_ns) >= (__s64)window_ns) {
		if (v->win_bytes >= heavy_bytes)
			emit_window(cs, p, v);
		v->win_start_ns = now - now % window_ns;
		v->win_bytes = 0;
		v->win_packets = 0;
	}
	v->win_bytes += w->bytes;
	v->win_packets += w->packets;
	v->win_dir = dir;
}

/* note_origin records whose a flow is, once, at its first egress packet:
 * the packet's socket (its cookie, and its cgroup v2 id, which also names
 * sockets opened before the trace and accepted ones, whose creation no
 * cgroup program saw), or, for a forwarded packet with no local socket,
 * the interface it came in on. A flow's first packet is the only one that
 * pays two helper calls; every later one reads one byte. Racing CPUs write
 * the same values. */
static __attribute__((noinline)) void note_origin(struct __sk_buff *skb, struct flow_stats *v)
{
	if (!v)
		return;
	__u64 cookie = bpf_get_socket_cookie(skb);
	if (cookie) {
		v->sock_cookie = cookie;
		v->sock_cgroup = bpf_skb_cgroup_id(skb);
		v->origin = ORIGIN_SOCKET;
		return;
	}
	__u32 in = skb->ingress_ifindex;
	if (in && in != skb->ifindex) {
		v->in_ifindex = in;
		v->origin = ORIGIN_FORWARDED;
		return;
	}
	v->origin = ORIGIN_NONE;
}

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

/* IMDS: what an IMDSv2 client that never gets its token looks like on the
 * wire (README, imds_hop_limit). Looked at only for packets whose address
 * is IMDS's, so every other packet pays one comparison. */

/* Eight characters as the little-endian word a load from memory gives. */
#define WORD8(a, b, c, d, e, f, g, h)                                                     \
	((__u64)(a) | (__u64)(b) << 8 | (__u64)(c) << 16 | (__u64)(d) << 24 |               \
	 (__u64)(e) << 32 | (__u64)(f) << 40 | (__u64)(g) << 48 | (__u64)(h) << 56)
#define LOWER8 0x2020202020202020ULL

/* One 8-byte load (memcpy would be eight byte loads); unaligned loads
 * are allowed where the kernel has efficient unaligned access. */
static __always_inline __u64 load64(const __u8 *b)
{
	return *(const __u64 *)b;
}

/* imds_token_header says whether the first n bytes of the request in
 * imds_scratch hold "x-aws-ec2-metadata-token" in any case (HTTP header
 * names are case-insensitive). OR-ing 0x20 into every byte lowers the
 * letters and leaves '-' and '2' alone, so three words compare the 24
 * bytes. A global function: the verifier walks the loop once, on its own;
 * each iteration leaves one state going on (the exits end), so the walk
 * is linear in IMDS_PEEK. */
__attribute__((noinline)) int imds_token_header(__u32 n)
{
	__u32 zero = 0;
	struct imds_peek *pk = bpf_map_lookup_elem(&imds_scratch, &zero);
	if (!pk)
		return 0;
	const __u8 *buf = pk->buf;
#pragma clang loop unroll(disable)
	for (__u32 i = 0; i + 24 <= IMDS_PEEK; i++) {
		if (i + 24 > n)
			return 0;
		__u64 d = ((load64(buf + i) | LOWER8) ^ WORD8('x', '-', 'a', 'w', 's', '-', 'e', 'c')) |
			  ((load64(buf + i + 8) | LOWER8) ^ WORD8('2', '-', 'm', 'e', 't', 'a', 'd', 'a')) |
			  ((load64(buf + i + 16) | LOWER8) ^ WORD8('t', 'a', '-', 't', 'o', 'k', 'e', 'n'));
		if (!d)
			return 1;
	}
	return 0;
}

/* imds_request classifies the payload of a TCP segment to IMDS port 80. */
static __always_inline __u8 imds_request(struct __sk_buff *skb, __u32 off)
{
	__u32 zero = 0;
	struct imds_peek *pk = bpf_map_lookup_elem(&imds_scratch, &zero);
	if (!pk || off >= skb->len)
		return 0;
	__u64 n = skb->len - off;
	if (n > IMDS_PEEK)
		n = IMDS_PEEK;
	/* Bound the register the call gets: clang may pass the unclamped one. */
	asm volatile("" : "+r"(n));
	if (n < 8 || n > IMDS_PEEK || bpf_skb_load_bytes(skb, off, pk->buf, n))
		return 0;
	__u64 w0 = load64(pk->buf);
	if (w0 == WORD8('P', 'U', 'T', ' ', '/', 'l', 'a', 't')) {
		if (n >= 21 && load64(pk->buf + 8) == WORD8('e', 's', 't', '/', 'a', 'p', 'i', '/') &&
		    load64(pk->buf + 13) == WORD8('p', 'i', '/', 't', 'o', 'k', 'e', 'n'))
			return IMDS_TOKEN_REQUEST;
		return 0;
	}
	if ((__u32)w0 != WORD8('G', 'E', 'T', ' ', 0, 0, 0, 0))
		return 0;
	return imds_token_header(n) ? IMDS_GET_TOKEN : IMDS_GET_NO_TOKEN;
}

/* imds_quoted fills ev from the TCP packet an ICMP time exceeded quotes at
 * off (its IP header); 0 when it quotes no TCP packet. */
static __always_inline int imds_quoted(struct __sk_buff *skb, __u32 off, int v6,
				       struct imds_event *ev)
{
	__u8 h[40];
	__u16 ports[2];
	__u32 l4;
	if (!v6) {
		if (bpf_skb_load_bytes(skb, off, h, 20) || (h[0] >> 4) != 4 || h[9] != IPPROTO_TCP)
			return 0;
		l4 = off + ((h[0] & 0x0f) << 2);
		ev->key.saddr[10] = 0xff;
		ev->key.saddr[11] = 0xff;
		ev->key.daddr[10] = 0xff;
		ev->key.daddr[11] = 0xff;
		__builtin_memcpy(&ev->key.saddr[12], h + 12, 4);
		__builtin_memcpy(&ev->key.daddr[12], h + 16, 4);
		ev->ttl = h[8];
	} else {
		if (bpf_skb_load_bytes(skb, off, h, 40) || (h[0] >> 4) != 6 || h[6] != IPPROTO_TCP)
			return 0;
		l4 = off + 40;
		__builtin_memcpy(ev->key.saddr, h + 8, 16);
		__builtin_memcpy(ev->key.daddr, h + 24, 16);
		ev->ttl = h[7];
	}
	if (bpf_skb_load_bytes(skb, l4, ports, 4))
		return 0;
	ev->key.sport = ports[0];
	ev->key.dport = ports[1];
	ev->key.proto = IPPROTO_TCP;
	ev->key.present = 1;
	return 1;
}

/* imds_look sends an event for an IMDSv2 token request, a GET, the start of
 * a reply (with its TTL) or a time exceeded toward IMDS. A global function:
 * checked once by the verifier, outside the counting. */
__attribute__((noinline)) int imds_look(struct __sk_buff *skb, __u32 dir)
{
	__u32 zero = 0;
	struct cpu_state *cs = bpf_map_lookup_elem(&cpu_states, &zero);
	if (!cs)
		return 0;
	struct packet *p = &cs->pkt;
	struct imds_event ev;
	__builtin_memset(&ev, 0, sizeof(ev));
	int v6 = p->is_ip == 6;
	__u8 to_imds, from_imds;
	if (v6) {
		to_imds = ll_service_of(p->key6.daddr) == LL_IMDS;
		from_imds = ll_service_of(p->key6.saddr) == LL_IMDS;
	} else {
		to_imds = ll_service_of4(p->key4.daddr) == LL_IMDS;
		from_imds = ll_service_of4(p->key4.saddr) == LL_IMDS;
	}
	__u32 off = p->hdr_len;
	__u32 l3 = p->l2_len;
	if (off > MAX_HDR_OFF || l3 > MAX_HDR_OFF)
		return 0;

	if (p->class == CLASS_TCP && p->key4.proto == IPPROTO_TCP) {
		if (dir == DIR_EGRESS && to_imds && p->key4.dport == bpf_htons(80)) {
			ev.kind = imds_request(skb, off);
		} else if (dir == DIR_INGRESS && from_imds && p->key4.sport == bpf_htons(80)) {
			char h[5];
			if (!bpf_skb_load_bytes(skb, off, h, 5) && h[0] == 'H' && h[1] == 'T' &&
			    h[2] == 'T' && h[3] == 'P' && h[4] == '/')
				ev.kind = IMDS_REPLY;
		}
		if (!ev.kind)
			return 0;
		full_key(p, &ev.key);
		if (bpf_skb_load_bytes(skb, l3 + (v6 ? 7 : 8), &ev.ttl, 1))
			return 0;
	} else if (p->class == CLASS_ICMP && dir == DIR_EGRESS && to_imds) {
		/* ICMP time exceeded is type 11, ICMPv6 type 3; the type is the
		 * flow's source port. The quoted packet follows the 8-byte
		 * ICMP header. */
		__u16 type = bpf_ntohs(p->key4.sport);
		if (p->key4.proto != (v6 ? IPPROTO_ICMPV6 : IPPROTO_ICMP) || type != (v6 ? 3 : 11))
			return 0;
		if (!imds_quoted(skb, off, v6, &ev))
			return 0;
		ev.kind = IMDS_TIME_EXCEEDED;
	} else {
		return 0;
	}
	ev.ts_ns = bpf_ktime_get_ns();
	ev.dir = dir;
	if (bpf_ringbuf_output(&imds_events, &ev, sizeof(ev), BPF_RB_NO_WAKEUP))
		cs->loss[LOSS_IMDS_EVENTS] += 1;
	return 1;
}

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
		count_flow(cs, now, dir, v, p, &w, syn);
		if (note_origins && dir == DIR_EGRESS && !v->origin)
			note_origin(skb, v);
	}
	if (svc == LL_IMDS)
		imds_look(skb, dir);
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
