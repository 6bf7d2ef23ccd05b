/* Types shared with Go: bpf2go -type generates their Go twins. */
#ifndef __ENAPROBE_TYPES_H
#define __ENAPROBE_TYPES_H

#include <linux/types.h>
#include <linux/bpf.h>

enum direction {
	DIR_INGRESS = 0,
	DIR_EGRESS = 1,
	NUM_DIRECTIONS = 2,
};

enum proto_class {
	CLASS_TCP = 0,
	CLASS_UDP = 1,
	CLASS_ICMP = 2,
	CLASS_OTHER = 3, /* ARP, unknown protocols, truncated or malformed */
	NUM_CLASSES = 4,
};

enum ll_service {
	LL_NONE = 0,
	LL_IMDS = 1,
	LL_DNS = 2,
	LL_NTP = 3,
	NUM_LL_SERVICES = 3,
};

enum loss_kind {
	LOSS_FLOW_MAP_FULL = 0,     /* packets of new flows whose two buckets are full */
	LOSS_RINGBUF_FULL = 1,      /* window or flow-eviction events dropped */
	LOSS_BUCKET_OVERWRITTEN = 2,/* packets in a bucket reused before it was read */
	LOSS_SLICE_OVERWRITTEN = 3, /* packets in a size slice reused before it was read */
	LOSS_IMDS_EVENTS = 4,       /* IMDS events dropped: their ring was full */
	LOSS_LL_PAYLOAD = 5,        /* link-local payload events over the rate cap or the ring full */
	NUM_LOSS = 6,
};

/* What an IMDS packet was (imds_look in probe.c). Only packets to or from
 * 169.254.169.254 / fd00:ec2::254 are looked at. */
enum imds_kind {
	IMDS_TOKEN_REQUEST = 1, /* egress TCP to port 80, payload "PUT /latest/api/token" */
	IMDS_GET_NO_TOKEN = 2,  /* egress "GET " without the token header in the bytes looked at */
	IMDS_GET_TOKEN = 3,     /* egress "GET " with X-aws-ec2-metadata-token */
	IMDS_REPLY = 4,         /* ingress TCP from port 80, payload "HTTP/" */
	IMDS_TIME_EXCEEDED = 5, /* egress ICMP/ICMPv6 time exceeded quoting a TCP packet */
};

/* How many payload bytes of a GET are searched for the token header: a
 * header further in is not seen, and the GET counts as token-less. */
#define IMDS_PEEK 512

#define NUM_SIZE_CLASSES 8

/* A flow as its packets carry it; ports in network byte order. For ICMP,
 * sport holds the type and dport the code. Later fragments carry no ports:
 * they count to the flow of their addresses and protocol with ports 0.
 * present is 1 in every key built from a packet and 0 in an empty table
 * slot, so comparing keys also tells a free slot. Naturally aligned, no
 * padding holes, zeroed before use.
 *
 * IPv4 flows have their own 16-byte key and table: hashing and comparing a
 * 40-byte key costs more (docs/cost.md). Userspace and window events see
 * every flow as a flow_key, IPv4 v4-mapped. */
struct flow_key4 {
	__u32 saddr;
	__u32 daddr;
	__u16 sport;
	__u16 dport;
	__u8 proto;
	__u8 present;
	__u8 pad[2];
};

struct flow_key {
	__u8 saddr[16];
	__u8 daddr[16];
	__u16 sport;
	__u16 dport;
	__u8 proto;
	__u8 present;
	__u8 pad[2];
};

