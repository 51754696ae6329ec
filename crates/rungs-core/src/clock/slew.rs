//! A local estimate of reference time that moves toward a new offset
//! gradually (S9: "slew (do not jump) the local clock").
//!
//! Reference time is `local + offset`. When a fresh estimate moves the
//! offset, [`SlewedClock`] does not apply it at once: it moves the applied
//! offset toward the target by at most `max_slew_ppm` millionths of the local
//! time that passes. With a rate below 100 % the estimate of reference time
//! never runs backwards and never jumps; frames paced on it keep their order
//! and their rate stays within the slew rate of nominal.
//!
//! One exception, because nothing can notice it: until the clock is first
//! read, a new target applies at once. That lets a machine sync several times
//! before the game starts (the first result is used at once, S9) and slew only once frames are paced on the clock.

use crate::error::{Error, Result};

/// The default slew rate: 5 % (50 ms per second).
pub const DEFAULT_MAX_SLEW_PPM: u32 = 50_000;
/// The highest slew rate allowed, 50 %: the clock always advances at least
/// half as fast as local time.
pub const MAX_SLEW_PPM: u32 = 500_000;

const PPM: u128 = 1_000_000;

/// Local time mapped to reference time with a slewed offset.
#[derive(Debug, Clone)]
pub struct SlewedClock {
    applied_offset_us: i64,
    target_offset_us: i64,
    max_slew_ppm: u32,
    /// Local time up to which the applied offset has been slewed.
    slewed_until_us: Option<i64>,
    /// Slew budget (µs × 10⁻⁶) earned but too small to move a whole µs yet.
    /// Carrying it makes the path independent of how often the clock is read.
    budget_remainder: u128,
    read: bool,
}

impl SlewedClock {
    /// A clock at `offset_us` (`reference - local`), slewing at most
    /// `max_slew_ppm` (1–[`MAX_SLEW_PPM`]) millionths of elapsed local time.
    pub fn new(offset_us: i64, max_slew_ppm: u32) -> Result<SlewedClock> {
        if !(1..=MAX_SLEW_PPM).contains(&max_slew_ppm) {
            return Err(Error::invalid_value(
                "max_slew_ppm",
                max_slew_ppm,
                "1 to 500000",
            ));
        }
        Ok(SlewedClock {
            applied_offset_us: offset_us,
            target_offset_us: offset_us,
            max_slew_ppm,
            slewed_until_us: None,
            budget_remainder: 0,
            read: false,
        })
    }

    /// Slew up to `local_now_us`, then aim at `offset_us` from there on.
    /// Before the first reading the offset is taken at once (module docs).
    /// `Invalid` if local time went backwards; no effect then.
    pub fn steer_to(&mut self, offset_us: i64, local_now_us: i64) -> Result<()> {
        self.advance_to(local_now_us)?;
        self.target_offset_us = offset_us;
        if !self.read {
            self.applied_offset_us = offset_us;
            self.budget_remainder = 0;
        }
        Ok(())
    }

    /// Reference time at `local_now_us` (saturating at the ends of i64).
    /// `Invalid` if local time went backwards; no effect then.
    pub fn reference_time(&mut self, local_now_us: i64) -> Result<i64> {
        self.advance_to(local_now_us)?;
        self.read = true;
        Ok(local_now_us.saturating_add(self.applied_offset_us))
    }

    /// Move the applied offset toward the target for the local time that
    /// passed since the last call. Public so a caller can check a time before
    /// committing other changes; slewing is the same however it is split.
    pub fn advance_to(&mut self, local_now_us: i64) -> Result<()> {
        let Some(since) = self.slewed_until_us else {
            self.slewed_until_us = Some(local_now_us);
            return Ok(());
        };
        if local_now_us < since {
            return Err(Error::invalid_value(
                "local_now_us",
                local_now_us,
                format!("at or after the previous call's {since} (local time never goes back)"),
            ));
        }
        let elapsed = (i128::from(local_now_us) - i128::from(since)) as u128;
        self.slewed_until_us = Some(local_now_us);
        let distance = i128::from(self.target_offset_us) - i128::from(self.applied_offset_us);
        if distance == 0 {
            return Ok(());
        }
        let budget = elapsed * u128::from(self.max_slew_ppm) + self.budget_remainder;
        let max_step = budget / PPM;
        if distance.unsigned_abs() <= max_step {
            self.applied_offset_us = self.target_offset_us;
            self.budget_remainder = 0;
        } else {
            // max_step < |distance| < 2^64, so it fits i128 and the result stays
            // between the applied and target offsets.
            let step = max_step as i128 * distance.signum();
            self.applied_offset_us = (i128::from(self.applied_offset_us) + step) as i64;
            self.budget_remainder = budget % PPM;
        }
        Ok(())
    }

    /// The offset applied now (as of the last call), µs.
    pub fn offset_us(&self) -> i64 {
        self.applied_offset_us
    }

