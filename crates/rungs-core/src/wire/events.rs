//! Event payloads (S7): TIMING and NETWORK_REPORT, byte for byte.
//!
//! The engine owns every event ID (S7); this module only turns the *payload*
//! of an event into bytes and back. Encoders write into a caller buffer and
//! never allocate; decoders keep the contract of every wire codec (the
//! [`super`] module docs): exactly one length per layout, and everything
//! else refused with [`Error::Malformed`] (the layout's name and the
//! [`DecodeError`]), without panicking and without any effect. All
//! multi-byte fields are little-endian, as the original games wrote them on
//! x86. `docs/payloads.md` carries the same tables.
//!
//! # TIMING, Tiberian Sun layout (5 bytes)
//!
//! The layout of the original game, so an engine keeps its TIMING event ID
//! (31 in Tiberian Sun) and its own handler.
//!
//! | offset | size | field              | meaning                                           |
//! |-------:|-----:|--------------------|---------------------------------------------------|
//! | 0      | 2    | `DesiredFrameRate` | frames per second, 1–255                          |
//! | 2      | 2    | `MaxAhead`         | look-ahead in frames, plus the fog bias (below)   |
//! | 4      | 1    | `FrameSendRate`    | send period in frames, 1–10                       |
//!
//! The decoded timing must satisfy S1 (`look_ahead % send_period == 0`,
//! `send_period <= look_ahead <= 250`).
//!
//! **Fog-of-war bias.** Vanilla Tiberian Sun adds 10 to `MaxAhead` when fog of
//! war is on and subtracts it again where it executes TIMING. An engine that
//! keeps that quirk passes `fog_bias = 10` (see [`TS_FOG_BIAS`]) while fog is
//! on, and 0 otherwise; one that removed it always passes 0. Every machine of
//! a game must pass the same bias, because it changes the bytes.
//!
//! # TIMING, Red Alert layout (4 bytes)
//!
//! | offset | size | field              | meaning                  |
//! |-------:|-----:|--------------------|--------------------------|
//! | 0      | 2    | `DesiredFrameRate` | frames per second, 1–255 |
//! | 2      | 2    | `MaxAhead`         | look-ahead in frames     |
//!
//! Red Alert's TIMING (ID 29) has no `FrameSendRate`: the send period is a
//! session setting fixed before the game. The layout therefore carries the
//! session's send period outside the bytes; encoding a target on another send
//! period is refused, since those bytes could not say so. An engine that wants
//! the whole ladder (which changes the send period) needs the 5-byte layout.
//!
//! # NETWORK_REPORT, compact layout (6 bytes, OpenTS)
//!
//! OpenTS's event (OpenTS put it right after LATENCYFUDGE = 35; an engine
//! chooses its own ID, one no part of its game uses, docs/payloads.md):
//!
//! | offset | size | field            | meaning                                   |
//! |-------:|-----:|------------------|-------------------------------------------|
//! | 0      | 2    | average process  | ms per frame, **rounded up**, ≤ 65535     |
//! | 2      | 2    | worst round trip | ms, ≤ 65534; `0xFFFF` = none              |
//! | 4      | 2    | longest wait     | ms, ≤ 65535                               |
//!
//! Encoding rounds `process_us` *up* to whole milliseconds, so a slow machine
//! is never reported faster than it is (the frame rate it allows, S4.2, can
//! only come out lower). Values too large saturate: a round trip saturates at
//! `0xFFFE` because `0xFFFF` means none. Decoding gives `process_us = ms * 1000`.
//!
//! # NETWORK_REPORT, extended layout (9 bytes, version 1)
//!
//! Keeps the microseconds of the processing time.
//!
//! | offset | size | field            | meaning                                   |
//! |-------:|-----:|------------------|-------------------------------------------|
//! | 0      | 1    | version          | always 1; anything else is malformed      |
//! | 1      | 4    | average process  | µs per frame                              |
//! | 5      | 2    | worst round trip | ms, ≤ 65534; `0xFFFF` = none              |
//! | 7      | 2    | longest wait     | ms, ≤ 65535                               |
//!
//! The round trip and the wait saturate as in the compact layout.
//!
//! # NETWORK_REPORT, detailed layout (22 bytes, version 2)
//!
//! The extended layout's fields, then the round-trip distribution and the
//! stalls of the interval ([`ReportDetail`], what the `tracking` policy
//! reads; docs/tracking.md):
//!
//! | offset | size | field            | meaning                                   |
//! |-------:|-----:|------------------|-------------------------------------------|
//! | 0      | 1    | version          | always 2                                  |
//! | 1      | 4    | average process  | µs per frame                              |
//! | 5      | 2    | worst round trip | ms, ≤ 65534; `0xFFFF` = none              |
//! | 7      | 2    | longest wait     | ms, ≤ 65535 (last two intervals)          |
//! | 9      | 2    | median round trip| ms, ≤ 65534; `0xFFFF` = none              |
//! | 11     | 2    | p90 round trip   | ms, ≤ 65534; `0xFFFF` = none              |
//! | 13     | 2    | latest round trip| ms, ≤ 65534; `0xFFFF` = none              |
//! | 15     | 2    | frames           | frames run in the interval, ≤ 65535       |
//! | 17     | 2    | stalled frames   | ≤ frames                                  |
//! | 19     | 2    | stall time       | ms waited in the interval, ≤ 65535        |
//! | 21     | 1    | waited for       | seat 0–15; `0xFF` = nobody known          |
//!
//! The four round trips are all none or none of them, and `median <= p90 <=
//! worst`, `latest <= worst`; without a stalled frame there is no stall time
//! and nobody waited for. Bytes that break any of this are malformed; a
//! report whose detail breaks it (or that has none) is refused by the
//! encoder (`Invalid`). Counts saturate (the frames first, so
//! `stalled <= frames` survives saturation).
//!
//! # NETWORK_REPORT, needs layout (32 bytes, version 3)
//!
//! The detailed layout's 22 bytes (with version byte 3), then how much
//! look-ahead the interval's frames needed ([`LookAheadNeeds`],
//! `report::needs`), which the `tracking` policy sheds its margin and
//! guards its decreases by (docs/tracking.md, rule 10):
//!
//! | offset | size | field            | meaning                                   |
//! |-------:|-----:|------------------|-------------------------------------------|
//! | 0      | 1    | version          | always 3                                  |
//! | 1      | 21   | detailed fields  | as in the detailed layout, offsets 1–21   |
//! | 22     | 1    | reference        | look-ahead 1–250 the counts are below; 0 = no needs measured |
//! | 23     | 1    | most             | the most look-ahead a frame needed, 1–250 |
//! | 24     | 2    | above reference  | frames that needed more than `reference`  |
//! | 26     | 2    | above - 1        | … more than `reference - 1`               |
//! | 28     | 2    | above - 2        | … more than `reference - 2`               |
//! | 30     | 2    | above - 3        | … more than `reference - 3`               |
//!
//! With reference 0 the seven bytes after it are 0. Otherwise the counts
//! never decrease from one to the next, and a count is 0 exactly when
//! `most` is at or below its level ([`LookAheadNeeds::check`]). Bytes that
//! break this are malformed; so is any detailed field that breaks the
//! detailed layout's rules. The detailed layout leaves the needs out.
//!
//! Every layout fits Tiberian Sun's 36-byte event data union
//! ([`TS_EVENT_DATA_LEN`]), checked at compile time.

