//! An engine that paces and measures with a tick timer (S7): the frame rates
//! that timer can hit, and its ticks in µs and ms.
//!
//! Tiberian Sun and Red Alert count time in ticks of a 60 Hz timer. A frame
//! lasts `60 / DesiredFrameRate` whole ticks (integer division), so the rate
//! a game actually runs at is `60 / (60 / rate)`: asked for 45 fps it runs
//! at 60, asked for 25 it runs at 30. A rate the slowest machine can keep is
//! then no promise at all. So for such an engine every rate rungs asks for is
//! one the timer hits exactly — a divisor of its tick rate (60, 30, 20, 15,
//! 12, 10, 6, 5, 4, 3, 2, 1 at 60 Hz) — and the largest such rate at or below
//! the one the rules chose: never faster than a machine can keep
//! (decision 64 in `docs/decisions.md`).
//!
//! The same engines measure in whole ticks: a round trip is the ticks from a
//! packet's first send to its acknowledgement, processing time the ticks a
//! frame's work spanned. [`TickTimer::ticks_to_ms`] and
//! [`TickTimer::ticks_to_us`] turn them into the units of the reports (S1).

use crate::error::{Error, Result};

/// A tick timer of `hz` ticks per second (1–255; 60 for Tiberian Sun and Red
/// Alert).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TickTimer {
    hz: u8,
}

impl TickTimer {
    /// Tiberian Sun's and Red Alert's timer.
    pub const SIXTY_HZ: TickTimer = TickTimer { hz: 60 };

    /// A timer of `hz` ticks per second; 0 is refused.
    pub fn new(hz: u8) -> Result<TickTimer> {
        if hz == 0 {
            return Err(Error::invalid_value("hz", 0u8, "1 to 255 ticks per second"));
        }
        Ok(TickTimer { hz })
    }

    /// Ticks per second.
    pub fn hz(self) -> u8 {
        self.hz
    }

    /// Whether a frame timer of this rate runs exactly `fps` frames a
    /// second: `fps` divides the tick rate.
    pub fn hits(self, fps: u8) -> bool {
        fps != 0 && self.hz % fps == 0
    }

    /// The rate to ask for instead of `fps`: the largest rate at or below it
    /// that the timer hits, at least 1 (every timer hits 1 fps). A rate above
    /// the tick rate becomes the tick rate.
    pub fn rate_at_most(self, fps: u8) -> u8 {
        (1..=fps.min(self.hz))
            .rev()
            .find(|&rate| self.hits(rate))
            .unwrap_or(1)
    }

    /// Whole ticks per frame at `fps` as the engine's timer waits them
    /// (`hz / fps`, integer division; at least 1).
    pub fn ticks_per_frame(self, fps: u8) -> u32 {
        (u32::from(self.hz) / u32::from(fps.max(1))).max(1)
    }

    /// `ticks` in µs, rounded to the nearest µs.
    pub fn ticks_to_us(self, ticks: u32) -> u64 {
        let hz = u64::from(self.hz);
        (u64::from(ticks) * 1_000_000 + hz / 2) / hz
    }

    /// `ticks` in ms, rounded to the nearest ms (a sample of `n` ticks is a
    /// time between `n - 1` and `n + 1` ticks: `n` is its middle).
    pub fn ticks_to_ms(self, ticks: u32) -> u32 {
        let hz = u64::from(self.hz);
        u32::try_from((u64::from(ticks) * 1000 + hz / 2) / hz).unwrap_or(u32::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sixty_hz_timer_is_only_asked_for_rates_it_hits() {
        let timer = TickTimer::SIXTY_HZ;
        let hit: Vec<u8> = (1..=255).filter(|&f| timer.hits(f)).collect();
        assert_eq!(hit, [1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30, 60]);
        // 31-59 fps all run at 60 under the engine's timer; rungs asks for 30.
        assert_eq!(timer.rate_at_most(45), 30);
        assert_eq!(timer.rate_at_most(59), 30);
        assert_eq!(timer.rate_at_most(60), 60);
        assert_eq!(timer.rate_at_most(255), 60);
        assert_eq!(timer.rate_at_most(25), 20);
        assert_eq!(timer.rate_at_most(11), 10);
        assert_eq!(timer.rate_at_most(9), 6);
        assert_eq!(timer.rate_at_most(1), 1);
        assert_eq!(timer.rate_at_most(0), 1);
        // Every rate it gives runs at exactly that rate under the engine's rule.
        for fps in 1..=255u8 {
            let asked = timer.rate_at_most(fps);
            assert!(asked <= fps.max(1));
            let runs_at = 60 / timer.ticks_per_frame(asked);
            assert_eq!(runs_at, u32::from(asked), "asked {asked} for {fps}");
        }
    }

    #[test]
    fn ticks_convert_to_the_reports_units() {
        let timer = TickTimer::SIXTY_HZ;
        assert_eq!(timer.ticks_to_ms(0), 0);
        assert_eq!(timer.ticks_to_ms(1), 17);
        assert_eq!(timer.ticks_to_ms(6), 100);
        assert_eq!(timer.ticks_to_us(1), 16_667);
        assert_eq!(timer.ticks_to_us(3), 50_000);
        assert_eq!(timer.ticks_per_frame(45), 1);
        assert_eq!(timer.ticks_per_frame(30), 2);
        assert!(TickTimer::new(0).is_err());
        assert_eq!(TickTimer::new(18).unwrap().rate_at_most(10), 9);
    }
}
