//! `ip4-fragment`: an IPv4 packet without DF that is larger than the link it is
//! routed to (a port's MTU, or the tunnel's) is cut into fragments that fit
//! (RFC 791 section 3.2, "Fragmentation"). The packet's own buffer keeps the first
//! fragment; the others get new buffers with a copy of the header. A packet that is
//! already a fragment is cut the same way, its offset and MF flag carried over. All
//! of a packet's fragments wait in the IP layer, one after another, and the gateway
//! hands them on after this pass, in order (to `ip-rewrite` for a port, to
//! `ip-lookup` for the tunnel, where they now fit): a receiver sees each
//! datagram's fragments together. Sending the first of every packet in a frame
//! at once and the rest after would put up to a frame of other fragments between
//! the pieces of one datagram, and Linux drops a datagram whose pieces are more
//! than 64 fragments apart (`ipfrag_max_dist`): under load every datagram would
//! be lost.
//!
//! The node that sends a packet here sets its metadata's `icmp` to the MTU it must
//! fit (`TooBig { mtu }`), and its port to none for the tunnel.

use crate::arena::{Handle, IcmpReason};
use crate::context::Context;
use crate::counters::NodeCounters;
use crate::graph::KEEP;
use crate::nodes::PerPacket;
use wire::ipv4;

crate::node_errors! {
    /// Why ip4-fragment drops a packet (every fragment of it).
    pub enum Ip4FragmentError {
        Options => "options", "A packet with IP options: not fragmented here.";
        NoBuffer => "no-buffer", "No free buffer for one of its fragments.";
        MtuTooSmall => "mtu-too-small", "An MTU that leaves no room for 8 bytes of payload.";
        NoMtu => "no-mtu", "Sent here without the MTU to fit (a bug if counted).";
    }
}

pub struct Ip4Fragment;

impl Ip4Fragment {
    pub const NAME: &'static str = "ip4-fragment";
}

/// Fragments the packet `h` holds (the whole IPv4 packet, 20-byte header) into
/// pieces of at most `mtu` bytes: the first stays in `h`; `h` and then the others
/// are pushed to `rest`, in order. On failure nothing is left allocated, `rest` is
/// as it was and `h` is unchanged.
pub(crate) fn fragment(
    cx: &mut Context,
    h: Handle,
    mtu: usize,
    rest: &mut Vec<Handle>,
) -> Result<(), Ip4FragmentError> {
    let header_len = ipv4::HEADER_LEN;
    let data = cx.arena.data(h);
    let p = ipv4::Packet::new_unchecked(data);
    if p.header_len() != header_len {
        return Err(Ip4FragmentError::Options);
    }
    let chunk = (mtu.saturating_sub(header_len) / 8) * 8;
    if chunk == 0 {
        return Err(Ip4FragmentError::MtuTooSmall);
    }
    let (base, more) = (usize::from(p.frag_offset()), p.more_frags());
    let payload_len = data.len() - header_len;
    let pieces = payload_len.div_ceil(chunk);
    let start = rest.len();
    rest.push(h);
    for i in 1..pieces {
        let Some(f) = cx.arena.alloc() else {
            for f in rest.drain(start + 1..) {
                cx.arena.free(f);
            }
            rest.truncate(start);
            return Err(Ip4FragmentError::NoBuffer);
        };
        let from = header_len + i * chunk;
        let len = chunk.min(payload_len - i * chunk);
        let (src, dst) = (h, f);
        let meta = *cx.arena.meta(src);
        let at = meta.offset as usize;
        cx.arena.copy_between(src, at, dst, at, header_len);
        cx.arena
            .copy_between(src, at + from, dst, at + header_len, len);
        let m = cx.arena.meta_mut(dst);
        *m = meta;
        m.len = (header_len + len) as u16;
        // A piece of a sealed packet cannot be sealed again.
        m.seal = crate::arena::SealMark::NONE;
        let out = cx.arena.data_mut(dst);
        let last = i + 1 == pieces;
        set_fragment(out, base + i * chunk, !last || more);
        rest.push(dst);
    }
    cx.arena.meta_mut(h).len = (header_len + chunk) as u16;
    cx.arena.meta_mut(h).seal = crate::arena::SealMark::NONE;
    set_fragment(cx.arena.data_mut(h), base, true);
    Ok(())
}

/// Sets a fragment's length (its whole buffer), offset and MF flag, and its checksum.
fn set_fragment(pkt: &mut [u8], offset: usize, more: bool) {
    let total = pkt.len() as u16;
    let mut p = ipv4::Packet::new_unchecked(pkt);
    p.set_total_len(total);
    p.set_frag_offset(offset as u16);
    p.set_more_frags(more);
    p.fill_checksum();
}

impl PerPacket for Ip4Fragment {
    per_packet_node!(errors: Ip4FragmentError, next: []);