use super::cursor::{exact_len, DecodeError, PutLe, Reader, Writer};
use crate::error::{Error, Result};
use crate::report::{LookAheadNeeds, Report, ReportDetail};
use crate::timing::{Timing, TimingEvent};

/// Bytes in Tiberian Sun's event data union: every payload must fit (S7).
pub const TS_EVENT_DATA_LEN: usize = 36;
/// Length of TIMING in the Tiberian Sun layout.
pub const TIMING_LEN: usize = 5;
/// Length of TIMING in the Red Alert layout.
pub const RA_TIMING_LEN: usize = 4;
/// Length of NETWORK_REPORT in the compact (OpenTS) layout.
pub const REPORT_LEN: usize = 6;
/// Length of NETWORK_REPORT in the extended layout.
pub const REPORT_EXTENDED_LEN: usize = 9;
/// The version byte that opens the extended NETWORK_REPORT layout.
pub const REPORT_EXTENDED_VERSION: u8 = 1;
/// Length of NETWORK_REPORT in the detailed layout.
pub const REPORT_DETAILED_LEN: usize = 22;
/// The version byte that opens the detailed NETWORK_REPORT layout.
pub const REPORT_DETAILED_VERSION: u8 = 2;
/// Length of NETWORK_REPORT in the needs layout.
pub const REPORT_NEEDS_LEN: usize = 32;
/// The version byte that opens the needs NETWORK_REPORT layout.
pub const REPORT_NEEDS_VERSION: u8 = 3;
/// The waited-for value that means "nobody known".
pub const SEAT_NONE: u8 = 0xFF;
/// What vanilla Tiberian Sun adds to `MaxAhead` while fog of war is on.
pub const TS_FOG_BIAS: u8 = 10;
/// The worst-round-trip value that means "none" (S3).
pub const RTT_NONE: u16 = 0xFFFF;

const _: () = assert!(TIMING_LEN <= TS_EVENT_DATA_LEN);
const _: () = assert!(RA_TIMING_LEN <= TS_EVENT_DATA_LEN);
const _: () = assert!(REPORT_LEN <= TS_EVENT_DATA_LEN);
const _: () = assert!(REPORT_EXTENDED_LEN <= TS_EVENT_DATA_LEN);
const _: () = assert!(REPORT_DETAILED_LEN <= TS_EVENT_DATA_LEN);
const _: () = assert!(REPORT_NEEDS_LEN <= TS_EVENT_DATA_LEN);
const _: () =
    assert!(REPORT_NEEDS_LEN == REPORT_DETAILED_LEN + 2 + 2 * crate::report::needs::NEED_LEVELS);

/// How an engine lays out its TIMING event's payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimingLayout {
    /// Tiberian Sun, 5 bytes. `fog_bias` is added to `MaxAhead` on encode and
    /// subtracted on decode: [`TS_FOG_BIAS`] for an engine that keeps vanilla
    /// TS's fog-of-war quirk while fog is on, else 0.
    TiberianSun {
        /// Frames added to `MaxAhead` on encode and taken off on decode.
        fog_bias: u8,
    },
    /// Red Alert, 4 bytes, no `FrameSendRate`: the session's fixed send
    /// period (1–10) stands in for it.
    RedAlert {
        /// The session's fixed send period, 1–10.
        send_period: u8,
    },
}

