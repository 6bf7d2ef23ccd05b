/* The flow tables: keys, the two-choice hash table with its regions
 * and locks, window events of heavy flows, and the origin a flow notes.
 * Included by probe.c only. */
#ifndef __ENAPROBE_FLOWTABLE_H
#define __ENAPROBE_FLOWTABLE_H

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
 * loses one in twenty (docs/cost.md). Each bucket's ways fill in order and
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

#endif /* __ENAPROBE_FLOWTABLE_H */
