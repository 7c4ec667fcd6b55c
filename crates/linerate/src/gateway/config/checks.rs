//! What every table's checks share: where errors go, the directory key files are
//! found from, and the checks of values that several tables hold (integers in a
//! range, key files, address lists).

use super::error::Sink;
use super::values::addr_len;
use crate::keyfile::read_key_file;
use std::net::IpAddr;
use std::ops::{Range, RangeInclusive};
use std::path::{Path, PathBuf};
use toml::Spanned;

/// What the checks share: where errors go, and the directory key files are found from.
pub(super) struct Ctx<'s, 't> {
    pub(super) sink: &'s mut Sink<'t>,
    pub(super) base: &'s Path,
}

impl Ctx<'_, '_> {
    pub(super) fn err(&mut self, span: Range<usize>, key: &str, message: impl Into<String>) {
        self.sink.at(span, key, message);
    }

    /// `v` if it is in `range`, else an error.
    pub(super) fn int<T: TryFrom<i64>>(
        &mut self,
        v: &Spanned<i64>,
        range: RangeInclusive<i64>,
        key: &str,
    ) -> Option<T> {
        let n = *v.get_ref();
        if range.contains(&n) {
            T::try_from(n).ok()
        } else {
            self.err(
                v.span(),
                key,
                format!("{n} is out of range ({}..={})", range.start(), range.end()),
            );
            None
        }
    }

    /// A key file named in the file: resolved against the file's directory, read.
    pub(super) fn key_file(
        &mut self,
        v: &Spanned<String>,
        key: &str,
    ) -> Option<(PathBuf, zeroize::Zeroizing<[u8; 32]>)> {
        if v.get_ref().is_empty() {
            self.err(v.span(), key, "empty path");
            return None;
        }
        let path = self.base.join(v.get_ref());
        match read_key_file(&path) {
            Ok(k) => Some((path, k)),
            Err(e) => {
                self.err(v.span(), key, e);
                None
            }
        }
    }
}

impl Ctx<'_, '_> {
    /// The contents of a file the file names (a certificate, a key), resolved
    /// against the file's directory.
    pub(super) fn read_file(
        &mut self,
        v: &Spanned<String>,
        key: &str,
    ) -> Option<(PathBuf, Vec<u8>)> {
        if v.get_ref().is_empty() {
            self.err(v.span(), key, "empty path");
            return None;
        }
        let file = self.base.join(v.get_ref());
        match std::fs::read(&file) {
            Ok(b) => Some((file, b)),
            Err(e) => {
                self.err(
                    v.span(),
                    key,
                    format!("{}: cannot read: {e}", file.display()),
                );
                None
            }
        }
    }
}

impl Ctx<'_, '_> {
    /// The addresses (each with its network's prefix length) a table lists under
    /// `path.addresses`, or none; each reported where it does not parse, where the
    /// list has it already, or where `taken` names another holder of it.
    pub(super) fn addresses(
        &mut self,
        list: Option<&Spanned<Vec<Spanned<String>>>>,
        path: &str,
        taken: impl Fn(IpAddr) -> Option<String>,
    ) -> (Vec<(IpAddr, u8)>, bool) {
        let mut ok = true;
        let mut out: Vec<(IpAddr, u8)> = Vec::new();
        for (k, a) in list.iter().flat_map(|a| a.get_ref().iter()).enumerate() {
            let key = format!("{path}.addresses[{k}]");
            match addr_len(a.get_ref(), "an address with a prefix length") {
                Ok((addr, len)) => {
                    let before = taken(addr).or_else(|| {
                        out.iter()
                            .position(|&(b, _)| b == addr)
                            .map(|m| format!("{path}.addresses[{m}]"))
                    });
                    match before {
                        Some(before) => {
                            self.err(a.span(), &key, format!("{addr} is already {before}"));
                            ok = false;
                        }
                        None => out.push((addr, len)),
                    }
                }
                Err(e) => {
                    self.err(a.span(), &key, e);
                    ok = false;
                }
            }
        }
        (out, ok)
    }
}
