//! The lockstep session's link messages (S5, S8, S9): turns and their items,
//! clock pings, drop votes and relayed turns. Encoding into owned buffers and
//! validating decoding that keeps the contract of every wire codec (the
//! [`super`] module docs), with the one allowance stated there: a decoded
//! turn owns its commands, so decoding allocates at most the message's own
//! length (and nothing else with [`decode_reusing`]).
//!
//! These messages ride inside transport packets ([`super::packet`]), which
//! authenticate the sender; everything here is about *what* a seated player
//! says, and [`crate::session`] decides whether it may say it (S4.7).
//!
//! # Layout, version 4
//!
//! All multi-byte integers are little-endian. Every message starts with its
//! kind and the layout version:
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 1 | kind: `1` turn, `2` ping, `3` pong, `4` drop vote, `5` relay, `6` relay request, `7` drop decision |
//! | 1 | 1 | layout version, `4` ([`TURN_LAYOUT_VERSION`]) |
//!
//! **Turn** (kind 1), one *part* of the turn a seat sends on a send frame:
//!
//! | offset | size | field |
//! |---|---|---|
//! | 2 | 4 | send frame `s` (`u32`) |
//! | 6 | 4 | tag `s + look_ahead(s)` (`u32`), must be `> s` |
//! | 10 | 1 | part index, `< part count` |
//! | 11 | 1 | part count, `1 ..= MAX_TURN_PARTS` |
//! | 12 | 2 | item count (`u16`) |
//! | 14 | … | items, back to back, exactly filling the message |
//!
//! Each item is `kind: u8`, `len: u16`, `len` bytes of body:
//!
//! | kind | body |
//! |---|---|
//! | `0` command | the engine's bytes |
//! | `1` report | `ReportLayout::Needs` (32 bytes, version 3) |
//! | `2` timing event | `TimingLayout::TIBERIAN_SUN` (5 bytes) |
//! | `3` removal | seat (1 byte) |
//! | `10` checksum | frame `u32`, state checksum `u64` |
//! | `11` anchor | frame `u32`, ideal start in reference time `i64` µs |
//!
//! Kinds 0–3 are queued and execute on the turn's tag (S5); 10 and 11 are
//! records acted on when the whole turn has arrived.
//!
//! **Ping** (kind 2): `t0: i64` (sender's local µs). **Pong** (kind 3): `t0`,
//! `t1`, `t2: i64` (the ping's `t0`, then the master's reference time at
//! receipt and at sending).
//!
//! **Drop vote** (kind 4):
//!
//! | offset | size | field |
//! |---|---|---|
//! | 2 | 1 | dropped seat |
//! | 3 | 4 | last send frame of that seat's turns the voter holds whole (`u32`), or `0xFFFF_FFFF` for none |
//! | 7 | 4 | every seat the voter is dropping, as a bit mask (`u32`); must include the dropped seat |
//!
//! **Relay** (kind 5): `dropped seat: u8` at offset 2, then one complete turn
//! part message (kind 1, from offset 3) of that seat, unchanged.
//!
//! **Relay request** (kind 6): `dropped seat: u8` at offset 2, then the last
//! send frame of its turns the asker holds whole (`u32`, `0xFFFF_FFFF` for
//! none); the asked machine answers with relays of every later turn it
//! keeps.
//!
//! **Drop decision** (kind 7): `dropped seat: u8` at offset 2, then the cut
//! the sender decided: the dropped seat's last send frame that executes
//! (`u32`, `0xFFFF_FFFF`: none of its turns).
//!
//! Version 1 (rungs ≤ 0.1) had no version byte, no part index and no drop
//! mask; version 2 carried reports in the detailed layout (22 bytes,
//! without the look-ahead the frames needed); version 3 had no drop
//! decision (a drop was decided from the votes alone, which two crashes in
//! a row could split). Their messages fail the version check.

use super::cursor::{DecodeError, PutLe, Reader};
use crate::error::{Error, Result};
use crate::report::{Report, ReportDetail};
use crate::timing::TimingEvent;
use crate::wire::events::{ReportLayout, TimingLayout, REPORT_NEEDS_LEN, TIMING_LEN};

