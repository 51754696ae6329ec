//! The bytes of the relay's journal (`--state DIR`): each match's durable
//! records ([`rungs_core::relay::DurableRecord`]) as framed records in append-only
//! segment files.
//!
//! A record is `[length u32][check u32][body]`, little-endian; `check` is
//! the low 32 bits of SipHash-1-3 (fixed key) of the body, so a record torn
//! by a crash or a power loss is recognised and the reading stops there.
//! The body is a kind byte, the match id (`u64`), then the kind's fields:
//!
//! | kind | record | fields |
//! |---|---|---|
//! | 1 | Created | 8 created (Unix µs, `i64`), 1 seats, 2 human mask, 4 tick rate (mHz), 1 bundle interval, 1 pace to slowest (0/1), 2 checksum interval, 1 AI order delay, 8 start barrier µs, 8 grace µs, 4 tick limit, 4 queued-ticks limit, 1 length `n` of the policy's name (0: none), `n` its name (`adaptive`, `tracking`, `fixed:S/L`, `ra`, `protocol0`) |
//! | 2 | Started | 8 tick 0's start (Unix µs) |
//! | 3 | Entry | 4 tick, 1 seat, 1 kind (0 order, 1 quit, 2 dropped), 4 client sequence, 2 length `L`, `L` order |
//! | 4 | Refused | 1 seat, 4 client sequence, 1 reason |
//! | 5 | Clock | 4 from tick, 4 anchor tick, 8 anchor ms, 4 tick rate (mHz), 1 bundle interval |
//! | 6 | Lease | 4 tick |
//! | 7 | Checksums | 4 tick, 2 mask of the seats that reported, 8 per reporting seat |
//! | 8 | Over | 4 final tick, 1 reason |
//!
//! Times are wall-clock (Unix µs) in the journal and the relay process's
//! own clock in the records; [`encode`] and [`decode`] convert with a
//! [`Clock`] taken once per process.

use std::hash::Hasher;

use rungs_core::relay::{DecidedRound, DurableRecord, LogEntry, MatchSetup};
use rungs_core::timing::PolicyKind;
use rungs_core::wire::relay::{
    EntryKind, MatchOverReason, RefusalReason, TimingChange, MAX_ORDER_BYTES, MAX_SEATS,
};
use rungs_core::wire::{DecodeError, PutLe, Reader, Writer};
use siphasher::sip::SipHasher13;

/// Bytes before a record's body.
pub const FRAME_BYTES: usize = 8;
/// The largest body a record may have (a Checksums record of 16 seats, an
/// Entry with a maximal order, with room to spare).
pub const MAX_BODY_BYTES: usize = 4096;

/// The relay process's clock against the wall clock: `now_us` values and
/// Unix µs, one pair taken at start.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    pub now_us: u64,
    pub unix_us: i64,
}

impl Clock {
    fn to_unix(self, at_us: i64) -> i64 {
        self.unix_us + (at_us - self.now_us as i64)
    }

    fn to_local(self, unix_us: i64) -> i64 {
        self.now_us as i64 - (self.unix_us - unix_us)
    }
}

fn check(body: &[u8]) -> u32 {
    let mut h = SipHasher13::new_with_keys(0x7275_6e67_735f_6a6f, 0x7572_6e61_6c5f_7631);
    h.write(body);
    h.finish() as u32
}

/// The largest body the relay writes: an Entry carrying a maximal order
/// (the relay protocol refuses longer ones), larger than a Created with a
/// policy name of 255 bytes or a Checksums record of every seat.
const LARGEST_BODY_BYTES: usize = {
    let entry = 1 + 8 + 12 + MAX_ORDER_BYTES;
    let created = 1 + 8 + 45 + u8::MAX as usize;
    let checksums = 1 + 8 + 6 + 8 * MAX_SEATS;
    let mut largest = entry;
    if created > largest {
        largest = created;
    }
    if checksums > largest {
        largest = checksums;
    }
    largest
};
const _: () = assert!(LARGEST_BODY_BYTES <= MAX_BODY_BYTES);

