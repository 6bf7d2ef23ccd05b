//go:build ignore

// SPDX-License-Identifier: (MIT OR GPL-2.0)
/* enaprobe owners: who each socket belongs to. Cgroup programs on the
 * cgroup v2 root run in the process that creates a socket, connects it,
 * binds it or sends or receives a datagram on it, and record its cookie ->
 * pid, command and cgroup. The tc programs (probe.c) take the cookie of a
 * flow's first egress packet; userspace joins the two. Every program
 * returns 1: nothing is ever refused.
 *
 * Loads on 5.10: pid, comm, cgroup id and socket cookie are available to
 * cgroup sock and sock_addr programs since 5.7/5.8. */

#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "Dual MIT/GPL";

#define COMM_LEN 16

/* One socket's owner: the last process seen using it. */
struct sock_owner {
	__u64 cgroup_id; /* cgroup v2 id of the process (its directory's inode) */
	__u32 pid;       /* thread-group id */
	__u32 tid;
	char comm[COMM_LEN];
};

/* What the owner map took in: inserted counts new cookies, so that
 * userspace can tell the evictions (inserted - entries present: the map is
 * never deleted from) and how many sockets were seen. */
struct owner_counts {
	__u64 inserted;
	__u64 updated; /* a known socket used by another process */
};

/* Bounded: an LRU hash evicts the least recently used socket when full.
 * The loader sets max_entries. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__type(key, __u64);
	__type(value, struct sock_owner);
	__uint(max_entries, 65536);
} sock_owners SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct owner_counts);
	__uint(max_entries, 1);
} owner_stats SEC(".maps");

const struct sock_owner *unused_sock_owner __attribute__((unused));
const struct owner_counts *unused_owner_counts __attribute__((unused));

/* note records the current process as the owner of the socket with this
 * cookie. A socket already recorded for the same process costs one lookup:
 * sendmsg runs for every datagram. */
static __always_inline void note(__u64 cookie)
{
	if (!cookie)
		return;
	__u32 zero = 0;
	struct owner_counts *c = bpf_map_lookup_elem(&owner_stats, &zero);
	if (!c)
		return;
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 pid = pid_tgid >> 32;
	struct sock_owner *o = bpf_map_lookup_elem(&sock_owners, &cookie);
	if (o && o->pid == pid)
		return;
	struct sock_owner n = {};
	n.pid = pid;
	n.tid = (__u32)pid_tgid;
	n.cgroup_id = bpf_get_current_cgroup_id();
	bpf_get_current_comm(n.comm, sizeof(n.comm));
	if (bpf_map_update_elem(&sock_owners, &cookie, &n, BPF_ANY))
		return;
	if (o)
		c->updated++;
	else
		c->inserted++;
}

SEC("cgroup/sock_create")
int owner_sock_create(struct bpf_sock *sk)
{
	note(bpf_get_socket_cookie(sk));
	return 1;
}

SEC("cgroup/post_bind4")
int owner_post_bind4(struct bpf_sock *sk)
{
	note(bpf_get_socket_cookie(sk));
	return 1;
}

SEC("cgroup/post_bind6")
int owner_post_bind6(struct bpf_sock *sk)
{
	note(bpf_get_socket_cookie(sk));
	return 1;
}

SEC("cgroup/connect4")
int owner_connect4(struct bpf_sock_addr *ctx)
{
	note(bpf_get_socket_cookie(ctx));
	return 1;
}

SEC("cgroup/connect6")
int owner_connect6(struct bpf_sock_addr *ctx)
{
	note(bpf_get_socket_cookie(ctx));
	return 1;
}

SEC("cgroup/sendmsg4")
int owner_sendmsg4(struct bpf_sock_addr *ctx)
{
	note(bpf_get_socket_cookie(ctx));
	return 1;
}

SEC("cgroup/sendmsg6")
int owner_sendmsg6(struct bpf_sock_addr *ctx)
{
	note(bpf_get_socket_cookie(ctx));
	return 1;
}

SEC("cgroup/recvmsg4")
int owner_recvmsg4(struct bpf_sock_addr *ctx)
{
	note(bpf_get_socket_cookie(ctx));
	return 1;
}

SEC("cgroup/recvmsg6")
int owner_recvmsg6(struct bpf_sock_addr *ctx)
{
	note(bpf_get_socket_cookie(ctx));
	return 1;
}