/// The layout version this code speaks, byte 1 of every message (`turn`
/// in [`crate::ProtocolVersions`]).
///
/// **In every version, past and future, byte 0 of a message is its kind
/// and byte 1 this version**, whatever else the layouts change, so that a
/// message of another version is recognised as one ([`DecodeError::BadVersion`]
/// with the version it carries) and the session can say which version its
/// peer speaks instead of only counting a malformed message. Messages ride
/// inside authenticated packets, so this byte is the peer's own word.
pub const TURN_LAYOUT_VERSION: u8 = 4;

/// Message kind (byte 0) of one part of a seat's turn.
pub(crate) const MSG_TURN: u8 = 1;
/// Message kind of a clock ping to the master (S9).
pub(crate) const MSG_PING: u8 = 2;
/// Message kind of the master's answer to a ping (S9).
pub(crate) const MSG_PONG: u8 = 3;
/// Message kind of a vote to drop a seat (S4.7).
pub(crate) const MSG_DROP_VOTE: u8 = 4;
/// Message kind of a dropped seat's turn part passed on by another machine.
pub(crate) const MSG_RELAY: u8 = 5;
/// Message kind of a request for a dropped seat's turns after a send frame.
pub(crate) const MSG_RELAY_REQUEST: u8 = 6;
/// Message kind of the cut decided for a dropped seat.
pub(crate) const MSG_DROP_DECIDED: u8 = 7;

/// Item kind of the engine's command bytes (executes on the tag).
pub(crate) const ITEM_COMMAND: u8 = 0;
/// Item kind of the sender's report (executes on the tag, S3).
pub(crate) const ITEM_REPORT: u8 = 1;
/// Item kind of the master's timing event (executes on the tag, S4).
pub(crate) const ITEM_TIMING: u8 = 2;
/// Item kind of a seat's removal (executes on the tag).
pub(crate) const ITEM_REMOVAL: u8 = 3;
/// Record kind of the sender's state checksum (acted on at arrival).
pub(crate) const ITEM_CHECKSUM: u8 = 10;
/// Record kind of the master's pacing anchor (acted on at arrival, S9).
pub(crate) const ITEM_ANCHOR: u8 = 11;

/// Bytes before a turn part's items.
pub const TURN_HEADER_BYTES: usize = 14;
/// Bytes before an item's body.
pub(crate) const ITEM_HEADER_BYTES: usize = 3;
/// Bytes a relay adds in front of the turn part it carries.
pub const RELAY_HEADER_BYTES: usize = 3;
/// Most parts one turn may have (S8: bounded per turn).
pub const MAX_TURN_PARTS: u8 = 32;
/// A drop vote's "holds none" value.
const VOTE_NONE: u32 = u32::MAX;

const _: () = assert!(TURN_HEADER_BYTES == 2 + 4 + 4 + 1 + 1 + 2);
const _: () = assert!(MAX_TURN_PARTS >= 2);

/// Something a turn carries that executes on the turn's tag (S5).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Item {
    /// The engine's command bytes.
    Command(Vec<u8>),
    /// The sender's report (S3).
    Report(Report),
    /// The master's timing event (S4).
    Timing(TimingEvent),
    /// The removal of a seat (S4.7 decides whether it counts).
    Removal(u8),
}

impl Item {
    /// Bytes this item takes in a turn part, header included.
    pub fn encoded_len(&self) -> usize {
        ITEM_HEADER_BYTES
            + match self {
                Item::Command(bytes) => bytes.len(),
                Item::Report(_) => REPORT_NEEDS_LEN,
                Item::Timing(_) => TIMING_LEN,
                Item::Removal(_) => 1,
            }
    }
}

/// Something a turn carries that is acted on when the turn arrives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Record {
    /// The sender's state checksum after `frame`.
    Checksum {
        /// The frame after which the state was summed.
        frame: u32,
        /// The engine's state checksum.
        value: u64,
    },
    /// The master's pacing anchor: `frame` ideally starts at `start_us`
    /// reference time (S9).
    Anchor {
        /// The anchored frame.
        frame: u32,
        /// Its ideal start in the master's reference time, µs.
        start_us: i64,
    },
}

