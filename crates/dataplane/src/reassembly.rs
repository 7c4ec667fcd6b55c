//! Reassembly of IP fragments addressed to the gateway itself: a tunnel peer's
//! datagrams that its kernel cut for a narrower path (an OpenVPN client at tun-mtu
//! 1500 behind a smaller link, an IKE_AUTH with certificates). Each worker's
//! `ip-local` offers it the fragments it receives and gets whole datagrams back
//! (see `IpLayer::reassembly`). No I/O; the time is an argument.
//!
//! Fragments belong together as RFC 791 and RFC 8200 say: same source, destination,
//! protocol and identification for IPv4; same source, destination and identification
//! for IPv6. The policies, chosen so that memory stays within [`Limits`] whatever
//! arrives (a flood of fragments with random identifications included):
//!
//! - Overlap (RFC 5722, for IPv4 too): a fragment that overlaps another of its
//!   datagram drops the whole datagram. An exact copy of one held is ignored, not
//!   counted: networks duplicate packets.
//! - No room: a fragment that would take a datagram or bytes over the limit is
//!   refused and nothing is evicted, so datagrams nearer completion keep their place
//!   and the newcomer's sender retransmits (IKE and TCP do). A fragment that completes its
//!   datagram is always taken: its memory is freed at once.
//! - The reassembled header is that of the fragment at offset 0 (RFC 791 section 3.2,
//!   RFC 8200 section 4.5).
//! - What is whole already comes back at once, nothing kept: an IPv4 packet that is
//!   no fragment, an IPv6 atomic fragment (RFC 6946) without its Fragment header.
//! - A datagram is dropped `timeout` after its first fragment arrived. RFC 8200 says
//!   60 s; IKE retransmits sooner, so junk is not let to hold the table that long.
//! - A refused fragment changes nothing, except that the overlaps, ends and sizes
//!   that doom its datagram drop that datagram too.

use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::time::{Duration, Instant};
use wire::ip::protocol;
use wire::{ipv4, ipv6};

crate::node_errors! {
    /// Why a fragment is refused, or a datagram dropped.
    pub enum ReassemblyError {
        Malformed => "malformed", "Not a valid fragment: bad header or checksum, lengths that do not fit, a non-last fragment not a multiple of 8 long, extension headers that do not parse.";
        Overlap => "overlap", "Overlapped another fragment of its datagram: the whole datagram is dropped (RFC 5722).";
        TooBig => "too-big", "Would make a datagram over the configured limit or over 65535 bytes: dropped whole.";
        TableFull => "table-full", "No room (pending datagrams or bytes at their limit): the fragment is refused, nothing evicted.";
        TimedOut => "timed-out", "A datagram still incomplete at the timeout, counted once.";
        ConflictingLast => "conflicting-last", "Fragments disagree on where the datagram ends: dropped whole.";
    }
}

impl ReassemblyError {
    /// The name it is counted under.
    pub fn name(self) -> &'static str {
        Self::TABLE[self as usize].name
    }
}

/// What a held fragment costs beside its bytes: its allocation and its share of a
/// tree node, rounded up, so that a flood of 8-byte fragments cannot take several
/// times `Limits::bytes`.
pub const PIECE_COST: usize = 128;
/// What a pending datagram costs beside its fragments and header: its tree's first
/// node and its header's allocation. The table's slots, which `Limits::datagrams`
/// bounds, come on top.
pub const DATAGRAM_COST: usize = 512;

/// The IPv6 Authentication Header (RFC 4302), whose length counts 4-byte words.
const AH: u8 = 51;

#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Datagrams pending at most.
    pub datagrams: usize,
    /// Bytes charged to pending datagrams at most: each fragment's data plus
    /// [`PIECE_COST`], each datagram's header plus [`DATAGRAM_COST`].
    pub bytes: usize,
    /// The longest datagram reassembled, counted as the data its fragments carry
    /// together (for IPv4 the payload after the header).
    pub datagram_len: usize,
    /// How long a datagram waits for its missing fragments, from its first one.
    pub timeout: Duration,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            datagrams: 64,
            bytes: 1 << 20,
            datagram_len: 65535 - ipv4::HEADER_LEN,
            timeout: Duration::from_secs(10),
        }
    }
}

