//! The relay protocol (S10), version 3: byte layouts, writers into caller
//! buffers, and validating decoders that keep the contract of every wire
//! codec (the [`super`] module docs: never panic, never allocate, no
//! trailing bytes, fields judged in the order of the tables below).
//!
//! Two layers:
//!
//! * **Datagrams** that travel outside any link, because no link exists yet:
//!   the client's Hello (which carries the ticket), the relay's Cookie (its
//!   return-routability challenge) and the relay's Reject. Their first byte
//!   is [`MAGIC`] (`0xB8`), so one UDP port can carry them next to
//!   transport packets (`0xB7`, [`crate::wire::packet`]).
//! * **Messages** carried as payloads of a transport link (S8: numbered,
//!   acknowledged, resent until acked, authenticated with the per-connection
//!   key). Their first byte is the message kind.
//!
//! All multi-byte integers are little-endian. Times are signed microseconds
//! (`i64`), ticks `u32`, client sequences `u32` (first order is 1).
//!
//! # Hello datagram (client → relay), 82 bytes
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 1 | magic `0xB8` |
//! | 1 | 1 | relay protocol version, `3` |
//! | 2 | 1 | kind `0x01` |
//! | 3 | 1 | reserved, `0` |
//! | 4 | 8 | connection nonce (`u64`, fresh per connection attempt; its low 32 bits are the link's session id; never 0) |
//! | 12 | 4 | `have_horizon` (`u32`): every tick below it is already held by the client |
//! | 16 | 42 | ticket (see [`crate::relay::ticket`]) |
//! | 58 | 16 | cookie: the one the relay's Cookie datagram gave for this nonce, or all zero before one came |
//! | 74 | 8 | tag: SipHash-2-4 (`u64`) keyed with the ticket's link secret over bytes 0..74 |
//!
//! The nonce sits at offset 4 in every version, so a relay can echo it in a
//! Reject for a version it does not speak.
//!
//! # Cookie datagram (relay → client), 28 bytes
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 1 | magic `0xB8` |
//! | 1 | 1 | version `3` |
//! | 2 | 1 | kind `0x03` |
//! | 3 | 1 | reserved, `0` |
//! | 4 | 8 | the Hello's connection nonce, echoed |
//! | 12 | 16 | cookie (opaque to the client, never all zero) |
//!
//! The relay answers a Hello whose cookie is missing, stale or made for
//! another address or nonce with a Cookie, and nothing else: a Welcome and
//! bundles only ever go to an address that has shown it receives what the
//! relay sends there (the return-routability check of QUIC's Retry and
//! DTLS's HelloVerifyRequest). The client sends its Hello again at once with
//! the cookie in it. A Cookie is smaller than the Hello that caused it.
//!
//! # Reject datagram (relay → client), 12 bytes
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 1 | magic `0xB8` |
//! | 1 | 1 | version `3` |
//! | 2 | 1 | kind `0x02` |
//! | 3 | 1 | reason ([`RejectReason`]) |
//! | 4 | 8 | the Hello's connection nonce, echoed |
//!
//! These twelve bytes are the same in every relay protocol version (see
//! [`MAGIC`]), and byte 1 is the version of the relay that sent it: a relay
//! refuses a Hello of another version with `WrongVersion` in its own
//! version, and a client reads a Reject of any version
//! ([`read_reject_of_any_version`]), so it can say "the relay speaks relay
//! protocol 4; this build speaks 3" instead of waiting for an answer it
//! cannot read. Clients released before this rule read only Rejects of
//! their own version and time out on another relay's; every client since
//! reads a Reject of any version, earlier relays' (whose Rejects had this
//! layout) and later ones' alike.
//!
//! Neither a Reject nor a Cookie is authenticated (the relay may not know
//! the key: the ticket may be forged); the echoed nonce stops an off-path
//! attacker, who would have to guess 64 bits. Both are smaller than the
//! Hello that caused them, so the relay cannot be used to amplify a
//! reflection attack.
//!
//! # Messages (inside link messages)
//!
//! Byte 0 is the kind; the fields follow at the offsets given. A message must
//! be exactly as long as its layout says (no trailing bytes).
//!
//! Relay → client:
//!
//! | kind | name | fields after the kind byte (offset: size field) | total |
//! |---|---|---|---|
//! | `0x01` | Welcome | 1: 1 seat, 2: 1 seat count, 3: 2 human seat mask, 5: 4 `tick_rate_millihz`, 9: 1 `bundle_interval`, 10: 1 `ai_order_delay`, 11: 2 `checksum_interval`, 13: 4 relay tick, 17: 4 `resume_from_tick`, 21: 4 horizon tick, 25: 4 highest client sequence judged (accepted or refused), 29: 1 flags (bit 0 match started, bit 1 reports every 16 ticks) | 30 |
//! | `0x02` | Presence | 1: 4 relay tick, 5: 1 seat count `n`, 6: `n` seat states ([`SeatPresence`]) | 6 + n |
//! | `0x03` | TurnBundle | 1: 1 flags (bit 0 `MORE`: another chunk of the same range follows), 2: 4 `from_tick`, 6: 4 `horizon_tick`, 10: 2 entry count, 12: entries | 12 + entries |
//! | `0x04` | Pong | 1: 8 echoed client send time `t0`, 9: 8 relay receive time `t1`, 17: 8 relay send time `t2` (relay match clock: µs since the match started, negative before), 25: 4 relay tick, 29: 4 highest client sequence judged | 33 |
//! | `0x05` | Desync | 1: 4 tick, 5: 2 mask of seats that reported, 7: 2 mask of seats that disagree | 9 |
//! | `0x06` | MatchOver | 1: 4 final tick (the last horizon), 5: 1 reason ([`MatchOverReason`]) | 6 |
//! | `0x07` | Timing | 1: 4 `from_tick`, 5: 4 `anchor_tick` (at most `from_tick`), 9: 8 `anchor_ms` (`u64`, when `anchor_tick` starts: ms after the match start), 17: 4 `tick_rate_millihz`, 21: 1 `bundle_interval`, 22: 1 `look_ahead` (ticks) | 23 |
//! | `0x08` | OrderRefused | 1: 4 the client sequence refused, 5: 1 reason ([`RefusalReason`]) | 6 |
//! | `0x09` | Ephemeral | 1: 4 tick, 5: 1 seat, 6: 2 length `L` (at most [`MAX_ORDER_BYTES`]), 8: `L` the order | 8 + L |
//!
//! A Timing message ([`TimingChange`], version 3) announces the timing from
//! `from_tick` on: ticks at and after it start at `anchor_ms + (t -
//! anchor_tick) * 1_000_000 / tick_rate_millihz` ms, the horizon moves every
//! `bundle_interval` ticks counted from `from_tick`, and a client runs tick
//! `t` when the relay clock reaches tick `t + bundle_interval + look_ahead`.
//! The anchor is where the clock's rate last changed: a change of the
//! look-ahead alone keeps it, so it never rounds the clock (version 2 had
//! `from_ms` instead, and each change re-anchored the clock on a whole ms).
//!
//! A TurnBundle entry is 8 bytes of header and the order:
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 4 | execution tick (`u32`), `from_tick <= tick < horizon_tick` |
//! | 4 | 1 | seat |
//! | 5 | 1 | entry kind ([`EntryKind`]): 0 order, 1 quit (its payload, possibly empty, is the seat's quit as a game order), 2 dropped (left after the reconnect grace) |
//! | 6 | 2 | payload length `L` (`u16`), at most [`MAX_ORDER_BYTES`]; 0 for dropped |
//! | 8 | `L` | the order, opaque to rungs |
//!
//! Entries are sorted by (tick, seat), with at most one entry per seat and
//! tick. A bundle authorises its receiver to execute every tick below
//! `horizon_tick` once the final chunk (no `MORE`) has arrived; a seat with
//! no entry at a tick executes a null order there.
//!
//! Client → relay:
//!
//! | kind | name | fields after the kind byte | total |
//! |---|---|---|---|
//! | `0x11` | OrderSubmit | 1: 4 client sequence (from 1), 5: 2 length `L`, 7: `L` order | 7 + L |
//! | `0x12` | ChecksumReport | 1: 4 tick `t` (the state before tick `t` runs: after `t - 1`, the initial state for 0), 5: 8 checksum (`u64`) | 13 |
//! | `0x13` | Ping | 1: 8 client send time `t0` (client clock, µs) | 9 |
//! | `0x14` | Quit | 1: 4 client sequence (sequenced like an order), 5: 2 length `L` (at most [`MAX_ORDER_BYTES`]), 7: `L` the seat's quit as a game order (may be empty) | 7 + L |
//! | `0x15` | ResyncRequest | 1: 4 the client's horizon | 5 |
//! | `0x16` | TimingReport | 1: 32 the needs NETWORK_REPORT payload (version 3, `docs/payloads.md`): processing time per tick, longest wait for a bundle, the round trips to the relay (worst, median, p90, latest; none yet, else at most [`MAX_REPORTED_RTT_MS`]), the interval's ticks, stalled ticks and stall time, the look-ahead its ticks needed (reference 0: none measured); the seat waited for is always none | 33 |
//! | `0x17` | EphemeralSubmit | 1: 2 length `L` (at most [`MAX_ORDER_BYTES`]), 3: `L` the order | 3 + L |
//!
//! Version 2 added Timing and TimingReport (adaptive timing in relay mode).
//! Version 3 added the cookie (the Hello's cookie field and the Cookie
//! datagram), OrderRefused, Ephemeral and EphemeralSubmit, gave Quit (and
//! the quit entry) the seat's quit order, anchored Timing where the rate
//! last changed, made TimingReport carry the needs layout, labelled
//! checksums with the tick they precede, and added the Reject reason
//! `LogLost`. A relay refuses Hellos of other versions with `WrongVersion`.

use super::cursor::{exact_len, DecodeError, PutLe, Reader, Writer};
use crate::report::ReportDetail;
use crate::wire::events::{ReportLayout, REPORT_NEEDS_LEN};
use siphasher::sip::SipHasher24;
use std::hash::Hasher;