impl Record {
    /// Bytes this record takes in a turn part, header included.
    pub const ENCODED_LEN: usize = ITEM_HEADER_BYTES + 12;
}

/// One decoded turn part.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnPart {
    /// The send frame `s` the turn went out on.
    pub send_frame: u32,
    /// The frame its items execute on, `s + look_ahead(s)`; after `s`.
    pub tag: u32,
    /// This part's place in the turn, `< count`.
    pub index: u8,
    /// The turn's parts, `1 ..= MAX_TURN_PARTS`.
    pub count: u8,
    /// The items of this part, in order; they execute on `tag`.
    pub items: Vec<Item>,
    /// The records of this part, acted on when the whole turn has arrived.
    pub records: Vec<Record>,
}

/// Whether a seat's drop vote holds some of the dropped seat's turns.
pub type Holding = Option<u32>;

/// A decoded link message of the lockstep session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    /// One part of a seat's turn.
    Turn(TurnPart),
    /// A clock ping to the master (S9).
    Ping {
        /// The sender's local clock at sending, µs.
        t0: i64,
    },
    /// The master's answer to a ping (S9).
    Pong {
        /// The ping's `t0`, echoed.
        t0: i64,
        /// The master's reference time when the ping arrived, µs.
        t1: i64,
        /// The master's reference time when the pong went out, µs.
        t2: i64,
    },
    /// A vote to drop a seat (S4.7).
    DropVote {
        /// The seat being dropped.
        dropped: u8,
        /// The last send frame of its turns the voter holds whole.
        holds: Holding,
        /// Every seat the voter is dropping, a bit mask that includes
        /// `dropped`.
        dropping: u32,
    },
    /// A dropped seat's turn part passed on unchanged.
    Relay {
        /// The dropped seat whose part it is.
        dropped: u8,
        /// The part as that seat sent it.
        part: TurnPart,
    },
    /// A request for a dropped seat's turns the asker lacks.
    RelayRequest {
        /// The dropped seat.
        dropped: u8,
        /// The last send frame of its turns the asker holds whole; the
        /// answer relays every later one.
        after: Holding,
    },
    /// The cut the sender decided for a dropped seat.
    DropDecided {
        /// The dropped seat.
        dropped: u8,
        /// Its last send frame that executes; `None`: none of its turns.
        cut: Holding,
    },
}

/// The name of this module's layouts in error messages.
const LAYOUT: &str = "lockstep link message";

/// A decode error of this module's layouts as the crate's error.
fn malformed(e: DecodeError) -> Error {
    Error::malformed(LAYOUT, e)
}

/// A message of these layouts that decodes but breaks a rule the session
/// judges (a drop vote for no other human seat), as the crate's error.
pub fn invalid(rule: &'static str) -> Error {
    malformed(DecodeError::Invalid(rule))
}

fn header(kind: u8) -> Vec<u8> {
    vec![kind, TURN_LAYOUT_VERSION]
}

/// Bytes of a ping message.
pub(crate) const PING_BYTES: usize = 2 + 8;
/// Bytes of a pong message.
pub(crate) const PONG_BYTES: usize = 2 + 3 * 8;

/// A ping: `t0` is the sender's local time. (A fixed-size array: clock
/// pings go out all game long and allocate nothing.)
pub fn encode_ping(t0: i64) -> [u8; PING_BYTES] {
    let mut out = [0; PING_BYTES];
    out[..2].copy_from_slice(&[MSG_PING, TURN_LAYOUT_VERSION]);
    out[2..].copy_from_slice(&t0.to_le_bytes());
    out
}

/// The master's answer to a ping.
pub fn encode_pong(t0: i64, t1: i64, t2: i64) -> [u8; PONG_BYTES] {
    let mut out = [0; PONG_BYTES];
    out[..2].copy_from_slice(&[MSG_PONG, TURN_LAYOUT_VERSION]);
    for (at, value) in [t0, t1, t2].into_iter().enumerate() {
        out[2 + 8 * at..10 + 8 * at].copy_from_slice(&value.to_le_bytes());
    }
    out
}

