/* A foreign XDP program for tests/net/gateway.sh crash_restart: passes every
 * frame to the kernel. Built with clang -target bpf at test time. */
#include <linux/bpf.h>

__attribute__((section("xdp"), used)) int other_xdp_prog(struct xdp_md *ctx)
{
	return XDP_PASS;
}

char _license[] __attribute__((section("license"), used)) = "GPL";