/// Append `record` of `match_id`, framed, to `out`.
///
/// The record is written whole into a fixed buffer with the codec toolkit's
/// [`Writer`], framed, then appended: every record the relay makes fits
/// (`LARGEST_BODY_BYTES`, checked at compile time), so a body that does
/// not is a broken invariant, and the relay stops rather than journal a
/// record [`decode`] would refuse.
pub fn encode(match_id: u64, record: &DurableRecord, clock: Clock, out: &mut Vec<u8>) {
    let mut framed = [0u8; FRAME_BYTES + MAX_BODY_BYTES];
    let (frame, body) = framed.split_at_mut(FRAME_BYTES);
    let mut w = Writer::new(body, MAX_BODY_BYTES);
    put_body(&mut w, match_id, record, clock);
    let len = w
        .finish()
        .expect("a record body is at most LARGEST_BODY_BYTES, within MAX_BODY_BYTES");
    let mut f = Writer::new(frame, FRAME_BYTES);
    f.u32(len as u32);
    f.u32(check(&body[..len]));
    debug_assert_eq!(f.finish(), Some(FRAME_BYTES));
    out.extend_from_slice(&framed[..FRAME_BYTES + len]);
}

/// A record body's fields in layout order (the table above).
fn put_body(w: &mut Writer<'_>, match_id: u64, record: &DurableRecord, clock: Clock) {
    let kind = match record {
        DurableRecord::Created { .. } => 1,
        DurableRecord::Started { .. } => 2,
        DurableRecord::Entry(_) => 3,
        DurableRecord::Refused { .. } => 4,
        DurableRecord::Clock(_) => 5,
        DurableRecord::Lease { .. } => 6,
        DurableRecord::Checksums(_) => 7,
        DurableRecord::Over { .. } => 8,
    };
    w.u8(kind);
    w.u64(match_id);
    match record {
        DurableRecord::Created { setup, at_us } => {
            w.i64(clock.to_unix(*at_us));
            w.u8(setup.seat_count);
            w.u16(setup.human_mask);
            w.u32(setup.tick_rate_millihz);
            w.u8(setup.bundle_interval);
            w.u8(u8::from(setup.pace_to_slowest));
            w.u16(setup.checksum_interval);
            w.u8(setup.ai_order_delay);
            w.u64(setup.start_barrier_us);
            w.u64(setup.reconnect_grace_us);
            w.u32(setup.max_ticks);
            w.u32(setup.max_queued_ticks);
            let name = setup
                .timing_policy
                .map(PolicyKind::name)
                .unwrap_or_default();
            w.u8(name.len() as u8);
            w.put(name.as_bytes());
        }
        DurableRecord::Started { at_us } => w.i64(clock.to_unix(*at_us)),
        DurableRecord::Entry(e) => {
            w.u32(e.tick);
            w.u8(e.seat);
            w.u8(e.kind as u8);
            w.u32(e.sequence);
            w.u16(e.payload.len() as u16);
            w.put(&e.payload);
        }
        DurableRecord::Refused {
            seat,
            sequence,
            reason,
        } => {
            w.u8(*seat);
            w.u32(*sequence);
            w.u8(*reason as u8);
        }
        DurableRecord::Clock(c) => {
            w.u32(c.from_tick);
            w.u32(c.anchor_tick);
            w.u64(c.anchor_ms);
            w.u32(c.tick_rate_millihz);
            w.u8(c.bundle_interval);
        }
        DurableRecord::Lease { tick } => w.u32(*tick),
        DurableRecord::Checksums(round) => {
            w.u32(round.tick);
            w.u16(round.reported_mask);
            for seat in 0..MAX_SEATS {
                if round.reported_mask & (1 << seat) != 0 {
                    w.u64(round.values[seat]);
                }
            }
        }
        DurableRecord::Over { final_tick, reason } => {
            w.u32(*final_tick);
            w.u8(*reason as u8);
        }
    }
}