/// First byte of a relay datagram (Hello, Cookie, Reject).
///
/// **In every version, past and future, a datagram's magic is byte 0, its
/// version byte 1 and its kind byte 2; a Hello's nonce is bytes 4–11; and a
/// Reject is kind `0x02` with its reason at byte 3 and the echoed nonce at
/// bytes 4–11**, so that a relay can refuse a Hello of any version
/// ([`DatagramPeek::OtherVersion`]) and a client can read a Reject of any
/// version ([`read_reject_of_any_version`]): the Reject's byte 1 is the
/// relay's own version, which the client names beside its own. A Reject may
/// grow at its end in a later version; these twelve bytes never move.
pub const MAGIC: u8 = 0xB8;
/// The relay protocol version this code speaks, byte 1 of every datagram
/// (see [`MAGIC`] for the rule that keeps it there); `relay` in
/// [`crate::ProtocolVersions`].
pub const VERSION: u8 = 3;
/// Datagram kind: Hello.
pub(crate) const KIND_HELLO: u8 = 0x01;
/// Datagram kind: Reject.
pub(crate) const KIND_REJECT: u8 = 0x02;
/// Datagram kind: Cookie (the relay's return-routability challenge).
pub(crate) const KIND_COOKIE: u8 = 0x03;

/// Bytes of a ticket inside a Hello.
pub const TICKET_BYTES: usize = 42;
/// Bytes of a cookie (inside a Hello and a Cookie datagram).
pub const COOKIE_BYTES: usize = 16;
/// Bytes of a Hello datagram.
pub const HELLO_BYTES: usize = 16 + TICKET_BYTES + COOKIE_BYTES + 8;
/// Bytes of a Reject datagram.
pub const REJECT_BYTES: usize = 12;
/// Bytes of a Cookie datagram.
pub const COOKIE_DATAGRAM_BYTES: usize = 12 + COOKIE_BYTES;
/// Where a Hello's tag starts: it covers every byte before it.
const HELLO_TAG_AT: usize = HELLO_BYTES - 8;
/// Most seats a relayed match has (the seat masks are 16 bits).
pub const MAX_SEATS: usize = 16;
/// Largest order payload.
pub const MAX_ORDER_BYTES: usize = 512;
/// Bytes of a bundle entry before its payload.
pub(crate) const ENTRY_HEADER_BYTES: usize = 8;
/// Bytes of a TurnBundle before its entries.
pub(crate) const BUNDLE_HEADER_BYTES: usize = 12;
/// Largest message this module writes or accepts (a transport message).
pub const MAX_MESSAGE_BYTES: usize = crate::wire::packet::MAX_MESSAGE_BYTES;
/// TurnBundle flag: another chunk of the same range follows.
pub(crate) const BUNDLE_MORE: u8 = 0x01;

// A Hello and a Reject fit in one datagram; a bundle holds one maximal order.
const _: () = assert!(HELLO_BYTES == 82);
// Nothing the relay sends to an address it has not verified is larger than
// the Hello that caused it.
const _: () = assert!(REJECT_BYTES < HELLO_BYTES && COOKIE_DATAGRAM_BYTES < HELLO_BYTES);
const _: () = assert!(BUNDLE_HEADER_BYTES + ENTRY_HEADER_BYTES + MAX_ORDER_BYTES <= 600);
const _: () = assert!(7 + MAX_ORDER_BYTES <= 600);

/// Relay → client message kinds.
pub(crate) const MSG_WELCOME: u8 = 0x01;
/// Presence.
pub(crate) const MSG_PRESENCE: u8 = 0x02;
/// TurnBundle.
pub(crate) const MSG_TURN_BUNDLE: u8 = 0x03;
/// Pong.
pub(crate) const MSG_PONG: u8 = 0x04;
/// Desync notice.
pub(crate) const MSG_DESYNC: u8 = 0x05;
/// Match over.
pub(crate) const MSG_MATCH_OVER: u8 = 0x06;
/// Timing change.
pub(crate) const MSG_TIMING: u8 = 0x07;
/// An order the relay refused.
pub(crate) const MSG_ORDER_REFUSED: u8 = 0x08;
/// An ephemeral order, live only.
pub(crate) const MSG_EPHEMERAL: u8 = 0x09;
/// Client → relay: OrderSubmit.
pub(crate) const MSG_ORDER_SUBMIT: u8 = 0x11;
/// ChecksumReport.
pub(crate) const MSG_CHECKSUM_REPORT: u8 = 0x12;
/// Ping.
pub(crate) const MSG_PING: u8 = 0x13;
/// Quit.
pub(crate) const MSG_QUIT: u8 = 0x14;
/// ResyncRequest.
pub(crate) const MSG_RESYNC_REQUEST: u8 = 0x15;
/// TimingReport.
pub(crate) const MSG_TIMING_REPORT: u8 = 0x16;
/// EphemeralSubmit.
pub(crate) const MSG_EPHEMERAL_SUBMIT: u8 = 0x17;

/// Welcome flag: the match clock has started.
pub(crate) const WELCOME_STARTED: u8 = 1;
/// Welcome flag: clients report every 16 ticks ([`Welcome::frequent_reports`]).
pub(crate) const WELCOME_FREQUENT_REPORTS: u8 = 2;

/// Bytes of a Timing message.
pub(crate) const TIMING_BYTES: usize = 23;
/// Bytes of a TimingReport message (the needs layout).
pub(crate) const TIMING_REPORT_BYTES: usize = 1 + REPORT_NEEDS_LEN;
/// Bytes of an OrderRefused message.
pub(crate) const ORDER_REFUSED_BYTES: usize = 6;
/// Largest round trip a TimingReport may carry, ms (the clock filter's
/// bound, [`crate::clock::MAX_ROUND_TRIP_US`]).
pub const MAX_REPORTED_RTT_MS: u32 = (crate::clock::offset::MAX_ROUND_TRIP_US / 1000) as u32;
/// Largest `anchor_ms` a Timing message may carry (2^48 ms, 8900 years):
/// keeps every clock computation far from overflow.
pub(crate) const MAX_TIMING_ANCHOR_MS: u64 = 1 << 48;
/// Largest tick rate, mHz (as the match setup allows).
pub(crate) const MAX_TICK_RATE_MILLIHZ: u32 = 1_000_000_000;

/// The timing the relay announces from a tick on (a Timing message): the
/// relay clock's rate and anchor, the bundle interval and the client's
/// look-ahead behind the horizon.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TimingChange {
    /// The first tick it applies to.
    pub from_tick: u32,
    /// The tick the clock counts from at this rate (where the rate last
    /// changed), at most `from_tick`.
    pub anchor_tick: u32,
    /// When `anchor_tick` starts, ms after the match start.
    pub anchor_ms: u64,
    /// Ticks per 1000 s from `from_tick` on.
    pub tick_rate_millihz: u32,
    /// The horizon moves every this many ticks from `from_tick` on, 1–255.
    pub bundle_interval: u8,
    /// Ticks a client runs behind the horizon (its jitter buffer), 1–255.
    pub look_ahead: u8,
}

impl TimingChange {
    /// Whether every field is in range.
    pub fn is_valid(&self) -> bool {
        (1..=MAX_TICK_RATE_MILLIHZ).contains(&self.tick_rate_millihz)
            && self.bundle_interval > 0
            && self.look_ahead > 0
            && self.anchor_tick <= self.from_tick
            && self.anchor_ms <= MAX_TIMING_ANCHOR_MS
    }
}

/// Why the relay refused a Hello.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum RejectReason {
    /// The ticket's MAC or the Hello's tag does not verify, or its fields are invalid.
    BadTicket = 1,
    /// The ticket's expiry has passed.
    Expired = 2,
    /// The Hello speaks another relay protocol version.
    WrongVersion = 3,
    /// The seat has left the match (quit or dropped after the grace).
    SeatLeft = 4,
    /// The match is over.
    MatchOver = 5,
    /// No match with the ticket's id on this relay.
    UnknownMatch = 6,
    /// A replay: the Hello's cookie is no newer than the one that opened
    /// the seat's latest connection, or it carries the live connection's
    /// nonce from another address. A genuine client retries with a fresh
    /// nonce.
    Replayed = 7,
    /// Another connection uses the nonce's low 32 bits; retry with a fresh nonce.
    ConnectionIdTaken = 8,
    /// The relay holds as many connections as it may.
    RelayFull = 9,
    /// The client holds ticks the relay's turn log does not: the relay
    /// restarted without its state (or lost the tail of its log beyond its
    /// sync interval), so the match cannot go on from where this client is.
    /// Final: the lobby restarts the match (from a saved game).
    LogLost = 10,
}

impl RejectReason {
    /// Every reason.
    pub const ALL: [RejectReason; 10] = [
        RejectReason::BadTicket,
        RejectReason::Expired,
        RejectReason::WrongVersion,
        RejectReason::SeatLeft,
        RejectReason::MatchOver,
        RejectReason::UnknownMatch,
        RejectReason::Replayed,
        RejectReason::ConnectionIdTaken,
        RejectReason::RelayFull,
        RejectReason::LogLost,
    ];

    /// The reason with wire value `v`.
    pub fn from_u8(v: u8) -> Option<RejectReason> {
        RejectReason::ALL.iter().copied().find(|r| *r as u8 == v)
    }

    /// Whether a client may retry the same ticket with a fresh nonce.
    pub fn is_retryable(self) -> bool {
        matches!(
            self,
            RejectReason::Replayed | RejectReason::ConnectionIdTaken | RejectReason::RelayFull
        )
    }
}

/// What a seat is doing, as the relay sees it (Presence; informational: the
/// deterministic seat-left events are bundle entries).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum SeatPresence {
    /// An AI (or empty) seat: computed locally by every client.
    Ai = 0,
    /// A human seat that has not said Hello yet.
    Loading = 1,
    /// A human seat with a live connection.
    Connected = 2,
    /// A human seat whose connection was lost; inside the reconnect grace.
    Reconnecting = 3,
    /// A human seat that quit or was dropped.
    Left = 4,
}

impl SeatPresence {
    /// The state with wire value `v`.
    pub fn from_u8(v: u8) -> Option<SeatPresence> {
        Some(match v {
            0 => SeatPresence::Ai,
            1 => SeatPresence::Loading,
            2 => SeatPresence::Connected,
            3 => SeatPresence::Reconnecting,
            4 => SeatPresence::Left,
            _ => return None,
        })
    }
}

/// Why the relay refused an order (OrderRefused). The order is not in the
/// turn log and never will be; the orders after it are judged on their own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum RefusalReason {
    /// The seat's orders already reach `max_queued_ticks` past the horizon
    /// (one order per seat and tick: a flood cannot grow the relay's memory).
    QueueFull = 1,
    /// The match ends (its tick limit) before a tick could take the order.
    TickLimit = 2,
    /// The seat's quit is already sequenced: nothing of it runs after.
    Leaving = 3,
}

