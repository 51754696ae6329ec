//! When a frame stalls, and by how much: one rule for both lockstep
//! sessions (peer to peer and relayed), feeding the reports (S3) and the
//! session's stats alike.
//!
//! A frame waits when it is due and its turns (or the relay's bundle) are
//! not there yet. What a player sees as a stall is a frame that starts
//! later than the rate puts it after the frame before; only that part of
//! the wait is a stall. The rest was taken off the frame by the pacing
//! (S9): after a stall a machine steers back toward the master's schedule
//! a tenth of a frame at a time, and the master's new anchor reaches it
//! only a one-way trip later; until then its frames come due early and
//! wait for turns that arrive at the rate — on time, no stall. Counted as
//! stalls, those waits made each spike's onset look some twenty stalled
//! frames longer than the players saw it (decision 47 in docs/decisions.md).
//!
//! A frame that waited a whole frame past the rate or more waits a frame
//! and a half longer (the cushion, decisions 52 and 57): the turns of the
//! frames after it follow its own with the network's jitter, and without
//! the cushion they stalled one after another, a few ms each. The player
//! sees the cushion as part of the stall, so the session's stats count it;
//! the report does not (decision 58): S3's wait is the wait *for the other
//! players*, and the cushion starts when their turns are there. Reported,
//! it read to the `tracking` policy as a frame and a half of look-ahead
//! the turns lacked, on every stall of a frame or more.

use super::LockstepStats;
use crate::report::Measurements;

/// A frame later than the rate by at most this share of a frame (1/256:
/// 130 µs at 30 fps) is on the rate: the schedule's µs rounding and clocks
/// up to 100 ppm apart, nothing a player sees.
const ON_RATE_SLACK_DIVISOR: u64 = 256;

/// A frame that waited a whole frame past the rate or more starts this
/// many half frame periods after its turns came (decision 57: one frame,
/// decision 52's, still left a string of short stalls behind a spike's
/// onset on a jittery path).
const CUSHION_HALF_FRAMES: u64 = 3;

/// The open wait, if any, and when the last frame started.
#[derive(Debug, Clone, Default)]
pub(super) struct StallWatch {
    waiting_since: Option<u64>,
    /// The seat whose turn the open wait is for (the report names it).
    waiting_for: Option<u8>,
    last_frame_start_us: Option<u64>,
    /// Until when a frame that waited a whole frame or more waits on, and
    /// when its turns came (where its wait for the other players ended).
    cushion: Option<Cushion>,
}

/// A frame held on after its turns came ([`StallWatch::cushion`]).
#[derive(Debug, Clone, Copy)]
struct Cushion {
    turns_came_us: u64,
    until_us: u64,
}

impl StallWatch {
    /// The next frame is due but cannot start at `now_us`: a wait opens,
    /// for `seat`'s turn (asked only when the wait opens).
    pub(super) fn waiting(&mut self, now_us: u64, seat: impl FnOnce() -> Option<u8>) {
        if self.waiting_since.is_none() {
            self.waiting_since = Some(now_us);
            self.waiting_for = seat();
        }
    }

    /// The frame due is ready at `now_us` after waiting: when it may start.
    /// A frame that waited a whole frame past the rate or more waits a
    /// frame and a half more ([`CUSHION_HALF_FRAMES`]), so the frames after
    /// it, whose turns follow its own with the network's jitter, start on
    /// the rate instead of each waiting again: one longer stall instead of
    /// a stall and a string of short ones. `None`: start now.
    pub(super) fn cushion(&mut self, now_us: u64, frame_us: u64) -> Option<u64> {
        let since = self.waiting_since?;
        if let Some(held) = self.cushion {
            return (now_us < held.until_us).then_some(held.until_us);
        }
        let from = Self::on_rate_after(self.last_frame_start_us, since, frame_us);
        if now_us.saturating_sub(from) < frame_us {
            return None;
        }
        let until_us = now_us + frame_us * CUSHION_HALF_FRAMES / 2;
        self.cushion = Some(Cushion {
            turns_came_us: now_us,
            until_us,
        });
        Some(until_us)
    }

    /// When the frame whose wait opened at `since` would have started on
    /// the rate: a period after the last frame's start (the wait before
    /// that was the pacer bringing it forward), or the wait's opening if
    /// later. Only what comes after is a stall.
    fn on_rate_after(last_start_us: Option<u64>, since: u64, frame_us: u64) -> u64 {
        last_start_us.map_or(since, |last| since.max(last.saturating_add(frame_us)))
    }

    /// The latest the next frame, due at `due_us`, can start without
    /// counting as a stall: its due time, or a frame period after the last
    /// frame started if that is later (the rule [`Self::frame_starts`]
    /// measures stalls by).
    pub(super) fn stall_deadline(&self, due_us: u64, frame_us: u64) -> u64 {
        Self::on_rate_after(self.last_frame_start_us, due_us, frame_us)
    }

    /// Whether a wait is open (a datagram, not time, releases the frame).
    pub(super) fn is_waiting(&self) -> bool {
        self.waiting_since.is_some()
    }

