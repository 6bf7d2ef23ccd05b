/* Link-local payloads: the first bytes of what a DNS, IMDS or NTP packet
 * asks or answers, for the link-local detail of a finding (which names,
 * which IMDS paths, how often NTP polls). Included by probe.c only, after
 * imds.h, and called from one place (ll_look): only for packets whose
 * service parse_packet already named, so every other packet pays the one
 * comparison it paid before for IMDS. */
#ifndef __ENAPROBE_LLPAYLOAD_H
#define __ENAPROBE_LLPAYLOAD_H

/* How many payload bytes an event holds: a DNS message up to this, the
 * start of an IMDS request (its request line: the path), and NTP's first
 * LL_NTP_BYTES (mode and poll). */
#define LL_PAYLOAD_MAX 256
#define LL_NTP_BYTES 4

/* Events per second per interface (each interface loads its own probe);
 * more are counted as LOSS_LL_PAYLOAD, so a flood costs bounded ring
 * memory and CPU. 0 turns the capture off. */
volatile const __u32 ll_payload_rate = 4096;

/* One link-local packet's payload. key is the packet's flow; payload_len
 * the packet's payload bytes (after the L4 header), of which the first
 * captured are in data (the Ethernet padding of a short frame is not
 * payload). imds_kind is the IMDS look's verdict on a request
 * (enum imds_kind: whether it carried the token header), 0 otherwise.
 * tcp_seq is a TCP segment's sequence number (0 for UDP): a retransmitted
 * request repeats it, so the detail counts requests, not their copies. */
struct ll_payload_event {
	__u64 ts_ns;
	struct flow_key key;
	__u16 payload_len;
	__u16 captured;
	__u8 service; /* enum ll_service */
	__u8 dir;
	__u8 imds_kind;
	__u8 pad;
	__u32 tcp_seq;
	__u8 data[LL_PAYLOAD_MAX];
};

const struct ll_payload_event *unused_ll_payload_event __attribute__((unused));

/* The current second's event count, shared by the interface's CPUs. */
struct ll_rate {
	__u64 sec;
	__u64 count;
};

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 512 * 1024);
} ll_payloads SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct ll_rate);
	__uint(max_entries, 1);
} ll_rates SEC(".maps");

/* ll_rate_take says whether one more event fits in this second. The count
 * is added atomically and read back after: 5.10 has no fetching atomics.
 * The reset at a new second is a plain store, so CPUs racing at the turn of
 * a second may let a few events more through; none goes uncounted. */
static __always_inline int ll_rate_take(__u64 now)
{
	__u32 zero = 0;
	struct ll_rate *r = bpf_map_lookup_elem(&ll_rates, &zero);
	if (!r)
		return 0;
	__u64 sec = now / 1000000000ULL;
	if (r->sec != sec) {
		r->sec = sec;
		r->count = 0;
	}
	__sync_fetch_and_add(&r->count, 1);
	return r->count <= ll_payload_rate;
}

/* ll_payload sends the payload of a DNS message (UDP or TCP, port 53 on
 * either side), an IMDS request the IMDS look recognised (imds_kind), or an
 * NTP packet (UDP port 123). A global function: checked once, on its own. */
__attribute__((noinline)) int ll_payload(struct __sk_buff *skb, __u32 dir, __u32 imds_kind)
{
	__u32 zero = 0;
	struct cpu_state *cs = bpf_map_lookup_elem(&cpu_states, &zero);
	if (!cs || !ll_payload_rate)
		return 0;
	struct packet *p = &cs->pkt;
	__u8 svc = p->service;
	__u16 sport = bpf_ntohs(p->key4.sport), dport = bpf_ntohs(p->key4.dport);
	int udp = p->class == CLASS_UDP && p->key4.proto == IPPROTO_UDP;
	int tcp = p->class == CLASS_TCP && p->key4.proto == IPPROTO_TCP;
	__u32 most = LL_PAYLOAD_MAX;
	if (svc == LL_DNS) {
		if (!(udp || tcp) || (sport != 53 && dport != 53))
			return 0;
	} else if (svc == LL_NTP) {
		if (!udp || (sport != 123 && dport != 123))
			return 0;
		most = LL_NTP_BYTES;
	} else if (svc == LL_IMDS) {
		if (imds_kind < IMDS_TOKEN_REQUEST || imds_kind > IMDS_GET_TOKEN)
			return 0;
	} else {
		return 0;
	}
	/* The payload ends with the IP packet: a short frame's Ethernet padding
	 * is not payload. */
	__u32 l3 = p->l2_len;
	__u16 ip_len;
	if (l3 > MAX_HDR_OFF || bpf_skb_load_bytes(skb, l3 + (p->is_ip == 6 ? 4 : 2), &ip_len, 2))
		return 0;
	__u32 end = l3 + bpf_ntohs(ip_len) + (p->is_ip == 6 ? 40 : 0);
	if (end > skb->len)
		end = skb->len;
	__u32 off = p->hdr_len;
	if (off > MAX_HDR_OFF || off >= end)
		return 0;
	__u32 len = end - off;
	__u64 now = bpf_ktime_get_ns();
	if (!ll_rate_take(now)) {
		cs->loss[LOSS_LL_PAYLOAD] += 1;
		return 0;
	}
	struct ll_payload_event *ev = bpf_ringbuf_reserve(&ll_payloads, sizeof(*ev), 0);
	if (!ev) {
		cs->loss[LOSS_LL_PAYLOAD] += 1;
		return 0;
	}
	__builtin_memset(ev, 0, sizeof(*ev));
	__u64 n = len < most ? len : most;
	/* The size the call gets, in [1, LL_PAYLOAD_MAX] by arithmetic the
	 * verifier follows: the verifiers of 5.10 and 6.1 learn no lower bound
	 * from n != 0 (clang's test for n >= 1), and the helper takes no zero
	 * size. n is in that range already (off < end); the barrier keeps clang
	 * from folding the mask away. */
	__u64 size = n - 1;
	asm volatile("" : "+r"(size));
	size = (size & (LL_PAYLOAD_MAX - 1)) + 1;
	if (bpf_skb_load_bytes(skb, off, ev->data, size)) {
		bpf_ringbuf_discard(ev, BPF_RB_NO_WAKEUP);
		return 0;
	}
	ev->ts_ns = now;
	full_key(p, &ev->key);
	ev->payload_len = len > 0xffff ? 0xffff : len;
	ev->captured = size;
	ev->service = svc;
	ev->dir = dir;
	ev->imds_kind = svc == LL_IMDS ? imds_kind : 0;
	/* The class read again here, not tcp kept: a register live this long
	 * keeps TCP's and UDP's states apart through the function (1,400
	 * more instructions checked on 6.18). */
	__u32 seq_mask = -(__u32)(p->class == CLASS_TCP);
	ev->tcp_seq = p->tcp_seq & seq_mask;
	bpf_ringbuf_submit(ev, BPF_RB_NO_WAKEUP);
	return 1;
}

/* ll_look is what a link-local packet costs beyond the counting: the IMDS
 * look (the hop-limit events), then its payload. */
static __always_inline void ll_look(struct __sk_buff *skb, __u32 dir, __u32 svc)
{
	__u32 imds_kind = 0;
	if (svc == LL_IMDS)
		imds_kind = imds_look(skb, dir);
	ll_payload(skb, dir, imds_kind);
}

#endif /* __ENAPROBE_LLPAYLOAD_H */
