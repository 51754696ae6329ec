//! What a report's stalls ask of the look-ahead (rule 5 of
//! docs/tracking.md): nothing when a slow CPU or the round trips explain
//! them, margin when the round trips do not show them at all, a look-ahead
//! to reach or a spike's look-ahead to hold when they show them in part.

use super::TrackingPolicy;
use super::CPU_BOUND_PERMILLE;
use crate::report::record::MAX_SEATS;
use crate::report::{Record, Report};
use crate::timing::ladder::MAX_LOOK_AHEAD;

impl TrackingPolicy {
    /// What one report's stalls ask ([`Self::take_in_reports`]).
    pub(super) fn ask_of_report(
        record: &Record,
        report: &Report,
        rate: u8,
        in_force: u32,
        blocked: bool,
        jitter_ms: u32,
    ) -> StallsAsk {
        let mut asked = StallsAsk::default();
        let (stalled, frames, waited_for, stall_ms) = match report.detail {
            Some(d) => (d.stalled_frames, d.frames, d.waited_for, d.stall_ms),
            // The older layouts say only whether a wait happened.
            None => (
                u32::from(report.max_wait_ms > 0),
                0,
                None,
                report.max_wait_ms,
            ),
        };
        if stalled == 0 {
            return asked;
        }
        let cpu_bound = waited_for
            .and_then(|slow| record.latest(slow))
            .is_some_and(|(slow, _)| {
                u64::from(slow.process_us) * u64::from(rate) >= u64::from(CPU_BOUND_PERMILLE) * 1000
            });
        if cpu_bound {
            return asked;
        }
        let lacking = Self::lacking_frames(report, stalled, frames, stall_ms, rate, in_force);
        asked.lacking = lacking;
        let for_worst = report
            .worst_rtt_ms
            .map_or(0, |rtt| Self::look_ahead_for(rtt, rate));
        if for_worst >= in_force + lacking {
            // The round trips explain it: the look-ahead follows them.
            return asked;
        }
        asked.unexplained = stalled;
        if for_worst > in_force || blocked {
            // The round trips rose past the look-ahead in force but say
            // less than the stall: a spike whose round trips are only half
            // back (the first samples after its start went out before it,
            // and come back at the old one-way delay plus the new one). The
            // stall reads it whole. So does one that waited under the
            // look-ahead before a raise that has not reached the turns yet:
            // it asks for more only if it lacked more than the raise gave.
            let jitter = (u64::from(jitter_ms) * u64::from(rate)).div_ceil(1000) as u32;
            if for_worst > in_force {
                asked.spike = in_force + lacking + jitter;
            } else {
                asked.look_ahead = in_force + lacking;
            }
        } else {
            // The round trips do not show it at all: loss (Karn keeps
            // retransmitted samples out of them), jitter the distribution
            // does not show, a late sender. Margin on top of what the round
            // trips need (the look-ahead in force may be more than they
            // need: the opening's, or one coming down), at least a frame.
            asked.margin = lacking.max(1);
        }
        if asked.margin > 0 && stalled == 1 && u64::from(stall_ms) * u64::from(rate) < 1000 {
            asked.near_misses = 1;
            match waited_for.filter(|seat| usize::from(*seat) < MAX_SEATS) {
                Some(seat) => asked.near_miss_seats = 1 << seat,
                None => asked.near_misses_for_nobody = 1,
            }
        } else {
            asked.others = 1;
        }
        asked
    }

    /// The frames of look-ahead a report's stalls say `in_force` lacked:
    /// its longest single wait, in frames rounded up (a lost turn waiting
    /// for its copy, the first stall of a spike); and when every frame of
    /// the interval waited (two at least), `in_force` times a stalled
    /// frame's average wait, if more. The turns then arrive slower than the
    /// game's pace, as they do from a spike's start until the look-ahead
    /// covers it: the game runs `in_force` frames per one-way trip, and
    /// each such run of frames waits, in all, what the look-ahead lacks —
    /// mostly in its first frame, whose turn took the whole trip, the
    /// others' turns following close behind. A stalled frame's average
    /// wait alone read the first report of a 1.5 s spike on a 120 ms game
    /// (a 684 ms stall and a 3 ms one) as 11 frames lacking, not 21, and
    /// every stall until the spike's round trips came back (two of its
    /// round trips after it began) waited on it.
    pub(super) fn lacking_frames(
        report: &Report,
        stalled: u32,
        frames: u32,
        stall_ms: u32,
        rate: u8,
        in_force: u32,
    ) -> u32 {
        let chained = stalled >= 2 && stalled >= frames;
        let chained_ms = if chained {
            u64::from(stall_ms) * u64::from(in_force.max(1)) / u64::from(stalled)
        } else {
            0
        };
        let lacking_ms = chained_ms.max(u64::from(report.max_wait_ms));
        (lacking_ms * u64::from(rate))
            .div_ceil(1000)
            .min(u64::from(MAX_LOOK_AHEAD)) as u32
    }
}

/// A bit per seat.
type SeatMask = u16;
const _: () = assert!(MAX_SEATS <= SeatMask::BITS as usize);

/// What the stalls of an evaluation's new reports ask of the look-ahead.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct StallsAsk {
    /// The most unexplained stalled frames any one report has.
    pub(super) unexplained: u32,
    /// Frames of margin on top of the round trips' look-ahead: stalls the
    /// round trips do not show at all, outside a raise's way to the turns.
    pub(super) margin: u32,
    /// A look-ahead to reach: stalls under the look-ahead before a raise
    /// that had not reached the turns yet.
    pub(super) look_ahead: u32,
    /// A look-ahead a spike's first stalls ask for, its round trips only
    /// half back: held until they are back whole, not kept as margin.
    pub(super) spike: u32,
    /// Reports whose only unexplained stall is one frame that waited less
    /// than a frame, the round trips showing nothing: a near miss.
    pub(super) near_misses: u32,
    /// Reports with any other unexplained stall.
    pub(super) others: u32,
    /// The seats the near misses waited for, a bit per seat.
    pub(super) near_miss_seats: SeatMask,
    /// The most frames of look-ahead any report's frames lacked: its
    /// stalls' ([`TrackingPolicy::lacking_frames`]), whatever explains
    /// them, but a slow CPU's; or the most a frame needed beyond the
    /// look-ahead it ran under (the frames' needs). What says a spike
    /// still goes on (decision 75).
    pub(super) lacking: u32,
    /// Near misses that waited for no seat known.
    pub(super) near_misses_for_nobody: u32,
}

impl StallsAsk {
    /// Take in what one more report asks: the most any asks, and every
    /// report's near miss or other stall counted.
    pub(super) fn join(&mut self, one: &StallsAsk) {
        self.unexplained = self.unexplained.max(one.unexplained);
        self.margin = self.margin.max(one.margin);
        self.look_ahead = self.look_ahead.max(one.look_ahead);
        self.spike = self.spike.max(one.spike);
        self.near_misses += one.near_misses;
        self.others += one.others;
        self.near_miss_seats |= one.near_miss_seats;
        self.lacking = self.lacking.max(one.lacking);
        self.near_misses_for_nobody += one.near_misses_for_nobody;
    }

    /// Near misses and nothing else, all of them one late turn: one
    /// player's, or several players' that waited for the same seat
    /// (decision 56).
    pub(super) fn lone_near_miss(&self) -> bool {
        let one_late_turn = self.near_misses == 1
            || (self.near_misses_for_nobody == 0 && self.near_miss_seats.count_ones() == 1);
        self.near_misses > 0 && self.others == 0 && one_late_turn
    }
}
