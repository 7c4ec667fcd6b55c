//! A client's peer-info: `KEY=VALUE` lines it sends in its key-method 2 message,
//! saying what it is (`IV_VER`, `IV_PLAT`) and what it can do (`IV_CIPHERS`,
//! `IV_PROTO` flags, `IV_MTU`).

/// `IV_PROTO` bits this server reads.
pub mod proto {
    /// The client takes P_DATA_V2 with a peer-id.
    pub const DATA_V2: u32 = 1 << 1;
    /// The client sends its push request itself, without waiting.
    pub const REQUEST_PUSH: u32 = 1 << 2;
    /// The client can derive data keys with the TLS key exporter.
    pub const TLS_KEY_EXPORT: u32 = 1 << 3;
    /// The client announces its exit on the control channel.
    pub const CC_EXIT_NOTIFY: u32 = 1 << 7;
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PeerInfo(String);

impl PeerInfo {
    pub fn new(text: &str) -> PeerInfo {
        PeerInfo(text.to_owned())
    }

    /// The value of the first `KEY=` line.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0.lines().find_map(|line| {
            let (k, v) = line.split_once('=')?;
            (k == key).then_some(v.trim())
        })
    }

    /// A numeric value; `None` if absent or not a number.
    pub fn number(&self, key: &str) -> Option<u32> {
        self.get(key)?.parse().ok()
    }

    /// The client's `IV_CIPHERS` list, if it sent one.
    pub fn ciphers(&self) -> Option<impl Iterator<Item = &str>> {
        Some(self.get("IV_CIPHERS")?.split(':').filter(|c| !c.is_empty()))
    }

    /// Whether the client set all of `flags` in `IV_PROTO`.
    pub fn has_proto(&self, flags: u32) -> bool {
        self.number("IV_PROTO").is_some_and(|p| p & flags == flags)
    }

    /// A short description for logs and `show`: version and platform.
    pub fn describe(&self) -> String {
        format!(
            "{} on {}",
            self.get("IV_VER").unwrap_or("unknown version"),
            self.get("IV_PLAT").unwrap_or("unknown platform")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_read_by_key() {
        let p = PeerInfo::new(
            "IV_VER=2.6.14\nIV_PLAT=linux\nIV_PROTO=990\nIV_CIPHERS=AES-256-GCM:AES-128-GCM\nIV_MTU=1600\n",
        );
        assert_eq!(p.get("IV_VER"), Some("2.6.14"));
        assert_eq!(p.number("IV_MTU"), Some(1600));
        assert!(p.has_proto(proto::DATA_V2 | proto::TLS_KEY_EXPORT | proto::REQUEST_PUSH));
        assert_eq!(
            p.ciphers().unwrap().collect::<Vec<_>>(),
            ["AES-256-GCM", "AES-128-GCM"]
        );
        assert_eq!(p.describe(), "2.6.14 on linux");
        assert_eq!(PeerInfo::default().ciphers().map(|c| c.count()), None);
        assert!(!PeerInfo::new("IV_PROTO=junk").has_proto(proto::DATA_V2));
    }
}
