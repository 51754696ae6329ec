//! Offset of a reference clock (the relay, or the master) from the local
//! clock, from request/reply samples (S9).
//!
//! A sample is one exchange: the request leaves at local `t0`, arrives at
//! reference `t1`, the reply leaves at reference `t2` and arrives at local
//! `t3` (all microseconds). As in SNTP, the offset `reference - local` is
//! `((t1 - t0) + (t2 - t3)) / 2` and the round trip `(t3 - t0) - (t2 - t1)`.
//!
//! One sample is only as good as the symmetry of its two legs; a sample
//! delayed on one leg (a retransmission, a queue) has a long round trip and a
//! skewed offset. [`OffsetEstimator`] keeps the latest samples and applies the
//! filter of S9 (Simpson's): sort by round trip, take the median, drop
//! every sample more than one standard deviation above it, average the
//! offsets of the rest. Integer arithmetic throughout (an integer square root
//! for the deviation), so the same samples give the same estimate anywhere.

use crate::error::{Error, Result};

/// Round trips longer than this are refused: such a sample says nothing
/// useful about the offset, and the bound keeps the filter's sums in range.
pub const MAX_ROUND_TRIP_US: i64 = 60_000_000;
/// The most samples an estimator keeps.
pub const MAX_SAMPLE_WINDOW: usize = 64;
/// A window that spans a few seconds of pings at a typical rate.
pub const DEFAULT_SAMPLE_WINDOW: usize = 16;

/// One request/reply exchange with the reference clock, checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClockSample {
    offset_us: i64,
    round_trip_us: i64,
}

impl ClockSample {
    /// A sample from its four timestamps (µs): `t0` local send, `t1`
    /// reference receive, `t2` reference send, `t3` local receive.
    ///
    /// `Invalid` when the timestamps contradict each other (the reply
    /// arrives before the request left, the reference replies before it
    /// received, the round trip comes out negative) or the round trip is longer
    /// than [`MAX_ROUND_TRIP_US`].
    pub fn new(t0: i64, t1: i64, t2: i64, t3: i64) -> Result<ClockSample> {
        let (t0, t1, t2, t3) = (
            i128::from(t0),
            i128::from(t1),
            i128::from(t2),
            i128::from(t3),
        );
        if t3 < t0 {
            return Err(Error::invalid_value(
                "t3 (local receive)",
                t3,
                format!("at or after t0 (local send), {t0}"),
            ));
        }
        if t2 < t1 {
            return Err(Error::invalid_value(
                "t2 (reference send)",
                t2,
                format!("at or after t1 (reference receive), {t1}"),
            ));
        }
        let round_trip = (t3 - t0) - (t2 - t1);
        if round_trip < 0 {
            return Err(Error::invalid_value(
                "t2 - t1 (the reference's hold)",
                t2 - t1,
                format!("at most the round trip t3 - t0, {}", t3 - t0),
            ));
        }
        if round_trip > i128::from(MAX_ROUND_TRIP_US) {
            return Err(Error::invalid_value(
                "the round trip (t3 - t0) - (t2 - t1)",
                round_trip,
                "at most 60 s (60000000 µs)",
            ));
        }
        // Floor division: the same on every platform, and within 1 µs of exact.
        let offset = ((t1 - t0) + (t2 - t3)).div_euclid(2);
        let offset_us = i64::try_from(offset).map_err(|_| {
            Error::invalid_value(
                "the clock offset ((t1 - t0) + (t2 - t3)) / 2",
                offset,
                "a 64-bit number of µs",
            )
        })?;
        Ok(ClockSample {
            offset_us,
            round_trip_us: round_trip as i64,
        })
    }

    /// `reference - local`, µs.
    pub fn offset_us(&self) -> i64 {
        self.offset_us
    }

    /// Network time of the exchange, µs (the reference's holding time excluded).
    pub fn round_trip_us(&self) -> i64 {
        self.round_trip_us
    }
}

