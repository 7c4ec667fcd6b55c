//! UDP segmentation offload on send (`UDP_SEGMENT`): a run of datagrams to one address,
//! all of one size but a shorter last one, goes down as one message whose control
//! data names the segment size. The stack then routes, filters and checksums the run
//! once instead of per datagram, which is most of the cost of a send.
//!
//! Not every path takes it. A kernel without the option, or a device or xfrm path
//! without checksum offload, refuses it outright; a run whose segments do not fit the
//! path MTU is refused too. [`GsoRefusal`] tells these apart, and either way the
//! refused run is sent again as plain datagrams, never lost.

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::time::Instant;

use super::arrays::MsgArrays;
use super::batch::Stop;
use super::{MAX_BATCH, SendBatch, SendResult, UdpSocket};

/// Most segments one UDP GSO send may carry (the kernel's UDP_MAX_SEGMENTS).
const GSO_MAX_SEGMENTS: usize = 64;
/// Most bytes one UDP GSO send may carry.
const GSO_MAX_BYTES: usize = 65000;
/// `UDP_SEGMENT` (include/uapi/linux/udp.h).
const UDP_SEGMENT: libc::c_int = 103;

/// How a kernel refusal of a whole GSO run is handled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum GsoRefusal {
    /// No UDP GSO on this socket's path at all (no such option, or a device or xfrm
    /// path without checksum offload: EIO): plain sends from now on.
    ForGood,
    /// The run's segments do not fit the path MTU (EMSGSIZE, or EINVAL when the
    /// segment size plus headers exceeds it): plain sends, which the stack can
    /// fragment, for this run; GSO stays on for the other paths.
    ThisRun,
}

fn gso_refusal(err: &io::Error) -> Option<GsoRefusal> {
    match err.raw_os_error()? {
        libc::ENOPROTOOPT | libc::EIO => Some(GsoRefusal::ForGood),
        libc::EMSGSIZE | libc::EINVAL => Some(GsoRefusal::ThisRun),
        _ => None,
    }
}

/// Scratch space for [`UdpSocket::send_gso_batch_with`].
pub struct GsoSendBatch {
    arrays: MsgArrays,
    /// One control message (UDP_SEGMENT) per header; u64s keep it aligned.
    cmsgs: Box<[[u64; 4]]>,
    /// (first datagram, datagrams) of each header's run.
    runs: Box<[(usize, usize)]>,
}

impl GsoSendBatch {
    /// Room for [`MAX_BATCH`] datagrams per syscall.
    pub fn new() -> GsoSendBatch {
        GsoSendBatch {
            arrays: MsgArrays::new(MAX_BATCH),
            cmsgs: vec![[0u64; 4]; MAX_BATCH].into_boxed_slice(),
            runs: vec![(0, 0); MAX_BATCH].into_boxed_slice(),
        }
    }
}

impl Default for GsoSendBatch {
    fn default() -> GsoSendBatch {
        GsoSendBatch::new()
    }
}

/// The end of the run that starts at `pkts[i]`: the datagrams after it to the same
/// address, each no longer than the first, stopping after the first shorter one, within
/// the kernel's limits on segments and bytes. A run of one goes as a plain datagram.
fn run_end(pkts: &[(&[u8], SocketAddr)], i: usize) -> usize {
    let (first, addr) = pkts[i];
    let size = first.len();
    let mut j = i + 1;
    let mut total = size;
    while j < pkts.len()
        && j - i < GSO_MAX_SEGMENTS
        && pkts[j].1 == addr
        && pkts[j].0.len() <= size
        && total + pkts[j].0.len() <= GSO_MAX_BYTES
        && size > 0
    {
        total += pkts[j].0.len();
        j += 1;
        if pkts[j - 1].0.len() < size {
            break;
        }
    }
    j
}

impl UdpSocket {
    /// Whether UDP segmentation offload is in use (see
    /// [`send_gso_batch_with`](UdpSocket::send_gso_batch_with)).
    pub fn gso_enabled(&self) -> bool {
        self.gso.load(Ordering::Relaxed)
    }

    /// Turns UDP segmentation offload off (or back on, to be tried again).
    pub fn set_gso(&self, on: bool) {
        self.gso.store(on, Ordering::Relaxed);
    }

    /// Like [`send_batch_with`](UdpSocket::send_batch_with), but runs of datagrams to
    /// one address, all of one size but a shorter last one, go down as one UDP GSO send
    /// (`UDP_SEGMENT`): the stack then handles each run once instead of per datagram.
    /// A run the kernel refuses as a whole is sent again as plain datagrams with the
    /// rest of the batch, never lost: for good when the path has no GSO at all, for
    /// this batch when the run did not fit the path's MTU.
    pub fn send_gso_batch_with(
        &self,
        scratch: &mut GsoSendBatch,
        plain: &mut SendBatch,
        pkts: &[(&[u8], SocketAddr)],
    ) -> SendResult {
        if !self.gso_enabled() {
            return self.send_batch_with(plain, pkts);
        }
        let mut res = SendResult::default();
        let mut start = 0;
        while start < pkts.len() {
            let end = (start + MAX_BATCH).min(pkts.len());
            let chunk = &pkts[start..end];
            let (sent, failed, refused_gso) = self.send_gso_chunk(scratch, chunk);
            res.sent += sent;
            res.failed += failed;
            if let Some(from) = refused_gso {
                let rest = self.send_batch_with(plain, &pkts[start + from..]);
                res.sent += rest.sent;
                res.failed += rest.failed;
                return res;
            }
            start = end;
        }
        res
    }

