//! What the frames' needs say a look-ahead would have cost (rule 10 of
//! docs/tracking.md; decisions 61 and 62).
//!
//! A report in the needs layout says how many of its interval's frames
//! needed more than each of four look-aheads ([`LookAheadNeeds`]): how many
//! would have stalled under each. Kept per seat over its last
//! [`EVIDENCE_REPORTS`] reports, that is evidence for a look-ahead before
//! the game runs under it. The policy asks two things of it:
//! - **may the margin go?** — the lowest look-ahead under which every
//!   seat's frames over a long window ([`EVIDENCE_REPORTS`] reports, at
//!   least half the current calm period) would have stalled on at most
//!   [`EVIDENCE_STALLS_PERMILLE`] of them; the margin sheds down to it;
//! - **may a decrease go that far?** — the same over each seat's last
//!   [`GUARD_REPORTS`] reports (any number of frames): jitter's wobble in
//!   the round trips asks for a look-ahead the frames just showed too
//!   short, and the decrease stops there.
//!
//! A look-ahead the counts do not reach (more than three frames below the
//! one in force) is taken to stall on every frame: evidence only vouches
//! for what it measured.

use crate::report::needs::NEED_LEVELS;
use crate::report::record::MAX_SEATS;
use crate::report::{LookAheadNeeds, Record};
use crate::timing::ladder::MAX_LOOK_AHEAD;

/// Reports kept per seat: 512 frames at `tracking`'s cadence.
pub(super) const EVIDENCE_REPORTS: usize = 32;
/// Reports a decrease is checked against: the last 128 frames.
pub(super) const GUARD_REPORTS: usize = 8;
/// Stalls per mille of the frames a look-ahead may have cost and still
/// count as holding: one in 512 frames (the budget players are promised is
/// 0.5 %, and a spike's onset spends part of it).
pub(super) const EVIDENCE_STALLS_PERMILLE: u32 = 2;

/// One seat's recent reports: `(frames, needs)`, oldest first from `next - len`.
#[derive(Debug, Clone, Copy, Default)]
struct Window {
    ring: [(u32, LookAheadNeeds); EVIDENCE_REPORTS],
    len: usize,
    next: usize,
}

impl Window {
    fn push(&mut self, frames: u32, needs: LookAheadNeeds) {
        self.ring[self.next] = (frames, needs);
        self.next = (self.next + 1) % EVIDENCE_REPORTS;
        self.len = (self.len + 1).min(EVIDENCE_REPORTS);
    }

    /// The last `reports` reports (fewer if there are not as many).
    fn last(&self, reports: usize) -> impl Iterator<Item = &(u32, LookAheadNeeds)> {
        let count = reports.min(self.len);
        let start = self.next + EVIDENCE_REPORTS - count;
        (0..count).map(move |i| &self.ring[(start + i) % EVIDENCE_REPORTS])
    }

    /// Frames of the last `reports` reports, and how many of them would
    /// have stalled under `look_ahead`.
    fn stalls_under(&self, look_ahead: u32, reports: usize) -> (u32, u32) {
        self.last(reports)
            .fold((0, 0), |(frames, stalls), (f, needs)| {
                (frames + f, stalls + needs.stalled_under(look_ahead, *f))
            })
    }

    fn frames(&self, reports: usize) -> u32 {
        self.last(reports).map(|(f, _)| f).sum()
    }
}

/// Per seat, its recent reports' needs. Every machine keeps the same
/// (executed reports only).
#[derive(Debug, Clone)]
pub(super) struct Evidence {
    windows: [Window; MAX_SEATS],
}

impl Evidence {
    pub(super) fn new() -> Evidence {
        Evidence {
            windows: [Window::default(); MAX_SEATS],
        }
    }

    /// `seat`'s new report ran `frames` frames with these needs; a report
    /// without needs (the detailed layout, an interval nothing measured)
    /// adds nothing.
    pub(super) fn take_in(&mut self, seat: u8, frames: u32, needs: Option<LookAheadNeeds>) {
        let (Some(needs), Some(window)) = (needs, self.windows.get_mut(usize::from(seat))) else {
            return;
        };
        // Every measured frame is a frame run; an engine that counts them
        // apart cannot make the counts exceed the frames.
        let frames = frames.max(u32::from(needs.above[NEED_LEVELS - 1]));
        window.push(frames, needs);
    }

    /// Forget everything: what frames needed before a spike ended says
    /// nothing of the look-ahead after it.
    pub(super) fn forget(&mut self) {
        for window in &mut self.windows {
            window.len = 0;
        }
    }

    /// Whether every seat has sent needs at all (then the margin sheds by
    /// evidence only).
    pub(super) fn covers(&self, mut seats: impl Iterator<Item = u8>) -> bool {
        seats.all(|seat| {
            self.windows
                .get(usize::from(seat))
                .is_some_and(|w| w.len > 0)
        })
    }