/// The filtered estimate over the samples held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OffsetEstimate {
    /// `reference - local`, µs: the mean offset of the samples kept.
    pub offset_us: i64,
    /// The median round trip of the samples held, µs.
    pub median_round_trip_us: i64,
    /// Samples the filter kept (at least 1).
    pub samples_kept: usize,
    /// Samples held in the window.
    pub samples_held: usize,
}

/// The latest samples (a bounded window: the oldest leaves when it is full)
/// and the filtered estimate over them. Keep adding samples during play so
/// the estimate follows drift (S9).
#[derive(Debug, Clone)]
pub struct OffsetEstimator {
    window: Vec<ClockSample>,
    capacity: usize,
    oldest: usize,
    estimate: Option<OffsetEstimate>,
}

impl OffsetEstimator {
    /// An estimator keeping the latest `window` samples, 1–[`MAX_SAMPLE_WINDOW`].
    pub fn new(window: usize) -> Result<OffsetEstimator> {
        if !(1..=MAX_SAMPLE_WINDOW).contains(&window) {
            return Err(Error::invalid_value("sample_window", window, "1 to 64"));
        }
        Ok(OffsetEstimator {
            window: Vec::with_capacity(window),
            capacity: window,
            oldest: 0,
            estimate: None,
        })
    }

    /// Add a sample, replacing the oldest when the window is full, and
    /// recompute the estimate.
    pub fn add(&mut self, sample: ClockSample) -> OffsetEstimate {
        if self.window.len() < self.capacity {
            self.window.push(sample);
        } else {
            self.window[self.oldest] = sample;
            self.oldest = (self.oldest + 1) % self.capacity;
        }
        let estimate = filtered_estimate(&self.window);
        self.estimate = Some(estimate);
        estimate
    }

    /// The estimate over the samples held; `None` before the first sample.
    pub fn estimate(&self) -> Option<OffsetEstimate> {
        self.estimate
    }
}

/// S9's filter over 1..=MAX_SAMPLE_WINDOW samples.
fn filtered_estimate(samples: &[ClockSample]) -> OffsetEstimate {
    let mut sorted = [(0i64, 0i64); MAX_SAMPLE_WINDOW];
    let n = samples.len();
    for (slot, sample) in sorted.iter_mut().zip(samples) {
        *slot = (sample.round_trip_us, sample.offset_us);
    }
    let sorted = &mut sorted[..n];
    // Sorting by (round trip, offset) makes the order, and so the result,
    // independent of the order the samples arrived in.
    sorted.sort_unstable();

    // The lower median: with two samples, the faster one is the reference point.
    let median = sorted[(n - 1) / 2].0;
    let cutoff = median + standard_deviation(sorted.iter().map(|&(rtt, _)| rtt), n);
    let kept = sorted.iter().filter(|&&(rtt, _)| rtt <= cutoff);
    let (count, sum) = kept.fold((0usize, 0i128), |(count, sum), &(_, offset)| {
        (count + 1, sum + i128::from(offset))
    });
    // The median itself is always kept (its distance is 0), so count >= 1;
    // the mean of i64 values fits i64.
    let offset_us = sum.div_euclid(count as i128) as i64;
    OffsetEstimate {
        offset_us,
        median_round_trip_us: median,
        samples_kept: count,
        samples_held: n,
    }
}

/// Population standard deviation of `n` round trips, rounded down.
/// Exact integer variance `(n·Σx² − (Σx)²) / n²`: round trips are at most
/// 6·10⁷ µs and n at most 64, so every term fits i128 with room to spare.
fn standard_deviation(round_trips: impl Iterator<Item = i64> + Clone, n: usize) -> i64 {
    let n = n as i128;
    let sum: i128 = round_trips.clone().map(i128::from).sum();
    let sum_of_squares: i128 = round_trips.map(|x| i128::from(x) * i128::from(x)).sum();
    let variance = (n * sum_of_squares - sum * sum) / (n * n);
    // The variance is at most (6·10⁷)², well inside u64.
    integer_sqrt(variance as u64) as i64
}

