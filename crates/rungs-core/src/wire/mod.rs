//! Byte layouts on the wire: event payloads (S7), transport packets (S8),
//! the lockstep link messages (S5, S8, S9) and the relay protocol (S10).
//!
//! # The codec contract
//!
//! Every decoder here — the event payloads ([`ReportLayout`],
//! [`TimingLayout`]), [`packet`], [`turn`] and [`relay`], and
//! the relay's stored records built on the same toolkit — keeps one contract,
//! because each reads bytes an attacker or a broken peer may have chosen:
//!
//! * **Never panic.** Every read goes through [`Reader`], which
//!   checks the length before it reads; no decoder indexes received bytes.
//! * **Never allocate.** A decoder returns values and borrowed slices of
//!   its input. The one allowance: a decoded lockstep turn owns its
//!   commands, so [`turn`] allocates at most the message's own length (and
//!   nothing else with [`turn::decode_reusing`]).
//! * **Refuse trailing bytes.** A layout is exactly as long as its fields:
//!   bytes left over are an error ([`Reader::finish`]), never
//!   ignored, so one meaning has one byte string.
//! * **Validate in layout order.** Length bounds, then magic, version and
//!   kind, then each field in the order its table lists it, and the rules
//!   that join fields once they are read: the first thing wrong is the one
//!   reported, the same on every machine. The transport packet judges its
//!   magic and version before its length bounds ([`packet::peek`]): the
//!   bounds are this version's, and a packet of another version must be
//!   recognised as one whatever its length.
//! * **One error.** Every refusal is a [`DecodeError`] saying what
//!   was wrong and, where it applies, what was got and what was expected;
//!   the event payloads, whose errors reach the C API, carry it in
//!   [`crate::Error::Malformed`] with the layout's name.
//!
//! Encoders write little-endian fields in layout order through
//! [`PutLe`]: into a caller buffer with [`Writer`] (a
//! message is written whole or reported as not fitting) or into an owned
//! `Vec<u8>`. Each codec's module doc carries its layout tables and points
//! here for the contract.

pub(crate) mod cursor;
pub(crate) mod events;
pub mod packet;
pub mod relay;
pub mod turn;

pub use cursor::{DecodeError, PutLe, Reader, Writer};
pub use events::{
    check_detail, ReportLayout, TimingLayout, RA_TIMING_LEN, REPORT_DETAILED_LEN,
    REPORT_DETAILED_VERSION, REPORT_EXTENDED_LEN, REPORT_EXTENDED_VERSION, REPORT_LEN,
    REPORT_NEEDS_LEN, REPORT_NEEDS_VERSION, RTT_NONE, SEAT_NONE, TIMING_LEN, TS_EVENT_DATA_LEN,
    TS_FOG_BIAS,
};
pub use packet::{SessionKey, MAX_MESSAGE_BYTES, MAX_PACKET_BYTES};

/// The versions of the protocols two builds of rungs must share to play
/// together ([`protocol_versions`]). A lobby exchanges them before a game
/// and compares them with [`interoperates_with`](Self::interoperates_with):
/// two builds interoperate if and only if `wire`, `turn` and `relay` are all
/// equal. A build never speaks two versions of one protocol: a peer of
/// another version is refused (its datagrams dropped and counted, and the
/// mismatch reported: `docs/lockstep-session.md`), so a game of mismatched
/// builds fails at the lobby's check or at its first datagram, never later.
///
/// The event payloads ([`ReportLayout`], [`TimingLayout`]) are not a protocol of their own here:
/// each NETWORK_REPORT layout opens with its own version byte and the
/// engine chooses its layout; the lockstep turn carries the needs layout and
/// the relay's TimingReport too, so `turn` and `relay` change whenever what
/// they carry does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ProtocolVersions {
    /// The transport packet layout ([`packet::VERSION`]): every datagram
    /// of a peer-to-peer game and of a relay link.
    pub wire: u8,
    /// The lockstep session's link messages ([`turn::TURN_LAYOUT_VERSION`]):
    /// turns, clock pings, drop votes and decisions.
    pub turn: u8,
    /// The relay protocol ([`relay::VERSION`]): the Hello, Cookie and Reject
    /// datagrams and the relay's messages.
    pub relay: u8,
}

impl ProtocolVersions {
    /// Whether a build speaking `other` can play with this one: the lobby's
    /// check, `wire`, `turn` and `relay` all equal. Peer-to-peer games use
    /// `wire` and `turn`, relayed ones `wire` and `relay`, but a lobby
    /// compares all three so that one answer holds for either topology.
    pub fn interoperates_with(&self, other: &ProtocolVersions) -> bool {
        self == other
    }
}

/// The protocol versions this build speaks (see [`ProtocolVersions`]).
pub const fn protocol_versions() -> ProtocolVersions {
    ProtocolVersions {
        wire: packet::VERSION,
        turn: turn::TURN_LAYOUT_VERSION,
        relay: relay::VERSION,
    }
}
