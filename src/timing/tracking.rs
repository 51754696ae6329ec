//! The `tracking` policy (issue 12): the shortest look-ahead that the
//! measured round trips and processing times need, with send period 1, a
//! margin that grows only when players actually stall, and no hysteresis
//! on the way back down. Design and the measurements behind each rule:
//! `docs/tracking.md`.
//!
//! Like every policy it reads only executed reports (S3) and integer
//! arithmetic, on the same frames on every machine, so every machine holds
//! the same target; only the master's machine sends the timing events.

use super::ladder::{Timing, MAX_LOOK_AHEAD};
use super::policy::rate_from_reports;
use super::TimingEvent;
use crate::report::Record;

/// The policy looks at the record every this many frames (reports arrive
/// every 128 frames after 64; 32 catches the first ones as they come).
pub const TRACKING_PERIOD: u32 = 32;
/// The look-ahead before any report (send period 1).
pub const START_LOOK_AHEAD: u8 = 30;
/// At most this many frames of stall margin.
pub const MAX_STALL_MARGIN: u8 = 8;
/// Evaluations without a reported stall before one frame of margin goes.
pub const CALM_EVALUATIONS_TO_SHED_MARGIN: u8 = 8;

/// The `tracking` policy's state; every machine holds the same.
#[derive(Debug, Clone)]
pub struct TrackingPolicy {
    speed_fps: u8,
    target: Timing,
    rate: u8,
    /// Extra frames of look-ahead, earned by stalls players reported.
    margin: u8,
    calm_in_a_row: u8,
    /// The latest report frame already taken in, per seat (so one report's
    /// stall counts once).
    seen: [Option<u32>; crate::report::record::MAX_SEATS],
}

impl TrackingPolicy {
    pub fn new(speed_fps: u8) -> TrackingPolicy {
        TrackingPolicy {
            speed_fps: speed_fps.max(1),
            target: Self::start(),
            rate: speed_fps.max(1),
            margin: 0,
            calm_in_a_row: 0,
            seen: [None; crate::report::record::MAX_SEATS],
        }
    }

    /// `1/30` until the first reports arrive: a second of look-ahead at 30
    /// fps covers the widest round trips players meet, so the opening frames
    /// do not stall while nobody knows the network yet; few commands are
    /// issued that early, and the first evaluation brings it down.
    pub fn start() -> Timing {
        Timing::new(1, START_LOOK_AHEAD).unwrap_or(Timing::START)
    }

    pub fn target(&self) -> Timing {
        self.target
    }

    pub fn rate(&self) -> u8 {
        self.rate
    }

    pub fn margin(&self) -> u8 {
        self.margin
    }

    pub fn set_speed_fps(&mut self, speed_fps: u8) {
        self.speed_fps = speed_fps.max(1);
    }

    /// The look-ahead a turn needs at `fps`: it leaves when its frame's
    /// work is done (`process_us`) and must arrive before the frame it is
    /// for starts, one way (`rtt_ms / 2`, the worst sample of the interval,
    /// jitter included) — in whole frames, rounded up, at least 1.
    pub fn look_ahead_for(rtt_ms: u32, process_us: u32, fps: u8) -> u32 {
        let need_us = u64::from(rtt_ms) * 500 + u64::from(process_us);
        let frames = (need_us * u64::from(fps)).div_ceil(1_000_000);
        frames.clamp(1, u64::from(MAX_LOOK_AHEAD)) as u32
    }

    /// Every [`TRACKING_PERIOD`] frames with every player's fresh report.
    pub fn evaluate(&mut self, record: &Record, frame: u32) -> Option<TimingEvent> {
        if frame == 0 || frame % TRACKING_PERIOD != 0 || !record.all_fresh(frame) {
            return None;
        }
        let worst_rtt = record.worst_fresh_rtt(frame)?;
        let process_us = record.max_fresh_process_us(frame).unwrap_or(0);
        let rate = rate_from_reports(record, frame, self.speed_fps, self.rate);
        self.take_in_stalls(record, rate);
        let look_ahead = (Self::look_ahead_for(worst_rtt, process_us, rate)
            + u32::from(self.margin))
        .min(u32::from(MAX_LOOK_AHEAD)) as u8;
        let target = Timing::new(1, look_ahead).unwrap_or(self.target);
        if (target, rate) == (self.target, self.rate) {
            return None;
        }
        self.target = target;
        self.rate = rate;
        Some(TimingEvent { target, fps: rate })
    }

