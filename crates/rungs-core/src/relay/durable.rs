//! What a relay keeps of a match so that the match survives the relay's own
//! restart (S10, `docs/relay.md` "Surviving a restart"), sans-IO: the
//! records a [`Sequencer`](super::Sequencer) emits when persistence is on,
//! and the state they fold into, from which a restarted relay resumes the
//! match.
//!
//! Where the records go is the caller's business (`rungs-relay serve
//! --state DIR` appends them to a journal). The rule the caller keeps is
//! **write-ahead**: every record a call emitted is written before anything
//! that call caused is sent. Then nothing a client ever saw — a bundle, a
//! confirmation in a Pong or Welcome, a refusal — is missing from the
//! records, and a restarted relay never contradicts it:
//!
//! * every sequenced entry (order, quit, drop) is recorded when it is
//!   accepted, with its tick and client sequence, before any confirmation;
//! * the horizon only moves up to a **lease** recorded beforehand, so the
//!   restored horizon (the lease, or the clock's tick if later) is at or
//!   above any tick ever broadcast, and nothing new lands on a tick a
//!   client already ran, even if the wall clock stepped back;
//! * the clock's anchor (the start) and its changes are recorded, so the
//!   restored match keeps the clock the clients follow.
//!
//! Records are idempotent and order-insensitive where it matters (entries
//! by tick and seat, the lease by its maximum), so a record written twice —
//! copied into a newer journal file while the old one still exists — folds
//! to the same state.

use std::collections::BTreeMap;

use super::checksums::DecidedRound;
use super::log_entry::LogEntry;
use super::setup::MatchSetup;
use crate::wire::relay::{MatchOverReason, RefusalReason, TimingChange};

/// One record of a match's durable state. Times are µs on the clock of
/// whoever holds the record (the sequencer's `now_us`; a journal converts
/// them to and from wall-clock time).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DurableRecord {
    /// The match was created: its setup (every match, whoever created it).
    Created {
        /// The setup.
        setup: MatchSetup,
        /// When.
        at_us: i64,
    },
    /// Its clock started: tick 0 began at `at_us`.
    Started {
        /// When.
        at_us: i64,
    },
    /// A sequenced entry (an accepted order or quit with its client
    /// sequence, or a drop), at the tick it was given.
    Entry(LogEntry),
    /// An order refused (the client was told; a resubmission stays refused).
    Refused {
        /// Seat.
        seat: u8,
        /// Its client sequence.
        sequence: u32,
        /// Why.
        reason: RefusalReason,
    },
    /// The match clock changed from a tick on (rate, anchor, bundle
    /// interval; the look-ahead field is unused).
    Clock(TimingChange),
    /// The horizon may move up to this tick: no bundle reaches beyond it.
    Lease {
        /// The tick.
        tick: u32,
    },
    /// A checksum round was decided: what each seat reported (for replays
    /// that verify a desync offline).
    Checksums(DecidedRound),
    /// The match ended.
    Over {
        /// Its final horizon.
        final_tick: u32,
        /// Why.
        reason: MatchOverReason,
    },
}

/// A match folded from its records: what a restarted relay resumes from
/// ([`Sequencer::restore`](super::Sequencer::restore)) and what a turn log
/// export holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MatchState {
    /// The setup.
    pub setup: MatchSetup,
    /// When it was created.
    pub created_us: i64,
    /// When its clock started (`None`: still loading).
    pub started_us: Option<i64>,
    /// Every sequenced entry by (tick, seat).
    pub entries: BTreeMap<(u32, u8), LogEntry>,
    /// Refused orders: (seat, client sequence, why).
    pub refusals: Vec<(u8, u32, RefusalReason)>,
    /// The clock's changes after the setup's own, by tick.
    pub clock: Vec<TimingChange>,
    /// The highest lease: no bundle went beyond it.
    pub lease: u32,
    /// Decided checksum rounds by tick.
    pub checksums: BTreeMap<u32, DecidedRound>,
    /// Its end, once over.
    pub over: Option<(u32, MatchOverReason)>,
}

impl MatchState {
    /// A match created with `setup` at `created_us`, nothing else yet.
    pub fn new(setup: MatchSetup, created_us: i64) -> MatchState {
        MatchState {
            setup,
            created_us,
            started_us: None,
            entries: BTreeMap::new(),
            refusals: Vec::new(),
            clock: Vec::new(),
            lease: 0,
            checksums: BTreeMap::new(),
            over: None,
        }
    }

    /// A state from its first record (`Created`); `None` for any other.
    pub fn from_created(record: &DurableRecord) -> Option<MatchState> {
        match record {
            DurableRecord::Created { setup, at_us } => Some(MatchState::new(*setup, *at_us)),
            _ => None,
        }
    }