struct flow_stats {
	__u64 packets;       /* wire packets */
	__u64 bytes;         /* wire bytes */
	__u64 first_seen_ns;
	__u64 last_seen_ns;
	__u64 win_start_ns;  /* start of the fine window win_bytes belongs to */
	__u64 win_bytes;
	__u32 win_packets;
	__u32 syns;          /* TCP SYN without ACK */
	__u16 min_size;      /* layer-3 size of the smallest wire packet */
	__u16 max_size;
	__u8 tcp_flags;      /* OR of the TCP flag bytes seen */
	__u8 dirs;           /* bit per direction seen */
	__u8 service;        /* enum ll_service */
	__u8 win_dir;        /* direction of the last packet of the window */
	/* Whose the flow is (note_origin in probe.c), from its first egress
	 * packet: the socket's cookie and cgroup v2 id for a packet of a local
	 * socket; the interface a forwarded packet came in on (a container's
	 * veth) otherwise. Userspace joins the cookie with the owners the
	 * cgroup programs (owner.c) recorded. */
	__u64 sock_cookie;
	__u64 sock_cgroup;
	__u32 in_ifindex;
	__u8 origin;         /* enum origin */
	__u8 origin_pad[3];
	/* Impact (impact.h): what TCP says about loss and queueing. */
	__u32 seq_high;      /* end of the highest TCP sequence range seen */
	__u32 seq_retrans;   /* wire segments whose range ended at or before seq_high */
	__u32 sk_retrans;    /* the local socket's total_retrans, latest */
	__u32 sk_retrans0;   /* and at this entry's first packet with a socket */
	__u32 srtt_min_us;   /* smallest and largest srtt of the socket in */
	__u32 srtt_max_us;   /* snapshot generation snap_gen (flow_snapshot_gen) */
	__u32 snap_gen;      /* of srtt_min_us, srtt_max_us and gap_max_ns */
	__u32 sk_win;        /* low bits of the fine window the socket was last read in */
	__u32 seq_tail;      /* of seq_retrans, those ending at seq_high: tail probes */
	__u8 impact_flags;   /* IMPACT_SEQ_SEEN, IMPACT_SOCK_SEEN */
	__u8 impact_pad[3];
	__u32 gap_max_ns;    /* longest silence before a TCP packet of snap_gen, up to 4.29 s */
	/* Of snap_gen too, when IMPACT_ECHO_GEN: the least and greatest age
	 * (this host's clock in ms less the echoed TCP timestamp) of the
	 * flow's ACKs, an offset apart from each segment's RTT (impact.h). */
	__u32 echo_age_min_ms;
	__u32 echo_age_max_ms;
	/* The local socket's D-SACKs received (dsack_dups: segments the
	 * receiver got twice, sent again needlessly), latest, and at the
	 * entry's first packet with a socket, as sk_retrans. */
	__u32 sk_dsack;
	__u32 sk_dsack0;
};

/* How a flow's owner was looked for (flow_stats.origin). */
enum origin {
	ORIGIN_UNKNOWN = 0, /* no egress packet yet */
	ORIGIN_SOCKET = 1,  /* sock_cookie (and sock_cgroup when the kernel keeps it) */
	ORIGIN_FORWARDED = 2, /* in_ifindex: no local socket, came in on another interface */
	ORIGIN_NONE = 3,    /* a packet of this host without a socket (RST, ICMP errors) */
};

/* The flow tables are hash tables of our own in memory-mapped arrays (see
 * find_flow in probe.c): one array entry is a bucket of FLOW_WAYS slots,
 * filled in order and never emptied; a slot's flow changes only when a
 * full bucket evicts an idle flow. The established path is an inlined
 * array lookup and a compare per way, where a BPF hash map lookup cost a
 * third of the per-packet budget. */
#define FLOW_WAYS 8

struct flow_slot4 {
	struct flow_key4 key;
	struct flow_stats stats;
};

struct flow_bucket4 {
	struct flow_slot4 ways[FLOW_WAYS];
};

struct flow_slot6 {
	struct flow_key key;
	struct flow_stats stats;
};

struct flow_bucket6 {
	struct flow_slot6 ways[FLOW_WAYS];
};

/* Serialises claiming and evicting slots in one region of buckets. Lookups
 * and counter updates never take it. */
struct flow_lock {
	struct bpf_spin_lock lock;
};

/* A flow evicted from a full bucket after flow_idle_ns without packets: its
 * final counters, so userspace keeps every flow's totals. */
struct flow_eviction {
	struct flow_key key;
	struct flow_stats stats;
};

/* One time bucket of one direction. Slot tag `epoch` is ktime / bucket_ns.
 * Counters are added atomically and swapped to zero by userspace through
 * the memory-mapped array when it reads them. */
