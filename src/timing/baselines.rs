//! The timing rules players use today, for comparison with rungs' adaptive
//! policy (issue 5, `rungs-sim --policy`). The facts come from the original
//! games' public sources (EA's GPL release of Red Alert, CnCNet's protocol 0).
//!
//! Each baseline only chooses targets; the targets are applied by the same
//! schedule (S5) as rungs' own, so no baseline can make a command due before
//! one sent earlier. (The original games apply a new MaxAhead at once, which
//! is exactly the hazard S5's staged decreases remove.) All of them read the
//! same shared record of reports (S3), so they stay deterministic.

use super::ladder::{one_way_frames, Timing};
use super::policy::rate_from_reports;
use super::TimingEvent;
use crate::report::Record;

/// Which rule chooses the timing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PolicyKind {
    /// rungs' adaptive ladder (S4).
    Adaptive,
    /// A fixed `SP/LA` for the whole game, as players set it by hand.
    Fixed(Timing),
    /// Red Alert's rule (`ra`).
    RedAlert,
    /// CnCNet's Tiberian Sun spawner, protocol 0 (`protocol0`).
    Protocol0,
}

/// Red Alert recomputes its timing every this many frames.
pub const RED_ALERT_PERIOD: u32 = 128;
/// Red Alert's default FrameSendRate.
pub const RED_ALERT_SEND_PERIOD: u8 = 3;
/// Protocol 0 re-reads the response times every this many frames.
pub const PROTOCOL0_PERIOD: u32 = 128;

/// Red Alert (`ra`): send period 3; every 128 frames `MaxAhead = RTT·fps/120`
/// with the RTT in 60 Hz ticks — one-way frames — rounded up to the send
/// period and at least three send periods; from the worst round trip.
#[derive(Debug, Clone)]
pub struct RedAlertPolicy {
    speed_fps: u8,
    target: Timing,
    rate: u8,
}

impl RedAlertPolicy {
    /// Starts at `3/9`, Red Alert's usual MaxAhead with its default FrameSendRate.
    pub fn new(speed_fps: u8) -> RedAlertPolicy {
        RedAlertPolicy {
            speed_fps: speed_fps.max(1),
            target: Self::start(),
            rate: speed_fps.max(1),
        }
    }

    /// `3/9`.
    pub fn start() -> Timing {
        Timing::FALLBACK
    }

    /// The look-ahead Red Alert wants for `rtt_ms` at `fps`.
    pub fn look_ahead_for(rtt_ms: u32, fps: u8) -> u8 {
        let sp = u32::from(RED_ALERT_SEND_PERIOD);
        let owt = one_way_frames(rtt_ms, fps);
        let rounded = owt.div_ceil(sp).saturating_mul(sp).max(3 * sp);
        rounded.min(250 - 250 % sp) as u8
    }

    pub fn target(&self) -> Timing {
        self.target
    }

    pub fn rate(&self) -> u8 {
        self.rate
    }

    pub fn set_speed_fps(&mut self, speed_fps: u8) {
        self.speed_fps = speed_fps.max(1);
    }

    /// Every 128 frames, from the fresh reports.
    pub fn evaluate(&mut self, record: &Record, frame: u32) -> Option<TimingEvent> {
        if frame == 0 || frame % RED_ALERT_PERIOD != 0 {
            return None;
        }
        let rate = rate_from_reports(record, frame, self.speed_fps, self.rate);
        let worst = record.worst_fresh_rtt(frame)?;
        let look_ahead = Self::look_ahead_for(worst, rate);
        let target = Timing::new(RED_ALERT_SEND_PERIOD, look_ahead).unwrap_or(self.target);
        if (target, rate) == (self.target, self.rate) {
            return None;
        }
        self.target = target;
        self.rate = rate;
        Some(TimingEvent { target, fps: rate })
    }
}

/// CnCNet's Tiberian Sun spawner, protocol 0 (`protocol0`): three latency
/// levels, `2/6`, `3/12`, `4/16`; every 128 frames the level whose
/// look-ahead covers the worst response time (the round trip in 60 Hz
/// ticks), never lower than the level in force: it only ever rises.
#[derive(Debug, Clone)]
pub struct Protocol0Policy {
    level: usize,
    rate: u8,
}