impl RefusalReason {
    /// Every reason.
    pub const ALL: [RefusalReason; 3] = [
        RefusalReason::QueueFull,
        RefusalReason::TickLimit,
        RefusalReason::Leaving,
    ];

    /// The reason with wire value `v`.
    pub fn from_u8(v: u8) -> Option<RefusalReason> {
        RefusalReason::ALL.iter().copied().find(|r| *r as u8 == v)
    }
}

/// What a bundle entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum EntryKind {
    /// A human order.
    Order = 0,
    /// The seat quit (sequenced like an order); the payload, possibly
    /// empty, is the seat's quit as a game order, which runs on the tick
    /// the seat leaves.
    Quit = 1,
    /// The seat was dropped after its reconnect grace ran out.
    Dropped = 2,
}

impl EntryKind {
    /// The kind with wire value `v`.
    pub fn from_u8(v: u8) -> Option<EntryKind> {
        Some(match v {
            0 => EntryKind::Order,
            1 => EntryKind::Quit,
            2 => EntryKind::Dropped,
            _ => return None,
        })
    }
}

/// Why a match ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum MatchOverReason {
    /// Every human seat left.
    AllLeft = 0,
    /// The match reached its tick limit.
    TickLimit = 1,
    /// The relay's operator ended it (or the relay shut down).
    Ended = 2,
}

impl MatchOverReason {
    /// The reason with wire value `v`.
    pub fn from_u8(v: u8) -> Option<MatchOverReason> {
        Some(match v {
            0 => MatchOverReason::AllLeft,
            1 => MatchOverReason::TickLimit,
            2 => MatchOverReason::Ended,
            _ => return None,
        })
    }
}

// ---------------------------------------------------------------------------
// Datagrams

/// A Hello, decoded (the tag is checked separately with [`verify_hello_tag`],
/// because the key comes from the ticket).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hello {
    /// Fresh per connection attempt; low 32 bits are the link's session id.
    pub nonce: u64,
    /// Every tick below it is already held by the client.
    pub have_horizon: u32,
    /// The ticket bytes.
    pub ticket: [u8; TICKET_BYTES],
    /// The cookie the relay gave for this nonce ([`NO_COOKIE`] before one came).
    pub cookie: [u8; COOKIE_BYTES],
}

/// A Hello's cookie field before the relay gave one.
pub const NO_COOKIE: [u8; COOKIE_BYTES] = [0; COOKIE_BYTES];

/// A Cookie datagram, decoded: the relay's challenge for the Hello with
/// this nonce.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CookieChallenge {
    /// The Hello's nonce, echoed.
    pub nonce: u64,
    /// What the client puts in its next Hello (never [`NO_COOKIE`]).
    pub cookie: [u8; COOKIE_BYTES],
}

/// A Reject, decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reject {
    /// Why.
    pub reason: RejectReason,
    /// The Hello's nonce.
    pub nonce: u64,
}

/// A Reject read by the fields every version keeps in place
/// ([`read_reject_of_any_version`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AnyReject {
    /// The relay protocol version the relay speaks (the Reject's byte 1).
    pub version: u8,
    /// The reason byte as sent: a relay of another version may use reasons
    /// this build does not know, so it is not decoded. `WrongVersion` (3)
    /// keeps its value in every version.
    pub reason: u8,
    /// The Hello's nonce, echoed.
    pub nonce: u64,
}

/// The datagram's relay kind after checking magic, and — for a version this
/// build does not speak — the nonce to echo in a `WrongVersion` Reject.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DatagramPeek {
    /// [`VERSION`], kind as given (not yet validated further).
    Current(u8),
    /// Another version; the nonce (when the datagram is long enough to hold one).
    OtherVersion(Option<u64>),
}

/// Check the magic and read version and kind.
pub(crate) fn peek_datagram(bytes: &[u8]) -> Result<DatagramPeek, DecodeError> {
    let mut r = Reader::new(bytes);
    let magic = r.u8()?;
    if magic != MAGIC {
        return Err(DecodeError::BadMagic {
            got: magic,
            expected: MAGIC,
        });
    }
    let [version, kind] = r.array()?;
    if version != VERSION {
        let _reserved = r.u8();
        return Ok(DatagramPeek::OtherVersion(r.u64().ok()));
    }
    Ok(DatagramPeek::Current(kind))
}

/// A datagram of this version and `kind`, exactly `len` bytes long: a
/// reader past its magic, version and kind.
fn datagram(bytes: &[u8], kind: u8, len: usize) -> Result<Reader<'_>, DecodeError> {
    let peeked = peek_datagram(bytes)?;
    let mut r = Reader::new(bytes);
    let [_magic, version, got] = r.array()?;
    match peeked {
        DatagramPeek::Current(k) if k == kind => {}
        DatagramPeek::Current(_) => return Err(DecodeError::UnknownKind(got)),
        DatagramPeek::OtherVersion(_) => {
            return Err(DecodeError::BadVersion {
                got: version,
                expected: VERSION,
            })
        }
    }
    exact_len(bytes.len(), len)?;
    Ok(r)
}

fn hello_tag(key: &[u8; 16], body: &[u8]) -> u64 {
    let (mut k0, mut k1) = ([0u8; 8], [0u8; 8]);
    k0.copy_from_slice(&key[..8]);
    k1.copy_from_slice(&key[8..]);
    let mut h = SipHasher24::new_with_keys(u64::from_le_bytes(k0), u64::from_le_bytes(k1));
    h.write(body);
    h.finish()
}

/// Write a Hello tagged with `link_secret` into `buf`; its length, or `None`
/// when `buf` is shorter than [`HELLO_BYTES`].
pub fn write_hello(hello: &Hello, link_secret: &[u8; 16], buf: &mut [u8]) -> Option<usize> {
    let out = buf.get_mut(..HELLO_BYTES)?;
    let mut w = Writer::new(out, HELLO_TAG_AT);
    w.put(&[MAGIC, VERSION, KIND_HELLO, 0]);
    w.u64(hello.nonce);
    w.u32(hello.have_horizon);
    w.put(&hello.ticket);
    w.put(&hello.cookie);
    let body_len = w.finish()?;
    let tag = hello_tag(link_secret, &out[..body_len]);
    out[body_len..].copy_from_slice(&tag.to_le_bytes());
    Some(HELLO_BYTES)
}

/// Decode a Hello of this version (the tag is not checked here).
pub fn read_hello(bytes: &[u8]) -> Result<Hello, DecodeError> {
    let mut r = datagram(bytes, KIND_HELLO, HELLO_BYTES)?;
    let reserved = r.u8()?;
    let nonce = r.u64()?;
    if reserved != 0 || nonce == 0 {
        return Err(DecodeError::Invalid(
            "a Hello's reserved byte must be 0 and its nonce not 0",
        ));
    }
    let have_horizon = r.u32()?;
    let ticket = r.array()?;
    let cookie = r.array()?;
    let _tag = r.u64()?;
    r.finish()?;
    Ok(Hello {
        nonce,
        have_horizon,
        ticket,
        cookie,
    })
}

/// Whether a Hello's tag is right for `link_secret` (one 64-bit comparison).
pub fn verify_hello_tag(bytes: &[u8], link_secret: &[u8; 16]) -> bool {
    if bytes.len() != HELLO_BYTES {
        return false;
    }
    let (body, tag) = bytes.split_at(HELLO_TAG_AT);
    Reader::new(tag)
        .u64()
        .is_ok_and(|tag| hello_tag(link_secret, body) == tag)
}

/// Write a Cookie datagram into `buf`; its length, or `None` when `buf` is
/// too short.
pub fn write_cookie(challenge: &CookieChallenge, buf: &mut [u8]) -> Option<usize> {
    let mut w = Writer::new(buf, COOKIE_DATAGRAM_BYTES);
    w.put(&[MAGIC, VERSION, KIND_COOKIE, 0]);
    w.u64(challenge.nonce);
    w.put(&challenge.cookie);
    w.finish()
}

/// Decode a Cookie datagram.
pub fn read_cookie(bytes: &[u8]) -> Result<CookieChallenge, DecodeError> {
    let mut r = datagram(bytes, KIND_COOKIE, COOKIE_DATAGRAM_BYTES)?;
    let reserved = r.u8()?;
    let nonce = r.u64()?;
    let cookie = r.array()?;
    r.finish()?;
    if reserved != 0 || cookie == NO_COOKIE {
        return Err(DecodeError::Invalid(
            "a Cookie's reserved byte must be 0 and its cookie not all zero",
        ));
    }
    Ok(CookieChallenge { nonce, cookie })
}

/// Write a Reject into `buf`; its length, or `None` when `buf` is too short.
pub fn write_reject(reject: &Reject, buf: &mut [u8]) -> Option<usize> {
    let mut w = Writer::new(buf, REJECT_BYTES);
    w.put(&[MAGIC, VERSION, KIND_REJECT, reject.reason as u8]);
    w.u64(reject.nonce);
    w.finish()
}

/// Decode a Reject.
pub fn read_reject(bytes: &[u8]) -> Result<Reject, DecodeError> {
    let mut r = datagram(bytes, KIND_REJECT, REJECT_BYTES)?;
    let reason = RejectReason::from_u8(r.u8()?).ok_or(DecodeError::Invalid(
        "a Reject's reason must be a known one",
    ))?;
    let nonce = r.u64()?;
    r.finish()?;
    Ok(Reject { reason, nonce })
}

/// Read a Reject of any relay protocol version by the twelve bytes every
/// version keeps in place ([`MAGIC`]): magic, version, kind `0x02`, reason,
/// nonce; a longer Reject (a later version's) is read by those bytes too.
/// A client that gets one of another version than [`VERSION`] for its own
/// nonce knows the relay speaks that version. Like every Reject it is not
/// authenticated: only the echoed 64-bit nonce binds it to the Hello.
pub fn read_reject_of_any_version(bytes: &[u8]) -> Result<AnyReject, DecodeError> {
    let mut r = Reader::new(bytes);
    let [magic, version, kind, reason] = r.array()?;
    if magic != MAGIC {
        return Err(DecodeError::BadMagic {
            got: magic,
            expected: MAGIC,
        });
    }
    if kind != KIND_REJECT {
        return Err(DecodeError::UnknownKind(kind));
    }
    let nonce = r.u64()?;
    Ok(AnyReject {
        version,
        reason,
        nonce,
    })
}

