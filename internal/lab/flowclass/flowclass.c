//go:build ignore

// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
//
// flowclass is a cls_bpf classifier in classic (not direct-action) mode: its
// return value is the classid the htb qdisc puts the packet in. It spreads
// flows over nbuckets leaf classes major:first_minor..first_minor+nbuckets-1
// by the skb flow hash, so every flow lands in one class and is shaped to that
// class's rate (the emulated per-flow cap). bpf_get_hash_recalc returns the
// socket's tx hash for local sockets, else the flow dissector's 5-tuple hash.
#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

// Set from Go before load (read-only data, so the verifier sees constants).
volatile const __u32 major = 0x10;
volatile const __u32 first_minor = 0x100;
volatile const __u32 nbuckets = 64;

SEC("tc")
int flowclass(struct __sk_buff *skb)
{
	__u32 n = nbuckets;
	__u32 hash = bpf_get_hash_recalc(skb);

	if (n == 0)
		n = 1;
	return (int)((major << 16) | ((first_minor + hash % n) & 0xffff));
}

char __license[] SEC("license") = "Dual BSD/GPL";