/// Protocol 0's levels, best first.
pub const PROTOCOL0_LEVELS: [(u8, u8); 3] = [(2, 6), (3, 12), (4, 16)];

impl Protocol0Policy {
    pub fn new(speed_fps: u8) -> Protocol0Policy {
        Protocol0Policy {
            level: 0,
            rate: speed_fps.max(1),
        }
    }

    fn timing_of(level: usize) -> Timing {
        let (sp, la) = PROTOCOL0_LEVELS[level];
        Timing::new(sp, la).unwrap_or(Timing::START)
    }

    /// `2/6`.
    pub fn start() -> Timing {
        Self::timing_of(0)
    }

    /// The level (0–2) a response time of `rtt_ms` asks for.
    pub fn level_for(rtt_ms: u32) -> usize {
        let response_ticks = (u64::from(rtt_ms) * 60).div_ceil(1000);
        PROTOCOL0_LEVELS
            .iter()
            .position(|(_, la)| response_ticks <= u64::from(*la))
            .unwrap_or(PROTOCOL0_LEVELS.len() - 1)
    }

    pub fn target(&self) -> Timing {
        Self::timing_of(self.level)
    }

    pub fn rate(&self) -> u8 {
        self.rate
    }

    /// Every 128 frames: rise to the level the worst round trip needs.
    pub fn evaluate(&mut self, record: &Record, frame: u32) -> Option<TimingEvent> {
        if frame == 0 || frame % PROTOCOL0_PERIOD != 0 {
            return None;
        }
        let worst = record.worst_fresh_rtt(frame)?;
        let level = Self::level_for(worst);
        if level <= self.level {
            return None;
        }
        self.level = level;
        Some(TimingEvent {
            target: self.target(),
            fps: self.rate,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::Report;

    fn record_with(rtt: u32, process_us: u32) -> Record {
        let mut record = Record::new(0, [0, 1]);
        for seat in 0..2 {
            record
                .apply_report(
                    seat,
                    100,
                    Report {
                        process_us,
                        max_wait_ms: 0,
                        worst_rtt_ms: Some(rtt),
                    },
                )
                .unwrap();
        }
        record
    }

    #[test]
    fn red_alert_uses_one_way_frames_rounded_to_three_at_least_nine() {
        assert_eq!(RedAlertPolicy::look_ahead_for(20, 30), 9);
        assert_eq!(RedAlertPolicy::look_ahead_for(700, 30), 12); // owt 11 -> 12
        assert_eq!(RedAlertPolicy::look_ahead_for(5000, 30), 75);
        assert_eq!(RedAlertPolicy::look_ahead_for(100_000, 30), 249);
        let mut ra = RedAlertPolicy::new(30);
        assert_eq!(
            ra.evaluate(&record_with(700, 8000), 100),
            None,
            "only every 128 frames"
        );
        let event = ra.evaluate(&record_with(700, 8000), 128).unwrap();
        assert_eq!(event.target.to_string(), "3/12");
        assert_eq!(
            ra.evaluate(&record_with(700, 8000), 256),
            None,
            "unchanged: nothing sent"
        );
        // It comes back down as soon as the round trip does.
        assert_eq!(
            ra.evaluate(&record_with(20, 8000), 384)
                .unwrap()
                .target
                .to_string(),
            "3/9"
        );
        // And follows the slowest machine's processing time.
        assert_eq!(ra.evaluate(&record_with(20, 45_000), 512).unwrap().fps, 22);
    }

    #[test]
    fn protocol0_levels_only_rise() {
        assert_eq!(Protocol0Policy::level_for(100), 0); // 6 ticks
        assert_eq!(Protocol0Policy::level_for(101), 1);
        assert_eq!(Protocol0Policy::level_for(200), 1); // 12 ticks
        assert_eq!(Protocol0Policy::level_for(260), 2);
        assert_eq!(Protocol0Policy::level_for(5000), 2);
        let mut p0 = Protocol0Policy::new(30);
        assert_eq!(p0.evaluate(&record_with(60, 8000), 128), None);
        assert_eq!(
            p0.evaluate(&record_with(180, 8000), 256)
                .unwrap()
                .target
                .to_string(),
            "3/12"
        );
        assert_eq!(
            p0.evaluate(&record_with(20, 8000), 384),
            None,
            "never comes back down"
        );
        assert_eq!(p0.target().to_string(), "3/12");
    }
}
