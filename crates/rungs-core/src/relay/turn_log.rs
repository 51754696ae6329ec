//! A match's turn log as a file (`rungs-relay export`), for replays: an
//! engine feeds it back through a session
//! ([`LockstepSession::replay`](crate::session::LockstepSession::replay),
//! C `rungs_lockstep_replay_new`) to replay a game or to verify a desync
//! offline against the checksums every seat reported.
//!
//! # Layout, version 1
//!
//! All integers little-endian.
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 8 | magic `RUNGSLOG` |
//! | 8 | 1 | version `1` |
//! | 9 | 1 | seat count (1–16) |
//! | 10 | 2 | human seat mask |
//! | 12 | 4 | `tick_rate_millihz` |
//! | 16 | 2 | `checksum_interval` (0: none) |
//! | 18 | 1 | `ai_order_delay` (0–8) |
//! | 19 | 1 | how it ended: 0 every human left, 1 tick limit, 2 ended by the operator, `0xFF` still running when exported |
//! | 20 | 8 | match id |
//! | 28 | 4 | end tick: every tick below it is final and in the file |
//! | 32 | 4 | entry count `E` |
//! | 36 | 4 | checksum round count `C` |
//! | 40 | … | `E` entries, in the TurnBundle entry layout (`docs/relay.md`): 4 tick, 1 seat, 1 kind (0 order, 1 quit, 2 dropped), 2 length `L`, `L` bytes; sorted by (tick, seat), ticks below the end tick |
//! | … | … | `C` checksum rounds: 4 tick (a multiple of the interval, at most the end tick), 2 mask of the seats that reported, then 8 bytes per reporting seat in seat order (its checksum of the state before that tick); by tick |
//!
//! Nothing may follow. A running match's export ends at the last tick the
//! relay had certainly broadcast when the file was written.

use super::checksums::DecidedRound;
use super::durable::MatchState;
use super::sequencer::{LogEntry, LEASE_TICKS};
use crate::error::{Error, Result};
use crate::wire::cursor::Reader;
use crate::wire::relay::{
    EntryKind, MatchOverReason, ENTRY_HEADER_BYTES, MAX_ORDER_BYTES, MAX_SEATS,
};

/// The file's first eight bytes.
pub(crate) const TURN_LOG_MAGIC: [u8; 8] = *b"RUNGSLOG";
/// The layout version this code writes and reads.
pub(crate) const TURN_LOG_VERSION: u8 = 1;
/// Bytes before the entries.
pub(crate) const TURN_LOG_HEADER_BYTES: usize = 40;
/// The "how it ended" byte of a match still running when exported.
const RUNNING: u8 = 0xFF;

/// A match's turn log. See the module docs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnLog {
    /// The match.
    pub match_id: u64,
    /// Seats, 1–16.
    pub seat_count: u8,
    /// Bit `s`: seat `s` is human.
    pub human_mask: u16,
    /// The setup's tick rate.
    pub tick_rate_millihz: u32,
    /// Checksums every this many ticks (0: none).
    pub checksum_interval: u16,
    /// AI orders run this many ticks after their decision.
    pub ai_order_delay: u8,
    /// Every tick below it is final and in the log.
    pub end_tick: u32,
    /// How the match ended (`None`: still running when exported).
    pub over: Option<MatchOverReason>,
    /// The entries, by (tick, seat); client sequences are not kept (0).
    pub entries: Vec<LogEntry>,
    /// What each seat reported, per checksum tick.
    pub checksums: Vec<DecidedRound>,
}