/// What reading a segment found.
#[derive(Debug, PartialEq, Eq)]
pub enum Read {
    /// A record, and the bytes it took.
    Record(u64, DurableRecord, usize),
    /// The end of the bytes.
    End,
    /// A torn or damaged record at this point: nothing after it is read.
    Damaged(&'static str),
}

/// Read the record at the start of `bytes`.
pub fn decode(bytes: &[u8], clock: Clock) -> Read {
    if bytes.is_empty() {
        return Read::End;
    }
    let mut r = Reader::new(bytes);
    let (Ok(len), Ok(sum)) = (r.u32(), r.u32()) else {
        return Read::Damaged("a torn record frame");
    };
    let len = len as usize;
    if len > MAX_BODY_BYTES {
        return Read::Damaged("a record longer than any the relay writes");
    }
    let Ok(body) = r.take(len) else {
        return Read::Damaged("a torn record");
    };
    if check(body) != sum {
        return Read::Damaged("a record whose check does not match");
    }
    match body_record(body, clock) {
        Ok((id, record)) => Read::Record(id, record, FRAME_BYTES + len),
        Err(_) => Read::Damaged("a record whose fields do not make sense"),
    }
}

/// A record body's fields in layout order, every byte of it a field.
fn body_record(body: &[u8], clock: Clock) -> Result<(u64, DurableRecord), DecodeError> {
    let nonsense = DecodeError::Invalid("a field out of range");
    let mut f = Reader::new(body);
    let kind = f.u8()?;
    let id = f.u64()?;
    let record = match kind {
        1 => {
            let at_us = clock.to_local(f.u64()? as i64);
            let seat_count = f.u8()?;
            let human_mask = f.u16()?;
            let mut setup = MatchSetup::new(id, seat_count, human_mask);
            setup.tick_rate_millihz = f.u32()?;
            setup.bundle_interval = f.u8()?;
            setup.pace_to_slowest = f.u8()? != 0;
            setup.checksum_interval = f.u16()?;
            setup.ai_order_delay = f.u8()?;
            setup.start_barrier_us = f.u64()?;
            setup.reconnect_grace_us = f.u64()?;
            setup.max_ticks = f.u32()?;
            setup.max_queued_ticks = f.u32()?;
            let n = usize::from(f.u8()?);
            let name = std::str::from_utf8(f.take(n)?).map_err(|_| nonsense)?;
            setup.timing_policy = if n == 0 {
                None
            } else {
                Some(
                    PolicyKind::from_name(name)
                        .ok_or(nonsense)?
                        .map_err(|_| nonsense)?,
                )
            };
            setup.validate().map_err(|_| nonsense)?;
            DurableRecord::Created { setup, at_us }
        }
        2 => DurableRecord::Started {
            at_us: clock.to_local(f.u64()? as i64),
        },
        3 => {
            let tick = f.u32()?;
            let seat = f.u8()?;
            let kind = EntryKind::from_u8(f.u8()?).ok_or(nonsense)?;
            let sequence = f.u32()?;
            let len = usize::from(f.u16()?);
            DurableRecord::Entry(LogEntry {
                tick,
                seat,
                kind,
                sequence,
                payload: f.take(len)?.into(),
            })
        }
        4 => DurableRecord::Refused {
            seat: f.u8()?,
            sequence: f.u32()?,
            reason: RefusalReason::from_u8(f.u8()?).ok_or(nonsense)?,
        },
        5 => DurableRecord::Clock(TimingChange {
            from_tick: f.u32()?,
            anchor_tick: f.u32()?,
            anchor_ms: f.u64()?,
            tick_rate_millihz: f.u32()?,
            bundle_interval: f.u8()?,
            look_ahead: 1,
        }),
        6 => DurableRecord::Lease { tick: f.u32()? },
        7 => {
            let tick = f.u32()?;
            let reported_mask = f.u16()?;
            let mut values = [0u64; MAX_SEATS];
            for (seat, value) in values.iter_mut().enumerate() {
                if reported_mask & (1 << seat) != 0 {
                    *value = f.u64()?;
                }
            }
            DurableRecord::Checksums(DecidedRound {
                tick,
                reported_mask,
                values,
            })
        }
        8 => DurableRecord::Over {
            final_tick: f.u32()?,
            reason: MatchOverReason::from_u8(f.u8()?).ok_or(nonsense)?,
        },
        _ => return Err(DecodeError::UnknownKind(kind)),
    };
    f.finish()?;
    Ok((id, record))
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn every_kind() -> Vec<DurableRecord> {
        let mut setup = MatchSetup::new(5, 3, 0b011);
        setup.timing_policy = Some(PolicyKind::Fixed(rungs_core::timing::Timing::START));
        let mut values = [0u64; MAX_SEATS];
        values[1] = 99;
        vec![
            DurableRecord::Created {
                setup,
                at_us: -1_000_000,
            },
            DurableRecord::Started { at_us: 5_000 },
            DurableRecord::Entry(LogEntry {
                tick: 7,
                seat: 1,
                kind: EntryKind::Quit,
                sequence: 4,
                payload: b"gg".to_vec().into(),
            }),
            DurableRecord::Refused {
                seat: 0,
                sequence: 9,
                reason: RefusalReason::QueueFull,
            },
            DurableRecord::Clock(TimingChange {
                from_tick: 64,
                anchor_tick: 64,
                anchor_ms: 2133,
                tick_rate_millihz: 22_000,
                bundle_interval: 1,
                look_ahead: 1,
            }),
            DurableRecord::Lease { tick: 96 },
            DurableRecord::Checksums(DecidedRound {
                tick: 30,
                reported_mask: 0b010,
                values,
            }),
            DurableRecord::Over {
                final_tick: 120,
                reason: MatchOverReason::AllLeft,
            },
        ]
    }

    #[test]
    fn every_record_round_trips_across_a_restart_s_clock() {
        let before = Clock {
            now_us: 1_000,
            unix_us: 1_700_000_000_000_000,
        };
        // The next process started 10 s later (wall clock), its own clock
        // at 50.
        let after = Clock {
            now_us: 50,
            unix_us: before.unix_us + 10_000_000,
        };
        let mut bytes = Vec::new();
        for r in every_kind() {
            encode(5, &r, before, &mut bytes);
        }
        let mut at = 0;
        let mut read = Vec::new();
        while let Read::Record(id, r, used) = decode(&bytes[at..], after) {
            assert_eq!(id, 5);
            read.push(r);
            at += used;
        }
        assert_eq!(at, bytes.len());
        let shifted = |at_us: i64| at_us - 1_000 + 50 - 10_000_000;
        let mut expected = every_kind();
        expected[0] = match expected[0].clone() {
            DurableRecord::Created { setup, at_us } => DurableRecord::Created {
                setup,
                at_us: shifted(at_us),
            },
            other => other,
        };
        expected[1] = DurableRecord::Started {
            at_us: shifted(5_000),
        };
        assert_eq!(read, expected);
    }

    /// The bytes of each record of [`every_kind`], as the journal's layout
    /// (the table above) has them: a journal written by an older build must
    /// read the same, so these bytes never change without a new layout.
    /// The hex was written by the encoder this layout was first shipped with.
    const GOLDEN: [&str; 8] = [
        "3f000000b45e60d7010500000000000000d8f90e18240a06000303003075000001001e000800879303000000000087930300000000ffffffff000100000966697865643a322f36",
        "110000006f8bdb8d020500000000000000a04f1e18240a0600",
        "170000004508b3920305000000000000000700000001010400000002006767",
        "0f0000005113a806040500000000000000000900000001",
        "1e00000087be59d505050000000000000040000000400000005508000000000000f055000001",
        "0d0000003a89a9ba06050000000000000060000000",
        "17000000f314d9c90705000000000000001e00000002006300000000000000",
        "0e00000011d3cc3a0805000000000000007800000000",
    ];

    #[test]
    fn every_kind_is_written_byte_for_byte_as_the_layout_says() {
        let clock = Clock {
            now_us: 1_000,
            unix_us: 1_700_000_000_000_000,
        };
        let mut journal = Vec::new();
        for (record, golden) in every_kind().iter().zip(GOLDEN) {
            let mut bytes = Vec::new();
            encode(5, record, clock, &mut bytes);
            let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
            assert_eq!(hex, golden, "{record:?}");
            encode(5, record, clock, &mut journal);
        }
        let journal_hex: String = journal.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(
            journal_hex,
            GOLDEN.concat(),
            "records appended whole, nothing between"
        );
    }

    #[test]
    fn an_entry_with_the_longest_order_round_trips() {
        let clock = Clock {
            now_us: 0,
            unix_us: 0,
        };
        let entry = DurableRecord::Entry(LogEntry {
            tick: u32::MAX,
            seat: 15,
            kind: EntryKind::Order,
            sequence: u32::MAX,
            payload: vec![0xa5; MAX_ORDER_BYTES].into(),
        });
        let mut bytes = vec![0xee];
        encode(7, &entry, clock, &mut bytes);
        assert_eq!(bytes[0], 0xee, "appended after what was there");
        assert_eq!(bytes.len(), 1 + FRAME_BYTES + LARGEST_BODY_BYTES);
        assert_eq!(
            decode(&bytes[1..], clock),
            Read::Record(7, entry, bytes.len() - 1)
        );
    }

    #[test]
    fn a_torn_or_damaged_record_ends_the_reading() {
        let clock = Clock {
            now_us: 0,
            unix_us: 0,
        };
        let mut bytes = Vec::new();
        for r in every_kind() {
            encode(5, &r, clock, &mut bytes);
        }
        let first = match decode(&bytes, clock) {
            Read::Record(_, _, used) => used,
            other => panic!("{other:?}"),
        };
        for cut in 1..first {
            assert!(
                matches!(decode(&bytes[..cut], clock), Read::Damaged(_)),
                "cut {cut}"
            );
        }
        for at in 0..first {
            let mut b = bytes.clone();
            b[at] ^= 0x40;
            assert!(
                !matches!(decode(&b, clock), Read::Record(_, ref r, _) if *r == every_kind()[0]),
                "flip at {at} read back unchanged"
            );
        }
        assert_eq!(decode(&[], clock), Read::End);
    }
}