struct bucket {
	__u64 epoch;
	__u64 packets;
	__u64 bytes;
	__u32 syns;
	__u32 link_local[NUM_LL_SERVICES];
	__u32 retrans;  /* TCP segments sent again, by the wire's sequence test (impact.h) */
	__u32 retrans_pad;
};

/* Packet-size histogram of one slice, per CPU. epoch is ktime / slice_ns,
 * 0 for a slot never used. */
struct size_slice {
	__u64 epoch;
	__u64 counts[NUM_SIZE_CLASSES];
	__u64 super_packets;
};

struct dir_totals {
	__u64 packets[NUM_CLASSES];
	__u64 bytes[NUM_CLASSES];
	__u64 syns;
};

/* The packet being counted, as parse_packet leaves it for the counting
 * that follows. It lives in the per-CPU state, not on the stack, because the
 * parse is a global function of its own: the verifier checks it once, and
 * the counting once, for every packet the parse could have seen, where an
 * inlined parse multiplied the counting by its paths (too many for the
 * verifiers of 5.10 and 6.1). Ports and protocol are parsed into key4
 * whatever the family; an IPv6 packet's addresses go straight into key6,
 * whose other fields are filled from key4 before use. */
struct __attribute__((aligned(8))) packet {
	struct flow_key4 key4;
	struct flow_key key6;
	__u32 l2_len;   /* Ethernet and VLAN headers */
	__u32 hdr_len;  /* l2 + l3 + l4 headers: what segmentation repeats */
	__u8 class;     /* enum proto_class */
	__u8 is_ip;     /* 4 or 6: a flow key exists */
	__u8 tcp_flags;
	__u8 service;   /* enum ll_service of either address */
	__u32 scratch;  /* a flow table way, read back to forget it (probe.c) */
	__u32 tcp_seq;  /* TCP sequence number, host order (impact.h) */
	__u32 l3_len;   /* IP total length from the header; 0 when it says none */
	__u32 tcp_tsecr; /* TCP timestamp echo reply, host order, when tcp_ts */
	__u8 tcp_ts;     /* 1: the segment carries Linux's NOP NOP TIMESTAMP first */
	__u8 pad[7];
};

/* Per-CPU state: exact totals, loss, the current size slices, the open
 * buckets (per-CPU bucket mode), the current bucket cached so the hot
 * path divides only when the bucket or slice changes, and the packet being
 * counted. */
struct cpu_state {
	struct dir_totals totals[NUM_DIRECTIONS];
	struct size_slice slices[NUM_DIRECTIONS];
	struct bucket open[NUM_DIRECTIONS];
	__u64 loss[NUM_LOSS];
	__u64 bucket_epoch;
	__u64 bucket_start_ns;
	__u64 slice_epoch;
	__u64 slice_start_ns;
	__u32 timer_ready; /* this CPU's flush timer is set up */
	__u32 timer_armed; /* and pending */
	struct packet pkt;
};

/* A CPU's flush timer, in an array indexed by CPU: a per-CPU map cannot
 * hold a bpf_timer. */
struct cpu_timer {
	struct bpf_timer timer;
};

/* A flow moved at least heavy_bytes in the fine window starting at
 * win_start_ns. Sent when the window closes (the flow's next packet in a
 * later window); userspace reads windows still open from the flow table. */
struct window_event {
	struct flow_key key;
	__u64 win_start_ns;
	__u64 bytes;
	__u32 packets;
	__u8 dir;
	__u8 pad[3];
};

/* One IMDS packet. key is the packet's flow, except for a time exceeded,
 * where it is the flow of the packet it quotes (the reply that died). ttl
 * is the IP TTL / IPv6 hop limit of the packet, or of the quoted one. */
struct imds_event {
	__u64 ts_ns;
	struct flow_key key;
	__u8 kind; /* enum imds_kind */
	__u8 dir;
	__u8 ttl;
	__u8 pad[5];
};

/* The bytes of a request imds_look searches. */
struct imds_peek {
	__u8 buf[IMDS_PEEK];
};

#endif