impl TimingLayout {
    /// Tiberian Sun layout without a fog bias.
    pub const TIBERIAN_SUN: TimingLayout = TimingLayout::TiberianSun { fog_bias: 0 };

    /// Bytes a payload in this layout takes.
    pub fn payload_len(self) -> usize {
        match self {
            TimingLayout::TiberianSun { .. } => TIMING_LEN,
            TimingLayout::RedAlert { .. } => RA_TIMING_LEN,
        }
    }

    /// The layout's name in error messages.
    pub fn name(self) -> &'static str {
        match self {
            TimingLayout::TiberianSun { .. } => "TIMING",
            TimingLayout::RedAlert { .. } => "Red Alert TIMING",
        }
    }

    /// Write `event` into the start of `buf`; returns the bytes written.
    ///
    /// Refuses a frame rate of 0 and, in the Red Alert layout, a target whose
    /// send period differs from the layout's (`Invalid`); a `buf`
    /// shorter than [`payload_len`](Self::payload_len) gets `BufferTooSmall`.
    /// On error nothing is written.
    pub fn encode(self, event: &TimingEvent, buf: &mut [u8]) -> Result<usize> {
        if event.fps == 0 {
            return Err(Error::invalid_value("event.fps", 0u8, "1 to 255"));
        }
        let look_ahead = u16::from(event.target.look_ahead());
        let (max_ahead, frame_send_rate) = match self {
            TimingLayout::TiberianSun { fog_bias } => (
                look_ahead + u16::from(fog_bias),
                Some(event.target.send_period()),
            ),
            TimingLayout::RedAlert { send_period } => {
                check_session_send_period(send_period)?;
                if event.target.send_period() != send_period {
                    return Err(Error::invalid_value(
                        "event.target's send period",
                        event.target.send_period(),
                        format!(
                            "the session's, {send_period} (Red Alert's TIMING has no send period)"
                        ),
                    ));
                }
                (look_ahead, None)
            }
        };
        let mut w = output(buf, self.payload_len())?;
        w.u16(u16::from(event.fps));
        w.u16(max_ahead);
        if let Some(send_period) = frame_send_rate {
            w.u8(send_period);
        }
        written(w)
    }

    /// Read a TIMING payload of exactly [`payload_len`](Self::payload_len)
    /// bytes. Refuses a wrong length, a frame rate of 0 or above 255, a
    /// `MaxAhead` below the fog bias, and a timing that breaks S1, all as
    /// `Malformed`. A Red Alert layout with a send period outside 1–10 is the
    /// caller's mistake: `Invalid`.
    pub fn decode(self, bytes: &[u8]) -> Result<TimingEvent> {
        if let TimingLayout::RedAlert { send_period } = self {
            check_session_send_period(send_period)?;
        }
        self.decode_fields(bytes)
            .map_err(|e| Error::malformed(self.name(), e))
    }

    /// The fields of [`decode`](Self::decode), in layout order.
    fn decode_fields(self, bytes: &[u8]) -> std::result::Result<TimingEvent, DecodeError> {
        exact_len(bytes.len(), self.payload_len())?;
        let mut r = Reader::new(bytes);
        let fps = u8::try_from(r.u16()?)
            .ok()
            .filter(|&fps| fps != 0)
            .ok_or(DecodeError::Invalid("TIMING frame rate must be 1 to 255"))?;
        let max_ahead = r.u16()?;
        let (look_ahead, send_period) = match self {
            TimingLayout::TiberianSun { fog_bias } => {
                let look_ahead =
                    max_ahead
                        .checked_sub(u16::from(fog_bias))
                        .ok_or(DecodeError::Invalid(
                            "TIMING MaxAhead is below the fog-of-war bias",
                        ))?;
                (look_ahead, r.u8()?)
            }
            TimingLayout::RedAlert { send_period } => (max_ahead, send_period),
        };
        r.finish()?;
        let look_ahead = u8::try_from(look_ahead)
            .map_err(|_| DecodeError::Invalid("TIMING look-ahead must be at most 250"))?;
        let target = Timing::new(send_period, look_ahead).map_err(|e| {
            DecodeError::Invalid(match e.invalid_argument().map(|i| i.field()) {
                Some("send period") => "TIMING send period must be 1 to 10",
                Some("look-ahead") => {
                    "TIMING look-ahead must be a multiple of the send period, from it to 250"
                }
                _ => "TIMING breaks the timing rules (S1)",
            })
        })?;
        Ok(TimingEvent { target, fps })
    }
}

/// How an engine lays out its NETWORK_REPORT event's payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReportLayout {
    /// OpenTS's 6 bytes: whole milliseconds everywhere.
    Compact,
    /// 9 bytes, version 1: the processing time in microseconds.
    Extended,
    /// 22 bytes, version 2: the extended fields plus the round-trip
    /// distribution and the stalls ([`ReportDetail`]).
    Detailed,
    /// 32 bytes, version 3: the detailed fields plus the look-ahead the
    /// interval's frames needed ([`LookAheadNeeds`]).
    Needs,
}

