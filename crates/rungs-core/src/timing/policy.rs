//! The master's evaluation (S4).
//!
//! Every machine runs this policy on the same record at the same frames, so
//! every machine knows the target, the count of three and whether a descent
//! is running; only the master's machine actually sends the timing events it
//! produces. That is what makes a master handoff (S4.6) seamless: the new
//! master already holds the state it must keep.

use super::ladder::{one_way_frames, one_way_frames_headroom, required, Timing, MAX_SEND_PERIOD};
use super::TimingEvent;
use crate::report::Record;

/// A reported wait this long or longer blocks every improvement (S4.4 b).
pub(crate) const WAIT_BLOCKS_IMPROVEMENT_MS: u32 = 100;
/// Frames after a change before the master may improve again (S4.4 c).
pub(crate) const FRAMES_BETWEEN_IMPROVEMENTS: u32 = 256;
/// Qualifying evaluations in a row before the first step down (S4.4).
pub(crate) const QUALIFYING_EVALUATIONS_TO_IMPROVE: u8 = 3;
/// A silent player forces the widest timing this many frames after the record starts (S3).
pub(crate) const SILENT_GRACE_FRAMES: u32 = 512;

/// Whether the master evaluates on `frame`: 64 and 128, then every 256
/// frames (384, 640, 896, ...) (S4.1).
pub fn is_evaluation_frame(frame: u32) -> bool {
    frame == 64 || frame == 128 || (frame >= 384 && (frame - 384) % 256 == 0)
}

/// The frame rate S4.2 allows on `frame`: `min(speed_fps, 10^6 / max process_us)`
/// (at least 1; a process time of 0 allows any rate) while every player has a
/// fresh report, else `current`. Red Alert's `DesiredFrameRate =
/// min(60 / slowest_ticks, 60 / GameSpeed)` is the same rule in 60 Hz ticks,
/// so the baselines use it too.
pub(crate) fn rate_from_reports(record: &Record, frame: u32, speed_fps: u8, current: u8) -> u8 {
    rate_within(record, frame, speed_fps, current, 1_000_000)
}

/// S4.2's rule with `budget_us` of each second for the slowest machine's
/// frame work instead of all of it: `min(speed_fps, budget_us / max
/// process_us)`, at least 1, while every player has a fresh report, else
/// `current`. `tracking` leaves headroom with it. A game whose engines pace
/// by a tick timer gets the largest rate at or below that the timer hits
/// (`Record::fit_rate`), so round trips are converted at the rate played.
pub(crate) fn rate_within(
    record: &Record,
    frame: u32,
    speed_fps: u8,
    current: u8,
    budget_us: u32,
) -> u8 {
    if !record.all_fresh(frame) {
        return current;
    }
    let rate = match record.max_fresh_process_us(frame) {
        None | Some(0) => speed_fps,
        Some(process_us) => (budget_us / process_us).clamp(1, u32::from(speed_fps)) as u8,
    };
    record.fit_rate(rate)
}

/// Where an evaluation stopped (S4.4), for logs and tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Not an evaluation frame, or no player left to evaluate.
    NoEvaluation,
    /// Calibration waits: a player is missing at 64 (S4.3).
    CalibrationWaiting,
    /// Calibration set the target (S4.3).
    Calibrated,
    /// Calibration fell back to `3/9` at 128 (S4.3).
    CalibrationFallback,
    /// A silent player held the timing at or above `10/250` (S4.4 step 1).
    SilentHeld,
    /// A silent player forced `10/250` (S4.4 step 1).
    SilentWorsened,
    /// Fresh round trips need more than the target (S4.4 step 2).
    Worsened,
    /// A player is missing: the timing holds (S4.4 step 3).
    MissingHeld,
    /// The evaluation did not qualify for an improvement (S4.4 step 4).
    NotQualified,
    /// It qualified and was counted towards the three (S4.4 step 4).
    Counted,
    /// The master stepped down (S4.4 step 5).
    SteppedDown,
}

/// The master's evaluation state (S4).
#[derive(Debug, Clone)]
pub struct MasterPolicy {
    speed_fps: u8,
    target: Timing,
    rate: u8,
    calibrating: bool,
    qualifying_in_a_row: u8,
    descent_running: bool,
    /// Frame of the latest executed target-changing timing event, or of a
    /// handoff; `None` while the master has never changed the timing (S4.4 c).
    last_change: Option<u32>,
}

impl MasterPolicy {
    /// A calibrating master with target `2/6` at the game speed's rate (S4.3).
    pub fn new(speed_fps: u8) -> MasterPolicy {
        MasterPolicy {
            speed_fps: speed_fps.max(1),
            target: Timing::START,
            rate: speed_fps.max(1),
            calibrating: true,
            qualifying_in_a_row: 0,
            descent_running: false,
            last_change: None,
        }
    }