// ---------------------------------------------------------------------------
// Messages

/// The match setup and the client's place in it, sent on every Welcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Welcome {
    /// The client's seat.
    pub seat: u8,
    /// Seats in the match (1–16).
    pub seat_count: u8,
    /// Bit `s`: seat `s` is human (else AI, computed by every client).
    pub human_mask: u16,
    /// Relay ticks per 1000 s (30000 = 30 ticks/s).
    pub tick_rate_millihz: u32,
    /// Ticks per bundle (1–255).
    pub bundle_interval: u8,
    /// An AI decision at tick `t` yields an order for `t + ai_order_delay` (0–8).
    pub ai_order_delay: u8,
    /// Clients report a checksum every this many ticks (0: never).
    pub checksum_interval: u16,
    /// The relay's tick now (0 until the match starts).
    pub relay_tick: u32,
    /// The first tick of the bundles that follow.
    pub resume_from_tick: u32,
    /// The relay's horizon now: bundles up to it follow at once.
    pub horizon_tick: u32,
    /// The highest client sequence the relay judged from this seat
    /// (accepted, or refused with an OrderRefused sent before this).
    pub highest_accepted_sequence: u32,
    /// Whether the match clock has started.
    pub match_started: bool,
    /// Clients send a TimingReport every 16 ticks (the match's policy is
    /// `tracking`, which reads reports on its own cadence, docs/tracking.md);
    /// otherwise on ticks 32, 64, then every 128 (S3).
    pub frequent_reports: bool,
}

/// One entry of a TurnBundle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BundleEntry<'a> {
    /// Execution tick.
    pub tick: u32,
    /// Seat.
    pub seat: u8,
    /// What it is.
    pub kind: EntryKind,
    /// The order (for a quit, the seat's quit order; empty for dropped).
    pub payload: &'a [u8],
}

/// A TurnBundle chunk, validated, borrowing the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TurnBundle<'a> {
    /// Another chunk of the same range follows.
    pub more: bool,
    /// First tick covered.
    pub from_tick: u32,
    /// Ticks below it are authorised once the final chunk arrives.
    pub horizon_tick: u32,
    entry_count: u16,
    entries: &'a [u8],
}

impl<'a> TurnBundle<'a> {
    /// Number of entries.
    pub fn entry_count(&self) -> usize {
        usize::from(self.entry_count)
    }

    /// The entries in order.
    pub fn entries(&self) -> BundleEntries<'a> {
        BundleEntries {
            rest: Reader::new(self.entries),
            left: self.entry_count,
        }
    }
}

/// Iterator over validated bundle entries.
#[derive(Debug, Clone)]
pub struct BundleEntries<'a> {
    rest: Reader<'a>,
    left: u16,
}

impl<'a> Iterator for BundleEntries<'a> {
    type Item = BundleEntry<'a>;

    fn next(&mut self) -> Option<BundleEntry<'a>> {
        if self.left == 0 {
            return None;
        }
        // Validated by `read_server_message`; a failure ends the iteration.
        let entry = read_entry(&mut self.rest).ok()?;
        self.left -= 1;
        Some(entry)
    }
}

/// One bundle entry at the reader: its header, then its payload.
fn read_entry<'a>(r: &mut Reader<'a>) -> Result<BundleEntry<'a>, DecodeError> {
    let tick = r.u32()?;
    let seat = r.u8()?;
    let kind = EntryKind::from_u8(r.u8()?).ok_or(DecodeError::Invalid(
        "a bundle entry's kind must be a known one",
    ))?;
    let len = usize::from(r.u16()?);
    if len > MAX_ORDER_BYTES || (kind == EntryKind::Dropped && len != 0) {
        return Err(DecodeError::Invalid(
            "a bundle entry's order must be at most MAX_ORDER_BYTES, and empty for a drop",
        ));
    }
    Ok(BundleEntry {
        tick,
        seat,
        kind,
        payload: r.take(len)?,
    })
}

/// A relay → client message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerMessage<'a> {
    /// Accepted; the setup and where the bundles resume.
    Welcome(Welcome),
    /// Seat states at a relay tick; `states[..seat_count]` are valid.
    Presence {
        /// Relay tick.
        tick: u32,
        /// Seats.
        seat_count: u8,
        /// Per seat.
        states: [SeatPresence; MAX_SEATS],
    },
    /// Ticks authorised for execution.
    TurnBundle(TurnBundle<'a>),
    /// Answer to a Ping.
    Pong {
        /// The Ping's client send time.
        t0_us: i64,
        /// Relay receive time (match clock).
        t1_us: i64,
        /// Relay send time (match clock).
        t2_us: i64,
        /// Relay tick at `t2`.
        relay_tick: u32,
        /// Highest client sequence judged from this seat.
        highest_accepted_sequence: u32,
    },
    /// Clients disagree about the state at `tick`.
    Desync {
        /// The tick.
        tick: u32,
        /// Seats whose checksums were compared.
        reported_mask: u16,
        /// Seats outside the largest agreeing group (all of them on a tie).
        disagreeing_mask: u16,
    },
    /// The match ended; no more bundles.
    MatchOver {
        /// The last horizon.
        final_tick: u32,
        /// Why.
        reason: MatchOverReason,
    },
    /// The timing from a tick on (version 2).
    Timing(TimingChange),
    /// The relay refused the order with this client sequence (version 3).
    OrderRefused {
        /// Its client sequence.
        sequence: u32,
        /// Why.
        reason: RefusalReason,
    },
    /// An ephemeral order (version 3): it runs with tick `tick` on the
    /// clients that are live when the relay broadcasts the tick, and on no
    /// other (never in a catch-up, the turn log or a replay).
    Ephemeral {
        /// The tick it comes with.
        tick: u32,
        /// Its seat.
        seat: u8,
        /// The order.
        payload: &'a [u8],
    },
}

/// A client → relay message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientMessage<'a> {
    /// An order to sequence.
    OrderSubmit {
        /// Client sequence, from 1.
        sequence: u32,
        /// The order.
        payload: &'a [u8],
    },
    /// A state checksum after executing `tick`.
    ChecksumReport {
        /// Tick.
        tick: u32,
        /// Checksum.
        checksum: u64,
    },
    /// A clock sample request.
    Ping {
        /// Client send time, µs.
        t0_us: i64,
    },
    /// Leave the match (sequenced like an order).
    Quit {
        /// Client sequence.
        sequence: u32,
        /// The seat's quit as a game order (may be empty), version 3.
        payload: &'a [u8],
    },
    /// The client saw a bundle gap: resend from `horizon`.
    ResyncRequest {
        /// The client's horizon.
        horizon: u32,
    },
    /// What the client measured over its last report interval (S3), for
    /// the relay's timing policy (version 2; the needs layout since 3).
    TimingReport(crate::report::Report),
    /// An ephemeral order (version 3): not sequenced by client sequence,
    /// never resent, never in the turn log (voice, pings on the map).
    EphemeralSubmit {
        /// The order.
        payload: &'a [u8],
    },
}

/// The rest of a message: a 2-byte length (at most [`MAX_ORDER_BYTES`]) and
/// that many bytes, which end the message.
fn length_prefixed<'a>(r: &mut Reader<'a>) -> Result<&'a [u8], DecodeError> {
    let len = usize::from(r.u16()?);
    if len > MAX_ORDER_BYTES {
        return Err(DecodeError::Invalid(
            "an order must be at most MAX_ORDER_BYTES long",
        ));
    }
    let payload = r.take(len)?;
    r.finish()?;
    Ok(payload)
}

/// A reader past the kind byte of a message that must be `len` bytes.
fn fixed(bytes: &[u8], len: usize) -> Result<Reader<'_>, DecodeError> {
    exact_len(bytes.len(), len)?;
    let mut r = Reader::new(bytes);
    r.u8()?;
    Ok(r)
}