    /// New reports that say their player waited at all raise
    /// the margin by a frame, or to the frames waited if that is more; a run
    /// of calm new reports sheds one frame.
    fn take_in_stalls(&mut self, record: &Record, rate: u8) {
        let frame_ms = 1000 / u32::from(rate.max(1));
        let mut new_reports = 0;
        let mut waited_frames = 0u32;
        for seat in record.seats() {
            let Some((report, executed)) = record.latest(seat) else {
                continue;
            };
            let Some(seen) = self.seen.get_mut(usize::from(seat)) else {
                continue;
            };
            if *seen == Some(executed) {
                continue;
            }
            *seen = Some(executed);
            new_reports += 1;
            if report.max_wait_ms > 0 {
                waited_frames = waited_frames.max(report.max_wait_ms.div_ceil(frame_ms.max(1)));
            }
        }
        if new_reports == 0 {
            return;
        }
        if waited_frames > 0 {
            // A stall a player suffered while the margin was already there
            // says the margin is short by about the frames it waited.
            let earned = waited_frames.min(u32::from(MAX_STALL_MARGIN)) as u8;
            self.margin = self
                .margin
                .max(earned)
                .max(self.margin + 1)
                .min(MAX_STALL_MARGIN);
            self.calm_in_a_row = 0;
        } else {
            self.calm_in_a_row = self.calm_in_a_row.saturating_add(1);
            if self.calm_in_a_row >= CALM_EVALUATIONS_TO_SHED_MARGIN && self.margin > 0 {
                self.margin -= 1;
                self.calm_in_a_row = 0;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::Report;

    fn record_with(rtt: u32, wait_ms: u32, executed: u32) -> Record {
        let mut record = Record::new(0, [0, 1]);
        for seat in 0..2 {
            let report = Report {
                process_us: 5000,
                max_wait_ms: wait_ms,
                worst_rtt_ms: Some(rtt),
                detail: None,
            };
            record.apply_report(seat, executed, report).unwrap();
        }
        record
    }

    #[test]
    fn the_look_ahead_covers_half_the_round_trip_plus_the_frame_work() {
        // 5 ms on a LAN at 30 fps: 2.5 + 5 ms fit in one frame.
        assert_eq!(TrackingPolicy::look_ahead_for(5, 5000, 30), 1);
        // 100 ms at 60 fps: 55 ms is 3.3 frames, so 4.
        assert_eq!(TrackingPolicy::look_ahead_for(100, 5000, 60), 4);
        assert_eq!(TrackingPolicy::look_ahead_for(1_000_000, 0, 60), 250);
    }

    #[test]
    fn it_follows_the_reports_down_at_once_and_stalls_buy_margin() {
        let mut policy = TrackingPolicy::new(30);
        assert_eq!(policy.evaluate(&record_with(200, 0, 30), 31), None);
        let up = policy.evaluate(&record_with(200, 0, 30), 32).unwrap();
        assert_eq!(up.target.to_string(), "1/4"); // 100 + 5 ms: 3.15 frames
                                                  // The round trip falls: the very next look follows it down.
        let down = policy.evaluate(&record_with(20, 0, 60), 64).unwrap();
        assert_eq!(down.target.to_string(), "1/1");
        // A player waited 70 ms: three frames of margin.
        let held = policy.evaluate(&record_with(20, 70, 190), 192).unwrap();
        assert_eq!(held.target.to_string(), "1/4");
        assert_eq!(policy.margin(), 3);
        // The same report again earns nothing more.
        assert_eq!(policy.evaluate(&record_with(20, 70, 190), 224), None);
        // Calm reports shed the margin a frame at a time.
        for n in 0..CALM_EVALUATIONS_TO_SHED_MARGIN {
            let frame = 256 + u32::from(n) * 128;
            policy.evaluate(&record_with(20, 0, frame - 1), frame);
        }
        assert_eq!(policy.margin(), 2);
    }
}