    /// The target: the last timing the master chose.
    pub fn target(&self) -> Timing {
        self.target
    }

    /// The frame rate the master last chose.
    pub fn rate(&self) -> u8 {
        self.rate
    }

    /// The rate the game speed allows (S4.2).
    pub fn speed_fps(&self) -> u8 {
        self.speed_fps
    }

    /// Change the game speed's cap (the Speed slider, S6); the next
    /// evaluation with fresh reports applies it.
    pub fn set_speed_fps(&mut self, speed_fps: u8) {
        self.speed_fps = speed_fps.max(1);
    }

    /// Whether the master is still calibrating (S4.3).
    pub fn calibrating(&self) -> bool {
        self.calibrating
    }

    /// Qualifying evaluations in a row so far (the count of three).
    pub fn qualifying_in_a_row(&self) -> u8 {
        self.qualifying_in_a_row
    }

    /// Whether a descent is running.
    pub fn descent_running(&self) -> bool {
        self.descent_running
    }

    /// Frame of the latest change or handoff, if any.
    pub fn last_change(&self) -> Option<u32> {
        self.last_change
    }

    /// A target-changing timing event executed on `frame` (S4.4 c).
    pub fn note_change_executed(&mut self, frame: u32) {
        self.last_change = Some(frame);
    }

    /// The master was removed on `frame`; the next human takes over with the
    /// current target and rate, a fresh count and no descent, and waits 256
    /// frames before an improvement (S4.6).
    pub fn hand_off(&mut self, frame: u32) {
        self.reset_improvement();
        self.last_change = Some(frame);
    }

    fn reset_improvement(&mut self) {
        self.qualifying_in_a_row = 0;
        self.descent_running = false;
    }

    /// The frame rate an evaluation on `frame` chooses (S4.2).
    fn choose_rate(&self, record: &Record, frame: u32) -> u8 {
        rate_from_reports(record, frame, self.speed_fps, self.rate)
    }

    /// Evaluate the record on `frame`, after all of that frame's events
    /// executed (S4.1). Returns the verdict and the timing event to send, if
    /// any. Call on every frame; non-evaluation frames do nothing.
    pub fn evaluate(&mut self, record: &Record, frame: u32) -> (Verdict, Option<TimingEvent>) {
        if !is_evaluation_frame(frame) || record.seats().next().is_none() {
            return (Verdict::NoEvaluation, None);
        }
        let rate = self.choose_rate(record, frame);
        if self.calibrating {
            return self.calibrate(record, frame, rate);
        }

        let before = (self.target, self.rate);
        let worst = record.worst_fresh_rtt(frame);

        // Step 1: a silent player forces 10/250 once the grace has passed.
        let grace_over =
            u64::from(frame) >= u64::from(record.start_frame()) + u64::from(SILENT_GRACE_FRAMES);
        if record.any_silent() && grace_over {
            self.reset_improvement();
            if Timing::WIDEST > self.target {
                return (
                    Verdict::SilentWorsened,
                    Some(self.send(Timing::WIDEST, rate)),
                );
            }
            return (Verdict::SilentHeld, None);
        }

        // Step 2: fresh round trips worsen the timing even while others are missing.
        let raw = worst.map(|rtt| required(one_way_frames(rtt, rate)));
        if let Some(raw) = raw.filter(|raw| *raw > self.target) {
            self.reset_improvement();
            return (Verdict::Worsened, Some(self.send(raw, rate)));
        }

        // Step 3: a missing player holds the timing (S4.5: nothing is sent).
        if record.any_missing(frame) {
            self.reset_improvement();
            return (Verdict::MissingHeld, None);
        }
        // No player is missing, so every player has a fresh round trip.
        let (Some(raw), Some(worst)) = (raw, worst) else {
            return (Verdict::MissingHeld, None);
        };

        // Step 4: does this evaluation qualify for an improvement?
        let waits_ok = record.max_fresh_wait_ms(frame).unwrap_or(0) < WAIT_BLOCKS_IMPROVEMENT_MS;
        let settled = match self.last_change {
            None => true,
            Some(_) if self.descent_running => true,
            Some(changed) => frame.saturating_sub(changed) >= FRAMES_BETWEEN_IMPROVEMENTS,
        };
        let headroom = required(one_way_frames_headroom(worst, rate));
        let qualifies = raw < self.target && waits_ok && settled && headroom < self.target;

        let verdict = if !qualifies {
            self.reset_improvement();
            Verdict::NotQualified
        } else if self.descent_running {
            self.target = self.step_down(raw);
            Verdict::SteppedDown
        } else {
            self.qualifying_in_a_row += 1;
            if self.qualifying_in_a_row >= QUALIFYING_EVALUATIONS_TO_IMPROVE {
                self.qualifying_in_a_row = 0;
                self.descent_running = true;
                self.target = self.step_down(raw);
                Verdict::SteppedDown
            } else {
                Verdict::Counted
            }
        };

        // Step 6: send when the target or the rate changed.
        if (self.target, rate) != before {
            let target = self.target;
            return (verdict, Some(self.send(target, rate)));
        }
        (verdict, None)
    }

