//! The Red Alert and protocol 0 rules applied to rungs' reports (S3):
//! what a relay runs as a match's master when its setup names `ra`,
//! `protocol0` or `protocol0-ts` (`docs/relay.md`, "Timing"). They read the
//! shared record, so every machine (and the relay) computes the same
//! targets, and the schedule (S5) applies them.
//!
//! These are **not** the baselines `rungs-sim` compares with: the original
//! games time their own connections (each machine's acknowledgement delays,
//! [`super::ResponseTime`]), wait by their own rule and resend on their own
//! timers, which only a model of their engines plays (`sim::classic`,
//! `docs/baselines.md`). Here the round trip is each report's worst clean
//! one, averaged over a player's last six reports, and the worst player's
//! average counts.

use super::super::ladder::Timing;
use super::super::TimingEvent;
use super::protocol0::{self, Protocol0Table};
use super::{red_alert, rtt_ticks};
use crate::report::record::MAX_SEATS;
use crate::report::Record;

/// Red Alert's rule recomputes the timing every this many frames.
pub(crate) const RED_ALERT_PERIOD: u32 = red_alert::TIMING_PERIOD;
/// Protocol 0's levels are re-read every this many frames (reports come
/// every 128 frames after frame 64: more often would see nothing new).
pub(crate) const PROTOCOL0_PERIOD: u32 = 32;
/// How many of a player's reports its averaged round trip spans.
pub(crate) const AVERAGED_REPORTS: usize = 6;

/// The response time from reports: per player, the mean of the round trips
/// of its last [`AVERAGED_REPORTS`] executed reports; the worst player's
/// counts. Deterministic: it reads only executed reports, and every machine
/// evaluates on the same frames.
#[derive(Debug, Clone)]
pub(crate) struct ReportedResponseTime {
    /// Per seat: the last reports' round trips, oldest first, how many, and
    /// the frame the latest executed on.
    samples: [([u32; AVERAGED_REPORTS], usize, Option<u32>); MAX_SEATS],
}

impl Default for ReportedResponseTime {
    fn default() -> Self {
        ReportedResponseTime::new()
    }
}

impl ReportedResponseTime {
    /// No report taken in yet (every seat's average absent).
    pub(crate) fn new() -> ReportedResponseTime {
        ReportedResponseTime {
            samples: [([0; AVERAGED_REPORTS], 0, None); MAX_SEATS],
        }
    }

    /// Take in the reports executed since the last call.
    pub(crate) fn update(&mut self, record: &Record) {
        for seat in record.seats() {
            let Some((report, executed)) = record.latest(seat) else {
                continue;
            };
            let Some(slot) = self.samples.get_mut(usize::from(seat)) else {
                continue;
            };
            if slot.2 == Some(executed) {
                continue;
            }
            slot.2 = Some(executed);
            if let Some(rtt) = report.worst_rtt_ms {
                if slot.1 == AVERAGED_REPORTS {
                    slot.0.rotate_left(1);
                    slot.1 -= 1;
                }
                slot.0[slot.1] = rtt;
                slot.1 += 1;
            }
        }
    }

    /// The worst present player's averaged round trip, ms; `None` before any
    /// round trip was reported.
    pub(crate) fn worst_ms(&self, record: &Record) -> Option<u32> {
        record
            .seats()
            .filter_map(|seat| {
                let (values, count, _) = self.samples.get(usize::from(seat))?;
                let count = *count;
                (count > 0).then(|| {
                    let sum: u64 = values[..count].iter().map(|v| u64::from(*v)).sum();
                    (sum / count as u64) as u32
                })
            })
            .max()
    }
}

/// Red Alert's rule from reports: send period 3, starting at `3/9`; every
/// 128 frames [`red_alert::max_ahead`] of the worst averaged round trip
/// and [`red_alert::desired_fps`] of the slowest reported frame work.
#[derive(Debug, Clone)]
pub struct RedAlertPolicy {
    speed_fps: u8,
    target: Timing,
    rate: u8,
    response: ReportedResponseTime,
}

impl RedAlertPolicy {
    /// The rule at the game's start (`3/9`) for a game speed of
    /// `speed_fps` frames a second (0 counts as 1), its top frame rate.
    pub fn new(speed_fps: u8) -> RedAlertPolicy {
        RedAlertPolicy {
            speed_fps: speed_fps.max(1),
            target: Self::start(),
            rate: speed_fps.max(1),
            response: ReportedResponseTime::new(),
        }
    }

    /// `3/9`.
    pub fn start() -> Timing {
        Timing::FALLBACK
    }

    /// The look-ahead for an averaged round trip of `rtt_ms` at `fps`.
    pub fn look_ahead_for(rtt_ms: u32, fps: u8) -> u8 {
        red_alert::max_ahead(rtt_ticks(rtt_ms), fps, red_alert::FRAME_SEND_RATE)
    }

    /// The frame rate from the slowest fresh report's whole ticks per
    /// frame; unchanged until every player has a fresh report.
    pub fn rate_for(record: &Record, frame: u32, speed_fps: u8, current: u8) -> u8 {
        if !record.all_fresh(frame) {
            return current;
        }
        let ticks = record
            .max_fresh_process_us(frame)
            .map_or(0, |us| red_alert::average_ticks(u64::from(us), 1));
        red_alert::desired_fps(ticks, speed_fps)
    }

    /// The timing the rule last chose (`3/9` before its first change).
    pub fn target(&self) -> Timing {
        self.target
    }

    /// The frame rate the rule last chose, frames a second (the game speed's
    /// before its first change).
    pub fn rate(&self) -> u8 {
        self.rate
    }

