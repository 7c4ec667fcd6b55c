/* A tc program for tests/net/ike.sh lost_rekey_answer_*: drops the first answer
 * to a CREATE_CHILD_SA request (IKE in UDP on port 4500 behind the non-ESP
 * marker, IPv4) that passes it, and nothing else, the way one lost datagram
 * would. The IKE header's exchange type and flags travel in clear. Built with
 * clang -target bpf at test time. */
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/in.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define NAT_T_PORT 4500
#define CREATE_CHILD_SA 36
#define FLAG_RESPONSE 0x20
/* The IKE header's exchange type, after the 4-byte marker and SPIs, next
 * payload and version (RFC 7296 section 3.1); its flags follow. */
#define EXCHANGE_AT (4 + 18)

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} dropped SEC(".maps");

SEC("tc") int drop_rekey_answer(struct __sk_buff *skb)
{
	__u32 key = 0, *n = bpf_map_lookup_elem(&dropped, &key);
	struct iphdr ip;
	struct udphdr udp;
	__u8 ike[EXCHANGE_AT + 2];
	__u32 at = ETH_HLEN;

	if (!n || *n > 0 || skb->protocol != bpf_htons(ETH_P_IP))
		return TC_ACT_OK;
	if (bpf_skb_load_bytes(skb, at, &ip, sizeof(ip)) || ip.protocol != IPPROTO_UDP)
		return TC_ACT_OK;
	at += ip.ihl * 4;
	if (bpf_skb_load_bytes(skb, at, &udp, sizeof(udp)))
		return TC_ACT_OK;
	if (udp.source != bpf_htons(NAT_T_PORT) && udp.dest != bpf_htons(NAT_T_PORT))
		return TC_ACT_OK;
	if (bpf_skb_load_bytes(skb, at + sizeof(udp), ike, sizeof(ike)))
		return TC_ACT_OK;
	/* IKE, not ESP: the non-ESP marker (four zero bytes) where ESP has its SPI. */
	if (ike[0] | ike[1] | ike[2] | ike[3])
		return TC_ACT_OK;
	if (ike[EXCHANGE_AT] != CREATE_CHILD_SA || !(ike[EXCHANGE_AT + 1] & FLAG_RESPONSE))
		return TC_ACT_OK;
	*n += 1;
	return TC_ACT_SHOT;
}

char _license[] SEC("license") = "GPL";
