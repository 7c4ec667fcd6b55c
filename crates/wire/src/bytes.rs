//! Fixed-offset reads and writes shared by the views.
//!
//! Every field access funnels through `fixed`/`fixed_mut`, so the only way a
//! view can panic is here, and only for a view built with `new_unchecked` over
//! a buffer shorter than the field it reads: `new_checked` rules that out.

pub(crate) fn fixed<const N: usize>(buf: &[u8], at: usize) -> &[u8; N] {
    match buf.get(at..).and_then(<[u8]>::first_chunk::<N>) {
        Some(field) => field,
        None => too_short(at.saturating_add(N), buf.len()),
    }
}

pub(crate) fn fixed_mut<const N: usize>(buf: &mut [u8], at: usize) -> &mut [u8; N] {
    let len = buf.len();
    match buf.get_mut(at..).and_then(<[u8]>::first_chunk_mut::<N>) {
        Some(field) => field,
        None => too_short(at.saturating_add(N), len),
    }
}

#[cold]
#[inline(never)]
fn too_short(need: usize, have: usize) -> ! {
    panic!("field ends at byte {need} but buffer has {have}: view built with new_unchecked")
}

pub(crate) fn u16_be(buf: &[u8], at: usize) -> u16 {
    u16::from_be_bytes(*fixed(buf, at))
}

pub(crate) fn set_u16_be(buf: &mut [u8], at: usize, v: u16) {
    *fixed_mut(buf, at) = v.to_be_bytes();
}

pub(crate) fn u32_be(buf: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(*fixed(buf, at))
}

pub(crate) fn set_u32_be(buf: &mut [u8], at: usize, v: u32) {
    *fixed_mut(buf, at) = v.to_be_bytes();
}

pub(crate) fn u32_le(buf: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(*fixed(buf, at))
}

pub(crate) fn set_u32_le(buf: &mut [u8], at: usize, v: u32) {
    *fixed_mut(buf, at) = v.to_le_bytes();
}

pub(crate) fn u64_le(buf: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(*fixed(buf, at))
}

pub(crate) fn set_u64_le(buf: &mut [u8], at: usize, v: u64) {
    *fixed_mut(buf, at) = v.to_le_bytes();
}

/// `buf[start..end]`, clamped so that it never panics: lengths come from
/// header fields that setters may have changed since validation.
pub(crate) fn clamped(buf: &[u8], start: usize, end: usize) -> &[u8] {
    let end = end.min(buf.len());
    let start = start.min(end);
    &buf[start..end]
}

pub(crate) fn clamped_mut(buf: &mut [u8], start: usize, end: usize) -> &mut [u8] {
    let end = end.min(buf.len());
    let start = start.min(end);
    &mut buf[start..end]
}
