//! Frame pacing (S9): when the next frame is due, nudged so machines stay on
//! the same frame.
//!
//! Every machine knows the same *ideal schedule*: a reference point ("frame
//! N starts at reference time T", from the master or the relay) and the frame
//! rate in force, which changes only on frames every machine agrees on (S5).
//! Frame `n` ideally starts at `T + (n - N) · 10⁶ / fps` µs, computed exactly
//! from the reference point each time so rounding never accumulates.
//!
//! A machine rarely starts a frame exactly on time (it waited for packets,
//! or its timer is coarse). [`FramePacer`] therefore does not aim at the ideal
//! time outright: the next frame is due one frame period after the actual
//! start of this one, nudged toward the ideal schedule by at most
//! `max_nudge_permille` of a period (±10 % by default). A machine ahead of
//! the schedule runs slightly slower and one behind slightly faster, so they
//! converge on the same frame without one running ahead and then stalling,
//! and the frame rate the player sees never jumps.
//!
//! A frame's deadline is fixed when the frame before it starts. Rate changes
//! and new reference points steer the frames after it, so a deadline the
//! engine has been told never moves — in particular never backwards.
//!
//! Times are reference times in µs, e.g. from a [`ClockSync`](crate::clock::ClockSync);
//! a machine that is itself the reference passes its own clock.

use crate::error::{Error, Result};

/// The default bound on the nudge: 10 % of a frame period.
pub const DEFAULT_MAX_NUDGE_PERMILLE: u16 = 100;
/// The largest bound allowed: a frame never lasts less than half a period.
pub const MAX_NUDGE_PERMILLE: u16 = 500;

const MICROS_PER_SECOND: i128 = 1_000_000;

/// Where the schedule starts and how a [`FramePacer`] nudges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PacerConfig {
    /// The frame rate in force, 1–255.
    pub fps: u8,
    /// The reference point: this frame ideally starts at `reference_start_us`.
    /// It is also the first frame due.
    pub reference_frame: u32,
    /// Reference time (µs) at which `reference_frame` ideally starts.
    pub reference_start_us: i64,
    /// Most a deadline is moved toward the ideal schedule, in thousandths of
    /// a frame period, 0–[`MAX_NUDGE_PERMILLE`] (0 paces without steering).
    pub max_nudge_permille: u16,
}

/// The next frame and when it is due.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameDue {
    /// The frame to start next.
    pub frame: u32,
    /// Reference time (µs) at which to start it.
    pub due_us: i64,
}

/// The ideal schedule: `frame` starts at `start_us`, then one frame every
/// `10⁶ / fps` µs (exactly, as a rational, rounded down per frame).
#[derive(Debug, Clone, Copy)]
struct Schedule {
    frame: u32,
    start_us: i64,
    fps: u8,
}

impl Schedule {
    fn start_of(&self, frame: u32) -> i64 {
        let frames = i128::from(frame) - i128::from(self.frame);
        let since = (frames * MICROS_PER_SECOND).div_euclid(i128::from(self.fps));
        saturate(i128::from(self.start_us) + since)
    }
}

/// Tells the engine when each frame is due (S9). See the module docs.
#[derive(Debug, Clone)]
pub struct FramePacer {
    schedule: Schedule,
    /// The frame since which the current rate is in force: the schedule is
    /// valid from here on, and nothing older may re-anchor it.
    rate_since: u32,
    max_nudge_permille: u16,
    last_started: Option<u32>,
    next: FrameDue,
}

impl FramePacer {
    /// A pacer whose first frame due is the reference frame, at its ideal
    /// time. `Invalid` for a frame rate of 0 or a nudge bound above
    /// [`MAX_NUDGE_PERMILLE`].
    pub fn new(config: PacerConfig) -> Result<FramePacer> {
        check_fps(config.fps)?;
        if config.max_nudge_permille > MAX_NUDGE_PERMILLE {
            return Err(Error::invalid_value(
                "max_nudge_permille",
                config.max_nudge_permille,
                "0 to 500",
            ));
        }
        Ok(FramePacer {
            schedule: Schedule {
                frame: config.reference_frame,
                start_us: config.reference_start_us,
                fps: config.fps,
            },
            rate_since: 0,
            max_nudge_permille: config.max_nudge_permille,
            last_started: None,
            next: FrameDue {
                frame: config.reference_frame,
                due_us: config.reference_start_us,
            },
        })
    }