/// ⌊√value⌋, bit by bit (rust-version 1.75 predates `u64::isqrt`).
fn integer_sqrt(value: u64) -> u64 {
    let mut remainder = value;
    let mut root = 0u64;
    let mut bit = 1u64 << 62;
    while bit > value {
        bit >>= 2;
    }
    while bit != 0 {
        if remainder >= root + bit {
            remainder -= root + bit;
            root = (root >> 1) + bit;
        } else {
            root >>= 1;
        }
        bit >>= 2;
    }
    root
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// An exchange with the reference `offset` ahead of local time, sent at
    /// local `at`, with the given one-way delays and 100 µs of holding time.
    fn exchange(at: i64, offset: i64, there: i64, back: i64) -> ClockSample {
        let t0 = at;
        let t1 = at + there + offset;
        let t2 = t1 + 100;
        let t3 = t2 - offset + back;
        ClockSample::new(t0, t1, t2, t3).unwrap()
    }

    #[test]
    fn s9_offset_and_round_trip_formulas() {
        let sample = ClockSample::new(1_000, 6_000, 6_100, 1_300).unwrap();
        // ((6000 - 1000) + (6100 - 1300)) / 2 and (1300 - 1000) - (6100 - 6000).
        assert_eq!(sample.offset_us(), 4_900);
        assert_eq!(sample.round_trip_us(), 200);
        // Symmetric legs give the exact offset.
        let sample = exchange(50_000, -2_000_000, 20_000, 20_000);
        assert_eq!(sample.offset_us(), -2_000_000);
        assert_eq!(sample.round_trip_us(), 40_000);
    }

    #[test]
    fn contradictory_or_absurd_samples_are_refused() {
        assert!(
            ClockSample::new(100, 0, 0, 99).is_err(),
            "reply before request"
        );
        assert!(
            ClockSample::new(0, 100, 99, 200).is_err(),
            "reference sends before receiving"
        );
        assert!(
            ClockSample::new(0, 0, 500, 200).is_err(),
            "negative round trip"
        );
        assert!(ClockSample::new(0, 0, 0, MAX_ROUND_TRIP_US + 1).is_err());
        assert!(ClockSample::new(i64::MIN, i64::MAX, i64::MAX, i64::MIN + 10).is_err());
        assert!(ClockSample::new(0, 0, 0, MAX_ROUND_TRIP_US).is_ok());
    }

    #[test]
    fn window_size_is_bounded() {
        assert!(OffsetEstimator::new(0).is_err());
        assert!(OffsetEstimator::new(MAX_SAMPLE_WINDOW + 1).is_err());
        assert!(OffsetEstimator::new(MAX_SAMPLE_WINDOW).is_ok());
    }

    #[test]
    fn seed_003_filter_drops_retransmission_like_samples() {
        let offset = 1_500_000;
        let mut estimator = OffsetEstimator::new(8).unwrap();
        assert_eq!(estimator.estimate(), None);
        for (i, (there, back)) in [(20_000, 21_000), (20_500, 20_000), (19_800, 20_600)]
            .into_iter()
            .enumerate()
        {
            estimator.add(exchange(i as i64 * 500_000, offset, there, back));
        }
        // A reply retransmitted once: 200 ms late on the way back only, so its
        // offset alone would be 100 ms off.
        let skewed = exchange(2_000_000, offset, 20_000, 220_000);
        assert_eq!(skewed.offset_us(), offset - 100_000);
        estimator.add(skewed);
        estimator.add(exchange(2_500_000, offset, 20_300, 20_100));

        let estimate = estimator.estimate().unwrap();
        assert_eq!(estimate.samples_held, 5);
        assert_eq!(
            estimate.samples_kept, 4,
            "the retransmitted sample is dropped"
        );
        assert!(
            (estimate.offset_us - offset).abs() <= 500,
            "estimate {} within half a millisecond of {offset}",
            estimate.offset_us
        );
        assert_eq!(estimate.median_round_trip_us, 40_500);
    }

    #[test]
    fn lower_median_keeps_the_faster_of_two() {
        let mut estimator = OffsetEstimator::new(4).unwrap();
        estimator.add(exchange(0, 7_000, 10_000, 10_000));
        let estimate = estimator.add(exchange(0, 7_000, 10_000, 300_000));
        assert_eq!(estimate.median_round_trip_us, 20_000);
        assert_eq!(estimate.samples_kept, 1);
        assert_eq!(estimate.offset_us, 7_000);
    }

    #[test]
    fn old_samples_leave_the_window_so_the_estimate_follows_drift() {
        let mut estimator = OffsetEstimator::new(4).unwrap();
        for i in 0..4 {
            estimator.add(exchange(i * 1_000_000, 10_000, 15_000, 15_000));
        }
        assert_eq!(estimator.estimate().unwrap().offset_us, 10_000);
        for i in 4..8 {
            estimator.add(exchange(i * 1_000_000, 12_000, 15_000, 15_000));
        }
        let estimate = estimator.estimate().unwrap();
        assert_eq!(estimate.samples_held, 4);
        assert_eq!(
            estimate.offset_us, 12_000,
            "only the four newest samples count"
        );
    }

    #[test]
    fn integer_sqrt_is_exact_floor() {
        for value in (0..10_000).chain([u64::MAX, u64::MAX - 1, 1 << 62, (1 << 32) - 1]) {
            let root = integer_sqrt(value);
            assert!(u128::from(root) * u128::from(root) <= u128::from(value));
            assert!(u128::from(root + 1) * u128::from(root + 1) > u128::from(value));
        }
    }

    proptest! {
        #[test]
        fn estimate_lies_within_the_offsets_held_and_ignores_arrival_order(
            samples in proptest::collection::vec(
                (0i64..MAX_ROUND_TRIP_US, -10_000_000_000i64..10_000_000_000),
                1..=MAX_SAMPLE_WINDOW,
            ),
        ) {
            let samples: Vec<ClockSample> = samples
                .into_iter()
                .map(|(round_trip, offset)| {
                    // t1 = t2: zero holding time; legs split so the offset comes out exact.
                    let t0 = 0;
                    let t1 = offset + round_trip / 2;
                    let t3 = round_trip;
                    ClockSample::new(t0, t1, t1, t3).unwrap()
                })
                .collect();
            let mut forward = OffsetEstimator::new(MAX_SAMPLE_WINDOW).unwrap();
            let mut backward = OffsetEstimator::new(MAX_SAMPLE_WINDOW).unwrap();
            for sample in &samples {
                forward.add(*sample);
            }
            for sample in samples.iter().rev() {
                backward.add(*sample);
            }
            let estimate = forward.estimate().unwrap();
            prop_assert_eq!(Some(estimate), backward.estimate());
            let lowest = samples.iter().map(|s| s.offset_us()).min().unwrap();
            let highest = samples.iter().map(|s| s.offset_us()).max().unwrap();
            prop_assert!(lowest <= estimate.offset_us && estimate.offset_us <= highest);
            prop_assert!(estimate.samples_kept >= 1 && estimate.samples_kept <= samples.len());
        }

        #[test]
        fn any_timestamps_give_a_sample_or_an_error(
            t0 in any::<i64>(), t1 in any::<i64>(), t2 in any::<i64>(), t3 in any::<i64>(),
        ) {
            if let Ok(sample) = ClockSample::new(t0, t1, t2, t3) {
                prop_assert!(sample.round_trip_us() >= 0);
                prop_assert!(sample.round_trip_us() <= MAX_ROUND_TRIP_US);
            }
        }
    }
}