/// A drop vote: `dropping` is every seat the voter is dropping (bit mask).
pub fn encode_drop_vote(dropped: u8, holds: Holding, dropping: u32) -> Vec<u8> {
    let mut out = header(MSG_DROP_VOTE);
    out.u8(dropped);
    out.u32(holds.unwrap_or(VOTE_NONE));
    out.u32(dropping);
    out
}

/// Ask the holder of a drop for `dropped`'s turns after `after`.
pub fn encode_relay_request(dropped: u8, after: Holding) -> Vec<u8> {
    let mut out = header(MSG_RELAY_REQUEST);
    out.u8(dropped);
    out.u32(after.unwrap_or(VOTE_NONE));
    out
}

/// The cut the sender decided for `dropped`: the last of its send frames
/// that executes.
pub fn encode_drop_decided(dropped: u8, cut: Holding) -> Vec<u8> {
    let mut out = header(MSG_DROP_DECIDED);
    out.u8(dropped);
    out.u32(cut.unwrap_or(VOTE_NONE));
    out
}

/// A relay of `dropped`'s turn part `raw` (a turn message as received).
pub fn encode_relay(dropped: u8, raw: &[u8]) -> Vec<u8> {
    let mut out = header(MSG_RELAY);
    out.u8(dropped);
    out.put(raw);
    out
}

fn encode_item(out: &mut Vec<u8>, item: &Item) {
    // The largest fixed-size body: a report in the needs layout.
    const _: () = assert!(TIMING_LEN <= REPORT_NEEDS_LEN);
    let mut body = [0u8; REPORT_NEEDS_LEN];
    let (kind, bytes): (u8, &[u8]) = match item {
        Item::Command(bytes) => (ITEM_COMMAND, bytes),
        Item::Report(report) => {
            // A report made without its detail still travels: the worst
            // round trip stands for the distribution, no stall counted.
            let report = Report {
                detail: Some(
                    report
                        .detail
                        .unwrap_or_else(|| ReportDetail::from_worst(report.worst_rtt_ms)),
                ),
                ..*report
            };
            let len = ReportLayout::Needs.encode(&report, &mut body).unwrap_or(0);
            (ITEM_REPORT, &body[..len])
        }
        Item::Timing(event) => {
            let len = TimingLayout::TIBERIAN_SUN
                .encode(event, &mut body)
                .unwrap_or(0);
            (ITEM_TIMING, &body[..len])
        }
        Item::Removal(seat) => {
            body[0] = *seat;
            (ITEM_REMOVAL, &body[..1])
        }
    };
    out.u8(kind);
    out.u16(bytes.len() as u16);
    out.put(bytes);
}

fn encode_record(out: &mut Vec<u8>, record: &Record) {
    let (kind, frame, value) = match *record {
        Record::Checksum { frame, value } => (ITEM_CHECKSUM, frame, value as i64),
        Record::Anchor { frame, start_us } => (ITEM_ANCHOR, frame, start_us),
    };
    out.u8(kind);
    out.u16(12);
    out.u32(frame);
    out.i64(value);
}

/// Greedy packing of item sizes into parts of `room` bytes each: the same
/// rule [`encode_turn`] applies, kept incrementally so the session can tell
/// before accepting a command whether the turn would still fit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartPlan {
    room: usize,
    parts: usize,
    fill: usize,
    items_in_part: usize,
}

impl PartPlan {
    /// An empty turn (one empty part) for messages of `max_message_bytes`.
    pub fn new(max_message_bytes: usize) -> PartPlan {
        PartPlan {
            room: max_message_bytes.saturating_sub(TURN_HEADER_BYTES),
            parts: 1,
            fill: 0,
            items_in_part: 0,
        }
    }

    /// Add an item of `len` encoded bytes; `None` if it can never fit a part.
    pub fn add(&mut self, len: usize) -> Option<()> {
        if len > self.room {
            return None;
        }
        if self.fill + len > self.room || self.items_in_part == usize::from(u16::MAX) {
            self.parts += 1;
            self.fill = 0;
            self.items_in_part = 0;
        }
        self.fill += len;
        self.items_in_part += 1;
        Some(())
    }