    /// Fold one more record in (any order, repeats harmless; a second
    /// `Created` is ignored).
    pub fn apply(&mut self, record: &DurableRecord) {
        match record {
            DurableRecord::Created { .. } => {}
            DurableRecord::Started { at_us } => {
                self.started_us.get_or_insert(*at_us);
            }
            DurableRecord::Entry(entry) => {
                self.entries
                    .entry((entry.tick, entry.seat))
                    .or_insert_with(|| entry.clone());
            }
            DurableRecord::Refused {
                seat,
                sequence,
                reason,
            } => {
                if !self
                    .refusals
                    .iter()
                    .any(|r| (r.0, r.1) == (*seat, *sequence))
                {
                    self.refusals.push((*seat, *sequence, *reason));
                }
            }
            DurableRecord::Clock(change) => {
                let at = self
                    .clock
                    .partition_point(|c| c.from_tick < change.from_tick);
                if self.clock.get(at).is_some_and(|c| c == change) {
                    return;
                }
                // A later word replaces what was said from its tick on.
                self.clock.truncate(at);
                self.clock.push(*change);
            }
            DurableRecord::Lease { tick } => self.lease = self.lease.max(*tick),
            DurableRecord::Checksums(round) => {
                self.checksums.entry(round.tick).or_insert(*round);
            }
            DurableRecord::Over { final_tick, reason } => {
                self.over.get_or_insert((*final_tick, *reason));
            }
        }
    }

    /// The entries in (tick, seat) order.
    pub fn log(&self) -> impl Iterator<Item = &LogEntry> + '_ {
        self.entries.values()
    }

    /// The last tick anyone can have run plus one: the final tick of an
    /// ended match, else the lease (no bundle went beyond it) or the tick
    /// after the last entry, whichever is later.
    pub fn end_tick(&self) -> u32 {
        match self.over {
            Some((final_tick, _)) => final_tick,
            None => self.lease.max(
                self.entries
                    .keys()
                    .next_back()
                    .map_or(0, |(tick, _)| tick.saturating_add(1)),
            ),
        }
    }

    /// The records that rebuild this state, in an order that folds back to
    /// it: what a journal writes when it copies a live match into a newer
    /// file.
    pub fn records(&self) -> Vec<DurableRecord> {
        let mut out = vec![DurableRecord::Created {
            setup: self.setup,
            at_us: self.created_us,
        }];
        if let Some(at_us) = self.started_us {
            out.push(DurableRecord::Started { at_us });
        }
        out.extend(self.clock.iter().map(|c| DurableRecord::Clock(*c)));
        out.extend(self.entries.values().cloned().map(DurableRecord::Entry));
        out.extend(
            self.refusals
                .iter()
                .map(|&(seat, sequence, reason)| DurableRecord::Refused {
                    seat,
                    sequence,
                    reason,
                }),
        );
        out.extend(
            self.checksums
                .values()
                .map(|r| DurableRecord::Checksums(*r)),
        );
        if self.lease > 0 {
            out.push(DurableRecord::Lease { tick: self.lease });
        }
        if let Some((final_tick, reason)) = self.over {
            out.push(DurableRecord::Over { final_tick, reason });
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::relay::EntryKind;

    fn entry(tick: u32, seat: u8, sequence: u32) -> LogEntry {
        LogEntry {
            tick,
            seat,
            kind: EntryKind::Order,
            sequence,
            payload: vec![seat, tick as u8].into(),
        }
    }

    #[test]
    fn records_fold_in_any_order_and_repeats_change_nothing() {
        let setup = MatchSetup::new(9, 2, 0b11);
        let records = vec![
            DurableRecord::Created { setup, at_us: -5 },
            DurableRecord::Started { at_us: 100 },
            DurableRecord::Lease { tick: 32 },
            DurableRecord::Entry(entry(3, 0, 1)),
            DurableRecord::Entry(entry(3, 1, 1)),
            DurableRecord::Refused {
                seat: 0,
                sequence: 2,
                reason: RefusalReason::QueueFull,
            },
            DurableRecord::Lease { tick: 64 },
            DurableRecord::Entry(entry(4, 0, 3)),
        ];
        let mut forward = MatchState::from_created(&records[0]).unwrap();
        for r in &records {
            forward.apply(r);
        }
        let mut shuffled = MatchState::from_created(&records[0]).unwrap();
        for r in records.iter().rev().chain(records.iter()) {
            shuffled.apply(r);
        }
        assert_eq!(forward, shuffled);
        assert_eq!(forward.lease, 64);
        assert_eq!(forward.entries.len(), 3);
        assert_eq!(forward.end_tick(), 64);
        // The state's own records fold back to it.
        let mut again = MatchState::from_created(&forward.records()[0]).unwrap();
        for r in forward.records() {
            again.apply(&r);
        }
        assert_eq!(again, forward);
        assert!(MatchState::from_created(&records[1]).is_none());
    }
}