impl TurnLog {
    /// The turn log of a match's durable state: every final tick (an
    /// ended match's whole log; a running match's up to the last tick its
    /// lease shows broadcast).
    pub fn from_state(state: &MatchState) -> TurnLog {
        let (end_tick, over) = match state.over {
            Some((final_tick, reason)) => (final_tick, Some(reason)),
            None => (state.lease.saturating_sub(LEASE_TICKS), None),
        };
        let interval = u32::from(state.setup.checksum_interval);
        TurnLog {
            match_id: state.setup.match_id,
            seat_count: state.setup.seat_count,
            human_mask: state.setup.human_mask,
            tick_rate_millihz: state.setup.tick_rate_millihz,
            checksum_interval: state.setup.checksum_interval,
            ai_order_delay: state.setup.ai_order_delay,
            end_tick,
            over,
            entries: state
                .log()
                .filter(|e| e.tick < end_tick)
                .map(|e| LogEntry {
                    sequence: 0,
                    ..e.clone()
                })
                .collect(),
            checksums: state
                .checksums
                .values()
                .filter(|r| r.tick <= end_tick && interval > 0 && r.tick % interval == 0)
                .copied()
                .collect(),
        }
    }

    /// The file's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(TURN_LOG_HEADER_BYTES + self.entries.len() * 16);
        out.extend_from_slice(&TURN_LOG_MAGIC);
        out.push(TURN_LOG_VERSION);
        out.push(self.seat_count);
        out.extend_from_slice(&self.human_mask.to_le_bytes());
        out.extend_from_slice(&self.tick_rate_millihz.to_le_bytes());
        out.extend_from_slice(&self.checksum_interval.to_le_bytes());
        out.push(self.ai_order_delay);
        out.push(self.over.map_or(RUNNING, |r| r as u8));
        out.extend_from_slice(&self.match_id.to_le_bytes());
        out.extend_from_slice(&self.end_tick.to_le_bytes());
        out.extend_from_slice(&(self.entries.len() as u32).to_le_bytes());
        out.extend_from_slice(&(self.checksums.len() as u32).to_le_bytes());
        for e in &self.entries {
            out.extend_from_slice(&e.tick.to_le_bytes());
            out.push(e.seat);
            out.push(e.kind as u8);
            out.extend_from_slice(&(e.payload.len() as u16).to_le_bytes());
            out.extend_from_slice(&e.payload);
        }
        for r in &self.checksums {
            out.extend_from_slice(&r.tick.to_le_bytes());
            out.extend_from_slice(&r.reported_mask.to_le_bytes());
            for seat in 0..MAX_SEATS {
                if r.reported_mask & (1 << seat) != 0 {
                    out.extend_from_slice(&r.values[seat].to_le_bytes());
                }
            }
        }
        out
    }

    /// Read and check a file: every field in range, entries in order and
    /// below the end tick, for human seats of the match, nothing left over.
    /// `Invalid` naming the first thing wrong.
    pub fn decode(bytes: &[u8]) -> Result<TurnLog> {
        let bad = |what: String| {
            Error::invalid_value(
                "bytes",
                format!("not a rungs turn log ({what})"),
                "a turn log as TurnLog::encode writes it",
            )
        };
        let mut r = Reader::new(bytes);
        if r.take(8)
            .map_err(|_| bad("shorter than its header".into()))?
            != TURN_LOG_MAGIC
        {
            return Err(bad("the magic is not RUNGSLOG".into()));
        }
        let mut head = [0u8; TURN_LOG_HEADER_BYTES - 8];
        head.copy_from_slice(
            r.take(TURN_LOG_HEADER_BYTES - 8)
                .map_err(|_| bad("shorter than its header".into()))?,
        );
        let u16_at = |at: usize| u16::from_le_bytes([head[at - 8], head[at - 7]]);
        let u32_at = |at: usize| {
            u32::from_le_bytes([head[at - 8], head[at - 7], head[at - 6], head[at - 5]])
        };
        let version = head[0];
        if version != TURN_LOG_VERSION {
            return Err(bad(format!(
                "version {version}; this build reads {TURN_LOG_VERSION}"
            )));
        }
        let seat_count = head[1];
        let human_mask = u16_at(10);
        let tick_rate_millihz = u32_at(12);
        let checksum_interval = u16_at(16);
        let ai_order_delay = head[10];
        let ended = head[11];
        let match_id = u64::from(u32_at(20)) | u64::from(u32_at(24)) << 32;
        let end_tick = u32_at(28);
        let entry_count = u32_at(32);
        let round_count = u32_at(36);
        let seats = usize::from(seat_count);
        if !(1..=MAX_SEATS).contains(&seats)
            || human_mask == 0
            || (seats < MAX_SEATS && human_mask >> seats != 0)
        {
            return Err(bad(format!(
                "{seat_count} seats with human mask {human_mask:#06x}"
            )));
        }
        if tick_rate_millihz == 0 || ai_order_delay > 8 {
            return Err(bad("tick rate 0 or ai_order_delay above 8".into()));
        }
        let over = match ended {
            RUNNING => None,
            v => Some(MatchOverReason::from_u8(v).ok_or_else(|| bad(format!("end reason {v}")))?),
        };
        // Each entry takes at least its header: a count the bytes cannot
        // hold is refused before anything is allocated for it.
        if (entry_count as usize).saturating_mul(ENTRY_HEADER_BYTES) > r.left() {
            return Err(bad(format!("{entry_count} entries in {} bytes", r.left())));
        }
        let mut entries = Vec::with_capacity(entry_count as usize);
        let mut last: Option<(u32, u8)> = None;
        for i in 0..entry_count {
            let head = r
                .take(ENTRY_HEADER_BYTES)
                .map_err(|_| bad(format!("entry {i} is cut short")))?;
            let tick = u32::from_le_bytes([head[0], head[1], head[2], head[3]]);
            let seat = head[4];
            let kind = EntryKind::from_u8(head[5])
                .ok_or_else(|| bad(format!("entry {i}: kind {}", head[5])))?;
            let len = usize::from(u16::from_le_bytes([head[6], head[7]]));
            if len > MAX_ORDER_BYTES || (kind == EntryKind::Dropped && len > 0) {
                return Err(bad(format!("entry {i}: {len} bytes of {kind:?}")));
            }
            if tick >= end_tick
                || usize::from(seat) >= seats
                || human_mask & (1 << seat) == 0
                || last.is_some_and(|l| l >= (tick, seat))
            {
                return Err(bad(format!(
                    "entry {i} (tick {tick}, seat {seat}) is out of order, past the end tick {end_tick} or not for a human seat"
                )));
            }
            last = Some((tick, seat));
            let payload = r
                .take(len)
                .map_err(|_| bad(format!("entry {i} is cut short")))?;
            entries.push(LogEntry {
                tick,
                seat,
                kind,
                sequence: 0,
                payload: payload.into(),
            });
        }
        if (round_count as usize).saturating_mul(6) > r.left() {
            return Err(bad(format!(
                "{round_count} checksum rounds in {} bytes",
                r.left()
            )));
        }
        let mut checksums = Vec::with_capacity(round_count as usize);
        let mut last_round: Option<u32> = None;
        for i in 0..round_count {
            let head = r
                .take(6)
                .map_err(|_| bad(format!("checksum round {i} is cut short")))?;
            let tick = u32::from_le_bytes([head[0], head[1], head[2], head[3]]);
            let reported_mask = u16::from_le_bytes([head[4], head[5]]);
            let interval = u32::from(checksum_interval);
            if interval == 0
                || tick % interval != 0
                || tick > end_tick
                || reported_mask == 0
                || reported_mask & !human_mask != 0
                || last_round.is_some_and(|l| l >= tick)
            {
                return Err(bad(format!(
                    "checksum round {i} (tick {tick}, seats {reported_mask:#06x}) does not fit the match"
                )));
            }
            last_round = Some(tick);
            let mut values = [0u64; MAX_SEATS];
            for (seat, value) in values.iter_mut().enumerate() {
                if reported_mask & (1 << seat) != 0 {
                    let b = r
                        .take(8)
                        .map_err(|_| bad(format!("checksum round {i} is cut short")))?;
                    *value = u64::from_le_bytes(b.try_into().unwrap_or_default());
                }
            }
            checksums.push(DecidedRound {
                tick,
                reported_mask,
                values,
            });
        }
        if r.left() != 0 {
            return Err(bad(format!(
                "{} bytes after the last checksum round",
                r.left()
            )));
        }
        Ok(TurnLog {
            match_id,
            seat_count,
            human_mask,
            tick_rate_millihz,
            checksum_interval,
            ai_order_delay,
            end_tick,
            over,
            entries,
            checksums,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::relay::MatchSetup;

    fn sample() -> TurnLog {
        let mut setup = MatchSetup::new(0x0102, 3, 0b011);
        setup.checksum_interval = 10;
        setup.ai_order_delay = 4;
        let mut state = MatchState::new(setup, 0);
        state.started_us = Some(0);
        for (tick, seat, kind, payload) in [
            (0u32, 0u8, EntryKind::Order, &b"ab"[..]),
            (3, 1, EntryKind::Order, b""),
            (3, 0, EntryKind::Order, b"c"),
            (9, 1, EntryKind::Quit, b"gg"),
            (200, 0, EntryKind::Order, b"too late"),
        ] {
            state.entries.insert(
                (tick, seat),
                LogEntry {
                    tick,
                    seat,
                    kind,
                    sequence: 7,
                    payload: payload.into(),
                },
            );
        }
        let mut values = [0u64; MAX_SEATS];
        values[0] = 11;
        values[1] = 12;
        state.checksums.insert(
            10,
            DecidedRound {
                tick: 10,
                reported_mask: 0b011,
                values,
            },
        );
        state.over = Some((20, MatchOverReason::AllLeft));
        TurnLog::from_state(&state)
    }

    #[test]
    fn a_turn_log_is_byte_for_byte_as_documented_and_round_trips() {
        let log = sample();
        assert_eq!(log.entries.len(), 4, "the tick past the end is not final");
        let bytes = log.encode();
        assert_eq!(&bytes[..8], b"RUNGSLOG");
        assert_eq!(
            &bytes[8..40],
            &[
                1, 3, 0b011, 0, 0x30, 0x75, 0, 0, 10, 0, 4, 0, // version .. ended
                2, 1, 0, 0, 0, 0, 0, 0, // match id
                20, 0, 0, 0, 4, 0, 0, 0, 1, 0, 0, 0 // end, entries, rounds
            ]
        );
        assert_eq!(&bytes[40..50], &[0, 0, 0, 0, 0, 0, 2, 0, b'a', b'b']);
        let tail = &bytes[bytes.len() - 22..];
        assert_eq!(&tail[..6], &[10, 0, 0, 0, 0b011, 0]);
        assert_eq!(&tail[6..14], &11u64.to_le_bytes());
        assert_eq!(TurnLog::decode(&bytes), Ok(log));
    }

    #[test]
    fn a_damaged_turn_log_is_refused_not_misread() {
        let bytes = sample().encode();
        for cut in 0..bytes.len() {
            assert!(TurnLog::decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(TurnLog::decode(&longer).is_err());
        let mut rng = crate::rng::SplitMix64::new(5);
        for _ in 0..20_000 {
            let mut b = bytes.clone();
            let at = (rng.next_u64() as usize) % b.len();
            b[at] ^= 1 << (rng.next_u64() % 8);
            if let Ok(log) = TurnLog::decode(&b) {
                // Whatever still reads is canonical: it writes back the same.
                assert_eq!(log.encode(), b);
            }
        }
        let mut huge_count = bytes.clone();
        huge_count[32..36].copy_from_slice(&u32::MAX.to_le_bytes());
        let e = TurnLog::decode(&huge_count).unwrap_err();
        assert!(e.to_string().contains("entries"), "{e}");
    }
}
