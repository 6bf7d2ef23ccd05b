/* Time buckets and size slices: what one skb stands for on the wire, the
 * shared bucket ring and, with ENAPROBE_PERCPU_BUCKETS, the per-CPU open
 * buckets their pinned timers flush. Included by probe.c only. */
#ifndef __ENAPROBE_BUCKETS_H
#define __ENAPROBE_BUCKETS_H

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
	b->retrans = 0;
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
	if (o->retrans)
		add_retrans_to_slot(dir, o->epoch, o->retrans);
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

#endif /* __ENAPROBE_BUCKETS_H */