/// What fragments of one datagram share: for IPv6 no protocol, which the first
/// fragment alone holds (RFC 8200 section 4.5).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Key {
    src: IpAddr,
    dst: IpAddr,
    protocol: Option<u8>,
    id: u32,
}

/// Where the header's last next-header byte is, and the value the Fragment header
/// holds for it: what an IPv6 datagram needs to drop its Fragment header. None for
/// IPv4.
type NextHeader = Option<(usize, u8)>;

/// One fragment, parsed and checked.
struct Fragment<'a> {
    key: Key,
    offset: usize,
    more: bool,
    data: &'a [u8],
    /// The unfragmentable part: IPv4 header with options, or IPv6 header with the
    /// extension headers before the Fragment header.
    header: &'a [u8],
    next: NextHeader,
}

struct Pending {
    first: Instant,
    /// Data by offset; no two overlap and none passes `end`.
    pieces: BTreeMap<usize, Vec<u8>>,
    /// Bytes in `pieces`: `end` once every piece is in, as none overlaps.
    len: usize,
    /// Where the data ends, once the last fragment has said.
    end: Option<usize>,
    /// From the fragment at offset 0.
    header: Option<(Vec<u8>, NextHeader)>,
    cost: usize,
}

enum Fit {
    New,
    Duplicate,
}

impl Pending {
    /// Whether `f`, ending at `end`, may join: checked before anything changes.
    fn fit(&self, f: &Fragment, end: usize) -> Result<Fit, ReassemblyError> {
        let last_end = self.pieces.last_key_value().map_or(0, |(o, d)| o + d.len());
        if self.end.is_some_and(|e| end > e || (!f.more && end != e)) || (!f.more && last_end > end)
        {
            return Err(ReassemblyError::ConflictingLast);
        }
        if let Some((&o, d)) = self.pieces.range(..=f.offset).next_back() {
            if o == f.offset && d[..] == *f.data {
                // A copy that now says it is the last does not duplicate the held one.
                return if f.more || self.end == Some(end) {
                    Ok(Fit::Duplicate)
                } else {
                    Err(ReassemblyError::ConflictingLast)
                };
            }
            if o + d.len() > f.offset {
                return Err(ReassemblyError::Overlap);
            }
        }
        match self.pieces.range(f.offset + 1..).next() {
            Some((&o, _)) if o < end => Err(ReassemblyError::Overlap),
            _ => Ok(Fit::New),
        }
    }
}

/// Fragments waiting for the rest of their datagrams, within [`Limits`].
pub struct Reassembler {
    limits: Limits,
    pending: HashMap<Key, Pending>,
    /// Bytes charged to `pending`, all together.
    held: usize,
    dropped: BTreeMap<&'static str, u64>,
    /// Datagrams made whole from two fragments or more.
    made_whole: u64,
}

impl Reassembler {
    pub fn new(limits: Limits) -> Reassembler {
        Reassembler {
            limits,
            pending: HashMap::new(),
            held: 0,
            dropped: ReassemblyError::TABLE.iter().map(|e| (e.name, 0)).collect(),
            made_whole: 0,
        }
    }

    /// Takes a fragment (a whole IP packet from its header on: IPv4 with MF set or a
    /// nonzero offset, IPv6 with a Fragment header) and returns the datagram once its
    /// last missing piece is in: a valid IP packet without fragment fields (IPv4: MF
    /// and offset clear, total length and checksum set; IPv6: Fragment header gone,
    /// the next header before it and the payload length set). Expires first; every
    /// error is counted under its name.
    pub fn offer(
        &mut self,
        packet: &[u8],
        now: Instant,
    ) -> Result<Option<Vec<u8>>, ReassemblyError> {
        let result = self.take(packet, now);
        if let Err(e) = result {
            *self.dropped.entry(e.name()).or_default() += 1;
        }
        result
    }

