/* Minimal stand-in for the kernel's uapi <linux/types.h> so that the vendored
 * <linux/bpf.h> compiles for the bpf target without the host's asm headers. */
#ifndef __ENAPROBE_LINUX_TYPES_H
#define __ENAPROBE_LINUX_TYPES_H

typedef signed char __s8;
typedef unsigned char __u8;
typedef signed short __s16;
typedef unsigned short __u16;
typedef signed int __s32;
typedef unsigned int __u32;
typedef signed long long __s64;
typedef unsigned long long __u64;
typedef __u16 __be16;
typedef __u32 __be32;
typedef __u64 __be64;
typedef __u32 __wsum;
typedef __u16 __sum16;

#define __aligned_u64 __u64 __attribute__((aligned(8)))

#endif