    /// The game speed changed to `speed_fps` frames a second (0 counts as
    /// 1): the top rate of later evaluations.
    pub fn set_speed_fps(&mut self, speed_fps: u8) {
        self.speed_fps = speed_fps.max(1);
    }

    /// Every 128 frames, from the averaged response times.
    pub fn evaluate(&mut self, record: &Record, frame: u32) -> Option<TimingEvent> {
        self.response.update(record);
        if frame == 0 || frame % RED_ALERT_PERIOD != 0 {
            return None;
        }
        let rate = Self::rate_for(record, frame, self.speed_fps, self.rate);
        let worst = self.response.worst_ms(record)?;
        let look_ahead = Self::look_ahead_for(worst, rate);
        let target = Timing::new(red_alert::FRAME_SEND_RATE, look_ahead).unwrap_or(self.target);
        if (target, rate) == (self.target, self.rate) {
            return None;
        }
        self.target = target;
        self.rate = rate;
        Some(TimingEvent { target, fps: rate })
    }
}

/// Protocol 0's rule from reports: starting at `2/12`, every 32 frames the
/// worst averaged round trip in ticks picks a level of `table`; a higher
/// level than the one in force applies (send period `L`, the table's
/// look-ahead) at the game speed's rate; levels only rise.
#[derive(Debug, Clone)]
pub struct Protocol0Policy {
    table: Protocol0Table,
    /// 0 is the initial `2/12`, before any level was applied.
    level: u8,
    rate: u8,
    response: ReportedResponseTime,
}

impl Protocol0Policy {
    /// The rule at the game's start (`2/12`, level 0) with the levels of
    /// `table`, at a game speed of `speed_fps` frames a second (0 counts as
    /// 1).
    pub fn new(table: Protocol0Table, speed_fps: u8) -> Protocol0Policy {
        Protocol0Policy {
            table,
            level: 0,
            rate: speed_fps.max(1),
            response: ReportedResponseTime::new(),
        }
    }

    /// `2/12`.
    pub fn start() -> Timing {
        let (sp, la) = protocol0::START;
        Timing::new(sp, la).unwrap_or(Timing::START)
    }

    /// The timing of the level in force (`2/12` before any level).
    pub fn target(&self) -> Timing {
        match self.level {
            0 => Self::start(),
            level => self.table.timing(level),
        }
    }

    /// The frame rate, frames a second: always the game speed's (protocol 0
    /// never changes it).
    pub fn rate(&self) -> u8 {
        self.rate
    }

    /// Every 32 frames: rise to the level the worst averaged round trip
    /// needs.
    pub fn evaluate(&mut self, record: &Record, frame: u32) -> Option<TimingEvent> {
        self.response.update(record);
        if frame == 0 || frame % PROTOCOL0_PERIOD != 0 {
            return None;
        }
        let worst = self.response.worst_ms(record)?;
        let level = self.table.level_for(rtt_ticks(worst));
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

    /// Both players' reports executed on `executed`.
    fn record_with(rtt: u32, process_us: u32, executed: u32) -> Record {
        let mut record = Record::new(0, [0, 1]);
        for seat in 0..2 {
            record
                .apply_report(
                    seat,
                    executed,
                    Report {
                        process_us,
                        max_wait_ms: 0,
                        worst_rtt_ms: Some(rtt),
                        detail: None,
                    },
                )
                .unwrap();
        }
        record
    }

    #[test]
    fn red_alert_from_reports_follows_the_averaged_round_trip_every_128_frames() {
        let mut ra = RedAlertPolicy::new(30);
        assert_eq!(ra.evaluate(&record_with(700, 8000, 90), 100), None);
        let event = ra.evaluate(&record_with(700, 8000, 120), 128).unwrap();
        assert_eq!(event.target.to_string(), "3/12");
        // (700, 100): 400 ms, 24 ticks, 6 frames: back to the minimum.
        let event = ra.evaluate(&record_with(100, 8000, 250), 256).unwrap();
        assert_eq!(event.target.to_string(), "3/9");
        // The slowest machine's whole ticks per frame set the rate: 45 ms is
        // 2 ticks, 30 fps; 51 ms is 3 ticks, 20 fps.
        assert_eq!(
            RedAlertPolicy::rate_for(&record_with(20, 45_000, 1), 2, 30, 30),
            30
        );
        assert_eq!(
            RedAlertPolicy::rate_for(&record_with(20, 51_000, 1), 2, 30, 30),
            20
        );
    }

    #[test]
    fn protocol0_from_reports_starts_at_2_12_and_its_levels_only_rise() {
        assert_eq!(Protocol0Policy::start().to_string(), "2/12");
        let mut p0 = Protocol0Policy::new(Protocol0Table::YurisRevenge, 30);
        assert_eq!(p0.evaluate(&record_with(60, 8000, 31), 31), None);
        let event = p0.evaluate(&record_with(60, 8000, 31), 32).unwrap();
        assert_eq!(event.target.to_string(), "1/4");
        // (60, 180) average 120 ms, 7 ticks: level 3.
        let event = p0.evaluate(&record_with(180, 8000, 63), 64).unwrap();
        assert_eq!(event.target.to_string(), "3/12");
        assert_eq!(p0.evaluate(&record_with(20, 8000, 191), 192), None);
        assert_eq!(p0.target().to_string(), "3/12");
        assert_eq!(p0.rate(), 30);
        let mut ts = Protocol0Policy::new(Protocol0Table::TiberianSun, 30);
        ts.evaluate(&record_with(180, 8000, 31), 32);
        assert_eq!(
            ts.target().to_string(),
            "4/12",
            "10 ticks: the TS table's level 4"
        );
    }
}