    /// The lowest look-ahead under which every seat of `record`'s last `reports`
    /// reports would have stalled on at most [`EVIDENCE_STALLS_PERMILLE`]
    /// of their frames, or `None` while a seat has fewer than `min_frames`
    /// frames (at least one) in them.
    pub(super) fn floor(&self, record: &Record, reports: usize, min_frames: u32) -> Option<u32> {
        for seat in record.seats() {
            let window = self.windows.get(usize::from(seat))?;
            if window.frames(reports) < min_frames.max(1) {
                return None;
            }
        }
        (1..u32::from(MAX_LOOK_AHEAD))
            .find(|&look_ahead| {
                record.seats().all(|seat| {
                    let (frames, stalls) =
                        self.windows[usize::from(seat)].stalls_under(look_ahead, reports);
                    u64::from(stalls) * 1000
                        <= u64::from(frames) * u64::from(EVIDENCE_STALLS_PERMILLE)
                })
            })
            .or(Some(u32::from(MAX_LOOK_AHEAD)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An interval of 16 frames under `reference` whose frames needed
    /// `needed` (each 1–250).
    fn needs(reference: u8, needed: &[u8]) -> (u32, LookAheadNeeds) {
        let mut tally = crate::report::needs::NeedTally::new();
        for &n in needed {
            tally.add(reference, n);
        }
        (needed.len() as u32, tally.take().unwrap())
    }

    fn fill(evidence: &mut Evidence, seat: u8, reports: usize, interval: (u32, LookAheadNeeds)) {
        for _ in 0..reports {
            evidence.take_in(seat, interval.0, Some(interval.1));
        }
    }

    #[test]
    fn the_floor_is_the_lowest_look_ahead_the_frames_would_have_held() {
        let mut evidence = Evidence::new();
        let seats = [0u8, 1];
        let record = Record::new(0, seats);
        assert_eq!(evidence.floor(&record, 8, 1), None, "no evidence yet");
        assert!(!evidence.covers(seats.into_iter()));
        // Seat 0: under 6 every frame needed 4 at most; seat 1: one frame in
        // each report needed 5.
        fill(&mut evidence, 0, 8, needs(6, &[4; 16]));
        assert_eq!(evidence.floor(&record, 8, 1), None, "seat 1 has none");
        let mut one_needs_5 = [3u8; 16];
        one_needs_5[7] = 5;
        fill(&mut evidence, 1, 8, needs(6, &one_needs_5));
        assert!(evidence.covers(seats.into_iter()));
        // Under 4, seat 1 would have stalled once per 16 frames: far more
        // than 2 per mille. Under 5, never.
        assert_eq!(evidence.floor(&record, 8, 1), Some(5));
        // Not before 256 frames of it when asked for that many.
        assert_eq!(evidence.floor(&record, 8, 256), None);
        fill(&mut evidence, 0, 8, needs(6, &[4; 16]));
        fill(&mut evidence, 1, 8, needs(6, &[3; 16]));
        assert_eq!(evidence.floor(&record, 16, 256), Some(5));
        // The last 8 reports alone: seat 1's needs of 5 are older.
        assert_eq!(evidence.floor(&record, 8, 1), Some(4));
    }

    #[test]
    fn a_stall_in_512_frames_passes_and_two_do_not() {
        let mut evidence = Evidence::new();
        let alone = Record::new(0, [0u8]);
        let mut one_stall = [4u8; 16];
        one_stall[0] = 6;
        fill(&mut evidence, 0, 31, needs(6, &[4; 16]));
        fill(&mut evidence, 0, 1, needs(6, &one_stall));
        // 512 frames, one of which needed 6: under 4 or 5 it stalls once,
        // within 2 per mille of 512 (1.02).
        assert_eq!(evidence.floor(&alone, 32, 512), Some(4));
        // Twice in the last 512 frames (the oldest report makes room): only
        // 6 holds.
        fill(&mut evidence, 0, 1, needs(6, &one_stall));
        assert_eq!(evidence.floor(&alone, 32, 512), Some(6));
        // One in 496 frames is more than 2 per mille.
        let mut short = Evidence::new();
        fill(&mut short, 0, 30, needs(6, &[4; 16]));
        fill(&mut short, 0, 1, needs(6, &one_stall));
        assert_eq!(short.floor(&alone, 32, 1), Some(6));
    }

    #[test]
    fn what_the_counts_do_not_reach_is_not_vouched_for_and_forgetting_clears() {
        let mut evidence = Evidence::new();
        let alone = Record::new(0, [0u8]);
        // Under 20 the frames needed 5 at most: the counts reach down to
        // 17, and `most` vouches for 5 and above.
        fill(&mut evidence, 0, 8, needs(20, &[5; 16]));
        assert_eq!(evidence.floor(&alone, 8, 1), Some(5));
        // Needs of 10 and 5 mixed: nothing is known between 5 and 16 but
        // that some frames needed 10, so only 10 is vouched for.
        let mut mixed = [5u8; 16];
        mixed[3] = 10;
        fill(&mut evidence, 0, 8, needs(20, &mixed));
        assert_eq!(evidence.floor(&alone, 8, 1), Some(10));
        evidence.forget();
        assert_eq!(evidence.floor(&alone, 8, 1), None);
        // A report without needs adds nothing.
        evidence.take_in(0, 16, None);
        assert!(!evidence.covers([0u8].into_iter()));
    }
}