impl ReportLayout {
    /// Bytes a payload in this layout takes.
    pub fn payload_len(self) -> usize {
        match self {
            ReportLayout::Compact => REPORT_LEN,
            ReportLayout::Extended => REPORT_EXTENDED_LEN,
            ReportLayout::Detailed => REPORT_DETAILED_LEN,
            ReportLayout::Needs => REPORT_NEEDS_LEN,
        }
    }

    /// The layout's name in error messages.
    pub fn name(self) -> &'static str {
        match self {
            ReportLayout::Compact => "NETWORK_REPORT",
            ReportLayout::Extended => "extended NETWORK_REPORT",
            ReportLayout::Detailed => "detailed NETWORK_REPORT",
            ReportLayout::Needs => "needs NETWORK_REPORT",
        }
    }

    /// Whether this layout carries the detail (the detailed and needs
    /// layouts).
    pub fn has_detail(self) -> bool {
        matches!(self, ReportLayout::Detailed | ReportLayout::Needs)
    }

    /// The version byte the layout opens with (`None`: the compact one has
    /// none).
    fn version(self) -> Option<u8> {
        match self {
            ReportLayout::Compact => None,
            ReportLayout::Extended => Some(REPORT_EXTENDED_VERSION),
            ReportLayout::Detailed => Some(REPORT_DETAILED_VERSION),
            ReportLayout::Needs => Some(REPORT_NEEDS_VERSION),
        }
    }

    /// Write `report` into the start of `buf`; returns the bytes written.
    /// Large values saturate and the compact layout rounds the processing
    /// time up (module docs); the compact and extended layouts leave the
    /// detail out, the detailed layout its needs. The detailed and needs
    /// layouts refuse a report without a detail or with one that breaks
    /// [`ReportDetail`]'s invariants (`Invalid`). A `buf` shorter than
    /// [`payload_len`](Self::payload_len) gets `BufferTooSmall`. On error
    /// nothing is written.
    pub fn encode(self, report: &Report, buf: &mut [u8]) -> Result<usize> {
        if self.has_detail() {
            let detail = report.detail.as_ref().ok_or(Error::invalid_value(
                "report.detail",
                "none",
                "a detail (the detailed and needs NETWORK_REPORT layouts carry it)",
            ))?;
            check_detail(report.worst_rtt_ms, detail).map_err(|rule| {
                Error::invalid_value(
                    "report.detail",
                    format!("against its rules ({rule})"),
                    "a detail that keeps ReportDetail's invariants",
                )
            })?;
        }
        let mut w = output(buf, self.payload_len())?;
        match self.version() {
            None => w.u16(saturate_u16(report.process_us.div_ceil(1000))),
            Some(version) => {
                w.u8(version);
                w.u32(report.process_us);
            }
        }
        w.u16(rtt_u16(report.worst_rtt_ms));
        w.u16(saturate_u16(report.max_wait_ms));
        if let (true, Some(d)) = (self.has_detail(), report.detail.as_ref()) {
            let frames = saturate_u16(d.frames);
            let stalled = saturate_u16(d.stalled_frames).min(frames);
            w.u16(rtt_u16(d.median_rtt_ms));
            w.u16(rtt_u16(d.p90_rtt_ms));
            w.u16(rtt_u16(d.latest_rtt_ms));
            w.u16(frames);
            w.u16(stalled);
            w.u16(saturate_u16(d.stall_ms));
            w.u8(d.waited_for.unwrap_or(SEAT_NONE));
            if self == ReportLayout::Needs {
                write_needs(d.needs.as_ref(), &mut w);
            }
        }
        written(w)
    }

    /// Read a NETWORK_REPORT payload of exactly
    /// [`payload_len`](Self::payload_len) bytes; the layouts after the
    /// compact one also need their version byte. Anything else is
    /// `Malformed`.
    pub fn decode(self, bytes: &[u8]) -> Result<Report> {
        self.decode_fields(bytes)
            .map_err(|e| Error::malformed(self.name(), e))
    }

    /// The fields of [`decode`](Self::decode), in layout order; the detail's
    /// rules are judged once it is read. (The relay's TimingReport nests
    /// this layout and keeps the bare error.)
    pub(crate) fn decode_fields(self, bytes: &[u8]) -> std::result::Result<Report, DecodeError> {
        exact_len(bytes.len(), self.payload_len())?;
        let mut r = Reader::new(bytes);
        let process_us = match self.version() {
            None => u32::from(r.u16()?) * 1000,
            Some(expected) => {
                let got = r.u8()?;
                if got != expected {
                    return Err(DecodeError::BadVersion { got, expected });
                }
                r.u32()?
            }
        };
        let worst_rtt_ms = rtt_from_u16(r.u16()?);
        let max_wait_ms = u32::from(r.u16()?);
        let detail = if self.has_detail() {
            let median_rtt_ms = rtt_from_u16(r.u16()?);
            let p90_rtt_ms = rtt_from_u16(r.u16()?);
            let latest_rtt_ms = rtt_from_u16(r.u16()?);
            let frames = u32::from(r.u16()?);
            let stalled_frames = u32::from(r.u16()?);
            let stall_ms = u32::from(r.u16()?);
            let seat = r.u8()?;
            let detail = ReportDetail {
                median_rtt_ms,
                p90_rtt_ms,
                latest_rtt_ms,
                frames,
                stalled_frames,
                stall_ms,
                waited_for: (seat != SEAT_NONE).then_some(seat),
                needs: if self == ReportLayout::Needs {
                    read_needs(&mut r)?
                } else {
                    None
                },
            };
            check_detail(worst_rtt_ms, &detail).map_err(DecodeError::Invalid)?;
            Some(detail)
        } else {
            None
        };
        r.finish()?;
        Ok(Report {
            process_us,
            max_wait_ms,
            worst_rtt_ms,
            detail,
        })
    }
}