    /// Parts the turn takes so far.
    pub fn parts(&self) -> usize {
        self.parts
    }
}

/// Encode the turn of send frame `send_frame`, tagged `tag`, as parts of at
/// most `max_message_bytes` each: items first (issue order), then records.
/// Fails if it would take more than [`MAX_TURN_PARTS`] parts or an item does
/// not fit one part; the session checks both before it accepts anything.
pub fn encode_turn(
    send_frame: u32,
    tag: u32,
    items: &[Item],
    records: &[Record],
    max_message_bytes: usize,
) -> Result<Vec<Vec<u8>>> {
    let mut parts = Vec::new();
    let count = encode_turn_into(
        send_frame,
        tag,
        items,
        records,
        max_message_bytes,
        &mut parts,
    )?;
    parts.truncate(count);
    Ok(parts)
}

/// [`encode_turn`] into buffers the caller keeps: the parts are
/// `parts[..count]`, for the returned count; `parts` grows only when a turn
/// needs more parts than any before, so a running game allocates nothing.
pub fn encode_turn_into(
    send_frame: u32,
    tag: u32,
    items: &[Item],
    records: &[Record],
    max_message_bytes: usize,
    parts: &mut Vec<Vec<u8>>,
) -> Result<usize> {
    let lengths = || {
        items
            .iter()
            .map(Item::encoded_len)
            .chain(records.iter().map(|_| Record::ENCODED_LEN))
    };
    // First pass: the plan, which part each item goes to.
    let mut plan = PartPlan::new(max_message_bytes);
    for len in lengths() {
        plan.add(len).ok_or_else(|| {
            Error::invalid_value(
                "a turn item's length",
                len,
                format!("at most {max_message_bytes} bytes (one message)"),
            )
        })?;
    }
    if plan.parts() > usize::from(MAX_TURN_PARTS) {
        return Err(Error::Full("a turn of more than MAX_TURN_PARTS parts"));
    }
    let count = plan.parts() as u8;
    while parts.len() < usize::from(count) {
        parts.push(Vec::new());
    }
    for (index, out) in parts[..usize::from(count)].iter_mut().enumerate() {
        out.clear();
        out.put(&[MSG_TURN, TURN_LAYOUT_VERSION]);
        out.u32(send_frame);
        out.u32(tag);
        out.put(&[index as u8, count]);
        out.u16(0);
    }
    // Second pass: the same plan again, writing each item into its part.
    let mut plan = PartPlan::new(max_message_bytes);
    let mut counts = [0u16; MAX_TURN_PARTS as usize];
    let mut next_part = lengths().map(|len| {
        let _ = plan.add(len);
        plan.parts() - 1
    });
    for item in items {
        let part = next_part.next().unwrap_or(0);
        encode_item(&mut parts[part], item);
        counts[part] += 1;
    }
    for record in records {
        let part = next_part.next().unwrap_or(0);
        encode_record(&mut parts[part], record);
        counts[part] += 1;
    }
    for (part, n) in parts.iter_mut().zip(counts).take(usize::from(count)) {
        part[12..14].copy_from_slice(&n.to_le_bytes());
    }
    Ok(usize::from(count))
}

/// A turn part's header fields after kind and version, checked.
fn turn_header(r: &mut Reader<'_>) -> std::result::Result<(u32, u32, u8, u8, u16), DecodeError> {
    let send_frame = r.u32()?;
    let tag = r.u32()?;
    let index = r.u8()?;
    let count = r.u8()?;
    let items_count = r.u16()?;
    if tag <= send_frame {
        return Err(DecodeError::Invalid(
            "a turn's tag must be after its send frame",
        ));
    }
    if count == 0 || count > MAX_TURN_PARTS || index >= count {
        return Err(DecodeError::Invalid(
            "a turn's part index or count is out of range",
        ));
    }
    // Every item takes at least its header: the count cannot promise more
    // items than bytes remain (no allocation beyond the message's length).
    if usize::from(items_count) * ITEM_HEADER_BYTES > r.left() {
        return Err(DecodeError::Invalid(
            "a turn's item count exceeds its length",
        ));
    }
    Ok((send_frame, tag, index, count, items_count))
}