    /// The next frame and its deadline. It changes only when a frame starts
    /// (and, before the first frame, with the schedule).
    pub fn next_frame_due(&self) -> FrameDue {
        self.next
    }

    /// When `frame` ideally starts on the shared schedule (what a master or
    /// relay announces as a reference point). Meaningful for frames run at the
    /// rate now in force.
    pub fn ideal_start_us(&self, frame: u32) -> i64 {
        self.schedule.start_of(frame)
    }

    /// The engine started `frame` at reference time `now_us`; fixes the next
    /// frame's deadline. The first call may name any frame, later ones the
    /// frame after the previous one (else `State`, no effect).
    pub fn frame_started(&mut self, frame: u32, now_us: i64) -> Result<()> {
        if let Some(last) = self.last_started {
            if last.checked_add(1) != Some(frame) {
                return Err(
                    Error::State("frames must start in order, one after another").detailed(
                        format!(
                            "frame is {frame}; expected {} (the frame after {last})",
                            last.wrapping_add(1)
                        ),
                    ),
                );
            }
        }
        let next = frame
            .checked_add(1)
            .ok_or(Error::State("frame numbers are exhausted"))?;
        let ideal_next = i128::from(self.schedule.start_of(next));
        let period = ideal_next - i128::from(self.schedule.start_of(frame));
        let nominal = i128::from(now_us) + period;
        let bound = period * i128::from(self.max_nudge_permille) / 1000;
        let nudge = (ideal_next - nominal).clamp(-bound, bound);
        self.last_started = Some(frame);
        self.next = FrameDue {
            frame: next,
            due_us: saturate(nominal + nudge),
        };
        Ok(())
    }

    /// The frame rate becomes `fps` from frame `from_frame` on (S5: when the
    /// timing event, or its staged decrease, takes effect). Every machine
    /// must call this for the same frame; calling it while that frame runs is
    /// the normal case. The deadline already given is kept; the schedule
    /// after it follows the new rate.
    ///
    /// `Invalid` for `fps` 0; `State` for a frame before the latest
    /// rate change, or one after the next frame (call it when the rate comes
    /// into force, not ahead of time). No effect on error.
    pub fn set_fps(&mut self, fps: u8, from_frame: u32) -> Result<()> {
        check_fps(fps)?;
        if from_frame < self.rate_since {
            return Err(Error::State(
                "rate change for a frame before the latest one",
            ));
        }
        if from_frame > self.next.frame {
            return Err(Error::State(
                "rate change ahead of time: call it when the rate comes into force",
            ));
        }
        self.schedule = Schedule {
            frame: from_frame,
            start_us: self.schedule.start_of(from_frame),
            fps,
        };
        self.rate_since = from_frame;
        self.refresh_first_deadline();
        Ok(())
    }

    /// A new reference point: `frame` ideally starts at reference time
    /// `start_us` (the master's or relay's announcement, at the rate in
    /// force). `State`, with no effect, for a frame before the latest rate
    /// change: that point was measured at another rate.
    pub fn set_reference(&mut self, frame: u32, start_us: i64) -> Result<()> {
        if frame < self.rate_since {
            return Err(Error::State(
                "reference point older than the latest rate change",
            ));
        }
        self.schedule = Schedule {
            frame,
            start_us,
            fps: self.schedule.fps,
        };
        self.refresh_first_deadline();
        Ok(())
    }

    /// The frame rate in force.
    pub fn fps(&self) -> u8 {
        self.schedule.fps
    }

