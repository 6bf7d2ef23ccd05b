/* Packet parsing: Ethernet, 802.1Q/802.1ad, IPv4, IPv6 with extension
 * headers, TCP, UDP, ICMP, ICMPv6. Reads only; never writes the packet. */
#ifndef __ENAPROBE_PARSE_H
#define __ENAPROBE_PARSE_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "types.h"

#define ETH_HLEN 14
#define ETH_P_IP 0x0800
#define ETH_P_IPV6 0x86DD
#define ETH_P_8021Q 0x8100
#define ETH_P_8021AD 0x88A8
#define MAX_VLAN_TAGS 2
#define MAX_IPV6_EXT 6

#define IPPROTO_HOPOPTS 0
#define IPPROTO_ICMP 1
#define IPPROTO_TCP 6
#define IPPROTO_UDP 17
#define IPPROTO_ROUTING 43
#define IPPROTO_FRAGMENT 44
#define IPPROTO_AH 51
#define IPPROTO_ICMPV6 58
#define IPPROTO_DSTOPTS 60

#define TCP_FLAG_SYN 0x02
#define TCP_FLAG_ACK 0x10

/* Header offsets are at most 22 + 40 + 6 * 2048 bytes, below this bound. */
#define MAX_HDR_OFF 0x3fff

/* reload32 and reload8 read back what the parse just stored in the packet
 * state. The verifier does not track memory: to it the value is unknown,
 * so paths that reached this point with different offsets or next headers
 * (VLAN tags, each IPv6 extension header) go on as one state instead of
 * each checking the rest of the parse again. */
static __always_inline __u32 reload32(const __u32 *slot)
{
	return *(volatile const __u32 *)slot;
}

static __always_inline __u8 reload8(const __u8 *slot)
{
	return *(volatile const __u8 *)slot;
}

/* Packet fields copied with one load and store per word: memcpy from a
 * pointer of unknown alignment is a byte at a time in BPF, and the counting
 * later reads the key in 8-byte words, which a CPU cannot forward from
 * byte stores. Headers are not aligned in the packet: the verifier allows
 * unaligned packet loads on x86-64 and arm64 (efficient unaligned access). */
static __always_inline void copy16(void *dst, const void *src)
{
	((__u64 *)dst)[0] = ((const __u64 *)src)[0];
	((__u64 *)dst)[1] = ((const __u64 *)src)[1];
}

static __always_inline int parse_l4(void *data, void *end, __u32 off, __u8 proto,
				    struct packet *p)
{
	p->key4.proto = proto;
	p->hdr_len = off;
	if (proto == IPPROTO_TCP) {
		__u8 *th = data + off;
		if ((void *)(th + 20) > end)
			return 0;
		p->key4.sport = *(const __u16 *)th;
		p->key4.dport = *(const __u16 *)(th + 2);
		p->tcp_flags = th[13];
		p->tcp_seq = bpf_ntohl(*(const __u32 *)(th + 4));
		p->hdr_len = off + ((th[12] >> 4) << 2);
		p->class = CLASS_TCP;
		/* The timestamp option where Linux puts it in every segment of
		 * a connection that agreed to it: first, after two NOPs (RFC
		 * 7323 appendix A's layout); other layouts go unread. */
		if (th[12] >= 0x80 && (void *)(th + 32) <= end &&
		    *(const __u32 *)(th + 20) == bpf_htonl(0x0101080a)) {
			p->tcp_tsecr = bpf_ntohl(*(const __u32 *)(th + 28));
			p->tcp_ts = 1;
		}
	} else if (proto == IPPROTO_UDP) {
		__u8 *uh = data + off;
		if ((void *)(uh + 8) > end)
			return 0;
		p->key4.sport = *(const __u16 *)uh;
		p->key4.dport = *(const __u16 *)(uh + 2);
		p->hdr_len = off + 8;
		p->class = CLASS_UDP;
	} else if (proto == IPPROTO_ICMP || proto == IPPROTO_ICMPV6) {
		__u8 *ih = data + off;
		if ((void *)(ih + 4) > end)
			return 0;
		p->key4.sport = bpf_htons(ih[0]);
		p->key4.dport = bpf_htons(ih[1]);
		p->hdr_len = off + 8;
		p->class = CLASS_ICMP;
	}
	return 0;
}