/// Decode and validate a relay → client message.
pub fn read_server_message(bytes: &[u8]) -> Result<ServerMessage<'_>, DecodeError> {
    let mut r = Reader::new(bytes);
    let kind = r.u8()?;
    if bytes.len() > MAX_MESSAGE_BYTES {
        return Err(DecodeError::TooLong {
            got: bytes.len(),
            expected: MAX_MESSAGE_BYTES,
        });
    }
    match kind {
        MSG_WELCOME => {
            let mut r = fixed(bytes, 30)?;
            let [seat, seat_count] = r.array()?;
            let human_mask = r.u16()?;
            let tick_rate_millihz = r.u32()?;
            let [bundle_interval, ai_order_delay] = r.array()?;
            let checksum_interval = r.u16()?;
            let relay_tick = r.u32()?;
            let resume_from_tick = r.u32()?;
            let horizon_tick = r.u32()?;
            let highest_accepted_sequence = r.u32()?;
            let flags = r.u8()?;
            r.finish()?;
            let w = Welcome {
                seat,
                seat_count,
                human_mask,
                tick_rate_millihz,
                bundle_interval,
                ai_order_delay,
                checksum_interval,
                relay_tick,
                resume_from_tick,
                horizon_tick,
                highest_accepted_sequence,
                match_started: flags & WELCOME_STARTED != 0,
                frequent_reports: flags & WELCOME_FREQUENT_REPORTS != 0,
            };
            let seats = usize::from(w.seat_count);
            let valid = (1..=MAX_SEATS).contains(&seats)
                && w.seat < w.seat_count
                && (seats == MAX_SEATS || w.human_mask >> seats == 0)
                && w.human_mask & (1 << w.seat) != 0
                && w.tick_rate_millihz > 0
                && w.bundle_interval > 0
                && w.ai_order_delay <= 8
                && w.resume_from_tick <= w.horizon_tick
                && flags & !(WELCOME_STARTED | WELCOME_FREQUENT_REPORTS) == 0;
            if !valid {
                return Err(DecodeError::Invalid(
                    "a Welcome's setup must be in range (seat, seats, human mask, rates, flags)",
                ));
            }
            Ok(ServerMessage::Welcome(w))
        }
        MSG_PRESENCE => {
            let tick = r.u32()?;
            let seat_count = r.u8()?;
            let n = usize::from(seat_count);
            if !(1..=MAX_SEATS).contains(&n) {
                return Err(DecodeError::Invalid(
                    "a Presence's seat count must be 1 to 16",
                ));
            }
            exact_len(bytes.len(), 6 + n)?;
            let mut states = [SeatPresence::Ai; MAX_SEATS];
            for state in &mut states[..n] {
                *state = SeatPresence::from_u8(r.u8()?).ok_or(DecodeError::Invalid(
                    "a seat's presence must be a known one",
                ))?;
            }
            r.finish()?;
            Ok(ServerMessage::Presence {
                tick,
                seat_count,
                states,
            })
        }
        MSG_TURN_BUNDLE => {
            let flags = r.u8()?;
            let from_tick = r.u32()?;
            let horizon_tick = r.u32()?;
            let entry_count = r.u16()?;
            if flags & !BUNDLE_MORE != 0 || from_tick >= horizon_tick {
                return Err(DecodeError::Invalid(
                    "a TurnBundle's flags must be known and its range not empty",
                ));
            }
            let entries = r.rest();
            let mut e = Reader::new(entries);
            let mut previous: Option<(u32, u8)> = None;
            for _ in 0..entry_count {
                let entry = read_entry(&mut e)?;
                if entry.tick < from_tick
                    || entry.tick >= horizon_tick
                    || usize::from(entry.seat) >= MAX_SEATS
                    || previous.is_some_and(|p| p >= (entry.tick, entry.seat))
                {
                    return Err(DecodeError::Invalid(
                        "bundle entries must lie in the range, in (tick, seat) order, one per seat and tick",
                    ));
                }
                previous = Some((entry.tick, entry.seat));
            }
            e.finish()?;
            Ok(ServerMessage::TurnBundle(TurnBundle {
                more: flags & BUNDLE_MORE != 0,
                from_tick,
                horizon_tick,
                entry_count,
                entries,
            }))
        }
        MSG_PONG => {
            let mut r = fixed(bytes, 33)?;
            let message = ServerMessage::Pong {
                t0_us: r.i64()?,
                t1_us: r.i64()?,
                t2_us: r.i64()?,
                relay_tick: r.u32()?,
                highest_accepted_sequence: r.u32()?,
            };
            r.finish()?;
            Ok(message)
        }
        MSG_DESYNC => {
            let mut r = fixed(bytes, 9)?;
            let tick = r.u32()?;
            let reported_mask = r.u16()?;
            let disagreeing_mask = r.u16()?;
            r.finish()?;
            if disagreeing_mask & !reported_mask != 0 || disagreeing_mask == 0 {
                return Err(DecodeError::Invalid(
                    "a Desync's disagreeing seats must be some of those that reported",
                ));
            }
            Ok(ServerMessage::Desync {
                tick,
                reported_mask,
                disagreeing_mask,
            })
        }
        MSG_MATCH_OVER => {
            let mut r = fixed(bytes, 6)?;
            let final_tick = r.u32()?;
            let reason = MatchOverReason::from_u8(r.u8()?).ok_or(DecodeError::Invalid(
                "a MatchOver's reason must be a known one",
            ))?;
            r.finish()?;
            Ok(ServerMessage::MatchOver { final_tick, reason })
        }
        MSG_TIMING => {
            let mut r = fixed(bytes, TIMING_BYTES)?;
            let change = TimingChange {
                from_tick: r.u32()?,
                anchor_tick: r.u32()?,
                anchor_ms: r.u64()?,
                tick_rate_millihz: r.u32()?,
                bundle_interval: r.u8()?,
                look_ahead: r.u8()?,
            };
            r.finish()?;
            if !change.is_valid() {
                return Err(DecodeError::Invalid(
                    "a Timing message's fields must be in range",
                ));
            }
            Ok(ServerMessage::Timing(change))
        }
        MSG_ORDER_REFUSED => {
            let mut r = fixed(bytes, ORDER_REFUSED_BYTES)?;
            let sequence = r.u32()?;
            let reason = RefusalReason::from_u8(r.u8()?).ok_or(DecodeError::Invalid(
                "an OrderRefused's reason must be a known one",
            ))?;
            r.finish()?;
            if sequence == 0 {
                return Err(DecodeError::Invalid(
                    "an OrderRefused's client sequence must not be 0",
                ));
            }
            Ok(ServerMessage::OrderRefused { sequence, reason })
        }
        MSG_EPHEMERAL => {
            let tick = r.u32()?;
            let seat = r.u8()?;
            let payload = length_prefixed(&mut r)?;
            if usize::from(seat) >= MAX_SEATS {
                return Err(DecodeError::Invalid("an Ephemeral's seat must be 0 to 15"));
            }
            Ok(ServerMessage::Ephemeral {
                tick,
                seat,
                payload,
            })
        }
        _ => Err(DecodeError::UnknownKind(kind)),
    }
}

/// Decode and validate a client → relay message.
pub fn read_client_message(bytes: &[u8]) -> Result<ClientMessage<'_>, DecodeError> {
    let mut r = Reader::new(bytes);
    let kind = r.u8()?;
    match kind {
        MSG_ORDER_SUBMIT | MSG_QUIT => {
            let sequence = r.u32()?;
            let payload = length_prefixed(&mut r)?;
            if sequence == 0 {
                return Err(DecodeError::Invalid(
                    "an order's client sequence must not be 0",
                ));
            }
            Ok(if kind == MSG_QUIT {
                ClientMessage::Quit { sequence, payload }
            } else {
                ClientMessage::OrderSubmit { sequence, payload }
            })
        }
        MSG_EPHEMERAL_SUBMIT => Ok(ClientMessage::EphemeralSubmit {
            payload: length_prefixed(&mut r)?,
        }),
        MSG_CHECKSUM_REPORT => {
            let mut r = fixed(bytes, 13)?;
            let message = ClientMessage::ChecksumReport {
                tick: r.u32()?,
                checksum: r.u64()?,
            };
            r.finish()?;
            Ok(message)
        }
        MSG_PING => {
            let mut r = fixed(bytes, 9)?;
            let message = ClientMessage::Ping { t0_us: r.i64()? };
            r.finish()?;
            Ok(message)
        }
        MSG_RESYNC_REQUEST => {
            let mut r = fixed(bytes, 5)?;
            let message = ClientMessage::ResyncRequest { horizon: r.u32()? };
            r.finish()?;
            Ok(message)
        }
        MSG_TIMING_REPORT => {
            let mut r = fixed(bytes, TIMING_REPORT_BYTES)?;
            let report = ReportLayout::Needs.decode_fields(r.rest())?;
            if report
                .worst_rtt_ms
                .is_some_and(|ms| ms > MAX_REPORTED_RTT_MS)
            {
                return Err(DecodeError::Invalid(
                    "a TimingReport's worst round trip must be at most MAX_REPORTED_RTT_MS",
                ));
            }
            Ok(ClientMessage::TimingReport(report))
        }
        _ => Err(DecodeError::UnknownKind(kind)),
    }
}

impl ServerMessage<'_> {
    /// Write the message into `buf`: its length, or `None` when it does not
    /// fit (or a field is out of range: an order longer than
    /// [`MAX_ORDER_BYTES`], more than 16 seats).
    pub fn write(&self, buf: &mut [u8]) -> Option<usize> {
        let mut o = Writer::new(buf, MAX_MESSAGE_BYTES);
        match *self {
            ServerMessage::Welcome(w) => {
                o.put(&[MSG_WELCOME, w.seat, w.seat_count]);
                o.put(&w.human_mask.to_le_bytes());
                o.put(&w.tick_rate_millihz.to_le_bytes());
                o.put(&[w.bundle_interval, w.ai_order_delay]);
                o.put(&w.checksum_interval.to_le_bytes());
                o.put(&w.relay_tick.to_le_bytes());
                o.put(&w.resume_from_tick.to_le_bytes());
                o.put(&w.horizon_tick.to_le_bytes());
                o.put(&w.highest_accepted_sequence.to_le_bytes());
                let mut flags = 0;
                if w.match_started {
                    flags |= WELCOME_STARTED;
                }
                if w.frequent_reports {
                    flags |= WELCOME_FREQUENT_REPORTS;
                }
                o.put(&[flags]);
            }
            ServerMessage::Presence {
                tick,
                seat_count,
                states,
            } => {
                let n = usize::from(seat_count);
                if n > MAX_SEATS {
                    return None;
                }
                o.put(&[MSG_PRESENCE]);
                o.put(&tick.to_le_bytes());
                o.put(&[seat_count]);
                for s in &states[..n] {
                    o.put(&[*s as u8]);
                }
            }
            ServerMessage::TurnBundle(b) => {
                o.put(&[MSG_TURN_BUNDLE, if b.more { BUNDLE_MORE } else { 0 }]);
                o.put(&b.from_tick.to_le_bytes());
                o.put(&b.horizon_tick.to_le_bytes());
                o.put(&b.entry_count.to_le_bytes());
                o.put(b.entries);
            }
            ServerMessage::Pong {
                t0_us,
                t1_us,
                t2_us,
                relay_tick,
                highest_accepted_sequence,
            } => {
                o.put(&[MSG_PONG]);
                o.put(&t0_us.to_le_bytes());
                o.put(&t1_us.to_le_bytes());
                o.put(&t2_us.to_le_bytes());
                o.put(&relay_tick.to_le_bytes());
                o.put(&highest_accepted_sequence.to_le_bytes());
            }
            ServerMessage::Desync {
                tick,
                reported_mask,
                disagreeing_mask,
            } => {
                o.put(&[MSG_DESYNC]);
                o.put(&tick.to_le_bytes());
                o.put(&reported_mask.to_le_bytes());
                o.put(&disagreeing_mask.to_le_bytes());
            }
            ServerMessage::MatchOver { final_tick, reason } => {
                o.put(&[MSG_MATCH_OVER]);
                o.put(&final_tick.to_le_bytes());
                o.put(&[reason as u8]);
            }
            ServerMessage::Timing(change) => {
                if !change.is_valid() {
                    return None;
                }
                o.put(&[MSG_TIMING]);
                o.put(&change.from_tick.to_le_bytes());
                o.put(&change.anchor_tick.to_le_bytes());
                o.put(&change.anchor_ms.to_le_bytes());
                o.put(&change.tick_rate_millihz.to_le_bytes());
                o.put(&[change.bundle_interval, change.look_ahead]);
            }
            ServerMessage::OrderRefused { sequence, reason } => {
                if sequence == 0 {
                    return None;
                }
                o.put(&[MSG_ORDER_REFUSED]);
                o.put(&sequence.to_le_bytes());
                o.put(&[reason as u8]);
            }
            ServerMessage::Ephemeral {
                tick,
                seat,
                payload,
            } => {
                if payload.len() > MAX_ORDER_BYTES || usize::from(seat) >= MAX_SEATS {
                    return None;
                }
                o.put(&[MSG_EPHEMERAL]);
                o.put(&tick.to_le_bytes());
                o.put(&[seat]);
                o.put(&(payload.len() as u16).to_le_bytes());
                o.put(payload);
            }
        }
        o.finish()
    }

    /// The message as a new vector.
    pub fn to_vec(&self) -> Vec<u8> {
        let mut buf = [0u8; MAX_MESSAGE_BYTES];
        let len = self.write(&mut buf).unwrap_or(0);
        buf[..len].to_vec()
    }
}