    /// The next frame starts at `now_us`, the rate in force being
    /// `frame_us` per frame: its stall, if any, is measured and counted —
    /// in the stats with its cushion, as the player saw it; in the report
    /// up to when its turns came (the wait for the other players, S3).
    /// Whether it waited at all.
    pub(super) fn frame_starts(
        &mut self,
        now_us: u64,
        frame_us: u64,
        measurements: &mut Measurements,
        stats: &mut LockstepStats,
    ) -> bool {
        let last = self.last_frame_start_us.replace(now_us);
        let cushion = self.cushion.take();
        let Some(since) = self.waiting_since.take() else {
            return false;
        };
        let seat = self.waiting_for.take();
        let from = Self::on_rate_after(last, since, frame_us);
        let stall_us = now_us.saturating_sub(from);
        if stall_us > frame_us / ON_RATE_SLACK_DIVISOR {
            let turns_came_us = cushion.map_or(now_us, |held| held.turns_came_us.min(now_us));
            measurements.add_wait_for_us(turns_came_us.saturating_sub(from), seat);
            stats.stalled_frames += 1;
            stats.stall_us += stall_us;
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FRAME: u64 = 33_333;

    fn start(watch: &mut StallWatch, at: u64, stats: &mut LockstepStats) -> bool {
        watch.frame_starts(at, FRAME, &mut Measurements::new(), stats)
    }

    #[test]
    fn a_wait_past_the_rate_is_a_stall_and_one_within_it_is_not() {
        let mut watch = StallWatch::default();
        let mut stats = LockstepStats::default();
        assert!(!start(&mut watch, 1_000_000, &mut stats));
        // Due on the rate, turns 20 ms late: a 20 ms stall.
        watch.waiting(1_000_000 + FRAME, || Some(2));
        assert!(start(&mut watch, 1_000_000 + FRAME + 20_000, &mut stats));
        assert_eq!((stats.stalled_frames, stats.stall_us), (1, 20_000));
        // Due a tenth early (the pacer catching up), turns on the rate: it
        // waited, but starts one period after the last frame: no stall.
        let last = 1_000_000 + FRAME + 20_000;
        watch.waiting(last + FRAME - 3_333, || Some(2));
        assert!(start(&mut watch, last + FRAME + 1, &mut stats));
        assert_eq!((stats.stalled_frames, stats.stall_us), (1, 20_000));
        // Due early and turns later than the rate: the part past it.
        let last = last + FRAME + 1;
        watch.waiting(last + FRAME - 3_333, || None);
        assert!(start(&mut watch, last + FRAME + 5_000, &mut stats));
        assert_eq!((stats.stalled_frames, stats.stall_us), (2, 25_000));
    }

    #[test]
    fn a_frame_that_waited_a_whole_frame_waits_one_and_a_half_more_and_counts_once() {
        let mut watch = StallWatch::default();
        let mut stats = LockstepStats::default();
        start(&mut watch, 0, &mut stats);
        // Due on the rate; its turns come 40 ms late, more than a frame:
        // it starts a frame and a half after they came.
        watch.waiting(FRAME, || Some(1));
        let ready = FRAME + 40_000;
        let cushion = FRAME * 3 / 2;
        assert_eq!(watch.cushion(ready, FRAME), Some(ready + cushion));
        assert_eq!(watch.cushion(ready + 5_000, FRAME), Some(ready + cushion));
        assert_eq!(watch.cushion(ready + cushion, FRAME), None);
        assert!(start(&mut watch, ready + cushion, &mut stats));
        assert_eq!(
            (stats.stalled_frames, stats.stall_us),
            (1, 40_000 + cushion)
        );
        // A wait under a frame past the rate starts at once.
        let last = ready + cushion;
        watch.waiting(last + FRAME, || Some(1));
        assert_eq!(watch.cushion(last + FRAME + 10_000, FRAME), None);
        assert!(start(&mut watch, last + FRAME + 10_000, &mut stats));
        assert_eq!(stats.stalled_frames, 2);
        // No wait open: nothing to hold.
        assert_eq!(watch.cushion(last + 3 * FRAME, FRAME), None);
    }

    /// A watch whose first frame started at 0, its stats and measurements.
    fn started_at_zero() -> (StallWatch, LockstepStats, Measurements) {
        let mut watch = StallWatch::default();
        let mut stats = LockstepStats::default();
        let mut measurements = Measurements::new();
        watch.frame_starts(0, FRAME, &mut measurements, &mut stats);
        (watch, stats, measurements)
    }

    #[test]
    fn the_report_waits_until_the_turns_came_and_the_stats_see_the_cushion() {
        let (mut watch, mut stats, mut measurements) = started_at_zero();
        // Due on the rate; its turns come 40 ms late: the player sees a
        // 40 ms stall and the cushion after it, the report the 40 ms the
        // other players kept it waiting (S3).
        watch.waiting(FRAME, || Some(2));
        let ready = FRAME + 40_000;
        let until = watch.cushion(ready, FRAME).expect("a whole frame late");
        watch.frame_starts(until, FRAME, &mut measurements, &mut stats);
        assert_eq!(stats.stall_us, 40_000 + FRAME * 3 / 2);
        let report = measurements.take_report();
        assert_eq!(report.max_wait_ms, 40);
        let detail = report.detail.unwrap();
        assert_eq!((detail.stalled_frames, detail.stall_ms), (1, 40));
        assert_eq!(detail.waited_for, Some(2));
    }

    #[test]
    fn the_stall_goes_into_the_report_with_its_seat() {
        let (mut watch, mut stats, mut measurements) = started_at_zero();
        watch.waiting(FRAME, || Some(3));
        watch.waiting(FRAME + 10, || panic!("asked only when the wait opens"));
        watch.frame_starts(FRAME + 40_000, FRAME, &mut measurements, &mut stats);
        let detail = measurements.take_report().detail.unwrap();
        assert_eq!(detail.stalled_frames, 1);
        assert_eq!(detail.stall_ms, 40);
        assert_eq!(detail.waited_for, Some(3));
    }
}