/* A later fragment has no L4 header: it counts to its protocol's class and
 * to the flow of its addresses and protocol, with ports 0. */
static __always_inline void later_fragment(__u8 proto, __u32 off, struct packet *p)
{
	p->key4.proto = proto;
	p->hdr_len = off;
	if (proto == IPPROTO_TCP)
		p->class = CLASS_TCP;
	else if (proto == IPPROTO_UDP)
		p->class = CLASS_UDP;
	else if (proto == IPPROTO_ICMP || proto == IPPROTO_ICMPV6)
		p->class = CLASS_ICMP;
}

static __always_inline int parse_ipv4(void *data, void *end, __u32 off, struct packet *p)
{
	__u8 *ip = data + off;
	if ((void *)(ip + 20) > end)
		return 0;
	__u32 ihl = (ip[0] & 0x0f) << 2;
	if ((ip[0] >> 4) != 4 || ihl < 20)
		return 0;
	p->is_ip = 4;
	p->l3_len = bpf_ntohs(*(const __u16 *)(ip + 2));
	p->key4.saddr = *(const __u32 *)(ip + 12);
	p->key4.daddr = *(const __u32 *)(ip + 16);
	__u8 proto = ip[9];
	p->key4.proto = proto;
	p->hdr_len = off + 20;
	__u16 frag;
	__builtin_memcpy(&frag, ip + 6, 2);
	off += ihl;
	if (bpf_ntohs(frag) & 0x1fff) {
		later_fragment(proto, off, p);
		return 0;
	}
	return parse_l4(data, end, off, proto, p);
}

static __always_inline int parse_ipv6(void *data, void *end, __u32 off, struct packet *p)
{
	__u8 *ip6 = data + off;
	if ((void *)(ip6 + 40) > end)
		return 0;
	if ((ip6[0] >> 4) != 6)
		return 0;
	p->is_ip = 6;
	/* Payload length 0: a jumbogram (BIG TCP), whose length the header
	 * does not say. */
	__u16 plen = bpf_ntohs(*(const __u16 *)(ip6 + 4));
	p->l3_len = plen ? 40 + plen : 0;
	copy16(p->key6.saddr, ip6 + 8);
	copy16(p->key6.daddr, ip6 + 24);
	__u8 nexthdr = ip6[6];
	p->key4.proto = nexthdr;
	off += 40;
	p->hdr_len = off;
	int later = 0;

#pragma unroll
	for (int i = 0; i < MAX_IPV6_EXT; i++) {
		__u8 *h = data + off;
		if (nexthdr == IPPROTO_HOPOPTS || nexthdr == IPPROTO_ROUTING ||
		    nexthdr == IPPROTO_DSTOPTS) {
			if ((void *)(h + 8) > end)
				return 0;
			nexthdr = h[0];
			off += ((__u32)h[1] + 1) << 3;
		} else if (nexthdr == IPPROTO_FRAGMENT) {
			if ((void *)(h + 8) > end)
				return 0;
			__u16 fo;
			__builtin_memcpy(&fo, h + 2, 2);
			if (bpf_ntohs(fo) & 0xfff8)
				later = 1;
			nexthdr = h[0];
			off += 8;
		} else if (nexthdr == IPPROTO_AH) {
			if ((void *)(h + 8) > end)
				return 0;
			nexthdr = h[0];
			off += ((__u32)h[1] + 2) << 2;
		} else {
			break;
		}
		p->key4.proto = nexthdr;
		p->hdr_len = off;
		/* Each kind of header took its own path here: go on as one. */
		off = reload32(&p->hdr_len);
		nexthdr = reload8(&p->key4.proto);
		if (off > MAX_HDR_OFF)
			return 0;
	}
	if (later) {
		later_fragment(nexthdr, off, p);
		return 0;
	}
	return parse_l4(data, end, off, nexthdr, p);
}