impl ClientMessage<'_> {
    /// Write the message into `buf`: its length, or `None` when it does not
    /// fit or the order is longer than [`MAX_ORDER_BYTES`].
    pub fn write(&self, buf: &mut [u8]) -> Option<usize> {
        let mut o = Writer::new(buf, MAX_MESSAGE_BYTES);
        match *self {
            ClientMessage::OrderSubmit { sequence, payload } => {
                if payload.len() > MAX_ORDER_BYTES {
                    return None;
                }
                o.put(&[MSG_ORDER_SUBMIT]);
                o.put(&sequence.to_le_bytes());
                o.put(&(payload.len() as u16).to_le_bytes());
                o.put(payload);
            }
            ClientMessage::ChecksumReport { tick, checksum } => {
                o.put(&[MSG_CHECKSUM_REPORT]);
                o.put(&tick.to_le_bytes());
                o.put(&checksum.to_le_bytes());
            }
            ClientMessage::Ping { t0_us } => {
                o.put(&[MSG_PING]);
                o.put(&t0_us.to_le_bytes());
            }
            ClientMessage::Quit { sequence, payload } => {
                if payload.len() > MAX_ORDER_BYTES {
                    return None;
                }
                o.put(&[MSG_QUIT]);
                o.put(&sequence.to_le_bytes());
                o.put(&(payload.len() as u16).to_le_bytes());
                o.put(payload);
            }
            ClientMessage::EphemeralSubmit { payload } => {
                if payload.len() > MAX_ORDER_BYTES {
                    return None;
                }
                o.put(&[MSG_EPHEMERAL_SUBMIT]);
                o.put(&(payload.len() as u16).to_le_bytes());
                o.put(payload);
            }
            ClientMessage::ResyncRequest { horizon } => {
                o.put(&[MSG_RESYNC_REQUEST]);
                o.put(&horizon.to_le_bytes());
            }
            ClientMessage::TimingReport(report) => {
                if report
                    .worst_rtt_ms
                    .is_some_and(|ms| ms > MAX_REPORTED_RTT_MS)
                {
                    return None;
                }
                // A report measured without the detail (a compact source)
                // goes as its worst round trip with nothing counted.
                let mut report = report;
                if report.detail.is_none() {
                    report.detail = Some(ReportDetail::from_worst(report.worst_rtt_ms));
                }
                let mut payload = [0u8; REPORT_NEEDS_LEN];
                let len = ReportLayout::Needs.encode(&report, &mut payload).ok()?;
                o.put(&[MSG_TIMING_REPORT]);
                o.put(&payload[..len]);
            }
        }
        o.finish()
    }

    /// The message as a new vector.
    pub fn to_vec(&self) -> Vec<u8> {
        let mut buf = [0u8; MAX_MESSAGE_BYTES];
        let len = self.write(&mut buf).unwrap_or(0);
        buf[..len].to_vec()
    }
}

/// Builds one TurnBundle chunk in a caller buffer: entries are pushed in
/// (tick, seat) order while they fit, then [`finish`](Self::finish) writes
/// the range and the count.
#[derive(Debug)]
pub struct BundleWriter<'b> {
    buf: &'b mut [u8],
    len: usize,
    count: u16,
    last: Option<(u32, u8)>,
}

