/* Impact: what TCP itself says about an incident, lost or only queued.
 * The wire's sequence test counts segments sent again on any TCP flow, in
 * both directions (a remote sender's retransmissions, which no local
 * socket counts, and a forwarded flow's); on egress, the local socket's
 * own state (bpf_tcp_sock, Linux 5.1+; dsack_dups 5.3+) gives its
 * retransmission count, the D-SACKs that say which of them were needless,
 * and its smoothed RTT; the timestamps the ACKs echo time each segment. All of it lives in the flow's entry and the time buckets:
 * no map of its own. Included by probe.c before buckets.h. */
#ifndef __ENAPROBE_IMPACT_H
#define __ENAPROBE_IMPACT_H

/* flow_stats.impact_flags; an enum for bpf2go to give userspace. */
enum impact_flag {
	IMPACT_SEQ_SEEN = 1,  /* seq_high holds a sequence number */
	IMPACT_SOCK_SEEN = 2, /* sk_retrans0 holds the socket's first count */
	IMPACT_ECHO_GEN = 4,  /* echo_age_min_ms and _max_ms hold snap_gen's ages */
};
const enum impact_flag *unused_impact_flag __attribute__((unused));

/* ms_of is ns / 1,000,000 without a division on the packet's path:
 * (ns / 2^20) * (2^44 / 10^6) / 2^24, within 3e-9 of it (and a step of
 * 1.05 ms) for 36 years of uptime. The kernel's TCP timestamps are its
 * CLOCK_MONOTONIC in ms (tcp_clock_ns), which bpf_ktime_get_ns reads. */
static __always_inline __u32 ms_of(__u64 ns)
{
	return (__u32)(((ns >> 20) * 17592186ULL) >> 24);
}

/* Written by userspace through the memory-mapped .bss after each read of
 * the flow tables: a flow's srtt_min_us and srtt_max_us start again at
 * its first packet of a newer generation, so each snapshot holds the
 * smallest and largest srtt since the one before. */
volatile __u32 flow_snapshot_gen = 0;

/* 0 turns the impact counting off (the benchmarks' comparison). */
volatile const __u8 measure_impact = 1;

/* add_retrans_to_slot adds retransmitted segments to the shared ring's
 * bucket of epoch, which the packet's counting has just taken over; a
 * slot holding another epoch (taken over meanwhile by a later bucket) is
 * left alone. */
static __always_inline void add_retrans_to_slot(__u32 dir, __u64 epoch, __u32 n)
{
	__u32 slot = dir * (bucket_mask + 1) + ((__u32)epoch & bucket_mask);
	struct bucket *b = bpf_map_lookup_elem(&buckets, &slot);
	if (b && b->epoch == epoch)
		__sync_fetch_and_add(&b->retrans, n);
}

/* tcp_payload is the payload bytes of the skb's TCP segments: the IP
 * length bounds it, as a short frame arrives padded (Ethernet minimum)
 * on ingress, and a super-packet's IP length is its whole length. */
static __always_inline __u32 tcp_payload(struct __sk_buff *skb, const struct packet *p)
{
	__u32 len = skb->len, hdr = p->hdr_len;
	if (len <= hdr)
		return 0;
	__u32 payload = len - hdr;
	__u32 l3 = p->l3_len, hdr3 = hdr - p->l2_len;
	if (l3) {
		if (l3 <= hdr3)
			return 0;
		if (l3 - hdr3 < payload)
			payload = l3 - hdr3;
	}
	return payload;
}

/* count_impact runs for every TCP packet with a flow entry. segs is the
 * wire segments the skb stands for; gap_ns the time since the entry's
 * packet before this one (0 for its first); now the packet's time. */