    /// Sends up to MAX_BATCH datagrams; returns (sent, failed, Some(index) if the kernel
    /// refused a GSO run starting at that datagram, which is then not counted).
    fn send_gso_chunk(
        &self,
        scratch: &mut GsoSendBatch,
        pkts: &[(&[u8], SocketAddr)],
    ) -> (usize, usize, Option<usize>) {
        let GsoSendBatch {
            arrays,
            cmsgs,
            runs,
        } = scratch;
        let mut failed = 0;
        let mut i = 0;
        let mut h = 0;
        while i < pkts.len() {
            let Some((sa, namelen)) = self.encode_dst(pkts[i].1) else {
                failed += 1;
                i += 1;
                continue;
            };
            let j = run_end(pkts, i);
            for (iov, (pkt, _)) in arrays.iovs[i..j].iter_mut().zip(&pkts[i..j]) {
                *iov = libc::iovec {
                    // The kernel only reads through iov_base on send.
                    iov_base: pkt.as_ptr().cast_mut().cast(),
                    iov_len: pkt.len(),
                };
            }
            arrays.addrs[h] = sa;
            arrays.link(h, i, j - i, namelen);
            if j - i > 1 {
                let hdr = &mut arrays.hdrs[h];
                let buf = &mut cmsgs[h];
                // SAFETY: CMSG_SPACE/CMSG_LEN are pure arithmetic.
                let (space, len) = unsafe { (libc::CMSG_SPACE(2), libc::CMSG_LEN(2)) };
                hdr.msg_hdr.msg_control = buf.as_mut_ptr().cast();
                hdr.msg_hdr.msg_controllen = space as usize;
                // SAFETY: the control buffer is 32 bytes, aligned for cmsghdr, and larger
                // than CMSG_SPACE(2); CMSG_FIRSTHDR points into it.
                unsafe {
                    let c = libc::CMSG_FIRSTHDR(&hdr.msg_hdr);
                    (*c).cmsg_level = libc::SOL_UDP;
                    (*c).cmsg_type = UDP_SEGMENT;
                    (*c).cmsg_len = len as usize;
                    std::ptr::write_unaligned(
                        libc::CMSG_DATA(c).cast::<u16>(),
                        pkts[i].0.len() as u16,
                    );
                }
            }
            runs[h] = (i, j - i);
            h += 1;
            i = j;
        }
        let runs = &runs[..h];
        let mut deadline: Option<Instant> = None;
        // SAFETY: headers 0..h were linked just above to iovecs over live caller
        // payloads (borrowed from `pkts` for this whole call), to address slots holding
        // `msg_namelen` valid bytes, and to the control buffers in `cmsgs` or none.
        let done = unsafe {
            self.send_headers(
                &mut arrays.hdrs[..h],
                |k| runs[k].1,
                &mut deadline,
                |err, k| {
                    // A refused run goes again as plain datagrams, which the stack may
                    // fragment; see `gso_refusal` for whether GSO stays on.
                    let refusal = if runs[k].1 > 1 {
                        gso_refusal(err)
                    } else {
                        None
                    };
                    if refusal == Some(GsoRefusal::ForGood) {
                        self.set_gso(false);
                    }
                    refusal.is_some()
                },
            )
        };
        let refused = match done.stop {
            Stop::GaveUp(k) => Some(runs[k].0),
            Stop::Done | Stop::Full => None,
        };
        (done.sent, failed + done.failed, refused)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_stop_at_a_new_address_a_longer_or_a_shorter_datagram() {
        let a: SocketAddr = "198.18.0.1:1".parse().unwrap();
        let b: SocketAddr = "198.18.0.2:1".parse().unwrap();
        let (big, small, tiny) = ([0u8; 100], [0u8; 60], [0u8; 10]);
        let pkts = [
            (&big[..], a),
            (&big[..], a),
            (&small[..], a),
            (&small[..], a),
            (&tiny[..], b),
            (&big[..], b),
        ];
        assert_eq!(run_end(&pkts, 0), 3, "a shorter one ends the run");
        assert_eq!(run_end(&pkts, 3), 4, "another address ends it");
        assert_eq!(run_end(&pkts, 4), 5, "a longer one ends it");
        let empty = [(&[][..], a), (&[][..], a)];
        assert_eq!(run_end(&empty, 0), 1, "empty datagrams go alone");
    }

    #[test]
    fn runs_keep_to_the_kernel_limits() {
        let a: SocketAddr = "198.18.0.1:1".parse().unwrap();
        let one = [0u8; 100];
        let many = vec![(&one[..], a); 100];
        assert_eq!(run_end(&many, 0), GSO_MAX_SEGMENTS);
        let big = [0u8; 20000];
        let few = vec![(&big[..], a); 5];
        assert_eq!(run_end(&few, 0), 3, "65000 bytes at most");
    }

    #[test]
    fn refusals_by_errno() {
        let e = io::Error::from_raw_os_error;
        assert_eq!(gso_refusal(&e(libc::EIO)), Some(GsoRefusal::ForGood));
        assert_eq!(
            gso_refusal(&e(libc::ENOPROTOOPT)),
            Some(GsoRefusal::ForGood)
        );
        assert_eq!(gso_refusal(&e(libc::EMSGSIZE)), Some(GsoRefusal::ThisRun));
        assert_eq!(gso_refusal(&e(libc::EINVAL)), Some(GsoRefusal::ThisRun));
        assert_eq!(gso_refusal(&e(libc::EPERM)), None);
    }
}