/// [`ReportDetail`]'s invariants, in the order of the layout's fields: the
/// rule broken first, or `Ok`. The encoder and decoder check these; so does
/// the C API for a detail it is handed (`ffi::types::detailed_report`).
pub fn check_detail(
    worst_rtt_ms: Option<u32>,
    d: &ReportDetail,
) -> std::result::Result<(), &'static str> {
    let rtts = [d.median_rtt_ms, d.p90_rtt_ms, d.latest_rtt_ms];
    match worst_rtt_ms {
        None if rtts.iter().any(Option::is_some) => {
            return Err("NETWORK_REPORT detail has round trips but no worst round trip")
        }
        Some(_) if rtts.iter().any(Option::is_none) => {
            return Err("NETWORK_REPORT detail lacks a round trip the worst one has")
        }
        _ => {}
    }
    // Compared as sent (saturated), so a value that saturates stays valid.
    let sent = |ms: Option<u32>| rtt_u16(ms);
    if sent(d.median_rtt_ms) > sent(d.p90_rtt_ms) || sent(d.p90_rtt_ms) > sent(worst_rtt_ms) {
        return Err("NETWORK_REPORT detail must have median <= p90 <= worst round trip");
    }
    if sent(d.latest_rtt_ms) > sent(worst_rtt_ms) {
        return Err("NETWORK_REPORT detail must have latest <= worst round trip");
    }
    if d.stalled_frames > d.frames {
        return Err("NETWORK_REPORT detail has more stalled frames than frames");
    }
    if d.stalled_frames == 0 && (d.stall_ms != 0 || d.waited_for.is_some()) {
        return Err("NETWORK_REPORT detail has stall time or a seat waited for without a stall");
    }
    if d.waited_for
        .is_some_and(|seat| usize::from(seat) >= crate::report::record::MAX_SEATS)
    {
        return Err("NETWORK_REPORT detail's seat waited for must be 0 to 15 or 0xFF");
    }
    match d.needs {
        Some(needs) => needs.check(),
        None => Ok(()),
    }
}

/// Bytes of the needs layout after the detailed fields.
const NEEDS_BYTES: usize = REPORT_NEEDS_LEN - REPORT_DETAILED_LEN;

/// The needs layout's last ten bytes: reference 0 and zeros for none.
fn write_needs(needs: Option<&LookAheadNeeds>, w: &mut Writer<'_>) {
    let Some(needs) = needs else {
        w.put(&[0; NEEDS_BYTES]);
        return;
    };
    w.u8(needs.reference);
    w.u8(needs.most);
    for &count in &needs.above {
        w.u16(count);
    }
}

/// The needs layout's last ten bytes; `check_detail` judges them after.
fn read_needs(r: &mut Reader<'_>) -> std::result::Result<Option<LookAheadNeeds>, DecodeError> {
    let reference = r.u8()?;
    let most = r.u8()?;
    let mut above = [0u16; crate::report::needs::NEED_LEVELS];
    for count in &mut above {
        *count = r.u16()?;
    }
    if reference == 0 {
        if most != 0 || above.iter().any(|&count| count != 0) {
            return Err(DecodeError::Invalid(
                "NETWORK_REPORT without needs (reference 0) must have zeros after it",
            ));
        }
        return Ok(None);
    }
    Ok(Some(LookAheadNeeds {
        reference,
        most,
        above,
    }))
}

fn rtt_u16(ms: Option<u32>) -> u16 {
    match ms {
        None => RTT_NONE,
        Some(ms) => saturate_u16(ms).min(RTT_NONE - 1),
    }
}

fn rtt_from_u16(value: u16) -> Option<u32> {
    (value != RTT_NONE).then_some(u32::from(value))
}

fn check_session_send_period(send_period: u8) -> Result<()> {
    if (1..=crate::timing::MAX_SEND_PERIOD).contains(&send_period) {
        Ok(())
    } else {
        Err(Error::invalid_value(
            "the Red Alert layout's send_period",
            send_period,
            "1 to 10",
        ))
    }
}

/// A writer over the first `len` bytes of `buf`, or `BufferTooSmall`
/// before anything is written.
fn output(buf: &mut [u8], len: usize) -> Result<Writer<'_>> {
    if buf.len() < len {
        return Err(Error::BufferTooSmall { needed: len });
    }
    Ok(Writer::new(buf, len))
}

/// The length an encoder wrote: the layout's, since [`output`] checked the
/// room for it (the byte-for-byte tests hold each encoder to its length).
fn written(w: Writer<'_>) -> Result<usize> {
    let len = w.len();
    debug_assert!(w.finish().is_some(), "an encoder wrote past its length");
    Ok(len)
}