static __always_inline void count_impact(struct __sk_buff *skb, struct cpu_state *cs,
						   __u32 dir, struct flow_stats *v, __u32 segs,
						   __u64 gap_ns, __u64 now)
{
	if (!v)
		return;
	struct packet *p = &cs->pkt;
	/* The longest silence of the flow, one direction, since the last read
	 * of the flow tables: an upload whose segments wait behind a burst
	 * is not ACKed for as long as they wait, whatever its srtt (the
	 * kernel's, smoothed, rises by an eighth of each late sample). In ns,
	 * held at 4.29 s: no division on the packet's path. The first packet
	 * of a generation starts the fields of it again. */
	__u32 gen = flow_snapshot_gen;
	if (v->snap_gen != gen) {
		v->snap_gen = gen;
		v->srtt_min_us = 0;
		v->srtt_max_us = 0;
		v->gap_max_ns = 0;
		v->impact_flags &= ~IMPACT_ECHO_GEN;
	}
	/* An ACK's timestamp echo is the sender's clock when it sent the
	 * segment answered (RFC 7323): its age here is the segment's RTT, up
	 * to the sender's random offset and, for a remote sender, its clock's.
	 * The offset is the connection's, so the ages' rise over their least
	 * is each segment's own wait, per ACK, where the srtt is smoothed and
	 * the silence breaks up as a queue lets the segments out one by one.
	 * Compared as signed distances: the offset puts them anywhere. */
	if (p->tcp_ts && (p->tcp_flags & TCP_FLAG_ACK)) {
		__u32 age = ms_of(now) - p->tcp_tsecr;
		if (!(v->impact_flags & IMPACT_ECHO_GEN)) {
			v->echo_age_min_ms = age;
			v->echo_age_max_ms = age;
			v->impact_flags |= IMPACT_ECHO_GEN;
		} else if ((__s32)(age - v->echo_age_min_ms) < 0) {
			v->echo_age_min_ms = age;
		} else if ((__s32)(age - v->echo_age_max_ms) > 0) {
			v->echo_age_max_ms = age;
		}
	}
	if (gap_ns > 0xffffffffULL)
		gap_ns = 0xffffffffULL;
	if ((__u32)gap_ns > v->gap_max_ns)
		v->gap_max_ns = (__u32)gap_ns;
	/* A segment with payload and ACK, not SYN (a later IP fragment has no
	 * TCP header, and flags 0): sent again when its range ends at or
	 * before the highest end seen. Sequence numbers wrap: compared as
	 * signed distances. Reordering on the way counts too. */
	if ((p->tcp_flags & (TCP_FLAG_ACK | TCP_FLAG_SYN)) == TCP_FLAG_ACK) {
		__u32 payload = tcp_payload(skb, p);
		if (payload) {
			__u32 end = p->tcp_seq + payload;
			if (!(v->impact_flags & IMPACT_SEQ_SEEN)) {
				v->seq_high = end;
				v->impact_flags |= IMPACT_SEQ_SEEN;
			} else if ((__s32)(end - v->seq_high) > 0) {
				v->seq_high = end;
			} else {
				__sync_fetch_and_add(&v->seq_retrans, segs);
				/* The highest segment sent again is what a tail loss
				 * probe sends (2 srtt without an ACK, as when a queue
				 * holds the ACKs back): no loss by itself. */
				if (end == v->seq_high)
					__sync_fetch_and_add(&v->seq_tail, segs);
#ifdef ENAPROBE_PERCPU_BUCKETS
				/* The open bucket, unless this CPU hands each
				 * packet over at once (no timer): then the ring. */
				if (cs->timer_armed)
					cs->open[dir & 1].retrans += segs;
				else
					add_retrans_to_slot(dir, cs->bucket_epoch, segs);
#else
				add_retrans_to_slot(dir, cs->bucket_epoch, segs);
#endif
			}
		}
	}
	if (dir != DIR_EGRESS)
		return;
	/* The socket once per fine window of the flow, at its first packet
	 * in it: srtt moves with ACKs, smoothed, and a retransmission is
	 * counted once done, so a reading per millisecond misses little, where
	 * one per packet cost a quarter of the packet's budget (cost.md). */
	__u32 win = (__u32)v->win_start_ns;
	if (win == v->sk_win)
		return;
	v->sk_win = win;
	/* A local full TCP socket only (bpf_tcp_sock checks it is full):
	 * forwarded packets have none, timewait and request sockets are not
	 * full. */
	struct bpf_sock *sk = skb->sk;
	if (!sk)
		return;
	struct bpf_tcp_sock *tp = bpf_tcp_sock(sk);
	if (!tp)
		return;
	__u32 retrans = tp->total_retrans, dsack = tp->dsack_dups;
	if (!(v->impact_flags & IMPACT_SOCK_SEEN)) {
		v->sk_retrans0 = retrans;
		v->sk_dsack0 = dsack;
		v->impact_flags |= IMPACT_SOCK_SEEN;
	}
	v->sk_retrans = retrans;
	v->sk_dsack = dsack;
	__u32 srtt = tp->srtt_us >> 3; /* the kernel keeps 8 times the srtt */
	if (!srtt)
		return; /* no RTT sample yet */
	if (!v->srtt_max_us) {
		v->srtt_min_us = srtt;
		v->srtt_max_us = srtt;
		return;
	}
	if (srtt < v->srtt_min_us)
		v->srtt_min_us = srtt;
	if (srtt > v->srtt_max_us)
		v->srtt_max_us = srtt;
}

#endif /* __ENAPROBE_IMPACT_H */
