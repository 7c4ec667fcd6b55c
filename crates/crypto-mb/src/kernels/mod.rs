//! The x86-64 vector kernels. Each is an `unsafe fn` with `#[target_feature]`, reached
//! only through a [`crate::dispatch::Kernels`] table, which is built only after the
//! runtime check for the features. Pointer work is limited to loading and storing
//! the lanes' blocks; everything else is arithmetic on registers.

pub(crate) mod chacha_avx2;
pub(crate) mod chacha_avx512;
pub(crate) mod poly_avx2;
pub(crate) mod poly_avx512;
pub(crate) mod poly_group_avx512;
pub(crate) mod poly_ifma;
