/* Link-local services: which of DNS, IMDS and NTP an address is. Included by
 * probe.c only, after its definitions. */
#ifndef __ENAPROBE_LINKLOCAL_H
#define __ENAPROBE_LINKLOCAL_H

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

#endif /* __ENAPROBE_LINKLOCAL_H */
