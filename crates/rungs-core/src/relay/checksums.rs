//! The relay's checksum comparison (S10), sans-IO: clients report a state
//! checksum every `checksum_interval` ticks, the relay compares the values
//! per tick and names a desync.
//!
//! A report for tick `t` is the state *before* tick `t` runs (after `t - 1`;
//! for tick 0 the initial state), so it can arrive once the client holds
//! every tick below `t`: `t <= horizon`. A tick is decided when every human
//! still in the match has reported, or [`CHECKSUM_DECIDE_TICKS`] after it
//! with what arrived (a seat that stays away must not hide a desync of the
//! others); a late report is compared with the agreed value on its own.
//! Reports older than [`CHECKSUM_WINDOW_TICKS`] are refused, which bounds
//! the memory.
//!
//! A decision names the seats outside the largest agreeing group (every
//! reporter on a tie), in seat order: deterministic.

use std::collections::BTreeMap;

use crate::wire::relay::MAX_SEATS;

/// Checksum reports older than this many ticks behind the horizon are
/// decided with whatever arrived, then forgotten (bounds the memory).
pub(crate) const CHECKSUM_WINDOW_TICKS: u32 = 900;
/// A checksum round still missing reports this many ticks behind the
/// horizon is decided with the reports it has (a seat that stays away must
/// not hide a desync of the others); later reports are checked against it.
pub(crate) const CHECKSUM_DECIDE_TICKS: u32 = 150;

/// A desync the relay found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DesyncNotice {
    /// The tick (its checksums describe the state before it ran).
    pub tick: u32,
    /// Seats whose checksums were compared.
    pub reported_mask: u16,
    /// Seats outside the largest agreeing group (every reporter on a tie).
    pub disagreeing_mask: u16,
}

/// A decided round: what every reporter said (for the turn log's record,
/// so a replay can compare an engine's state with each seat's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecidedRound {
    /// The tick.
    pub tick: u32,
    /// Seats that reported.
    pub reported_mask: u16,
    /// Their values, by seat (0 for seats that did not report).
    pub values: [u64; MAX_SEATS],
}

#[derive(Debug, Default)]
struct Round {
    values: [u64; MAX_SEATS],
    reported: u16,
    /// The agreed value once decided (`None`: undecided, or no majority).
    decided: Option<Option<u64>>,
}

/// What a report or a horizon step decided.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Decisions {
    /// Desyncs found, in order.
    pub desyncs: Vec<DesyncNotice>,
    /// Rounds decided (with or without a desync), in order; a late report
    /// re-decides nothing and adds none.
    pub decided: Vec<DecidedRound>,
}

/// The open and recently decided checksum rounds of one match.
#[derive(Debug, Default)]
pub(crate) struct ChecksumRounds {
    rounds: BTreeMap<u32, Round>,
}

impl ChecksumRounds {
    /// Whether a report for `tick` may be taken at `horizon` with the
    /// match's `interval` (0: checksums off).
    pub(crate) fn accepts(tick: u32, horizon: u32, interval: u16) -> bool {
        let interval = u32::from(interval);
        interval > 0
            && tick % interval == 0
            && tick <= horizon
            && tick.saturating_add(CHECKSUM_WINDOW_TICKS) >= horizon
    }

    /// `seat` reports `checksum` for `tick` (already accepted); `expected`
    /// are the seats still in the match.
    pub(crate) fn report(
        &mut self,
        seat: u8,
        tick: u32,
        checksum: u64,
        expected: u16,
        out: &mut Decisions,
    ) {
        let bit = 1u16 << seat;
        let round = self.rounds.entry(tick).or_default();
        if round.reported & bit != 0 {
            return; // a repeat (resent after a reconnect)
        }
        round.reported |= bit;
        round.values[usize::from(seat)] = checksum;
        match round.decided {
            // A late report (e.g. after a reload): checked against the
            // agreed value on its own.
            Some(Some(agreed)) if agreed != checksum => {
                out.desyncs.push(DesyncNotice {
                    tick,
                    reported_mask: round.reported,
                    disagreeing_mask: bit,
                });
            }
            Some(_) => {}
            None if round.reported & expected == expected => self.decide(tick, out),
            None => {}
        }
    }

    /// The horizon moved to `to`: decide the rounds that fell out of the
    /// window, waited too long or wait only for seats that left, and forget
    /// the old ones.
    pub(crate) fn advance(&mut self, to: u32, expected: u16, out: &mut Decisions) {
        let oldest = to.saturating_sub(CHECKSUM_WINDOW_TICKS);
        let stale: Vec<u32> = self.rounds.range(..oldest).map(|(t, _)| *t).collect();
        for tick in stale {
            if self.rounds.get(&tick).is_some_and(|r| r.decided.is_none()) {
                self.decide(tick, out);
            }
            self.rounds.remove(&tick);
        }
        let overdue = to.saturating_sub(CHECKSUM_DECIDE_TICKS);
        let ready: Vec<u32> = self
            .rounds
            .iter()
            .filter(|(t, r)| {
                r.decided.is_none() && (r.reported & expected == expected || **t < overdue)
            })
            .map(|(t, _)| *t)
            .collect();
        for tick in ready {
            self.decide(tick, out);
        }
    }