fn saturate_u16(value: u32) -> u16 {
    u16::try_from(value).unwrap_or(u16::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(send_period: u8, look_ahead: u8, fps: u8) -> TimingEvent {
        TimingEvent {
            target: Timing::new(send_period, look_ahead).unwrap(),
            fps,
        }
    }

    #[test]
    fn tiberian_sun_timing_bytes_are_the_documented_ones() {
        let mut buf = [0xAA; 8];
        let len = TimingLayout::TIBERIAN_SUN
            .encode(&event(3, 9, 30), &mut buf)
            .unwrap();
        assert_eq!(len, TIMING_LEN);
        assert_eq!(&buf[..len], &[30, 0, 9, 0, 3]);
        assert_eq!(buf[len..], [0xAA; 3], "nothing written past the payload");
        assert_eq!(
            TimingLayout::TIBERIAN_SUN.decode(&buf[..len]).unwrap(),
            event(3, 9, 30)
        );
    }

    #[test]
    fn fog_bias_is_added_on_encode_and_removed_on_decode() {
        let layout = TimingLayout::TiberianSun {
            fog_bias: TS_FOG_BIAS,
        };
        let mut buf = [0; TIMING_LEN];
        layout.encode(&event(10, 250, 60), &mut buf).unwrap();
        assert_eq!(buf, [60, 0, 4, 1, 10], "MaxAhead 260 = 250 + 10");
        assert_eq!(layout.decode(&buf).unwrap(), event(10, 250, 60));
        // Without the bias, the same bytes break S1 (look-ahead 260).
        assert!(matches!(
            TimingLayout::TIBERIAN_SUN.decode(&buf),
            Err(Error::Malformed(_))
        ));
        // A MaxAhead below the bias cannot have been written by a biased encoder.
        assert!(matches!(
            layout.decode(&[30, 0, 9, 0, 3]),
            Err(Error::Malformed(_))
        ));
    }

    #[test]
    fn timing_decoder_refuses_each_broken_field() {
        let ts = TimingLayout::TIBERIAN_SUN;
        for bytes in [
            &[30, 0, 9, 0][..],       // short
            &[30, 0, 9, 0, 3, 0][..], // long
            &[0, 0, 9, 0, 3][..],     // frame rate 0
            &[0, 1, 9, 0, 3][..],     // frame rate 256
            &[30, 0, 10, 0, 3][..],   // 10 % 3 != 0 (S1)
            &[30, 0, 2, 0, 3][..],    // look-ahead below send period (S1)
            &[30, 0, 9, 0, 0][..],    // send period 0 (S1)
            &[30, 0, 33, 0, 11][..],  // send period 11 (S1)
            &[30, 0, 252, 0, 2][..],  // look-ahead 252 > 250 (S1)
            &[30, 0, 0, 1, 1][..],    // look-ahead 256
        ] {
            assert!(
                matches!(ts.decode(bytes), Err(Error::Malformed(_))),
                "{bytes:?} must be malformed"
            );
        }
    }

    #[test]
    fn red_alert_layout_carries_the_session_send_period() {
        let ra = TimingLayout::RedAlert { send_period: 3 };
        let mut buf = [0; RA_TIMING_LEN];
        assert_eq!(ra.encode(&event(3, 15, 30), &mut buf), Ok(RA_TIMING_LEN));
        assert_eq!(buf, [30, 0, 15, 0]);
        assert_eq!(ra.decode(&buf).unwrap(), event(3, 15, 30));
        // A target on another send period cannot be said in these bytes.
        let mut untouched = [0xAA; RA_TIMING_LEN];
        assert!(matches!(
            ra.encode(&event(2, 6, 30), &mut untouched),
            Err(Error::Invalid(_))
        ));
        assert_eq!(untouched, [0xAA; RA_TIMING_LEN]);
        // MaxAhead 16 is no multiple of the session's send period 3 (S1).
        assert!(matches!(
            ra.decode(&[30, 0, 16, 0]),
            Err(Error::Malformed(_))
        ));
        // A bad session send period is the caller's mistake, not the bytes'.
        let bad = TimingLayout::RedAlert { send_period: 0 };
        assert!(matches!(bad.decode(&buf), Err(Error::Invalid(_))));
        assert!(matches!(
            bad.encode(&event(3, 15, 30), &mut buf),
            Err(Error::Invalid(_))
        ));
    }

    #[test]
    fn timing_encoder_refuses_small_buffers_and_rate_zero() {
        let mut small = [0xAA; TIMING_LEN - 1];
        assert_eq!(
            TimingLayout::TIBERIAN_SUN.encode(&event(2, 6, 30), &mut small),
            Err(Error::BufferTooSmall { needed: TIMING_LEN })
        );
        assert_eq!(small, [0xAA; TIMING_LEN - 1]);
        let mut buf = [0xAA; TIMING_LEN];
        assert!(matches!(
            TimingLayout::TIBERIAN_SUN.encode(&event(2, 6, 0), &mut buf),
            Err(Error::Invalid(_))
        ));
        assert_eq!(buf, [0xAA; TIMING_LEN]);
    }

    #[test]
    fn compact_report_bytes_round_process_time_up() {
        let report = Report {
            process_us: 12_001,
            max_wait_ms: 250,
            worst_rtt_ms: Some(180),
            detail: None,
        };
        let mut buf = [0; REPORT_LEN];
        assert_eq!(
            ReportLayout::Compact.encode(&report, &mut buf),
            Ok(REPORT_LEN)
        );
        assert_eq!(buf, [13, 0, 180, 0, 250, 0], "12.001 ms reports as 13 ms");
        assert_eq!(
            ReportLayout::Compact.decode(&buf).unwrap(),
            Report {
                process_us: 13_000,
                ..report
            }
        );
    }

    #[test]
    fn compact_report_saturates_and_keeps_none_distinct() {
        let mut buf = [0; REPORT_LEN];
        let huge = Report {
            process_us: u32::MAX,
            max_wait_ms: u32::MAX,
            worst_rtt_ms: Some(u32::MAX),
            detail: None,
        };
        ReportLayout::Compact.encode(&huge, &mut buf).unwrap();
        assert_eq!(buf, [0xFF, 0xFF, 0xFE, 0xFF, 0xFF, 0xFF]);
        let decoded = ReportLayout::Compact.decode(&buf).unwrap();
        assert_eq!(
            decoded.worst_rtt_ms,
            Some(0xFFFE),
            "a huge RTT never reads as none"
        );
        assert_eq!(decoded.process_us, 65_535_000);

        let alone_without_rtt = Report {
            process_us: 0,
            max_wait_ms: 0,
            worst_rtt_ms: None,
            detail: None,
        };
        ReportLayout::Compact
            .encode(&alone_without_rtt, &mut buf)
            .unwrap();
        assert_eq!(buf, [0, 0, 0xFF, 0xFF, 0, 0]);
        assert_eq!(
            ReportLayout::Compact.decode(&buf).unwrap(),
            alone_without_rtt
        );
    }

    #[test]
    fn extended_report_keeps_microseconds() {
        let report = Report {
            process_us: 0x0102_0304,
            max_wait_ms: 99,
            worst_rtt_ms: None,
            detail: None,
        };
        let mut buf = [0; REPORT_EXTENDED_LEN];
        assert_eq!(
            ReportLayout::Extended.encode(&report, &mut buf),
            Ok(REPORT_EXTENDED_LEN)
        );
        assert_eq!(buf, [1, 4, 3, 2, 1, 0xFF, 0xFF, 99, 0]);
        assert_eq!(ReportLayout::Extended.decode(&buf).unwrap(), report);
        buf[0] = 2;
        assert!(matches!(
            ReportLayout::Extended.decode(&buf),
            Err(Error::Malformed(_))
        ));
    }

    fn detailed_example() -> Report {
        Report {
            process_us: 5_000,
            max_wait_ms: 40,
            worst_rtt_ms: Some(180),
            detail: Some(ReportDetail {
                median_rtt_ms: Some(120),
                p90_rtt_ms: Some(150),
                latest_rtt_ms: Some(125),
                frames: 128,
                stalled_frames: 2,
                stall_ms: 40,
                waited_for: Some(3),
                needs: None,
            }),
        }
    }

    const DETAILED_EXAMPLE_BYTES: [u8; REPORT_DETAILED_LEN] = [
        2, 0x88, 0x13, 0, 0, 180, 0, 40, 0, 120, 0, 150, 0, 125, 0, 128, 0, 2, 0, 40, 0, 3,
    ];

    #[test]
    fn detailed_report_bytes_are_the_documented_ones() {
        let mut buf = [0xAA; REPORT_DETAILED_LEN + 2];
        assert_eq!(
            ReportLayout::Detailed.encode(&detailed_example(), &mut buf),
            Ok(REPORT_DETAILED_LEN)
        );
        assert_eq!(buf[..REPORT_DETAILED_LEN], DETAILED_EXAMPLE_BYTES);
        assert_eq!(buf[REPORT_DETAILED_LEN..], [0xAA; 2]);
        assert_eq!(
            ReportLayout::Detailed.decode(&DETAILED_EXAMPLE_BYTES),
            Ok(detailed_example())
        );
        // The other layouts carry the same report without its detail.
        let mut extended = [0; REPORT_EXTENDED_LEN];
        ReportLayout::Extended
            .encode(&detailed_example(), &mut extended)
            .unwrap();
        assert_eq!(extended[0], REPORT_EXTENDED_VERSION);
        assert_eq!(extended[1..], DETAILED_EXAMPLE_BYTES[1..9]);
        assert_eq!(
            ReportLayout::Extended.decode(&extended).unwrap().detail,
            None
        );
    }

    #[test]
    fn detailed_report_decoder_refuses_each_broken_field() {
        let broken = |at: usize, value: &[u8]| {
            let mut bytes = DETAILED_EXAMPLE_BYTES;
            bytes[at..at + value.len()].copy_from_slice(value);
            bytes
        };
        for (what, bytes) in [
            ("version 1", broken(0, &[1])),
            ("version 3", broken(0, &[3])),
            ("median above p90", broken(9, &[151, 0])),
            ("p90 above worst", broken(11, &[181, 0])),
            ("latest above worst", broken(13, &[181, 0])),
            ("median none, worst some", broken(9, &[0xFF, 0xFF])),
            ("worst none, detail some", broken(5, &[0xFF, 0xFF])),
            ("stalled above frames", broken(17, &[129, 0])),
            ("stall time without a stall", broken(17, &[0, 0])),
            ("seat 16", broken(21, &[16])),
        ] {
            assert!(
                matches!(
                    ReportLayout::Detailed.decode(&bytes),
                    Err(Error::Malformed(_))
                ),
                "{what} must be malformed"
            );
        }
        // Nobody waited for, and no round trip at all, are fine.
        let mut quiet = DETAILED_EXAMPLE_BYTES;
        quiet[21] = SEAT_NONE;
        assert_eq!(
            ReportLayout::Detailed
                .decode(&quiet)
                .unwrap()
                .detail
                .unwrap()
                .waited_for,
            None
        );
        let mut no_rtt = quiet;
        for at in [5, 9, 11, 13] {
            no_rtt[at..at + 2].copy_from_slice(&RTT_NONE.to_le_bytes());
        }
        let decoded = ReportLayout::Detailed.decode(&no_rtt).unwrap();
        assert_eq!(decoded.worst_rtt_ms, None);
        assert_eq!(decoded.detail.unwrap().p90_rtt_ms, None);
    }

    fn needs_example() -> Report {
        let mut report = detailed_example();
        if let Some(detail) = report.detail.as_mut() {
            detail.needs = Some(LookAheadNeeds {
                reference: 6,
                most: 7,
                above: [1, 2, 40, 300],
            });
        }
        report
    }

    /// The detailed example's bytes with version 3, then reference 6, most
    /// 7 and the four counts.
    const NEEDS_EXAMPLE_BYTES: [u8; REPORT_NEEDS_LEN] = [
        3, 0x88, 0x13, 0, 0, 180, 0, 40, 0, 120, 0, 150, 0, 125, 0, 128, 0, 2, 0, 40, 0, 3, 6, 7,
        1, 0, 2, 0, 40, 0, 0x2C, 0x01,
    ];

    #[test]
    fn needs_report_bytes_are_the_documented_ones() {
        let mut buf = [0xAA; REPORT_NEEDS_LEN + 2];
        assert_eq!(
            ReportLayout::Needs.encode(&needs_example(), &mut buf),
            Ok(REPORT_NEEDS_LEN)
        );
        assert_eq!(buf[..REPORT_NEEDS_LEN], NEEDS_EXAMPLE_BYTES);
        assert_eq!(buf[REPORT_NEEDS_LEN..], [0xAA; 2]);
        assert_eq!(
            ReportLayout::Needs.decode(&NEEDS_EXAMPLE_BYTES),
            Ok(needs_example())
        );
        // Without needs: reference 0 and zeros.
        let mut without = [0xAA; REPORT_NEEDS_LEN];
        ReportLayout::Needs
            .encode(&detailed_example(), &mut without)
            .unwrap();
        assert_eq!(without[1..22], DETAILED_EXAMPLE_BYTES[1..]);
        assert_eq!(without[22..], [0; 10]);
        assert_eq!(ReportLayout::Needs.decode(&without), Ok(detailed_example()));
        // The detailed layout leaves the needs out.
        let mut detailed = [0; REPORT_DETAILED_LEN];
        ReportLayout::Detailed
            .encode(&needs_example(), &mut detailed)
            .unwrap();
        assert_eq!(detailed, DETAILED_EXAMPLE_BYTES);
    }

    #[test]
    fn needs_report_decoder_refuses_each_broken_field_and_the_encoder_broken_needs() {
        let broken = |at: usize, value: &[u8]| {
            let mut bytes = NEEDS_EXAMPLE_BYTES;
            bytes[at..at + value.len()].copy_from_slice(value);
            bytes
        };
        for (what, bytes) in [
            ("version 2", broken(0, &[2])),
            ("median above p90", broken(9, &[151, 0])),
            ("reference 251", broken(22, &[251])),
            ("most 0", broken(23, &[0])),
            ("counts decreasing", broken(24, &[3, 0])),
            ("nothing above 6 though the most is 7", broken(24, &[0, 0])),
            ("something above 6 though the most is 6", broken(23, &[6])),
            ("no needs but a most", broken(22, &[0])),
        ] {
            assert!(
                matches!(ReportLayout::Needs.decode(&bytes), Err(Error::Malformed(_))),
                "{what} must be malformed"
            );
        }
        let mut report = needs_example();
        if let Some(detail) = report.detail.as_mut() {
            detail.needs = detail.needs.map(|n| LookAheadNeeds { most: 0, ..n });
        }
        let mut buf = [0xAA; REPORT_NEEDS_LEN];
        assert!(matches!(
            ReportLayout::Needs.encode(&report, &mut buf),
            Err(Error::Invalid(_))
        ));
        assert_eq!(buf, [0xAA; REPORT_NEEDS_LEN], "nothing written");
    }

    #[test]
    fn report_decoders_refuse_wrong_lengths_and_encoders_small_buffers() {
        for layout in [
            ReportLayout::Compact,
            ReportLayout::Extended,
            ReportLayout::Detailed,
            ReportLayout::Needs,
        ] {
            let n = layout.payload_len();
            let bytes = [1u8; REPORT_NEEDS_LEN + 1];
            assert!(matches!(
                layout.decode(&bytes[..n - 1]),
                Err(Error::Malformed(_))
            ));
            assert!(matches!(
                layout.decode(&bytes[..n + 1]),
                Err(Error::Malformed(_))
            ));
            assert!(matches!(layout.decode(&[]), Err(Error::Malformed(_))));
            let mut small = vec![0xAA; n - 1];
            assert_eq!(
                layout.encode(&detailed_example(), &mut small),
                Err(Error::BufferTooSmall { needed: n })
            );
            assert!(small.iter().all(|&b| b == 0xAA));
        }
    }
}