    fn take(&mut self, packet: &[u8], now: Instant) -> Result<Option<Vec<u8>>, ReassemblyError> {
        let f = parse(packet).ok_or(ReassemblyError::Malformed)?;
        if f.more && (f.data.is_empty() || f.data.len() % 8 != 0) {
            return Err(ReassemblyError::Malformed);
        }
        let end = f.offset + f.data.len();
        if end > self.limits.datagram_len || !fits(f.header, f.next, end) {
            self.discard(&f.key);
            return Err(ReassemblyError::TooBig);
        }
        if f.offset == 0 && !f.more {
            return Ok(Some(finish([f.header, f.data].concat(), f.next)));
        }
        self.expire(now);
        let existing = self.pending.get(&f.key);
        match existing.map(|p| p.fit(&f, end)) {
            Some(Ok(Fit::Duplicate)) => return Ok(None),
            Some(Err(e)) => {
                self.discard(&f.key);
                return Err(e);
            }
            Some(Ok(Fit::New)) | None => {}
        }
        let completes = existing.is_some_and(|p| {
            let end = if f.more { p.end } else { Some(end) };
            end == Some(p.len + f.data.len()) && (p.header.is_some() || f.offset == 0)
        });
        let header_cost = if f.offset == 0 { f.header.len() } else { 0 };
        let cost = f.data.len() + PIECE_COST + header_cost + existing.map_or(DATAGRAM_COST, |_| 0);
        let full = existing.is_none() && self.pending.len() >= self.limits.datagrams;
        if !completes && (full || self.held + cost > self.limits.bytes) {
            return Err(ReassemblyError::TableFull);
        }
        self.held += cost;
        let mut slot = match self.pending.entry(f.key) {
            Entry::Occupied(slot) => slot,
            Entry::Vacant(slot) => slot.insert_entry(Pending {
                first: now,
                pieces: BTreeMap::new(),
                len: 0,
                end: None,
                header: None,
                cost: 0,
            }),
        };
        let p = slot.get_mut();
        p.cost += cost;
        p.len += f.data.len();
        if !f.more {
            p.end = Some(end);
        }
        if f.offset == 0 {
            p.header = Some((f.header.to_vec(), f.next));
        }
        if !f.data.is_empty() {
            p.pieces.insert(f.offset, f.data.to_vec());
        }
        // As no two pieces overlap and none passes the end, this many bytes cover it
        // all, the piece at 0 with its header included.
        if p.end != Some(p.len) {
            return Ok(None);
        }
        let p = slot.remove();
        self.held -= p.cost;
        let Some((header, next)) = p.header else {
            return Ok(None);
        };
        // The first fragment's header may be longer than the one checked above.
        if !fits(&header, next, p.len) {
            return Err(ReassemblyError::TooBig);
        }
        self.made_whole += 1;
        let mut out = Vec::with_capacity(header.len() + p.len);
        out.extend_from_slice(&header);
        p.pieces.values().for_each(|d| out.extend_from_slice(d));
        Ok(Some(finish(out, next)))
    }

    /// Drops the datagrams whose first fragment came `timeout` or longer before `now`.
    pub fn expire(&mut self, now: Instant) {
        let (timeout, mut freed, mut count) = (self.limits.timeout, 0, 0);
        self.pending.retain(|_, p| {
            let keep = now.saturating_duration_since(p.first) < timeout;
            if !keep {
                freed += p.cost;
                count += 1;
            }
            keep
        });
        self.held -= freed;
        *self
            .dropped
            .entry(ReassemblyError::TimedOut.name())
            .or_default() += count;
    }

    fn discard(&mut self, key: &Key) {
        if let Some(p) = self.pending.remove(key) {
            self.held -= p.cost;
        }
    }