    fn decide(&mut self, tick: u32, out: &mut Decisions) {
        let Some(round) = self.rounds.get_mut(&tick) else {
            return;
        };
        // Groups of equal values, by seat order: deterministic.
        let mut best: Option<(u64, u32)> = None;
        let mut tie = false;
        let mut distinct = 0;
        let seats = || (0..MAX_SEATS).filter(|&i| round.reported & (1 << i) != 0);
        for i in seats() {
            let v = round.values[i];
            if seats().take_while(|&j| j < i).any(|j| round.values[j] == v) {
                continue; // counted with an earlier seat
            }
            distinct += 1;
            let count = seats().filter(|&j| round.values[j] == v).count() as u32;
            match best {
                Some((_, c)) if c > count => {}
                Some((_, c)) if c == count => tie = true,
                _ => {
                    best = Some((v, count));
                    tie = false;
                }
            }
        }
        let reported = round.reported;
        out.decided.push(DecidedRound {
            tick,
            reported_mask: reported,
            values: round.values,
        });
        if distinct <= 1 {
            round.decided = Some(best.map(|b| b.0));
            return;
        }
        let agreed = if tie { None } else { best.map(|b| b.0) };
        round.decided = Some(agreed);
        let disagreeing = match agreed {
            Some(v) => seats()
                .filter(|&i| round.values[i] != v)
                .fold(0u16, |m, i| m | 1 << i),
            None => reported,
        };
        out.desyncs.push(DesyncNotice {
            tick,
            reported_mask: reported,
            disagreeing_mask: disagreeing,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_initial_state_and_the_state_before_the_horizon_may_be_reported() {
        assert!(
            ChecksumRounds::accepts(0, 0, 30),
            "tick 0: the initial state"
        );
        assert!(ChecksumRounds::accepts(30, 30, 30), "before tick 30: held");
        assert!(
            !ChecksumRounds::accepts(60, 30, 30),
            "ticks below 60 not held"
        );
        assert!(!ChecksumRounds::accepts(31, 40, 30), "not a checksum tick");
        assert!(!ChecksumRounds::accepts(0, 0, 0), "checksums off");
        assert!(!ChecksumRounds::accepts(
            30,
            30 + CHECKSUM_WINDOW_TICKS + 1,
            30
        ));
    }

    #[test]
    fn a_round_is_decided_when_everyone_reported_and_names_the_minority() {
        let mut rounds = ChecksumRounds::default();
        let mut out = Decisions::default();
        rounds.report(0, 30, 7, 0b111, &mut out);
        rounds.report(1, 30, 7, 0b111, &mut out);
        assert!(out.decided.is_empty(), "seat 2 still to report");
        rounds.report(2, 30, 8, 0b111, &mut out);
        assert_eq!(
            out.desyncs,
            vec![DesyncNotice {
                tick: 30,
                reported_mask: 0b111,
                disagreeing_mask: 0b100
            }]
        );
        assert_eq!(out.decided.len(), 1);
        assert_eq!(out.decided[0].values[2], 8);
        // A tie names everyone; agreement is no desync.
        let mut out = Decisions::default();
        for (seat, v) in [(0u8, 1u64), (1, 2)] {
            rounds.report(seat, 60, v, 0b011, &mut out);
        }
        assert_eq!(out.desyncs[0].disagreeing_mask, 0b011);
        let mut out = Decisions::default();
        for seat in 0..2 {
            rounds.report(seat, 90, 5, 0b011, &mut out);
        }
        assert!(out.desyncs.is_empty());
        assert_eq!(out.decided.len(), 1);
    }

    #[test]
    fn an_absent_seat_does_not_hide_a_desync_and_a_late_report_is_checked_alone() {
        let mut rounds = ChecksumRounds::default();
        let mut out = Decisions::default();
        rounds.report(0, 30, 1, 0b111, &mut out);
        rounds.report(1, 30, 2, 0b111, &mut out);
        rounds.advance(30 + CHECKSUM_DECIDE_TICKS, 0b111, &mut out);
        assert!(out.desyncs.is_empty(), "not overdue yet");
        rounds.advance(31 + CHECKSUM_DECIDE_TICKS, 0b111, &mut out);
        assert_eq!(out.desyncs[0].disagreeing_mask, 0b011, "a tie of two");
        let mut out = Decisions::default();
        rounds.report(2, 30, 2, 0b111, &mut out);
        assert!(out.desyncs.is_empty(), "no agreed value to differ from");
        assert!(out.decided.is_empty(), "a late report decides nothing anew");
    }
}
