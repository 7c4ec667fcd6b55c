// SPDX-License-Identifier: MIT OR Apache-2.0
//
// The XDP program of an AF_XDP port: frames the gateway handles (ARP, IPv4, IPv6) go
// to the AF_XDP socket bound to the queue they arrived on, and so do VLAN-tagged
// frames (802.1Q, 802.1ad), which the gateway drops and counts as an AF_PACKET
// port does (a port has no VLANs); everything else (LLDP, other EtherTypes) goes
// on to the kernel as if no program were attached. A queue with no socket in the map passes its frames to the kernel too.
// An interface the gateway takes whole (a cross-connected port, `settings[0]` set)
// has every frame redirected, whatever it holds.

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

#ifdef RESTORE_VLAN
// Built a second time with RESTORE_VLAN, loaded bound to the port's device where
// the kernel and the driver give XDP the receive metadata: a VLAN tag the NIC (or,
// on veth, the sender's offload) took out of the frame is put back in front of
// its EtherType, so the frame reaches the socket as it was on the wire.
extern int bpf_xdp_metadata_rx_vlan_tag(const struct xdp_md *ctx, __be16 *vlan_proto,
					__u16 *vlan_tci) __ksym;

static __always_inline void restore_vlan_tag(struct xdp_md *ctx)
{
	__be16 proto;
	__u16 tci;

	if (bpf_xdp_metadata_rx_vlan_tag(ctx, &proto, &tci) != 0)
		return;
	if (bpf_xdp_adjust_head(ctx, -4) != 0)
		return;
	__u16 *w = (void *)(long)ctx->data;
	if ((void *)(w + 9) > (void *)(long)ctx->data_end)
		return;
	// The addresses 4 bytes forward (each word's source lies ahead of it), then
	// the tag where they were.
#pragma unroll
	for (int i = 0; i < 6; i++)
		w[i] = w[i + 2];
	w[6] = proto;
	w[7] = bpf_htons(tci);
}
#endif

// settings[0]: non-zero to redirect every frame (see above).
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} settings SEC(".maps");

SEC("xdp")
int linerate_xsk(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	__u32 zero = 0;
	__u32 *take_all = bpf_map_lookup_elem(&settings, &zero);

#ifdef RESTORE_VLAN
	restore_vlan_tag(ctx);
	data = (void *)(long)ctx->data;
	end = (void *)(long)ctx->data_end;
	eth = data;
#endif
	if (take_all && *take_all)
		return bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS);

	if ((void *)(eth + 1) > end)
		return XDP_PASS;

	switch (eth->h_proto) {
	case bpf_htons(ETH_P_ARP):
	case bpf_htons(ETH_P_IP):
	case bpf_htons(ETH_P_IPV6):
	case bpf_htons(ETH_P_8021Q):
	case bpf_htons(ETH_P_8021AD):
		return bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS);
	default:
		return XDP_PASS;
	}
}

// The kernel's way of declaring MIT-licensed code GPL-compatible (as in MODULE_LICENSE);
// none of the helpers used here requires it, but libxdp's dispatcher, which may run
// this program as an extension, is GPL.
char _license[] SEC("license") = "Dual MIT/GPL";
