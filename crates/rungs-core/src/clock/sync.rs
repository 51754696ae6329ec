//! Clock synchronisation to a reference (S9): the filtered offset estimate
//! steering a slewed clock. This is what a session (or the C API) holds.

use super::offset::{ClockSample, OffsetEstimate, OffsetEstimator, DEFAULT_SAMPLE_WINDOW};
use super::slew::{SlewedClock, DEFAULT_MAX_SLEW_PPM};
use crate::error::{Error, Result};

/// How a [`ClockSync`] filters and slews.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClockSyncConfig {
    /// Samples kept for the filter, 1–64 (see [`OffsetEstimator::new`]).
    pub sample_window: usize,
    /// Slew rate bound, millionths of elapsed local time (see [`SlewedClock::new`]).
    pub max_slew_ppm: u32,
}

impl Default for ClockSyncConfig {
    fn default() -> Self {
        ClockSyncConfig {
            sample_window: DEFAULT_SAMPLE_WINDOW,
            max_slew_ppm: DEFAULT_MAX_SLEW_PPM,
        }
    }
}

/// The local machine's view of the reference clock: add every ping/pong
/// exchange as a [`ClockSample`], read reference time whenever needed.
#[derive(Debug, Clone)]
pub struct ClockSync {
    estimator: OffsetEstimator,
    clock: SlewedClock,
    has_estimate: bool,
}

impl ClockSync {
    /// A clock sync with no samples yet; `Invalid` for a window or
    /// slew rate out of range.
    pub fn new(config: ClockSyncConfig) -> Result<ClockSync> {
        Ok(ClockSync {
            estimator: OffsetEstimator::new(config.sample_window)?,
            clock: SlewedClock::new(0, config.max_slew_ppm)?,
            has_estimate: false,
        })
    }

    /// Add an exchange completed at local time `local_now_us` (normally its
    /// `t3`) and steer the clock toward the new estimate. `Invalid`,
    /// with no effect, if local time went backwards.
    pub fn add_sample(&mut self, sample: ClockSample, local_now_us: i64) -> Result<OffsetEstimate> {
        // Slew to now first: the new target must not apply retroactively, and
        // a time going backwards must be refused before the sample is kept.
        self.clock.advance_to(local_now_us)?;
        let estimate = self.estimator.add(sample);
        self.clock.steer_to(estimate.offset_us, local_now_us)?;
        self.has_estimate = true;
        Ok(estimate)
    }

    /// The filtered estimate; `None` before the first sample.
    pub fn estimate(&self) -> Option<OffsetEstimate> {
        self.estimator.estimate()
    }

    /// Reference time at local time `local_now_us`: never backwards, never a
    /// jump (S9). `State` before the first sample, `Invalid` if local
    /// time went backwards.
    pub fn reference_time(&mut self, local_now_us: i64) -> Result<i64> {
        if !self.has_estimate {
            return Err(Error::State("no clock sample yet"));
        }
        self.clock.reference_time(local_now_us)
    }

    /// The offset applied now (slewing toward the estimate), µs.
    pub fn applied_offset_us(&self) -> i64 {
        self.clock.offset_us()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_samples_set_the_clock_then_later_ones_slew_it() {
        let mut sync = ClockSync::new(ClockSyncConfig::default()).unwrap();
        assert_eq!(
            sync.reference_time(0),
            Err(Error::State("no clock sample yet"))
        );
        // Reference 1 s ahead, 40 ms round trip, symmetric.
        let sample = ClockSample::new(0, 1_020_000, 1_020_000, 40_000).unwrap();
        sync.add_sample(sample, 40_000).unwrap();
        assert_eq!(sync.reference_time(40_000).unwrap(), 1_040_000);
        // The reference now reads 10 ms further ahead: slewed in at 5 %.
        let sample = ClockSample::new(1_000_000, 2_030_000, 2_030_000, 1_040_000).unwrap();
        let estimate = sync.add_sample(sample, 1_040_000).unwrap();
        assert_eq!(
            estimate.offset_us, 1_005_000,
            "mean of the two samples kept"
        );
        assert_eq!(sync.applied_offset_us(), 1_000_000, "not jumped");
        assert_eq!(
            sync.reference_time(1_140_000).unwrap(),
            1_140_000 + 1_005_000
        );
    }

    #[test]
    fn config_is_validated_and_backwards_time_refused() {
        let bad_window = ClockSyncConfig {
            sample_window: 0,
            ..ClockSyncConfig::default()
        };
        assert!(ClockSync::new(bad_window).is_err());
        let bad_rate = ClockSyncConfig {
            max_slew_ppm: 0,
            ..ClockSyncConfig::default()
        };
        assert!(ClockSync::new(bad_rate).is_err());

        let mut sync = ClockSync::new(ClockSyncConfig::default()).unwrap();
        let sample = ClockSample::new(0, 500, 500, 1_000).unwrap();
        sync.add_sample(sample, 5_000).unwrap();
        assert!(sync.add_sample(sample, 4_999).is_err());
        assert_eq!(
            sync.estimate().unwrap().samples_held,
            1,
            "the refused sample is not kept"
        );
    }
}