    /// S4.3: the 64- and 128-frame evaluations.
    fn calibrate(
        &mut self,
        record: &Record,
        frame: u32,
        rate: u8,
    ) -> (Verdict, Option<TimingEvent>) {
        if !record.any_missing(frame) {
            let worst = record.worst_fresh_rtt(frame).unwrap_or(0);
            self.calibrating = false;
            let target = required(one_way_frames_headroom(worst, rate));
            return (Verdict::Calibrated, Some(self.send(target, rate)));
        }
        if frame >= 128 {
            self.calibrating = false;
            return (
                Verdict::CalibrationFallback,
                Some(self.send(Timing::FALLBACK, rate)),
            );
        }
        (Verdict::CalibrationWaiting, None)
    }

    /// S4.4 step 5.
    fn step_down(&self, raw: Timing) -> Timing {
        if self.target.is_extended() && raw.send_period() == MAX_SEND_PERIOD {
            return raw;
        }
        // The target is above raw, so its send period is at least 2 here.
        Timing::of_rung(self.target.send_period().saturating_sub(1).max(1)).unwrap_or(Timing::START)
    }

    fn send(&mut self, target: Timing, rate: u8) -> TimingEvent {
        self.target = target;
        self.rate = rate;
        TimingEvent { target, fps: rate }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::Report;

    fn t(s: u8, l: u8) -> Timing {
        Timing::new(s, l).unwrap()
    }

    fn all_report(record: &mut Record, frame: u32, rtt: Option<u32>) {
        let seats: Vec<u8> = record.seats().collect();
        for seat in seats {
            let r = Report {
                process_us: 8000,
                max_wait_ms: 0,
                worst_rtt_ms: rtt,
                detail: None,
            };
            record.apply_report(seat, frame, r).unwrap();
        }
    }

    #[test]
    fn evaluation_schedule_is_64_128_then_every_256() {
        let frames: Vec<u32> = (0..1500).filter(|f| is_evaluation_frame(*f)).collect();
        assert_eq!(frames, vec![64, 128, 384, 640, 896, 1152, 1408]);
    }

    #[test]
    fn calibration_uses_headroom_and_always_sends() {
        // S2 worked example: 200 ms at 30 fps needs 2/6 with headroom; the
        // master sends 2/6 although it is already the target.
        let mut record = Record::new(0, [0, 1]);
        all_report(&mut record, 38, Some(200));
        let mut policy = MasterPolicy::new(30);
        let (verdict, event) = policy.evaluate(&record, 64);
        assert_eq!(verdict, Verdict::Calibrated);
        assert_eq!(
            event,
            Some(TimingEvent {
                target: t(2, 6),
                fps: 30
            })
        );
    }

    #[test]
    fn calibration_waits_at_64_and_falls_back_at_128() {
        let mut record = Record::new(0, [0, 1]);
        all_report(&mut record, 38, None);
        let mut policy = MasterPolicy::new(30);
        assert_eq!(
            policy.evaluate(&record, 64),
            (Verdict::CalibrationWaiting, None)
        );
        let (verdict, event) = policy.evaluate(&record, 128);
        assert_eq!(verdict, Verdict::CalibrationFallback);
        assert_eq!(
            event,
            Some(TimingEvent {
                target: t(3, 9),
                fps: 30
            })
        );
        assert!(!policy.calibrating());
    }

    #[test]
    fn three_qualifying_evaluations_step_down_then_the_descent_continues() {
        let mut record = Record::new(0, [0, 1]);
        // 600 ms with headroom at 30 fps: ceil(600*5*30/8000) = 12 frames -> 6/18.
        all_report(&mut record, 38, Some(600));
        let mut policy = MasterPolicy::new(30);
        let (_, event) = policy.evaluate(&record, 64);
        assert_eq!(event.unwrap().target, t(6, 18));
        policy.note_change_executed(70);
        all_report(&mut record, 326, Some(20));
        assert_eq!(policy.evaluate(&record, 384).0, Verdict::Counted);
        all_report(&mut record, 582, Some(20));
        assert_eq!(policy.evaluate(&record, 640).0, Verdict::Counted);
        all_report(&mut record, 838, Some(20));
        let (verdict, event) = policy.evaluate(&record, 896);
        assert_eq!(verdict, Verdict::SteppedDown);
        assert_eq!(event.unwrap().target, t(5, 15));
        assert!(policy.descent_running());
        // The descent ignores the 256-frame rule and steps every evaluation.
        policy.note_change_executed(1000);
        all_report(&mut record, 1094, Some(20));
        let (verdict, event) = policy.evaluate(&record, 1152);
        assert_eq!(verdict, Verdict::SteppedDown);
        assert_eq!(event.unwrap().target, t(4, 12));
    }

    #[test]
    fn a_wait_of_100_ms_blocks_improvement_and_resets_the_count() {
        let mut record = Record::new(0, [0, 1]);
        all_report(&mut record, 38, Some(600));
        let mut policy = MasterPolicy::new(30);
        policy.evaluate(&record, 64);
        all_report(&mut record, 326, Some(20));
        assert_eq!(policy.evaluate(&record, 384).0, Verdict::Counted);
        let waited = Report {
            process_us: 8000,
            max_wait_ms: 100,
            worst_rtt_ms: Some(20),
            detail: None,
        };
        record.apply_report(1, 582, waited).unwrap();
        assert_eq!(policy.evaluate(&record, 640).0, Verdict::NotQualified);
        assert_eq!(policy.qualifying_in_a_row(), 0);
    }

    #[test]
    fn frame_rate_follows_the_slowest_fresh_player_and_is_sent_alone() {
        let mut record = Record::new(0, [0, 1]);
        all_report(&mut record, 38, Some(20));
        let mut policy = MasterPolicy::new(30);
        policy.evaluate(&record, 64);
        let slow = Report {
            process_us: 45_000,
            max_wait_ms: 0,
            worst_rtt_ms: Some(20),
            detail: None,
        };
        record.apply_report(1, 326, slow).unwrap();
        record
            .apply_report(
                0,
                326,
                Report {
                    process_us: 9000,
                    max_wait_ms: 0,
                    worst_rtt_ms: Some(20),
                    detail: None,
                },
            )
            .unwrap();
        let (_, event) = policy.evaluate(&record, 384);
        assert_eq!(
            event,
            Some(TimingEvent {
                target: t(1, 4),
                fps: 22
            })
        );
        // A process time of 0 allows any rate: back to the speed's cap.
        all_report(&mut record, 582, Some(20));
        let zero = Report {
            process_us: 0,
            max_wait_ms: 0,
            worst_rtt_ms: Some(20),
            detail: None,
        };
        record.apply_report(0, 582, zero).unwrap();
        record.apply_report(1, 582, zero).unwrap();
        let (_, event) = policy.evaluate(&record, 640);
        assert_eq!(
            event,
            Some(TimingEvent {
                target: t(1, 4),
                fps: 30
            })
        );
    }

    #[test]
    fn held_evaluations_send_no_rate_change() {
        // S4.5: a missing player holds everything, the computed rate included.
        let mut record = Record::new(0, [0, 1]);
        all_report(&mut record, 38, Some(20));
        let mut policy = MasterPolicy::new(30);
        policy.evaluate(&record, 64);
        let slow_no_rtt = Report {
            process_us: 45_000,
            max_wait_ms: 0,
            worst_rtt_ms: None,
            detail: None,
        };
        record.apply_report(0, 326, slow_no_rtt).unwrap();
        record.apply_report(1, 326, slow_no_rtt).unwrap();
        assert_eq!(policy.evaluate(&record, 384), (Verdict::MissingHeld, None));
        assert_eq!(policy.rate(), 30);
    }

    #[test]
    fn extended_target_cuts_straight_to_the_raw_need() {
        let mut record = Record::new(0, [0]);
        all_report(&mut record, 38, Some(5000));
        let mut policy = MasterPolicy::new(30);
        assert_eq!(policy.evaluate(&record, 64).1.unwrap().target, t(10, 110));
        policy.note_change_executed(70);
        for (report, eval) in [(326, 384), (582, 640)] {
            all_report(&mut record, report, Some(1600));
            assert_eq!(policy.evaluate(&record, eval).0, Verdict::Counted);
        }
        all_report(&mut record, 838, Some(1600));
        assert_eq!(policy.evaluate(&record, 896).1.unwrap().target, t(10, 40));
    }

    #[test]
    fn handoff_resets_and_waits_256_frames() {
        let mut record = Record::new(0, [0, 1]);
        all_report(&mut record, 38, Some(600));
        let mut policy = MasterPolicy::new(30);
        policy.evaluate(&record, 64);
        all_report(&mut record, 326, Some(20));
        assert_eq!(policy.evaluate(&record, 384).0, Verdict::Counted);
        policy.hand_off(500);
        all_report(&mut record, 582, Some(20));
        assert_eq!(policy.evaluate(&record, 640).0, Verdict::NotQualified);
        all_report(&mut record, 838, Some(20));
        assert_eq!(policy.evaluate(&record, 896).0, Verdict::Counted);
        assert_eq!(policy.target(), t(6, 18));
    }
}
