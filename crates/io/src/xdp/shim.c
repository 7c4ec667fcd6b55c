// Batched wrappers around the AF_XDP ring helpers of <xdp/xsk.h>, which are static
// inline and so cannot be called from Rust. The ring protocol (cached indices,
// reserve/submit, peek/release and their memory ordering) stays libxdp's; these
// functions only move arrays of addresses or descriptors in and out in one call, and
// give Rust an opaque handle for the four ring structs, whose layout it never sees.

#include <stdint.h>
#include <stdlib.h>

#include <linux/if_xdp.h>
#include <bpf/libbpf.h>
#include <xdp/xsk.h>

struct lr_xsk_rings {
	struct xsk_ring_prod fill;
	struct xsk_ring_cons comp;
	struct xsk_ring_cons rx;
	struct xsk_ring_prod tx;
};

struct lr_xsk_rings *lr_xsk_rings_new(void)
{
	return calloc(1, sizeof(struct lr_xsk_rings));
}

void lr_xsk_rings_free(struct lr_xsk_rings *r)
{
	free(r);
}

int lr_xsk_umem_create(struct xsk_umem **umem, struct lr_xsk_rings *r, void *area,
		       uint64_t size, uint32_t fill_size, uint32_t comp_size,
		       uint32_t frame_size, uint32_t headroom)
{
	const struct xsk_umem_config cfg = {
		.fill_size = fill_size,
		.comp_size = comp_size,
		.frame_size = frame_size,
		.frame_headroom = headroom,
		.flags = 0,
	};
	return xsk_umem__create(umem, area, size, &r->fill, &r->comp, &cfg);
}

// A socket on `umem` whose XDP program the caller loads and whose XSKMAP entry the
// caller sets (libxdp loads neither).
int lr_xsk_socket_create(struct xsk_socket **xsk, struct lr_xsk_rings *r,
			 struct xsk_umem *umem, const char *ifname, uint32_t queue,
			 uint32_t rx_size, uint32_t tx_size, uint16_t bind_flags)
{
	struct xsk_socket_config cfg = {
		.rx_size = rx_size,
		.tx_size = tx_size,
		.xdp_flags = 0,
		.bind_flags = bind_flags,
	};
	cfg.libxdp_flags = XSK_LIBXDP_FLAGS__INHIBIT_PROG_LOAD;
	return xsk_socket__create(xsk, ifname, queue, umem, &r->rx, &r->tx, &cfg);
}

// Puts as many of `bufs` (chunk numbers) on the fill ring as it has room for, as
// addresses `buf << shift`; returns how many.
uint32_t lr_xsk_fill(struct lr_xsk_rings *r, const uint32_t *bufs, uint32_t n,
		     uint32_t shift)
{
	uint32_t idx = 0;
	uint32_t room = xsk_prod_nb_free(&r->fill, n);

	if (n > room)
		n = room;
	if (n == 0 || xsk_ring_prod__reserve(&r->fill, n, &idx) != n)
		return 0;
	for (uint32_t i = 0; i < n; i++)
		*xsk_ring_prod__fill_addr(&r->fill, idx + i) = (uint64_t)bufs[i] << shift;
	xsk_ring_prod__submit(&r->fill, n);
	return n;
}

// Takes up to `n` finished transmissions off the completion ring, as chunk numbers
// (`addr >> shift`); returns how many.
uint32_t lr_xsk_complete(struct lr_xsk_rings *r, uint32_t *bufs, uint32_t n,
			 uint32_t shift)
{
	uint32_t idx = 0;
	uint32_t got = xsk_ring_cons__peek(&r->comp, n, &idx);

	for (uint32_t i = 0; i < got; i++)
		bufs[i] = (uint32_t)(*xsk_ring_cons__comp_addr(&r->comp, idx + i) >> shift);
	if (got)
		xsk_ring_cons__release(&r->comp, got);
	return got;
}

// Copies up to `n` received descriptors off the RX ring; returns how many.
uint32_t lr_xsk_recv(struct lr_xsk_rings *r, struct xdp_desc *descs, uint32_t n)
{
	uint32_t idx = 0;
	uint32_t got = xsk_ring_cons__peek(&r->rx, n, &idx);

	for (uint32_t i = 0; i < got; i++)
		descs[i] = *xsk_ring_cons__rx_desc(&r->rx, idx + i);
	if (got)
		xsk_ring_cons__release(&r->rx, got);
	return got;
}

// Puts as many of `descs` on the TX ring as it has room for; returns how many.
uint32_t lr_xsk_send(struct lr_xsk_rings *r, const struct xdp_desc *descs, uint32_t n)
{
	uint32_t idx = 0;
	uint32_t room = xsk_prod_nb_free(&r->tx, n);

	if (n > room)
		n = room;
	if (n == 0 || xsk_ring_prod__reserve(&r->tx, n, &idx) != n)
		return 0;
	for (uint32_t i = 0; i < n; i++)
		*xsk_ring_prod__tx_desc(&r->tx, idx + i) = descs[i];
	xsk_ring_prod__submit(&r->tx, n);
	return n;
}

// Free TX ring entries, looked for up to `n` (libxdp reads the consumer index
// only when its cached view shows fewer).
uint32_t lr_xsk_tx_free(struct lr_xsk_rings *r, uint32_t n)
{
	return xsk_prod_nb_free(&r->tx, n);
}

int lr_xsk_tx_needs_wakeup(const struct lr_xsk_rings *r)
{
	return xsk_ring_prod__needs_wakeup(&r->tx);
}

int lr_xsk_fill_needs_wakeup(const struct lr_xsk_rings *r)
{
	return xsk_ring_prod__needs_wakeup(&r->fill);
}

// Opens a BPF object from memory under a name of our choosing (libbpf otherwise
// names it after the buffer's address). NULL with errno set on failure.
struct bpf_object *lr_bpf_object_open_mem(const void *buf, size_t size, const char *name)
{
	LIBBPF_OPTS(bpf_object_open_opts, opts, .object_name = name);
	return bpf_object__open_mem(buf, size, &opts);
}