/* Headers outside the linear part (issue 23): an skb may carry only its
 * Ethernet header in the linear part and the rest in page fragments (a
 * frame of more than a page sent with AF_PACKET, GSO packets built from a
 * virtio header, drivers that build skbs from pages), and direct packet
 * access reads only data..data_end. PULL_LEN covers what the parse reads in
 * all but exotic frames: 2 VLAN tags, a full IPv4 header with options and
 * TCP (22 + 60 + 20 = 102 bytes), or IPv6 with about 170 bytes of extension
 * headers. A frame whose linear part is at least PULL_LEN bytes, or is the
 * whole frame, pays one compare of data_end (and, below PULL_LEN, one load
 * of skb->len); only a frame whose headers may lie beyond the linear part
 * pays the pull. */
#define PULL_LEN 256

/* pull_headers makes the first min(len, PULL_LEN) bytes of skb linear when
 * they are not, and reloads data and end: the pull invalidates every packet
 * pointer. It changes the skb's layout, never its bytes (a cloned skb gets
 * its own head, as for any tc program that writes). A failed pull (no
 * memory) leaves the frame as it was: the parse reads what is linear. */
static __always_inline void pull_headers(struct __sk_buff *skb, void **data, void **end)
{
	if (*data + PULL_LEN <= *end)
		return;
	__u32 want = skb->len;
	if (want > PULL_LEN)
		want = PULL_LEN;
	if (*data + want <= *end)
		return;
	bpf_skb_pull_data(skb, want);
	*data = (void *)(long)skb->data;
	*end = (void *)(long)skb->data_end;
}

/* parse fills p. Anything it cannot make sense of stays CLASS_OTHER, and a
 * frame whose IP header is complete still gets a flow key. */
static __always_inline void parse(struct __sk_buff *skb, struct packet *p)
{
	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;
	pull_headers(skb, &data, &end);

	/* key6 is left alone: only an IPv6 packet reads it, after writing its
	 * addresses whole and the rest from key4. */
	__builtin_memset(&p->key4, 0, sizeof(p->key4));
	p->key4.present = 1;
	p->is_ip = 0;
	p->tcp_flags = 0;
	p->tcp_ts = 0;
	p->service = LL_NONE;
	p->class = CLASS_OTHER;
	p->l2_len = ETH_HLEN;
	p->hdr_len = ETH_HLEN;

	__u8 *eth = data;
	if ((void *)(eth + ETH_HLEN) > end) {
		p->l2_len = skb->len;
		p->hdr_len = skb->len;
		return;
	}
	__u16 h_proto;
	__builtin_memcpy(&h_proto, eth + 12, 2);
	__u32 off = ETH_HLEN;

#pragma unroll
	for (int i = 0; i < MAX_VLAN_TAGS; i++) {
		if (h_proto != bpf_htons(ETH_P_8021Q) && h_proto != bpf_htons(ETH_P_8021AD))
			break;
		__u8 *vh = data + off;
		if ((void *)(vh + 4) > end)
			return;
		__builtin_memcpy(&h_proto, vh + 2, 2);
		off += 4;
	}
	p->l2_len = off;
	p->hdr_len = off;
	off = reload32(&p->l2_len);
	if (off > MAX_HDR_OFF)
		return;

	if (h_proto == bpf_htons(ETH_P_IP))
		parse_ipv4(data, end, off, p);
	else if (h_proto == bpf_htons(ETH_P_IPV6))
		parse_ipv6(data, end, off, p);
}

#endif