/// One item's kind and body.
fn item<'a>(r: &mut Reader<'a>) -> std::result::Result<(u8, &'a [u8]), DecodeError> {
    let kind = r.u8()?;
    let len = usize::from(r.u16()?);
    Ok((kind, r.take(len)?))
}

/// A removal's or a record's body (the other items nest event payloads).
fn small_item(kind: u8, body: &[u8]) -> std::result::Result<Small, DecodeError> {
    let mut b = Reader::new(body);
    let small = match kind {
        ITEM_REMOVAL => Small::Item(Item::Removal(b.u8()?)),
        ITEM_CHECKSUM => Small::Record(Record::Checksum {
            frame: b.u32()?,
            value: b.u64()?,
        }),
        ITEM_ANCHOR => Small::Record(Record::Anchor {
            frame: b.u32()?,
            start_us: b.i64()?,
        }),
        _ => return Err(DecodeError::UnknownKind(kind)),
    };
    b.finish()?;
    Ok(small)
}

/// What [`small_item`] read.
enum Small {
    Item(Item),
    Record(Record),
}

fn decode_turn_body(
    r: &mut Reader<'_>,
    mut items: Vec<Item>,
    mut records: Vec<Record>,
) -> Result<TurnPart> {
    let (send_frame, tag, index, count, items_count) = turn_header(r).map_err(malformed)?;
    items.clear();
    items.reserve(usize::from(items_count));
    records.clear();
    let mut part = TurnPart {
        send_frame,
        tag,
        index,
        count,
        items,
        records,
    };
    for _ in 0..items_count {
        let (kind, body) = item(r).map_err(malformed)?;
        match kind {
            ITEM_COMMAND => part.items.push(Item::Command(body.to_vec())),
            ITEM_REPORT => part
                .items
                .push(Item::Report(ReportLayout::Needs.decode(body)?)),
            ITEM_TIMING => part
                .items
                .push(Item::Timing(TimingLayout::TIBERIAN_SUN.decode(body)?)),
            _ => match small_item(kind, body).map_err(malformed)? {
                Small::Item(item) => part.items.push(item),
                Small::Record(record) => part.records.push(record),
            },
        }
    }
    r.finish().map_err(malformed)?;
    Ok(part)
}

/// The version a message of another layout version says it is in (byte 1,
/// kept there by every version: [`TURN_LAYOUT_VERSION`]), or `None` when it
/// is of this version or too short to say.
pub fn other_version(message: &[u8]) -> Option<u8> {
    message
        .get(1)
        .copied()
        .filter(|&version| version != TURN_LAYOUT_VERSION)
}

/// The kind and version every message opens with.
fn expect_header(r: &mut Reader<'_>, kind: u8) -> std::result::Result<(), DecodeError> {
    let got = r.u8()?;
    if got != kind {
        return Err(DecodeError::UnknownKind(got));
    }
    let version = r.u8()?;
    if version != TURN_LAYOUT_VERSION {
        return Err(DecodeError::BadVersion {
            got: version,
            expected: TURN_LAYOUT_VERSION,
        });
    }
    Ok(())
}

/// Decode one turn part message (kind 1), as sent or as carried in a relay.
pub(crate) fn decode_turn(bytes: &[u8]) -> Result<TurnPart> {
    let mut r = Reader::new(bytes);
    expect_header(&mut r, MSG_TURN).map_err(malformed)?;
    decode_turn_body(&mut r, Vec::new(), Vec::new())
}

/// Decode any lockstep link message, validating every field.
pub fn decode(bytes: &[u8]) -> Result<Message> {
    decode_reusing(bytes, &mut Vec::new(), &mut Vec::new())
}