impl<'b> BundleWriter<'b> {
    /// Start a chunk in `buf` (at most [`MAX_MESSAGE_BYTES`] of it are used).
    /// `None` when `buf` cannot hold the header.
    pub fn new(buf: &'b mut [u8]) -> Option<BundleWriter<'b>> {
        let limit = buf.len().min(MAX_MESSAGE_BYTES);
        if limit < BUNDLE_HEADER_BYTES {
            return None;
        }
        Some(BundleWriter {
            buf: &mut buf[..limit],
            len: BUNDLE_HEADER_BYTES,
            count: 0,
            last: None,
        })
    }

    /// Whether an entry with a payload of `len` bytes fits now.
    pub fn fits(&self, len: usize) -> bool {
        len <= MAX_ORDER_BYTES
            && self.count < u16::MAX
            && self.len + ENTRY_HEADER_BYTES + len <= self.buf.len()
    }

    /// Entries pushed so far.
    pub fn entry_count(&self) -> usize {
        usize::from(self.count)
    }

    /// Append an entry; `false` (nothing written) when it does not fit, is
    /// out of (tick, seat) order, or is malformed (payload on a drop).
    pub fn push(&mut self, entry: &BundleEntry<'_>) -> bool {
        let len = entry.payload.len();
        if !self.fits(len)
            || (entry.kind == EntryKind::Dropped && len != 0)
            || usize::from(entry.seat) >= MAX_SEATS
            || self.last.is_some_and(|l| l >= (entry.tick, entry.seat))
        {
            return false;
        }
        let mut w = Writer::new(&mut self.buf[self.len..], ENTRY_HEADER_BYTES + len);
        w.u32(entry.tick);
        w.put(&[entry.seat, entry.kind as u8]);
        w.u16(len as u16);
        w.put(entry.payload);
        let Some(written) = w.finish() else {
            return false;
        };
        self.len += written;
        self.count += 1;
        self.last = Some((entry.tick, entry.seat));
        true
    }

    /// Write the header for `[from_tick, horizon_tick)` and return the
    /// message length; `None` when the range is empty or an entry lies
    /// outside it.
    pub fn finish(self, from_tick: u32, horizon_tick: u32, more: bool) -> Option<usize> {
        if from_tick >= horizon_tick {
            return None;
        }
        let first_tick = self
            .buf
            .get(BUNDLE_HEADER_BYTES..)
            .and_then(|entries| Reader::new(entries).u32().ok());
        if self.count > 0 {
            let last = self.last.map_or(0, |l| l.0);
            if first_tick.is_some_and(|t| t < from_tick) || last >= horizon_tick {
                return None;
            }
        }
        let mut w = Writer::new(self.buf, BUNDLE_HEADER_BYTES);
        w.put(&[MSG_TURN_BUNDLE, if more { BUNDLE_MORE } else { 0 }]);
        w.u32(from_tick);
        w.u32(horizon_tick);
        w.u16(self.count);
        w.finish()?;
        Some(self.len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The classes of decode error a relay counts apart (in its logs),
    /// which the tables below assert.
    #[derive(Debug, PartialEq, Eq)]
    enum Class {
        BadMagic,
        BadVersion,
        UnknownKind,
        BadLength,
        Malformed,
    }

    fn class<T>(r: Result<T, DecodeError>) -> Result<T, Class> {
        r.map_err(|e| match e {
            DecodeError::BadMagic { .. } => Class::BadMagic,
            DecodeError::BadVersion { .. } => Class::BadVersion,
            DecodeError::UnknownKind(_) => Class::UnknownKind,
            DecodeError::TooShort { .. } | DecodeError::TooLong { .. } => Class::BadLength,
            DecodeError::Invalid(_) => Class::Malformed,
        })
    }

    const SECRET: [u8; 16] = *b"link-secret-0001";

    fn hello() -> Hello {
        Hello {
            nonce: 0x0102_0304_0506_0708,
            have_horizon: 0x1122_3344,
            ticket: [0x5A; TICKET_BYTES],
            cookie: [0xC0; COOKIE_BYTES],
        }
    }

    #[test]
    fn hello_layout_is_byte_for_byte_as_documented() {
        let mut buf = [0u8; 100];
        assert_eq!(write_hello(&hello(), &SECRET, &mut buf), Some(82));
        assert_eq!(
            &buf[..16],
            &[0xB8, 3, 1, 0, 8, 7, 6, 5, 4, 3, 2, 1, 0x44, 0x33, 0x22, 0x11]
        );
        assert_eq!(&buf[16..58], &[0x5A; 42][..]);
        assert_eq!(&buf[58..74], &[0xC0; 16][..]);
        assert!(verify_hello_tag(&buf[..82], &SECRET));
        assert!(!verify_hello_tag(&buf[..82], b"link-secret-0002"));
        assert_eq!(read_hello(&buf[..82]), Ok(hello()));
        // The tag covers everything before it, the cookie included.
        for i in 0..82 {
            let mut q = buf;
            q[i] ^= 1;
            assert!(!verify_hello_tag(&q[..82], &SECRET), "flip at {i}");
        }
        assert_eq!(write_hello(&hello(), &SECRET, &mut [0u8; 81]), None);
        let first = Hello {
            cookie: NO_COOKIE,
            ..hello()
        };
        write_hello(&first, &SECRET, &mut buf).unwrap();
        assert_eq!(&buf[58..74], &[0; 16][..]);
        assert_eq!(read_hello(&buf[..82]), Ok(first));
    }

    #[test]
    fn hello_validation() {
        let mut buf = [0u8; 82];
        write_hello(&hello(), &SECRET, &mut buf).unwrap();
        assert_eq!(class(read_hello(&buf[..81])), Err(Class::BadLength));
        let mut q = buf;
        q[0] = 0xB7;
        assert_eq!(class(read_hello(&q)), Err(Class::BadMagic));
        let mut q = buf;
        q[1] = 2; // version 2 (before cookies, refusals and ephemeral orders)
        assert_eq!(class(read_hello(&q)), Err(Class::BadVersion));
        assert_eq!(
            peek_datagram(&q),
            Ok(DatagramPeek::OtherVersion(Some(0x0102_0304_0506_0708)))
        );
        let mut q = buf;
        q[3] = 1;
        assert_eq!(class(read_hello(&q)), Err(Class::Malformed));
        let mut zero_nonce = hello();
        zero_nonce.nonce = 0;
        write_hello(&zero_nonce, &SECRET, &mut q).unwrap();
        assert_eq!(class(read_hello(&q)), Err(Class::Malformed));
        assert_eq!(class(peek_datagram(&[0xB8, 1])), Err(Class::BadLength));
        assert_eq!(class(peek_datagram(&[])), Err(Class::BadLength));
    }

    #[test]
    fn cookie_layout_and_validation() {
        let c = CookieChallenge {
            nonce: 0x0102_0304_0506_0708,
            cookie: *b"0123456789abcdef",
        };
        let mut buf = [0u8; 40];
        assert_eq!(write_cookie(&c, &mut buf), Some(28));
        assert_eq!(&buf[..12], &[0xB8, 3, 3, 0, 8, 7, 6, 5, 4, 3, 2, 1]);
        assert_eq!(&buf[12..28], b"0123456789abcdef");
        assert_eq!(read_cookie(&buf[..28]), Ok(c));
        assert_eq!(class(read_cookie(&buf[..27])), Err(Class::BadLength));
        assert_eq!(class(read_cookie(&buf[..29])), Err(Class::BadLength));
        let mut q = buf;
        q[3] = 1;
        assert_eq!(class(read_cookie(&q[..28])), Err(Class::Malformed));
        let mut q = buf;
        q[12..28].fill(0);
        assert_eq!(
            class(read_cookie(&q[..28])),
            Err(Class::Malformed),
            "an all-zero cookie means none"
        );
        let mut q = buf;
        q[2] = KIND_REJECT;
        assert_eq!(class(read_cookie(&q[..28])), Err(Class::UnknownKind));
        assert_eq!(write_cookie(&c, &mut [0u8; 27]), None);
    }

    #[test]
    fn reject_layout_and_round_trip() {
        let mut buf = [0u8; 12];
        let r = Reject {
            reason: RejectReason::Expired,
            nonce: 0x0102_0304_0506_0708,
        };
        assert_eq!(write_reject(&r, &mut buf), Some(12));
        assert_eq!(buf, [0xB8, 3, 2, 2, 8, 7, 6, 5, 4, 3, 2, 1]);
        assert_eq!(read_reject(&buf), Ok(r));
        for reason in RejectReason::ALL {
            assert_eq!(RejectReason::from_u8(reason as u8), Some(reason));
        }
        buf[3] = 0;
        assert_eq!(class(read_reject(&buf)), Err(Class::Malformed));
        assert_eq!(class(read_reject(&buf[..11])), Err(Class::BadLength));
    }

    #[test]
    fn a_reject_of_any_version_is_read_by_its_fixed_bytes() {
        let mut buf = [0u8; 12];
        let r = Reject {
            reason: RejectReason::WrongVersion,
            nonce: 0x0102_0304_0506_0708,
        };
        write_reject(&r, &mut buf).unwrap();
        let this = read_reject_of_any_version(&buf).unwrap();
        assert_eq!(
            (this.version, this.reason, this.nonce),
            (VERSION, 3, r.nonce)
        );
        // A later relay's Reject: another version, a reason this build does
        // not know, and bytes after the twelve every version keeps.
        let mut later = buf.to_vec();
        later[1] = VERSION + 1;
        later[3] = 200;
        later.extend_from_slice(&[9, 9, 9]);
        assert_eq!(
            read_reject_of_any_version(&later),
            Ok(AnyReject {
                version: VERSION + 1,
                reason: 200,
                nonce: r.nonce
            })
        );
        assert_eq!(class(read_reject(&later)), Err(Class::BadVersion));
        assert_eq!(
            class(read_reject_of_any_version(&later[..11])),
            Err(Class::BadLength)
        );
        let mut cookie = later.clone();
        cookie[2] = KIND_COOKIE;
        assert_eq!(
            class(read_reject_of_any_version(&cookie)),
            Err(Class::UnknownKind)
        );
        cookie[0] = 0xB7;
        assert_eq!(
            class(read_reject_of_any_version(&cookie)),
            Err(Class::BadMagic)
        );
    }

    fn welcome() -> Welcome {
        Welcome {
            seat: 2,
            seat_count: 4,
            human_mask: 0b0111,
            tick_rate_millihz: 30_000,
            bundle_interval: 1,
            ai_order_delay: 8,
            checksum_interval: 30,
            relay_tick: 100,
            resume_from_tick: 40,
            horizon_tick: 100,
            highest_accepted_sequence: 7,
            match_started: true,
            frequent_reports: false,
        }
    }

    #[test]
    fn welcome_layout_and_validation() {
        let bytes = ServerMessage::Welcome(welcome()).to_vec();
        assert_eq!(
            bytes,
            [
                1, 2, 4, 0b0111, 0, 0x30, 0x75, 0, 0, 1, 8, 30, 0, 100, 0, 0, 0, 40, 0, 0, 0, 100,
                0, 0, 0, 7, 0, 0, 0, 1
            ]
        );
        assert_eq!(
            read_server_message(&bytes),
            Ok(ServerMessage::Welcome(welcome()))
        );
        let bad: [fn(&mut Welcome); 6] = [
            |w| w.seat = 4,
            |w| w.human_mask = 0b1_0111,
            |w| w.seat = 3,
            |w| w.ai_order_delay = 9,
            |w| w.bundle_interval = 0,
            |w| w.resume_from_tick = 101,
        ];
        for f in bad {
            let mut w = welcome();
            f(&mut w);
            let bytes = ServerMessage::Welcome(w).to_vec();
            assert_eq!(class(read_server_message(&bytes)), Err(Class::Malformed));
        }
    }

    fn entry(tick: u32, seat: u8, payload: &[u8]) -> BundleEntry<'_> {
        BundleEntry {
            tick,
            seat,
            kind: EntryKind::Order,
            payload,
        }
    }

    #[test]
    fn bundle_layout_round_trip_and_order_rules() {
        let mut buf = [0u8; MAX_MESSAGE_BYTES];
        let mut w = BundleWriter::new(&mut buf).unwrap();
        assert!(w.push(&entry(10, 1, b"ab")));
        assert!(!w.push(&entry(10, 1, b"x")), "same seat and tick twice");
        assert!(!w.push(&entry(9, 3, b"x")), "tick going back");
        assert!(w.push(&BundleEntry {
            tick: 11,
            seat: 0,
            kind: EntryKind::Quit,
            payload: b"q"
        }));
        assert!(
            !w.push(&BundleEntry {
                tick: 11,
                seat: 1,
                kind: EntryKind::Dropped,
                payload: b"x"
            }),
            "a drop carries no order"
        );
        let len = w.finish(10, 12, false).unwrap();
        assert_eq!(
            &buf[..len],
            &[
                3, 0, 10, 0, 0, 0, 12, 0, 0, 0, 2, 0, // header
                10, 0, 0, 0, 1, 0, 2, 0, b'a', b'b', // entry
                11, 0, 0, 0, 0, 1, 1, 0, b'q', // quit, with the seat's quit order
            ]
        );
        let ServerMessage::TurnBundle(b) = read_server_message(&buf[..len]).unwrap() else {
            panic!("not a bundle");
        };
        assert_eq!((b.from_tick, b.horizon_tick, b.more), (10, 12, false));
        let entries: Vec<_> = b.entries().collect();
        assert_eq!(entries.len(), 2);
        assert_eq!(entries[0], entry(10, 1, b"ab"));
        assert_eq!(
            (entries[1].kind, entries[1].payload),
            (EntryKind::Quit, &b"q"[..])
        );
        let mut dropped_with_payload = buf[..len].to_vec();
        dropped_with_payload[len - 4] = EntryKind::Dropped as u8;
        assert_eq!(
            class(read_server_message(&dropped_with_payload)),
            Err(Class::Malformed)
        );
        // Out of range entries and empty ranges are refused by the writer
        // and by the reader.
        let mut w = BundleWriter::new(&mut buf).unwrap();
        assert!(w.push(&entry(12, 0, b"")));
        assert_eq!(w.finish(10, 12, false), None);
        let w = BundleWriter::new(&mut buf).unwrap();
        assert_eq!(w.finish(5, 5, false), None);
        let empty = BundleWriter::new(&mut buf)
            .unwrap()
            .finish(5, 6, true)
            .unwrap();
        let mut q = buf[..empty].to_vec();
        q[6] = 5; // horizon 5 == from 5
        assert_eq!(class(read_server_message(&q)), Err(Class::Malformed));
        q[6] = 6;
        q[1] = 0x02; // unknown flag
        assert_eq!(class(read_server_message(&q)), Err(Class::Malformed));
        q[1] = 0;
        q[10] = 1; // count says one entry, none follows
        assert_eq!(class(read_server_message(&q)), Err(Class::BadLength));
    }

    #[test]
    fn bundle_writer_stops_at_the_message_limit() {
        let mut buf = [0u8; 4 * MAX_MESSAGE_BYTES];
        let mut w = BundleWriter::new(&mut buf).unwrap();
        let order = [7u8; MAX_ORDER_BYTES];
        assert!(w.push(&entry(0, 0, &order)));
        assert!(!w.push(&entry(0, 1, &order)), "second maximal order");
        assert!(w.push(&entry(0, 1, &order[..200])));
        let big = [0u8; MAX_ORDER_BYTES + 1];
        assert!(!w.push(&entry(0, 2, &big)));
        let len = w.finish(0, 1, false).unwrap();
        assert!(len <= MAX_MESSAGE_BYTES);
        assert!(matches!(
            read_server_message(&buf[..len]),
            Ok(ServerMessage::TurnBundle(_))
        ));
    }

    #[test]
    fn other_server_messages_round_trip() {
        let mut states = [SeatPresence::Ai; MAX_SEATS];
        states[0] = SeatPresence::Connected;
        states[1] = SeatPresence::Reconnecting;
        states[2] = SeatPresence::Left;
        states[3] = SeatPresence::Loading;
        let messages = [
            ServerMessage::Presence {
                tick: 5,
                seat_count: 5,
                states,
            },
            ServerMessage::Pong {
                t0_us: -3,
                t1_us: 1 << 40,
                t2_us: (1 << 40) + 9,
                relay_tick: 77,
                highest_accepted_sequence: 12,
            },
            ServerMessage::Desync {
                tick: 300,
                reported_mask: 0b111,
                disagreeing_mask: 0b100,
            },
            ServerMessage::MatchOver {
                final_tick: 9000,
                reason: MatchOverReason::AllLeft,
            },
            ServerMessage::OrderRefused {
                sequence: 0x0403_0201,
                reason: RefusalReason::QueueFull,
            },
            ServerMessage::Ephemeral {
                tick: 17,
                seat: 3,
                payload: b"voice",
            },
        ];
        let lengths = [11, 33, 9, 6, 6, 13];
        for (m, len) in messages.iter().zip(lengths) {
            let bytes = m.to_vec();
            assert_eq!(bytes.len(), len);
            assert_eq!(read_server_message(&bytes).as_ref(), Ok(m));
            let mut longer = bytes.clone();
            longer.push(0);
            assert!(read_server_message(&longer).is_err());
            assert!(read_server_message(&bytes[..len - 1]).is_err());
        }
        assert_eq!(
            messages[4].to_vec(),
            [0x08, 1, 2, 3, 4, 1],
            "OrderRefused: sequence, reason"
        );
        assert_eq!(
            messages[5].to_vec(),
            [0x09, 17, 0, 0, 0, 3, 5, 0, b'v', b'o', b'i', b'c', b'e'],
            "Ephemeral: tick, seat, length, order"
        );
        for reason in RefusalReason::ALL {
            assert_eq!(RefusalReason::from_u8(reason as u8), Some(reason));
        }
        for bad in [
            [0x08, 1, 0, 0, 0, 0],
            [0x08, 1, 0, 0, 0, 4],
            [0x08, 0, 0, 0, 0, 1],
        ] {
            assert_eq!(class(read_server_message(&bad)), Err(Class::Malformed));
        }
        let mut ephemeral_seat_16 = messages[5].to_vec();
        ephemeral_seat_16[5] = 16;
        assert_eq!(
            class(read_server_message(&ephemeral_seat_16)),
            Err(Class::Malformed)
        );
        let desync_naming_a_silent_seat = [5, 0, 0, 0, 0, 0b011, 0, 0b100, 0];
        assert_eq!(
            class(read_server_message(&desync_naming_a_silent_seat)),
            Err(Class::Malformed)
        );
        assert_eq!(class(read_server_message(&[0x7F])), Err(Class::UnknownKind));
        assert_eq!(class(read_server_message(&[])), Err(Class::BadLength));
    }

    #[test]
    fn timing_messages_are_byte_for_byte_as_documented() {
        let change = TimingChange {
            from_tick: 0x0403_0201,
            anchor_tick: 0x0403_0101,
            anchor_ms: 0x0A09_0807_0605,
            tick_rate_millihz: 30_000,
            bundle_interval: 2,
            look_ahead: 6,
        };
        let bytes = ServerMessage::Timing(change).to_vec();
        let mut expected = vec![0x07, 1, 2, 3, 4, 1, 1, 3, 4, 5, 6, 7, 8, 9, 0x0A, 0, 0];
        expected.extend_from_slice(&30_000u32.to_le_bytes());
        expected.extend_from_slice(&[2, 6]);
        assert_eq!(bytes, expected);
        assert_eq!(bytes.len(), TIMING_BYTES);
        assert_eq!(
            read_server_message(&bytes),
            Ok(ServerMessage::Timing(change))
        );
        // Zero rate, interval or look-ahead, an anchor after the change or
        // absurdly late: refused both ways.
        for (at, len) in [(17, 4), (21, 1), (22, 1)] {
            let mut bad = bytes.clone();
            bad[at..at + len].fill(0);
            assert_eq!(class(read_server_message(&bad)), Err(Class::Malformed));
        }
        let mut anchor_after = bytes.clone();
        anchor_after[5..9].copy_from_slice(&0x0403_0202u32.to_le_bytes());
        assert_eq!(
            class(read_server_message(&anchor_after)),
            Err(Class::Malformed)
        );
        let far = TimingChange {
            anchor_ms: MAX_TIMING_ANCHOR_MS + 1,
            ..change
        };
        assert_eq!(ServerMessage::Timing(far).write(&mut [0u8; 64]), None);
        assert!(read_server_message(&bytes[..TIMING_BYTES - 1]).is_err());

        // TimingReport: the kind byte, then the needs NETWORK_REPORT
        // payload (docs/payloads.md) byte for byte.
        let detail = crate::report::ReportDetail {
            median_rtt_ms: Some(0x0101),
            p90_rtt_ms: Some(0x0180),
            latest_rtt_ms: Some(0x0102),
            frames: 16,
            stalled_frames: 2,
            stall_ms: 40,
            waited_for: Some(0),
            needs: Some(crate::report::LookAheadNeeds {
                reference: 6,
                most: 7,
                above: [1, 3, 9, 16],
            }),
        };
        let report = crate::report::Report {
            process_us: 0x0403_0201,
            max_wait_ms: 0x0605,
            worst_rtt_ms: Some(0x0201),
            detail: Some(detail),
        };
        let bytes = ClientMessage::TimingReport(report).to_vec();
        let mut payload = [0u8; REPORT_NEEDS_LEN];
        ReportLayout::Needs.encode(&report, &mut payload).unwrap();
        assert_eq!(bytes[0], 0x16);
        assert_eq!(&bytes[1..], &payload[..]);
        assert_eq!(
            &bytes[1..8],
            &[3, 1, 2, 3, 4, 1, 2],
            "version, process, worst"
        );
        assert_eq!(
            &bytes[23..33],
            &[6, 7, 1, 0, 3, 0, 9, 0, 16, 0],
            "needs: reference, most, the four counts"
        );
        assert_eq!(bytes.len(), TIMING_REPORT_BYTES);
        assert_eq!(
            read_client_message(&bytes),
            Ok(ClientMessage::TimingReport(report))
        );
        // No detail (a compact source): sent as its worst round trip.
        let bare = crate::report::Report {
            detail: None,
            ..report
        };
        assert_eq!(
            read_client_message(&ClientMessage::TimingReport(bare).to_vec()),
            Ok(ClientMessage::TimingReport(crate::report::Report {
                detail: Some(crate::report::ReportDetail::from_worst(Some(0x0201))),
                ..report
            }))
        );
        let none = crate::report::Report {
            worst_rtt_ms: None,
            detail: Some(crate::report::ReportDetail {
                median_rtt_ms: None,
                p90_rtt_ms: None,
                latest_rtt_ms: None,
                ..detail
            }),
            ..report
        };
        let bytes = ClientMessage::TimingReport(none).to_vec();
        assert_eq!(&bytes[6..8], &[0xFF; 2], "no round trip yet");
        assert_eq!(
            read_client_message(&bytes),
            Ok(ClientMessage::TimingReport(none))
        );
        // A round trip beyond the bound, a broken invariant, a wrong version
        // or length: refused.
        let mut too_long = ClientMessage::TimingReport(report).to_vec();
        too_long[6..8].copy_from_slice(&((MAX_REPORTED_RTT_MS + 1) as u16).to_le_bytes());
        assert_eq!(class(read_client_message(&too_long)), Err(Class::Malformed));
        let mut inverted = ClientMessage::TimingReport(report).to_vec();
        inverted[10..12].copy_from_slice(&0x0300u16.to_le_bytes()); // median > p90
        assert_eq!(class(read_client_message(&inverted)), Err(Class::Malformed));
        let mut version = ClientMessage::TimingReport(report).to_vec();
        version[1] = 1;
        assert_eq!(class(read_client_message(&version)), Err(Class::BadVersion));
        assert!(read_client_message(&ClientMessage::TimingReport(report).to_vec()[..22]).is_err());
        let huge = crate::report::Report {
            worst_rtt_ms: Some(MAX_REPORTED_RTT_MS + 1),
            detail: None,
            ..report
        };
        assert_eq!(
            ClientMessage::TimingReport(huge).write(&mut [0u8; 64]),
            None
        );
    }

    #[test]
    fn client_messages_round_trip_and_validate() {
        let order = [9u8; 40];
        let messages = [
            ClientMessage::OrderSubmit {
                sequence: 1,
                payload: &order,
            },
            ClientMessage::ChecksumReport {
                tick: 30,
                checksum: u64::MAX - 1,
            },
            ClientMessage::Ping { t0_us: -1 },
            ClientMessage::Quit {
                sequence: 9,
                payload: b"",
            },
            ClientMessage::Quit {
                sequence: 10,
                payload: b"gg",
            },
            ClientMessage::ResyncRequest { horizon: 44 },
            ClientMessage::EphemeralSubmit { payload: &order },
        ];
        let lengths = [47, 13, 9, 7, 9, 5, 43];
        for (m, len) in messages.iter().zip(lengths) {
            let bytes = m.to_vec();
            assert_eq!(bytes.len(), len);
            assert_eq!(read_client_message(&bytes).as_ref(), Ok(m));
            assert!(read_client_message(&bytes[..len - 1]).is_err());
        }
        assert_eq!(
            ClientMessage::OrderSubmit {
                sequence: 0x0403_0201,
                payload: b"z"
            }
            .to_vec(),
            [0x11, 1, 2, 3, 4, 1, 0, b'z']
        );
        assert_eq!(
            ClientMessage::Quit {
                sequence: 0x0403_0201,
                payload: b"q"
            }
            .to_vec(),
            [0x14, 1, 2, 3, 4, 1, 0, b'q']
        );
        assert_eq!(
            ClientMessage::EphemeralSubmit { payload: b"hi" }.to_vec(),
            [0x17, 2, 0, b'h', b'i']
        );
        for zero_sequence in [[0x11, 0, 0, 0, 0, 0, 0], [0x14, 0, 0, 0, 0, 0, 0]] {
            assert_eq!(
                class(read_client_message(&zero_sequence)),
                Err(Class::Malformed)
            );
        }
        let mut too_long_ephemeral = vec![0x17, 0x01, 0x02];
        too_long_ephemeral.resize(3 + 0x201, 0);
        assert_eq!(
            class(read_client_message(&too_long_ephemeral)),
            Err(Class::Malformed)
        );
        let too_long = [0u8; MAX_ORDER_BYTES + 1];
        let m = ClientMessage::OrderSubmit {
            sequence: 1,
            payload: &too_long,
        };
        assert_eq!(m.write(&mut [0u8; 2000]), None);
        assert_eq!(
            ClientMessage::Ping { t0_us: 0 }.write(&mut [0u8; 8]),
            None,
            "buffer one byte short"
        );
    }
}
