//! A simulated machine's clock: true (simulated) time seen through an
//! offset and a drift, so clock sync (S9) has work to do.

use super::SplitMix64;

/// Largest offset drawn, µs (machines up to 2000 s apart).
pub const MAX_OFFSET_US: u64 = 2_000_000_000;
/// Largest drift drawn either way, ppm.
pub const MAX_DRIFT_PPM: i64 = 100;

/// `local = t + offset + t * drift / 10^6`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MachineClock {
    pub offset_us: i64,
    pub drift_ppm: i64,
}

impl MachineClock {
    /// Up to [`MAX_OFFSET_US`] ahead, drifting up to ±[`MAX_DRIFT_PPM`].
    pub fn draw(rng: &mut SplitMix64) -> MachineClock {
        let offset_us = rng.below_or_equal(MAX_OFFSET_US) as i64;
        let drift_ppm = rng.below_or_equal(2 * MAX_DRIFT_PPM as u64) as i64 - MAX_DRIFT_PPM;
        MachineClock {
            offset_us,
            drift_ppm,
        }
    }

    /// The local clock at true time `t`.
    pub fn local(&self, t: u64) -> u64 {
        // Game times stay below 2^40 µs and drift below 10^3 ppm: i64 is ample.
        let t = t as i64;
        (t + self.offset_us + t * self.drift_ppm / 1_000_000).max(0) as u64
    }

    /// The true time at which the local clock reads `local` (rounded up).
    pub fn global(&self, local: u64) -> u64 {
        let since = local as i64 - self.offset_us;
        let rate = 1_000_000 + self.drift_ppm;
        let t = (since * 1_000_000 + rate - 1).div_euclid(rate);
        t.max(0) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drift_accumulates_from_the_offset() {
        let clock = MachineClock {
            offset_us: 5_000,
            drift_ppm: -100,
        };
        assert_eq!(clock.local(0), 5_000);
        assert_eq!(clock.local(10_000_000), 10_004_000);
        let mut rng = SplitMix64::new(9);
        for _ in 0..100 {
            let c = MachineClock::draw(&mut rng);
            assert!(c.drift_ppm.abs() <= MAX_DRIFT_PPM && c.offset_us >= 0);
        }
    }
}