    /// Drops so far by reason name, every reason listed (see [`ReassemblyError`]):
    /// refused fragments, and datagrams dropped whole when they time out.
    pub fn dropped(&self) -> &BTreeMap<&'static str, u64> {
        &self.dropped
    }

    /// Datagrams made whole from two fragments or more, so far.
    pub fn made_whole(&self) -> u64 {
        self.made_whole
    }

    /// Datagrams waiting for fragments.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// Bytes charged to the pending datagrams, at most `Limits::bytes`.
    pub fn held(&self) -> usize {
        self.held
    }
}

/// Whether a datagram of `header` and `len` bytes of data has lengths that fit their
/// 16-bit fields.
fn fits(header: &[u8], next: NextHeader, len: usize) -> bool {
    let not_counted = if next.is_some() { ipv6::HEADER_LEN } else { 0 };
    header.len() - not_counted + len <= usize::from(u16::MAX)
}

/// `out`, a header and its data, with the fragment fields gone and lengths set.
fn finish(mut out: Vec<u8>, next: NextHeader) -> Vec<u8> {
    match next {
        None => {
            let total = out.len() as u16;
            let mut p = ipv4::Packet::new_unchecked(&mut out[..]);
            p.set_total_len(total);
            p.set_more_frags(false);
            p.set_frag_offset(0);
            p.fill_checksum();
        }
        Some((at, next)) => {
            out[at] = next;
            let len = (out.len() - ipv6::HEADER_LEN) as u16;
            ipv6::Packet::new_unchecked(&mut out[..]).set_payload_len(len);
        }
    }
    out
}

fn parse(packet: &[u8]) -> Option<Fragment<'_>> {
    match packet.first()? >> 4 {
        ipv4::VERSION => parse_v4(packet),
        ipv6::VERSION => parse_v6(packet),
        _ => None,
    }
}

fn parse_v4(packet: &[u8]) -> Option<Fragment<'_>> {
    let p = ipv4::Packet::new_checked(packet).ok()?;
    if !p.verify_checksum() {
        return None;
    }
    let (header_len, total) = (p.header_len(), usize::from(p.total_len()));
    Some(Fragment {
        key: Key {
            src: p.src_addr().into(),
            dst: p.dst_addr().into(),
            protocol: Some(p.protocol()),
            id: p.ident().into(),
        },
        offset: usize::from(p.frag_offset()),
        more: p.more_frags(),
        data: packet.get(header_len..total)?,
        header: packet.get(..header_len)?,
        next: None,
    })
}

fn parse_v6(packet: &[u8]) -> Option<Fragment<'_>> {
    let p = ipv6::Packet::new_checked(packet).ok()?;
    let packet = packet.get(..p.total_len())?;
    // Only the headers routers read may come before the Fragment header (RFC 8200
    // section 4.5), hop-by-hop first of all (section 4.1).
    let (mut at, mut next_at) = (ipv6::HEADER_LEN, 6);
    loop {
        match *packet.get(next_at)? {
            protocol::FRAGMENT => break,
            protocol::HOP_BY_HOP if next_at == 6 => {}
            protocol::ROUTING | protocol::DEST_OPTS => {}
            _ => return None,
        }
        next_at = at;
        at += 8 * (usize::from(*packet.get(at + 1)?) + 1);
    }
    let fragment = packet.get(at..at + 8)?;
    let field = u16::from_be_bytes([fragment[2], fragment[3]]);
    let f = Fragment {
        key: Key {
            src: p.src_addr().into(),
            dst: p.dst_addr().into(),
            protocol: None,
            id: u32::from_be_bytes([fragment[4], fragment[5], fragment[6], fragment[7]]),
        },
        offset: usize::from(field & 0xfff8),
        more: field & 1 != 0,
        data: &packet[at + 8..],
        header: &packet[..at],
        next: Some((next_at, fragment[0])),
    };
    (f.offset != 0 || chain_fits(fragment[0], f.data)).then_some(f)
}