/// [`decode`], where a turn part (direct, not relayed) takes its item and
/// record lists from `items` and `records` (emptied first; they are left
/// empty): a receiver that hands the lists back once it has used them
/// decodes turns without allocating.
pub fn decode_reusing(
    bytes: &[u8],
    items: &mut Vec<Item>,
    records: &mut Vec<Record>,
) -> Result<Message> {
    let mut r = Reader::new(bytes);
    let kind = *bytes.first().ok_or(malformed(DecodeError::TooShort {
        got: 0,
        expected: 2,
    }))?;
    expect_header(&mut r, kind).map_err(malformed)?;
    match kind {
        MSG_TURN => {
            let part = decode_turn_body(&mut r, std::mem::take(items), std::mem::take(records))?;
            Ok(Message::Turn(part))
        }
        MSG_RELAY => {
            let dropped = r.u8().map_err(malformed)?;
            Ok(Message::Relay {
                dropped,
                part: decode_turn(r.rest())?,
            })
        }
        _ => control(kind, &mut r).map_err(malformed),
    }
}

/// The messages that carry no turn, each read whole.
fn control(kind: u8, r: &mut Reader<'_>) -> std::result::Result<Message, DecodeError> {
    let holding = |v: u32| (v != VOTE_NONE).then_some(v);
    let message = match kind {
        MSG_PING => Message::Ping { t0: r.i64()? },
        MSG_PONG => Message::Pong {
            t0: r.i64()?,
            t1: r.i64()?,
            t2: r.i64()?,
        },
        MSG_DROP_VOTE => {
            let dropped = r.u8()?;
            let holds = r.u32()?;
            let dropping = r.u32()?;
            if dropped >= 32 || dropping & (1 << dropped) == 0 {
                return Err(DecodeError::Invalid(
                    "a drop vote must name its seat in its mask",
                ));
            }
            Message::DropVote {
                dropped,
                holds: holding(holds),
                dropping,
            }
        }
        MSG_RELAY_REQUEST => Message::RelayRequest {
            dropped: r.u8()?,
            after: holding(r.u32()?),
        },
        MSG_DROP_DECIDED => Message::DropDecided {
            dropped: r.u8()?,
            cut: holding(r.u32()?),
        },
        _ => return Err(DecodeError::UnknownKind(kind)),
    };
    r.finish()?;
    Ok(message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timing::Timing;

    fn items() -> Vec<Item> {
        vec![
            Item::Command(vec![1, 2, 3]),
            Item::Removal(2),
            Item::Timing(TimingEvent {
                target: Timing::new(2, 6).unwrap(),
                fps: 30,
            }),
        ]
    }

    #[test]
    fn a_turn_round_trips_in_one_part() {
        let records = [
            Record::Checksum {
                frame: 64,
                value: u64::MAX - 3,
            },
            Record::Anchor {
                frame: 60,
                start_us: -5,
            },
        ];
        let parts = encode_turn(60, 66, &items(), &records, 1024).unwrap();
        assert_eq!(parts.len(), 1);
        assert_eq!(&parts[0][..2], &[MSG_TURN, TURN_LAYOUT_VERSION]);
        let part = decode_turn(&parts[0]).unwrap();
        assert_eq!(
            part,
            TurnPart {
                send_frame: 60,
                tag: 66,
                index: 0,
                count: 1,
                items: items(),
                records: records.to_vec(),
            }
        );
    }

    #[test]
    fn a_large_turn_splits_into_numbered_parts_in_issue_order() {
        let commands: Vec<Item> = (0..10u8).map(|i| Item::Command(vec![i; 300])).collect();
        let parts = encode_turn(8, 12, &commands, &[], 1024).unwrap();
        assert_eq!(
            parts.len(),
            4,
            "three 303-byte items per 1010 bytes of room"
        );
        let mut all = Vec::new();
        for (i, raw) in parts.iter().enumerate() {
            assert!(raw.len() <= 1024);
            let part = decode_turn(raw).unwrap();
            assert_eq!((part.index, part.count), (i as u8, 4));
            all.extend(part.items);
        }
        assert_eq!(all, commands);
    }

    #[test]
    fn the_part_plan_predicts_the_encoder() {
        let mut plan = PartPlan::new(200);
        let commands: Vec<Item> = (0..40u8)
            .map(|i| Item::Command(vec![i; usize::from(i) * 3 % 170]))
            .collect();
        for c in &commands {
            plan.add(c.encoded_len()).unwrap();
        }
        let parts = encode_turn(1, 2, &commands, &[], 200).unwrap();
        assert_eq!(plan.parts(), parts.len());
    }

    #[test]
    fn too_many_parts_or_an_oversized_item_are_refused() {
        let commands: Vec<Item> = (0..40).map(|_| Item::Command(vec![0; 900])).collect();
        assert!(matches!(
            encode_turn(1, 2, &commands, &[], 1024),
            Err(Error::Full(_))
        ));
        assert!(encode_turn(1, 2, &[Item::Command(vec![0; 1020])], &[], 1024).is_err());
    }

    #[test]
    fn votes_pings_and_relays_round_trip() {
        let vote = encode_drop_vote(3, Some(120), 0b1100);
        assert_eq!(
            decode(&vote).unwrap(),
            Message::DropVote {
                dropped: 3,
                holds: Some(120),
                dropping: 0b1100
            }
        );
        let none = encode_drop_vote(2, None, 0b100);
        assert_eq!(
            decode(&none).unwrap(),
            Message::DropVote {
                dropped: 2,
                holds: None,
                dropping: 0b100
            }
        );
        assert_eq!(decode(&encode_ping(-7)).unwrap(), Message::Ping { t0: -7 });
        assert_eq!(
            decode(&encode_relay_request(5, Some(9))).unwrap(),
            Message::RelayRequest {
                dropped: 5,
                after: Some(9)
            }
        );
        assert_eq!(
            decode(&encode_relay_request(5, None)).unwrap(),
            Message::RelayRequest {
                dropped: 5,
                after: None
            }
        );
        let decided = encode_drop_decided(4, Some(77));
        assert_eq!(decided, [7, TURN_LAYOUT_VERSION, 4, 77, 0, 0, 0]);
        assert_eq!(
            decode(&decided).unwrap(),
            Message::DropDecided {
                dropped: 4,
                cut: Some(77)
            }
        );
        assert_eq!(
            decode(&encode_drop_decided(1, None)).unwrap(),
            Message::DropDecided {
                dropped: 1,
                cut: None
            }
        );
        assert_eq!(
            decode(&encode_pong(1, 2, 3)).unwrap(),
            Message::Pong {
                t0: 1,
                t1: 2,
                t2: 3
            }
        );
        let turn = encode_turn(4, 10, &items(), &[], 1024).unwrap();
        let relay = encode_relay(1, &turn[0]);
        match decode(&relay).unwrap() {
            Message::Relay { dropped, part } => {
                assert_eq!(dropped, 1);
                assert_eq!(part, decode_turn(&turn[0]).unwrap());
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn malformed_messages_are_refused() {
        let good = encode_turn(4, 10, &items(), &[], 1024).unwrap().remove(0);
        let mut cases: Vec<Vec<u8>> = vec![Vec::new(), vec![MSG_TURN], vec![9, 2]];
        let mut old_version = good.clone();
        old_version[1] = 1;
        cases.push(old_version);
        let mut tag_not_after = good.clone();
        tag_not_after[6..10].copy_from_slice(&4u32.to_le_bytes());
        cases.push(tag_not_after);
        let mut index_past_count = good.clone();
        index_past_count[10] = 1;
        cases.push(index_past_count);
        let mut too_many_parts = good.clone();
        too_many_parts[11] = MAX_TURN_PARTS + 1;
        cases.push(too_many_parts);
        let mut huge_count = good.clone();
        huge_count[12..14].copy_from_slice(&u16::MAX.to_le_bytes());
        cases.push(huge_count);
        let mut trailing = good.clone();
        trailing.push(0);
        cases.push(trailing);
        cases.push(good[..good.len() - 1].to_vec());
        let mut bad_item = good.clone();
        bad_item[14] = 99;
        cases.push(bad_item);
        // A vote whose mask does not name its seat.
        cases.push(encode_drop_vote(3, None, 0b1).to_vec());
        for case in cases {
            assert!(decode(&case).is_err(), "{case:?}");
        }
        assert!(decode(&good).is_ok());
    }
}
