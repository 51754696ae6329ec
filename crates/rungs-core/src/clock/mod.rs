//! Clock offset estimation and frame pacing (S9), sans-IO.
//!
//! - [`ClockSample`], [`OffsetEstimator`]: samples of a request/reply
//!   exchange and S9's filter;
//! - [`SlewedClock`]: a reference-time estimate that slews instead of jumping;
//! - [`ClockSync`]: the two composed, what a machine holds;
//! - [`FramePacer`]: when the next frame is due, nudged toward the shared
//!   schedule.
//!
//! Every function takes the time as an argument; nothing here reads a clock.
//! `docs/clock.md` explains the design decisions.

pub(crate) mod offset;
pub(crate) mod pacer;
mod slew;
mod sync;

pub use offset::{
    ClockSample, OffsetEstimate, OffsetEstimator, DEFAULT_SAMPLE_WINDOW, MAX_ROUND_TRIP_US,
    MAX_SAMPLE_WINDOW,
};
pub use pacer::{
    FrameDue, FramePacer, PacerConfig, DEFAULT_MAX_NUDGE_PERMILLE, MAX_NUDGE_PERMILLE,
};
pub use slew::{SlewedClock, DEFAULT_MAX_SLEW_PPM, MAX_SLEW_PPM};
pub use sync::{ClockSync, ClockSyncConfig};

/// Two machines with different clock offsets, ±200 ppm drift and one of
/// them starting late, each syncing to the master's clock over a jittery
/// network with occasional retransmissions and pacing on the result.
#[cfg(test)]
mod convergence_tests {
    use super::pacer::DEFAULT_MAX_NUDGE_PERMILLE;
    use super::*;

    /// Simulation step of true time, µs: the engine's timer resolution.
    const STEP_US: i64 = 250;
    /// Frame 0 is due at this reference time.
    const GAME_START_US: i64 = 3_000_000;
    /// The rate drops from 30 to 20 fps on this frame (S5: a timing event).
    const RATE_CHANGE_FRAME: u32 = 400;

    /// Deterministic jitter: a 64-bit LCG (Knuth's MMIX constants).
    struct Lcg(u64);
    impl Lcg {
        fn below(&mut self, bound: i64) -> i64 {
            self.0 = self
                .0
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            ((self.0 >> 33) % bound as u64) as i64
        }
    }

    struct Machine {
        clock_offset_us: i64,
        drift_ppm: i64,
        ready_at_us: i64,
        sync: ClockSync,
        pacer: FramePacer,
        /// Exchanges in flight: (true time the reply arrives, sample).
        in_flight: Vec<(i64, ClockSample)>,
        /// True time at which each frame started.
        frame_starts: Vec<i64>,
    }

    impl Machine {
        fn new(clock_offset_us: i64, drift_ppm: i64, ready_at_us: i64, nudge: u16) -> Machine {
            Machine {
                clock_offset_us,
                drift_ppm,
                ready_at_us,
                sync: ClockSync::new(ClockSyncConfig::default()).unwrap(),
                pacer: FramePacer::new(PacerConfig {
                    fps: 30,
                    reference_frame: 0,
                    reference_start_us: GAME_START_US,
                    max_nudge_permille: nudge,
                })
                .unwrap(),
                in_flight: Vec::new(),
                frame_starts: Vec::new(),
            }
        }

        fn local(&self, true_us: i64) -> i64 {
            true_us + true_us * self.drift_ppm / 1_000_000 + self.clock_offset_us
        }

        /// A ping at true time `at`; the master's clock is true time.
        fn ping(&mut self, at: i64, there_us: i64, back_us: i64) {
            let t1 = at + there_us;
            let t2 = t1 + 50;
            let arrives = t2 + back_us;
            let sample = ClockSample::new(self.local(at), t1, t2, self.local(arrives)).unwrap();
            self.in_flight.push((arrives, sample));
        }

        fn step(&mut self, now: i64) {
            let local = self.local(now);
            let (arrived, in_flight) = self.in_flight.drain(..).partition(|(at, _)| *at <= now);
            self.in_flight = in_flight;
            for (_, sample) in arrived {
                self.sync.add_sample(sample, local).unwrap();
            }
            if now < self.ready_at_us || self.sync.estimate().is_none() {
                return;
            }
            let reference_now = self.sync.reference_time(local).unwrap();
            let due = self.pacer.next_frame_due();
            if reference_now >= due.due_us {
                self.pacer.frame_started(due.frame, reference_now).unwrap();
                self.frame_starts.push(now);
                if due.frame == RATE_CHANGE_FRAME {
                    self.pacer.set_fps(20, RATE_CHANGE_FRAME).unwrap();
                }
            }
        }
    }

    /// Runs both machines for 30 s of true time; returns their frame starts.
    fn run(nudge: u16) -> (Vec<i64>, Vec<i64>) {
        let mut a = Machine::new(4_000_000_000, 200, 0, nudge);
        // B's clock is far behind and slow, and it finishes loading 120 ms late.
        let mut b = Machine::new(-7_000_000, -200, GAME_START_US + 120_000, nudge);
        let mut jitter = Lcg(3);
        let mut pings = 0;
        for now in (0..30_000_000).step_by(STEP_US as usize) {
            if now % 200_000 == 0 {
                for machine in [&mut a, &mut b] {
                    pings += 1;
                    let there = 15_000 + jitter.below(4_000);
                    // Every seventh reply is retransmitted: 150 ms late one way.
                    let resent = if pings % 7 == 0 { 150_000 } else { 0 };
                    let back = 15_000 + jitter.below(4_000) + resent;
                    machine.ping(now, there, back);
                }
            }
            a.step(now);
            b.step(now);
        }
        (a.frame_starts, b.frame_starts)
    }

    #[test]
    fn s9_pacer_brings_a_late_drifting_machine_onto_the_same_frame() {
        let (a, b) = run(DEFAULT_MAX_NUDGE_PERMILLE);
        assert!(
            a.len() > 650 && b.len() > 650,
            "both ran the game: {} {}",
            a.len(),
            b.len()
        );
        // B starts 120 ms (3.6 frames) behind and gains at most 10 % of a
        // 33 ms frame each frame: caught up within 40 frames. From then on
        // both start every frame within 2 ms of each other (true time),
        // across the rate change, drift and retransmitted pings included.
        assert!(b[0] - a[0] >= 120_000);
        let worst_after_catch_up = a
            .iter()
            .zip(&b)
            .skip(40)
            .map(|(a, b)| (a - b).abs())
            .max()
            .unwrap();
        assert!(
            worst_after_catch_up <= 2_000,
            "frame starts differ by up to {worst_after_catch_up} µs"
        );
        // The catch-up shortened frames; it never made a burst.
        for starts in [&a, &b] {
            for pair in starts.windows(2) {
                assert!(
                    pair[1] - pair[0] >= 33_333 * 85 / 100,
                    "a frame shorter than 85 %"
                );
            }
        }
        // After the change to 20 fps the frames last 50 ms.
        let change = RATE_CHANGE_FRAME as usize;
        let twenty_fps = (a[change + 100] - a[change + 40]) / 60;
        assert!(
            (49_900..=50_100).contains(&twenty_fps),
            "{twenty_fps} µs per frame"
        );
    }

    #[test]
    fn without_nudging_the_late_machine_stays_behind() {
        let (a, b) = run(0);
        let lag_at_300 = b[300] - a[300];
        assert!(
            lag_at_300 >= 110_000,
            "B still about 120 ms behind: {lag_at_300} µs"
        );
    }
}
