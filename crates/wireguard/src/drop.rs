//! Every reason the protocol refuses a packet, named once. The data path's nodes that
//! pass these on count each under its own name, so an operator sees exactly why
//! packets die; what the data path itself refuses (no buffer, an engine failure, no
//! room for headers) its nodes declare themselves.

macro_rules! drop_reasons {
    ($($variant:ident => $name:literal, $doc:literal;)*) => {
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum DropReason {
            $(#[doc = $doc] $variant,)*
        }

        impl DropReason {
            pub const ALL: &'static [DropReason] = &[$(DropReason::$variant,)*];
            pub const COUNT: usize = Self::ALL.len();

            pub const fn name(self) -> &'static str {
                match self { $(DropReason::$variant => $name,)* }
            }

            pub const fn index(self) -> usize {
                self as usize
            }

            /// One line that says what the reason means.
            pub const fn doc(self) -> &'static str {
                match self { $(DropReason::$variant => $doc,)* }
            }
        }
    };
}

drop_reasons! {
    Truncated => "truncated", "Shorter than the smallest message of its type.";
    WrongLength => "wrong-length", "A handshake message that is not exactly its type's size.";
    UnknownType => "unknown-type", "A message type other than 1 to 4, or non-zero reserved bytes.";
    NoPrivateKey => "no-private-key", "A handshake arrived while the device has no private key.";
    BadMac1 => "bad-mac1", "MAC1 did not verify.";
    CookieSent => "cookie-sent", "Under load without a valid MAC2: answered with a cookie reply.";
    RateLimited => "rate-limited", "Under load, the source exceeded its handshake rate.";
    HandshakeDecrypt => "handshake-decrypt", "An encrypted handshake field did not open.";
    ZeroSharedSecret => "zero-shared-secret", "A Diffie-Hellman result was all zeros.";
    UnknownPeer => "unknown-peer", "An initiation from a static key that is not a peer.";
    StaleTimestamp => "stale-timestamp", "An initiation not newer than the peer's last one (a replay).";
    InitiationFlood => "initiation-flood", "A second initiation from a peer within 20 ms.";
    UnknownIndex => "unknown-index", "A response, cookie reply or data packet for no session of ours.";
    BadCookieReply => "bad-cookie-reply", "A cookie reply that did not open.";
    KeyExpired => "key-expired", "Data on a keypair past REJECT_AFTER_TIME or its message limit.";
    Replay => "replay", "A counter already seen, or too far behind the window.";
    BadTag => "bad-tag", "The data packet's tag did not verify.";
    BadInnerPacket => "bad-inner-packet", "Decrypted data that is no IPv4 or IPv6 packet.";
    SourceNotAllowed => "source-not-allowed", "Inner source address outside the peer's allowed IPs.";
    NoPeerForDestination => "no-peer", "Outbound packet to an address no peer's allowed IPs cover.";
    NoEndpoint => "no-endpoint", "The peer has no known endpoint to send to.";
    StagedOverflow => "staged-overflow", "Packets waiting for a handshake exceeded the queue.";
    StagedExpired => "staged-expired", "Waited for a handshake that never completed (REKEY_ATTEMPT_TIME).";
    StagedDiscarded => "staged-discarded", "Waited for a session of a peer that was removed or whose keys were reset.";
    CryptoFailed => "crypto-failed", "A handshake's keys could not be installed (the key registry is full).";
}

impl From<wire::Error> for DropReason {
    /// Why a message that does not parse is refused: too short, a handshake of the
    /// wrong size, or anything else the message views refuse (an unknown type or
    /// non-zero reserved bytes).
    fn from(e: wire::Error) -> DropReason {
        match e {
            wire::Error::Truncated => DropReason::Truncated,
            wire::Error::WrongLength { .. } => DropReason::WrongLength,
            _ => DropReason::UnknownType,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::DropReason;

    #[test]
    fn parse_errors_map_to_their_reasons() {
        assert_eq!(
            DropReason::from(wire::Error::Truncated),
            DropReason::Truncated
        );
        let wrong = wire::Error::WrongLength {
            expected: 148,
            got: 147,
        };
        assert_eq!(DropReason::from(wrong), DropReason::WrongLength);
        assert_eq!(
            DropReason::from(wire::Error::UnknownType(9)),
            DropReason::UnknownType
        );
        assert_eq!(
            DropReason::from(wire::Error::ReservedNotZero),
            DropReason::UnknownType
        );
    }
}
