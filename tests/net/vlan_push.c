/* A tc program for tests/net/l2.sh vlan_offload: tags every frame of EtherType
 * 0x88b5 leaving the interface with VLAN 100 the way a NIC's offload would carry
 * it: beside the frame (bpf_skb_vlan_push puts it in the skb's metadata when the
 * frame has no tag), not in it. Built with clang -target bpf at test time. */
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
__attribute__((section("tc"), used)) int push_vlan(struct __sk_buff *skb)
{
	if (skb->protocol == bpf_htons(0x88b5))
		bpf_skb_vlan_push(skb, bpf_htons(ETH_P_8021Q), 100);
	return TC_ACT_OK;
}
char _license[] __attribute__((section("license"), used)) = "GPL";
