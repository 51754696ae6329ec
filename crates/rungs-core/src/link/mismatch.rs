//! A peer that speaks another protocol version: what is reported, and the
//! memory that reports each version once.
//!
//! Builds of different protocol versions cannot play together (a lobby
//! compares [`crate::ProtocolVersions`] first). When they meet anyway, the
//! receiver must say so, naming both versions, rather than drop the
//! datagrams silently until the link times out. The transport version is
//! byte 1 of every packet, before the authentication tag and covered by no
//! key this build can check: anyone who can send from (or spoof) a peer's
//! address can claim any version. So a mismatch is only ever *reported*:
//! the datagram is dropped and counted as before, nothing of the link
//! changes, and each (peer, version) is reported once, so a forger can
//! raise at most one informative report per version and peer, with a fixed
//! amount of memory ([`HeardVersions`]: 32 bytes per peer).

use std::fmt;

/// Which of rungs' protocols a version number is of ([`crate::ProtocolVersions`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Protocol {
    /// The transport packet layout ([`crate::wire::packet::VERSION`]).
    Wire,
    /// The lockstep session's link messages
    /// ([`crate::wire::turn::TURN_LAYOUT_VERSION`]).
    Turn,
    /// The relay protocol ([`crate::wire::relay::VERSION`]).
    Relay,
}

impl Protocol {
    /// Its name in messages: `"wire"`, `"turn"`, `"relay"`.
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Wire => "wire",
            Protocol::Turn => "turn",
            Protocol::Relay => "relay",
        }
    }
}

/// Datagrams (or messages) from a peer carry rungs' magic but another
/// version of `protocol`. Its `Display` names both versions: `seat 2 speaks
/// wire protocol 5; this build speaks 4`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ProtocolMismatch {
    /// The peer's seat: the seat bound to the address the datagram came from.
    pub seat: u8,
    /// Which protocol.
    pub protocol: Protocol,
    /// The version the peer's datagram carried.
    pub theirs: u8,
    /// The version this build speaks.
    pub ours: u8,
}

impl fmt::Display for ProtocolMismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "seat {} speaks {} protocol {}; this build speaks {}",
            self.seat,
            self.protocol.name(),
            self.theirs,
            self.ours
        )
    }
}

/// The other versions already heard from one peer, one bit per version
/// value, and the latest: enough to report each once and to name the
/// latest when the peer falls silent. Fixed size whatever a peer sends.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HeardVersions {
    seen: [u64; 4],
    latest: Option<u8>,
    /// When the latest was heard (µs, the caller's clock).
    latest_us: u64,
}

impl HeardVersions {
    /// Note `version` heard at `now_us`: `true` the first time it is heard
    /// (report it), `false` after.
    pub fn note(&mut self, version: u8, now_us: u64) -> bool {
        self.latest = Some(version);
        self.latest_us = now_us;
        let (word, bit) = (usize::from(version / 64), version % 64);
        let first = self.seen[word] & (1 << bit) == 0;
        self.seen[word] |= 1 << bit;
        first
    }

    /// Forget `version` (its report could not be queued: it is reported
    /// when next heard).
    pub fn forget(&mut self, version: u8) {
        let (word, bit) = (usize::from(version / 64), version % 64);
        self.seen[word] &= !(1 << bit);
    }

    /// The latest other version heard and when, if any.
    pub fn latest(&self) -> Option<(u8, u64)> {
        self.latest.map(|v| (v, self.latest_us))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_version_is_reported_once() {
        let mut heard = HeardVersions::default();
        assert_eq!(heard.latest(), None);
        assert!(heard.note(5, 10));
        assert!(!heard.note(5, 20));
        assert!(heard.note(255, 30));
        assert!(heard.note(0, 40));
        assert!(!heard.note(255, 50));
        assert_eq!(heard.latest(), Some((255, 50)));
        heard.forget(0);
        assert!(heard.note(0, 60));
    }

    #[test]
    fn the_message_names_both_versions() {
        let m = ProtocolMismatch {
            seat: 2,
            protocol: Protocol::Wire,
            theirs: 5,
            ours: 4,
        };
        assert_eq!(
            m.to_string(),
            "seat 2 speaks wire protocol 5; this build speaks 4"
        );
    }
}