/// Whether the extension headers after the Fragment header all lie in the first
/// fragment, as RFC 8200 section 4.5 (after RFC 7112) requires, and none of them is
/// one that may not come there.
fn chain_fits(mut next: u8, data: &[u8]) -> bool {
    let mut at = 0;
    loop {
        match next {
            protocol::ROUTING | protocol::DEST_OPTS | AH => {}
            protocol::HOP_BY_HOP | protocol::FRAGMENT => return false,
            _ => return true,
        }
        let (Some(&after), Some(&len)) = (data.get(at), data.get(at + 1)) else {
            return false;
        };
        let len = usize::from(len);
        at += if next == AH {
            4 * (len + 2)
        } else {
            8 * (len + 1)
        };
        if at > data.len() {
            return false;
        }
        next = after;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    fn fill(data: &mut [u8], seed: u8) {
        for (i, b) in data.iter_mut().enumerate() {
            *b = (i as u8).wrapping_mul(7) ^ seed;
        }
    }

    fn whole4(id: u16, len: usize) -> Vec<u8> {
        let mut p = vec![0u8; 20 + len];
        fill(&mut p[20..], id as u8);
        let mut v = ipv4::Packet::new_unchecked(&mut p[..]);
        v.set_version(4);
        v.set_header_len(20);
        v.set_total_len(20 + len as u16);
        v.set_ident(id);
        v.set_ttl(64);
        v.set_protocol(protocol::UDP);
        v.set_src_addr(Ipv4Addr::new(198, 18, 0, 1));
        v.set_dst_addr(Ipv4Addr::new(198, 19, 0, 1));
        v.fill_checksum();
        p
    }

    fn frag4(whole: &[u8], offset: usize, len: usize, more: bool) -> Vec<u8> {
        let mut f = [&whole[..20], &whole[20 + offset..20 + offset + len]].concat();
        let mut v = ipv4::Packet::new_unchecked(&mut f[..]);
        v.set_total_len(20 + len as u16);
        v.set_frag_offset(offset as u16);
        v.set_more_frags(more);
        v.fill_checksum();
        f
    }

    /// A UDP datagram, with an 8-byte hop-by-hop header first if `unfrag` is 48.
    fn whole6(unfrag: usize, len: usize) -> Vec<u8> {
        let mut p = vec![0u8; unfrag + len];
        fill(&mut p[unfrag..], 6);
        let next_header = if unfrag == 40 {
            protocol::UDP
        } else {
            protocol::HOP_BY_HOP
        };
        let repr = ipv6::Ipv6Repr {
            src_addr: Ipv6Addr::new(0x2001, 2, 0, 0, 0, 0, 0, 1),
            dst_addr: Ipv6Addr::new(0x2001, 2, 0, 0, 0, 0, 0, 2),
            next_header,
            payload_len: (unfrag - 40 + len) as u16,
            hop_limit: 64,
            traffic_class: 0,
            flow_label: 0,
        };
        repr.emit(&mut p).unwrap();
        if unfrag == 48 {
            p[40..48].copy_from_slice(&[protocol::UDP, 0, 1, 4, 0, 0, 0, 0]);
        }
        p
    }

    fn frag6(whole: &[u8], unfrag: usize, offset: usize, len: usize, more: bool) -> Vec<u8> {
        let next_at = if unfrag == 40 { 6 } else { 40 };
        let mut f = whole[..unfrag].to_vec();
        let next = std::mem::replace(&mut f[next_at], protocol::FRAGMENT);
        f.extend_from_slice(&[next, 0]);
        f.extend_from_slice(&(offset as u16 | u16::from(more)).to_be_bytes());
        f.extend_from_slice(&0xdead_beef_u32.to_be_bytes());
        f.extend_from_slice(&whole[unfrag + offset..unfrag + offset + len]);
        let payload_len = (f.len() - 40) as u16;
        ipv6::Packet::new_unchecked(&mut f[..]).set_payload_len(payload_len);
        f
    }

    /// (offset, length, more) of `total` bytes cut into pieces of `size`.
    fn cuts(total: usize, size: usize) -> Vec<(usize, usize, bool)> {
        (0..total)
            .step_by(size)
            .map(|o| (o, size.min(total - o), o + size < total))
            .collect()
    }

    fn count(r: &Reassembler, e: ReassemblyError) -> u64 {
        r.dropped()[e.name()]
    }

    /// Offers three fragments in each of their six orders, expecting `whole`.
    fn in_every_order(pieces: &[Vec<u8>], whole: &[u8]) {
        for order in [
            [0, 1, 2],
            [0, 2, 1],
            [1, 0, 2],
            [1, 2, 0],
            [2, 0, 1],
            [2, 1, 0],
        ] {
            let (mut r, now) = (Reassembler::new(Limits::default()), Instant::now());
            assert_eq!(r.offer(&pieces[order[0]], now), Ok(None));
            assert_eq!(r.offer(&pieces[order[1]], now), Ok(None));
            let out = r.offer(&pieces[order[2]], now).unwrap().unwrap();
            assert_eq!(out, whole, "order {order:?}");
            assert_eq!((r.pending(), r.held()), (0, 0));
        }
    }

    #[test]
    fn v4_in_every_order_with_the_first_header_and_a_valid_checksum() {
        let whole = whole4(7, 3000);
        let mut pieces: Vec<_> = cuts(3000, 1480)
            .iter()
            .map(|&(o, l, m)| frag4(&whole, o, l, m))
            .collect();
        in_every_order(&pieces, &whole);
        // Options that later fragments do not copy come back, from the first.
        let with_options = |p: &[u8]| {
            let mut p = [&p[..20], &[1, 1, 1, 0], &p[20..]].concat();
            p[0] = 0x46;
            let mut v = ipv4::Packet::new_unchecked(&mut p[..]);
            v.set_total_len(v.total_len() + 4);
            v.fill_checksum();
            p
        };
        pieces[0] = with_options(&pieces[0]);
        let whole = with_options(&whole);
        assert!(
            ipv4::Packet::new_checked(&whole[..])
                .unwrap()
                .verify_checksum()
        );
        in_every_order(&pieces, &whole);
    }

    #[test]
    fn v6_with_and_without_hop_by_hop_in_every_order() {
        for unfrag in [40, 48] {
            let whole = whole6(unfrag, 2500);
            let pieces: Vec<_> = cuts(2500, 1232)
                .iter()
                .map(|&(o, l, m)| frag6(&whole, unfrag, o, l, m))
                .collect();
            in_every_order(&pieces, &whole);
            let atomic = frag6(&whole, unfrag, 0, 2500, false);
            let mut r = Reassembler::new(Limits::default());
            assert_eq!(r.offer(&atomic, Instant::now()), Ok(Some(whole)));
            assert_eq!(r.pending(), 0);
        }
    }

    #[test]
    fn duplicates_are_ignored_and_overlaps_drop_the_datagram() {
        let (whole, now) = (whole4(1, 2000), Instant::now());
        let mut r = Reassembler::new(Limits::default());
        let first = frag4(&whole, 0, 1000, true);
        assert_eq!(r.offer(&first, now), Ok(None));
        let held = r.held();
        assert_eq!(r.offer(&first, now), Ok(None));
        assert_eq!((r.held(), r.dropped().values().sum::<u64>()), (held, 0));
        assert_eq!(
            r.offer(&frag4(&whole, 1000, 1000, false), now),
            Ok(Some(whole.clone()))
        );

        let mut changed = first.clone();
        changed[100] ^= 1;
        for overlapping in [
            changed,
            frag4(&whole, 992, 16, true),
            frag4(&whole, 8, 8, true),
        ] {
            assert_eq!(r.offer(&first, now), Ok(None));
            assert_eq!(r.offer(&overlapping, now), Err(ReassemblyError::Overlap));
            assert_eq!((r.pending(), r.held()), (0, 0));
        }
        assert_eq!(count(&r, ReassemblyError::Overlap), 3);
    }

    #[test]
    fn two_ends_conflict() {
        let (whole, now) = (whole4(1, 3000), Instant::now());
        let mut r = Reassembler::new(Limits::default());
        for (a, b) in [
            ((1000, 1000, false), (1000, 8, false)),
            ((1000, 1000, false), (2000, 8, true)),
            ((2000, 8, true), (1000, 1000, false)),
            ((1000, 1000, true), (1000, 1000, false)),
        ] {
            assert_eq!(r.offer(&frag4(&whole, a.0, a.1, a.2), now), Ok(None));
            let second = r.offer(&frag4(&whole, b.0, b.1, b.2), now);
            assert_eq!(second, Err(ReassemblyError::ConflictingLast));
            assert_eq!((r.pending(), r.held()), (0, 0));
        }
    }

    #[test]
    fn too_big_past_the_limit_or_65535() {
        let now = Instant::now();
        let mut r = Reassembler::new(Limits {
            datagram_len: 1000,
            ..Limits::default()
        });
        let whole = whole4(1, 1008);
        assert_eq!(r.offer(&frag4(&whole, 0, 504, true), now), Ok(None));
        assert_eq!(
            r.offer(&frag4(&whole, 504, 504, false), now),
            Err(ReassemblyError::TooBig)
        );
        assert_eq!((r.pending(), r.held()), (0, 0));

        let mut r = Reassembler::new(Limits {
            datagram_len: 1 << 20,
            ..Limits::default()
        });
        let mut past = whole4(2, 16);
        let mut p = ipv4::Packet::new_unchecked(&mut past[..]);
        p.set_frag_offset(65528);
        p.fill_checksum();
        assert_eq!(r.offer(&past, now), Err(ReassemblyError::TooBig));
        let whole = whole6(40, 16);
        let mut past = frag6(&whole, 40, 0, 16, false);
        past[42..44].copy_from_slice(&65528u16.to_be_bytes());
        assert_eq!(r.offer(&past, now), Err(ReassemblyError::TooBig));
        assert_eq!(count(&r, ReassemblyError::TooBig), 2);
    }

    #[test]
    fn a_full_table_refuses_newcomers_but_lets_datagrams_complete() {
        let now = Instant::now();
        let one = 1000 + PIECE_COST + 20 + DATAGRAM_COST;
        for limits in [
            Limits {
                datagrams: 2,
                ..Limits::default()
            },
            Limits {
                bytes: 2 * one,
                ..Limits::default()
            },
        ] {
            let mut r = Reassembler::new(limits);
            let wholes: Vec<_> = (1..=3).map(|id| whole4(id, 2000)).collect();
            assert_eq!(r.offer(&frag4(&wholes[0], 0, 1000, true), now), Ok(None));
            assert_eq!(r.offer(&frag4(&wholes[1], 0, 1000, true), now), Ok(None));
            let third = frag4(&wholes[2], 0, 1000, true);
            assert_eq!(r.offer(&third, now), Err(ReassemblyError::TableFull));
            assert_eq!((r.pending(), r.held()), (2, 2 * one));
            let last = frag4(&wholes[0], 1000, 1000, false);
            assert_eq!(r.offer(&last, now), Ok(Some(wholes[0].clone())));
            assert_eq!(r.offer(&third, now), Ok(None));
            assert_eq!(count(&r, ReassemblyError::TableFull), 1);
        }
    }

    #[test]
    fn incomplete_datagrams_time_out_once() {
        let (whole, t0) = (whole4(1, 2000), Instant::now());
        let mut r = Reassembler::new(Limits::default());
        assert_eq!(r.offer(&frag4(&whole, 0, 1000, true), t0), Ok(None));
        r.expire(t0 + Duration::from_millis(9999));
        assert_eq!(r.pending(), 1);
        r.expire(t0 + Duration::from_secs(10));
        r.expire(t0 + Duration::from_secs(11));
        assert_eq!((r.pending(), r.held()), (0, 0));
        assert_eq!(count(&r, ReassemblyError::TimedOut), 1);
        // An offer expires too: the late half starts a datagram of its own.
        assert_eq!(r.offer(&frag4(&whole, 0, 1000, true), t0), Ok(None));
        let late = t0 + Duration::from_secs(10);
        assert_eq!(r.offer(&frag4(&whole, 1000, 1000, false), late), Ok(None));
        assert_eq!((r.pending(), count(&r, ReassemblyError::TimedOut)), (1, 2));
    }

    #[test]
    fn malformed_fragments_change_nothing() {
        let (whole, now) = (whole4(1, 2000), Instant::now());
        let mut r = Reassembler::new(Limits::default());
        assert_eq!(r.offer(&frag4(&whole, 0, 1000, true), now), Ok(None));
        let mut bad_sum = frag4(&whole, 1000, 1000, false);
        bad_sum[10] ^= 1;
        let w6 = whole6(48, 1000);
        let mut long_routing = frag6(&whole6(40, 1000), 40, 0, 1000, true);
        long_routing[40] = protocol::ROUTING;
        long_routing[49] = 255;
        let mut short_v6 = frag6(&w6, 48, 0, 1000, true);
        short_v6.truncate(100);
        let bad = [
            vec![],
            vec![0x45; 19],
            bad_sum,
            frag4(&whole, 1000, 1000, false)[..100].to_vec(),
            frag4(&whole, 0, 1001, true),
            frag4(&whole, 1000, 0, true),
            frag6(&w6, 40, 0, 1000, true), // hop-by-hop after the Fragment header
            long_routing,
            short_v6,
            w6[..56].to_vec(), // no Fragment header
        ];
        for packet in &bad {
            assert_eq!(r.offer(packet, now), Err(ReassemblyError::Malformed));
            assert_eq!(r.pending(), 1);
        }
        assert_eq!(count(&r, ReassemblyError::Malformed), bad.len() as u64);
        assert_eq!(
            r.offer(&frag4(&whole, 1000, 1000, false), now),
            Ok(Some(whole))
        );
    }

    #[test]
    fn random_input_never_panics_and_stays_within_limits() {
        let limits = Limits {
            datagrams: 8,
            bytes: 8192,
            datagram_len: 768,
            ..Limits::default()
        };
        let (mut r, t0) = (Reassembler::new(limits), Instant::now());
        let mut x = 0x9e37_79b9_7f4a_7c15_u64;
        let mut rand = move |n: usize| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % n as u64) as usize
        };
        let (w4, w6s) = (whole4(0, 1024), [whole6(40, 1024), whole6(48, 1024)]);
        let mut whole = 0;
        for i in 0..30_000u64 {
            let (offset, more) = (rand(64) * 8, rand(3) > 0);
            let len = (rand(16) * 8 + if more { 0 } else { rand(8) }).min(1024 - offset);
            let mut packet = match rand(3) {
                0 => (0..rand(120)).map(|_| rand(256) as u8).collect(),
                1 => {
                    let mut f = frag4(&w4, offset, len, more);
                    f[4..6].copy_from_slice(&(rand(24) as u16).to_be_bytes());
                    ipv4::Packet::new_unchecked(&mut f[..]).fill_checksum();
                    f
                }
                _ => {
                    let unfrag = 40 + 8 * rand(2);
                    let mut f = frag6(&w6s[unfrag / 48], unfrag, offset, len, more);
                    f[unfrag + 7] = rand(24) as u8;
                    f
                }
            };
            if rand(4) == 0 && !packet.is_empty() {
                let at = rand(packet.len());
                packet[at] = rand(256) as u8;
            }
            if let Ok(Some(out)) = r.offer(&packet, t0 + Duration::from_millis(3 * i)) {
                wire::IpPacket::parse(&out[..]).unwrap();
                whole += 1;
            }
            assert!(r.pending() <= limits.datagrams && r.held() <= limits.bytes);
        }
        assert!(whole > 0, "some datagrams completed");
        r.expire(t0 + Duration::from_secs(3600));
        assert_eq!((r.pending(), r.held()), (0, 0));
    }
}
