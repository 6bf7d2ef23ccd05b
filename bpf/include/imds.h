/* IMDS: the datapath events of the IMDSv2 hop limit. Included by probe.c
 * only. */
#ifndef __ENAPROBE_IMDS_H
#define __ENAPROBE_IMDS_H

/* IMDS: what an IMDSv2 client that never gets its token looks like on the
 * wire (docs/findings.md, imds_hop_limit). Looked at only for packets whose address
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
 * a reply (with its TTL) or a time exceeded toward IMDS, and returns its
 * kind (0: none), which the payload capture (llpayload.h) reuses. A global
 * function: checked once by the verifier, outside the counting. */
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
	return ev.kind;
}

#endif /* __ENAPROBE_IMDS_H */