    fn one(
        &mut self,
        cx: &mut Context,
        h: Handle,
        _: &mut NodeCounters,
    ) -> Result<u16, Ip4FragmentError> {
        let m = cx.arena.meta_mut(h);
        let Some(IcmpReason::TooBig { mtu }) = m.icmp.take() else {
            return Err(Ip4FragmentError::NoMtu);
        };
        let mut rest = std::mem::take(&mut cx.ip.fragments);
        let done = fragment(cx, h, usize::from(mtu), &mut rest);
        cx.ip.fragments = rest;
        done?;
        // Every fragment, this one first, goes on after the pass.
        Ok(KEEP)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arena::Arena;
    use crypto::{EngineSet, KeyRegistry};
    use std::sync::Arc;
    use std::time::{Instant, SystemTime};

    fn context(buffers: usize) -> Context {
        let now = Instant::now();
        let device = wireguard::Device::new(Arc::new(KeyRegistry::new(1)), now, SystemTime::now());
        Context::new(Arena::new(buffers), EngineSet::new(vec![]), device, 0, now)
    }

    fn packet(payload: usize, offset: u16, more: bool) -> Vec<u8> {
        let mut p = vec![0u8; 20 + payload];
        for (i, b) in p[20..].iter_mut().enumerate() {
            *b = i as u8;
        }
        let total = p.len() as u16;
        let mut v = ipv4::Packet::new_unchecked(&mut p[..]);
        v.set_version(4);
        v.set_header_len(20);
        v.set_total_len(total);
        v.set_ident(0x1234);
        v.set_ttl(64);
        v.set_protocol(17);
        v.set_frag_offset(offset);
        v.set_more_frags(more);
        v.fill_checksum();
        p
    }

    /// The fragments' payloads, put back at their offsets.
    fn reassemble(cx: &Context, hs: &[Handle]) -> (Vec<u8>, bool) {
        let mut out = vec![0u8; 4096];
        let mut end = 0;
        let mut last_more = false;
        for &h in hs {
            let p = ipv4::Packet::new_checked(cx.arena.data(h)).unwrap();
            assert!(p.verify_checksum());
            assert_eq!(p.ident(), 0x1234);
            let off = usize::from(p.frag_offset());
            out[off..off + p.payload().len()].copy_from_slice(p.payload());
            end = end.max(off + p.payload().len());
            last_more = p.more_frags();
        }
        out.truncate(end);
        (out, last_more)
    }

    #[test]
    fn a_packet_is_cut_into_pieces_that_fit_and_add_up() {
        for (payload, mtu) in [(1480, 1420), (1800, 576), (1000, 68), (64, 60), (17, 36)] {
            let mut cx = context(64);
            let original = packet(payload, 0, false);
            let h = cx.arena.alloc_with(&original).unwrap();
            let mut all = Vec::new();
            fragment(&mut cx, h, mtu, &mut all).unwrap();
            assert_eq!(all[0], h, "the packet's own buffer first");
            for &f in &all {
                assert!(cx.arena.data(f).len() <= mtu, "payload {payload} mtu {mtu}");
                let p = ipv4::Packet::new_checked(cx.arena.data(f)).unwrap();
                assert_eq!(p.frag_offset() % 8, 0);
            }
            let (bytes, more) = reassemble(&cx, &all);
            assert_eq!(bytes, original[20..], "payload {payload} mtu {mtu}");
            assert!(!more, "the last fragment clears MF");
            for f in all {
                cx.arena.free(f);
            }
            assert_eq!(cx.arena.available(), 64);
        }
    }

    #[test]
    fn a_fragment_is_cut_again_keeping_its_offset_and_mf() {
        let mut cx = context(8);
        let h = cx.arena.alloc_with(&packet(1000, 1480, true)).unwrap();
        assert_eq!(cx.arena.available(), 7);
        let mut rest = Vec::new();
        fragment(&mut cx, h, 576, &mut rest).unwrap();
        let first = ipv4::Packet::new_checked(cx.arena.data(h)).unwrap();
        assert_eq!(first.frag_offset(), 1480);
        let last = ipv4::Packet::new_checked(cx.arena.data(*rest.last().unwrap())).unwrap();
        assert!(last.more_frags(), "more followed the original");
    }

    #[test]
    fn without_buffers_nothing_changes_and_nothing_leaks() {
        let mut cx = context(2);
        let original = packet(1800, 0, false);
        let h = cx.arena.alloc_with(&original).unwrap();
        let mut rest = Vec::new();
        assert_eq!(
            fragment(&mut cx, h, 576, &mut rest),
            Err(Ip4FragmentError::NoBuffer)
        );
        assert!(rest.is_empty());
        assert_eq!(cx.arena.available(), 1);
        assert_eq!(cx.arena.data(h), &original[..]);
    }

    #[test]
    fn options_and_tiny_mtus_are_refused() {
        let mut cx = context(4);
        let mut with_options = packet(100, 0, false);
        with_options[0] = 0x46;
        with_options.splice(20..20, [1, 1, 1, 0]);
        let h = cx.arena.alloc_with(&with_options).unwrap();
        assert_eq!(
            fragment(&mut cx, h, 68, &mut Vec::new()),
            Err(Ip4FragmentError::Options)
        );
        let h = cx.arena.alloc_with(&packet(100, 0, false)).unwrap();
        assert_eq!(
            fragment(&mut cx, h, 27, &mut Vec::new()),
            Err(Ip4FragmentError::MtuTooSmall)
        );
    }
}