    /// The offset the clock is slewing toward, µs.
    pub fn target_offset_us(&self) -> i64 {
        self.target_offset_us
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn slew_rate_is_validated() {
        assert!(SlewedClock::new(0, 0).is_err());
        assert!(SlewedClock::new(0, MAX_SLEW_PPM + 1).is_err());
        assert!(SlewedClock::new(0, MAX_SLEW_PPM).is_ok());
    }

    #[test]
    fn targets_apply_at_once_until_the_clock_is_read() {
        let mut clock = SlewedClock::new(0, DEFAULT_MAX_SLEW_PPM).unwrap();
        clock.steer_to(5_000_000, 100).unwrap();
        clock.steer_to(4_000_000, 200).unwrap();
        assert_eq!(clock.reference_time(300).unwrap(), 4_000_300);
        // From now on, a new target is slewed toward at 5 %.
        clock.steer_to(3_000_000, 300).unwrap();
        assert_eq!(
            clock.reference_time(1_000_300).unwrap(),
            4_000_300 + 950_000
        );
        assert_eq!(clock.offset_us(), 3_950_000);
        assert_eq!(clock.target_offset_us(), 3_000_000);
    }

    #[test]
    fn s9_slew_reaches_the_target_and_stops_there() {
        let mut clock = SlewedClock::new(0, 50_000).unwrap();
        assert_eq!(clock.reference_time(0).unwrap(), 0);
        clock.steer_to(10_000, 0).unwrap();
        // 10 ms at 5 % needs 200 ms of local time.
        assert_eq!(clock.reference_time(100_000).unwrap(), 105_000);
        assert_eq!(clock.reference_time(200_000).unwrap(), 210_000);
        assert_eq!(clock.reference_time(300_000).unwrap(), 310_000);
    }

    #[test]
    fn frequent_readings_slew_as_fast_as_rare_ones() {
        let mut often = SlewedClock::new(0, 50_000).unwrap();
        let mut rarely = often.clone();
        for clock in [&mut often, &mut rarely] {
            clock.reference_time(0).unwrap();
            clock.steer_to(-7_777, 0).unwrap();
        }
        // Every 7 µs earns 0.35 µs of slew: only the carried remainder makes it move.
        for t in (0..=70_000).step_by(7) {
            often.reference_time(t).unwrap();
        }
        rarely.reference_time(70_000).unwrap();
        assert_eq!(often.offset_us(), rarely.offset_us());
        assert_eq!(often.offset_us(), -3_500);
    }

    #[test]
    fn local_time_going_backwards_is_refused_without_effect() {
        let mut clock = SlewedClock::new(10, 50_000).unwrap();
        assert_eq!(clock.reference_time(1_000).unwrap(), 1_010);
        assert!(clock.reference_time(999).is_err());
        assert!(clock.steer_to(0, 999).is_err());
        assert_eq!(clock.target_offset_us(), 10);
        assert_eq!(clock.reference_time(1_000).unwrap(), 1_010);
    }

    #[test]
    fn extreme_offsets_saturate_instead_of_overflowing() {
        let mut clock = SlewedClock::new(i64::MAX, MAX_SLEW_PPM).unwrap();
        assert_eq!(clock.reference_time(i64::MAX).unwrap(), i64::MAX);
        clock.steer_to(i64::MIN, i64::MAX).unwrap();
        assert_eq!(clock.reference_time(i64::MAX).unwrap(), i64::MAX);
    }

    proptest! {
        /// S9: whatever the targets, reference time never runs backwards and
        /// the offset moves no faster than the slew rate allows.
        #[test]
        fn s9_slewing_is_monotonic_and_bounded(
            ppm in 1u32..=MAX_SLEW_PPM,
            start_offset in -1_000_000_000i64..1_000_000_000,
            steps in proptest::collection::vec(
                (0i64..2_000_000, proptest::option::of(-1_000_000_000i64..1_000_000_000)),
                1..60,
            ),
        ) {
            let mut clock = SlewedClock::new(start_offset, ppm).unwrap();
            let mut local = 1_000_000i64;
            let mut reference = clock.reference_time(local).unwrap();
            let mut offset = clock.offset_us();
            // Slew earned and not yet spent, in µs × 10⁻⁶, bounds each step.
            for (dt, steer) in steps {
                local += dt;
                if let Some(target) = steer {
                    clock.steer_to(target, local).unwrap();
                }
                let now = clock.reference_time(local).unwrap();
                prop_assert!(now >= reference, "reference time ran backwards");
                let moved = (clock.offset_us() - offset).unsigned_abs() as u128;
                // At most the rate, plus under 1 µs carried from earlier steps.
                prop_assert!(moved * 1_000_000 < u128::from(dt as u64) * u128::from(ppm) + 1_000_000);
                reference = now;
                offset = clock.offset_us();
            }
        }
    }
}
