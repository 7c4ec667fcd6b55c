// SPDX-License-Identifier: MIT OR Apache-2.0
//
// The XDP program of an AF_XDP port: frames the gateway handles (ARP, IPv4, IPv6) go
// to the AF_XDP socket bound to the queue they arrived on; everything else (LLDP,
// VLAN-tagged frames, other EtherTypes) goes on to the kernel as if no program were
// attached. A queue with no socket in the map passes its frames to the kernel too.

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

// Queue number -> AF_XDP socket. Sized for the queues of any NIC we expect.
struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, 256);
	__type(key, __u32);
	__type(value, __u32);
} xsks SEC(".maps");

SEC("xdp")
int linerate_xsk(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;

	if ((void *)(eth + 1) > end)
		return XDP_PASS;

	switch (eth->h_proto) {
	case bpf_htons(ETH_P_ARP):
	case bpf_htons(ETH_P_IP):
	case bpf_htons(ETH_P_IPV6):
		return bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS);
	default:
		return XDP_PASS;
	}
}

// The kernel's way of declaring MIT-licensed code GPL-compatible (as in MODULE_LICENSE);
// none of the helpers used here requires it, but libxdp's dispatcher, which may run
// this program as an extension, is GPL.
char _license[] SEC("license") = "Dual MIT/GPL";