    /// Before any frame has started, the first deadline is simply the ideal
    /// start of the first frame: no frame has been paced on it yet.
    fn refresh_first_deadline(&mut self) {
        if self.last_started.is_none() {
            self.next.due_us = self.schedule.start_of(self.next.frame);
        }
    }
}

fn check_fps(fps: u8) -> Result<()> {
    if fps == 0 {
        Err(Error::invalid_value("fps", 0u8, "1 to 255"))
    } else {
        Ok(())
    }
}

fn saturate(value: i128) -> i64 {
    value.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pacer(fps: u8, start_us: i64) -> FramePacer {
        FramePacer::new(PacerConfig {
            fps,
            reference_frame: 0,
            reference_start_us: start_us,
            max_nudge_permille: DEFAULT_MAX_NUDGE_PERMILLE,
        })
        .unwrap()
    }

    #[test]
    fn config_is_validated() {
        let good = PacerConfig {
            fps: 30,
            reference_frame: 0,
            reference_start_us: 0,
            max_nudge_permille: MAX_NUDGE_PERMILLE,
        };
        assert!(FramePacer::new(good).is_ok());
        assert!(FramePacer::new(PacerConfig { fps: 0, ..good }).is_err());
        assert!(FramePacer::new(PacerConfig {
            max_nudge_permille: MAX_NUDGE_PERMILLE + 1,
            ..good
        })
        .is_err());
    }

    #[test]
    fn ideal_schedule_never_accumulates_rounding() {
        let p = pacer(30, 5_000);
        assert_eq!(p.ideal_start_us(1), 5_000 + 33_333);
        assert_eq!(p.ideal_start_us(2), 5_000 + 66_666);
        assert_eq!(p.ideal_start_us(30), 5_000 + 1_000_000);
        assert_eq!(p.ideal_start_us(30 * 3600), 5_000 + 3_600_000_000);
        assert_eq!(
            p.ideal_start_us(u32::MAX),
            5_000 + (u32::MAX as i64 * 1_000_000) / 30
        );
    }

    #[test]
    fn s9_on_time_frames_follow_the_schedule_exactly() {
        let mut p = pacer(30, 1_000_000);
        assert_eq!(
            p.next_frame_due(),
            FrameDue {
                frame: 0,
                due_us: 1_000_000
            }
        );
        for frame in 0..100 {
            let due = p.next_frame_due();
            assert_eq!(due.frame, frame);
            assert_eq!(due.due_us, p.ideal_start_us(frame));
            p.frame_started(frame, due.due_us).unwrap();
        }
    }

    #[test]
    fn s9_a_late_machine_catches_up_by_at_most_ten_percent_a_frame() {
        let mut p = pacer(20, 0); // 50 ms frames
        p.frame_started(0, 40_000).unwrap(); // 40 ms late
        assert_eq!(
            p.next_frame_due().due_us,
            40_000 + 45_000,
            "5 ms shorter, not 40"
        );
        p.frame_started(1, 85_000).unwrap();
        assert_eq!(p.next_frame_due().due_us, 130_000);
        p.frame_started(2, 130_000).unwrap();
        // 30 ms late now: three more 5 ms steps... the schedule is 150_000 for frame 3.
        let mut late = 130_000 - p.ideal_start_us(2);
        let mut frame = 2;
        while late > 0 {
            let due = p.next_frame_due();
            frame += 1;
            assert_eq!(due.frame, frame);
            let new_late = due.due_us - p.ideal_start_us(frame);
            assert!(new_late >= late - 5_000 && new_late < late);
            late = new_late;
            p.frame_started(frame, due.due_us).unwrap();
        }
        assert_eq!(late, 0, "back on the schedule, exactly");
    }

    #[test]
    fn s9_an_early_machine_slows_by_at_most_ten_percent_a_frame() {
        let mut p = pacer(25, 100_000); // 40 ms frames
        p.frame_started(0, 80_000).unwrap(); // 20 ms early
        assert_eq!(p.next_frame_due().due_us, 80_000 + 44_000);
    }

    #[test]
    fn s9_rate_changes_never_move_a_deadline_already_given() {
        let mut p = pacer(30, 0);
        p.frame_started(0, 0).unwrap();
        p.frame_started(1, p.next_frame_due().due_us).unwrap();
        let given = p.next_frame_due();
        // Faster from frame 1, which is running: the deadline of 2 stays.
        p.set_fps(60, 1).unwrap();
        assert_eq!(p.next_frame_due(), given);
        assert_eq!(p.fps(), 60);
        // The schedule now runs at 60 fps from frame 1's ideal start.
        assert_eq!(p.ideal_start_us(2) - p.ideal_start_us(1), 16_666);
        // Frame 2 starts on its old deadline, which is late for the new schedule;
        // the pacer catches up by 10 % of a 60 fps period per frame, never going backwards.
        let mut previous = given.due_us;
        p.frame_started(2, given.due_us).unwrap();
        for frame in 3..40 {
            let due = p.next_frame_due();
            assert!(due.due_us > previous);
            let period = p.ideal_start_us(frame) - p.ideal_start_us(frame - 1);
            assert!(due.due_us - previous >= period - period / 10);
            previous = due.due_us;
            p.frame_started(frame, due.due_us).unwrap();
        }
        assert_eq!(
            previous,
            p.ideal_start_us(39),
            "converged on the new schedule"
        );
    }

    #[test]
    fn slower_rate_lengthens_frames_after_the_current_one() {
        let mut p = pacer(60, 0);
        p.frame_started(0, 0).unwrap();
        let given = p.next_frame_due();
        p.set_fps(15, 0).unwrap();
        assert_eq!(p.next_frame_due(), given);
        p.frame_started(1, given.due_us).unwrap();
        let period = p.ideal_start_us(2) - p.ideal_start_us(1);
        assert_eq!(period, 66_667);
        // Ahead of the 15 fps schedule: slowed, but by no more than 10 % of its period.
        assert_eq!(
            p.next_frame_due().due_us,
            given.due_us + period + period / 10
        );
    }

    #[test]
    fn misuse_is_refused_without_effect() {
        let mut p = pacer(30, 0);
        p.frame_started(10, 0).unwrap(); // any first frame
        let out_of_order = p.frame_started(12, 1).unwrap_err();
        assert!(matches!(out_of_order.kind(), Error::State(_)));
        assert_eq!(
            out_of_order.to_string(),
            "frame is 12; expected 11 (the frame after 10)"
        );
        assert!(matches!(
            p.frame_started(10, 1).unwrap_err().kind(),
            Error::State(_)
        ));
        let due = p.next_frame_due();
        assert_eq!(due.frame, 11);
        assert!(matches!(p.set_fps(0, 11), Err(Error::Invalid(_))));
        assert!(
            matches!(p.set_fps(20, 12), Err(Error::State(_))),
            "ahead of time"
        );
        p.set_fps(20, 11).unwrap();
        assert!(
            matches!(p.set_fps(25, 10), Err(Error::State(_))),
            "older than 11"
        );
        assert!(matches!(p.set_reference(10, 5), Err(Error::State(_))));
        assert_eq!(p.next_frame_due(), due);
        assert_eq!(p.fps(), 20);

        let mut last = pacer(30, 0);
        last.frame_started(u32::MAX, 0).unwrap_err();
        assert_eq!(last.next_frame_due().frame, 0);
    }

    #[test]
    fn before_the_first_frame_the_deadline_follows_the_reference() {
        let mut p = pacer(30, 0);
        p.set_reference(90, 10_000_000).unwrap();
        // Frame 0 is 90 frames (3 s) before frame 90.
        assert_eq!(
            p.next_frame_due(),
            FrameDue {
                frame: 0,
                due_us: 7_000_000
            }
        );
        // Once frames run, a new reference only steers.
        p.frame_started(0, 7_000_000).unwrap();
        let given = p.next_frame_due();
        p.set_reference(90, 9_000_000).unwrap();
        assert_eq!(p.next_frame_due(), given);
    }
}
