//! Clock pings (S9): every machine other than the master samples the
//! master's reference time, fast at first, then steadily during play.

use crate::clock::{ClockSample, ClockSync, ClockSyncConfig};
use crate::error::Result;
use crate::link::Endpoint;
use crate::wire::turn;

/// Pings sent at the fast interval before settling.
const FIRST_PINGS: u32 = 8;
const FIRST_PING_INTERVAL_US: u64 = 100_000;
const PING_INTERVAL_US: u64 = 1_000_000;

/// This machine's view of the master's reference time: the samples' filter
/// and when the next ping is due.
#[derive(Debug)]
pub struct ClockPings {
    clock: ClockSync,
    sent: u32,
    next_us: u64,
}

impl ClockPings {
    /// The first ping due at `now_us`.
    pub fn new(now_us: u64) -> Result<ClockPings> {
        Ok(ClockPings {
            clock: ClockSync::new(ClockSyncConfig::default())?,
            sent: 0,
            next_us: now_us,
        })
    }

    /// Whether a clock sample came in (before it, only the master paces).
    pub fn is_synced(&self) -> bool {
        self.clock.estimate().is_some()
    }

    /// The clock offset applied to reach reference time, µs.
    pub fn applied_offset_us(&self) -> i64 {
        self.clock.applied_offset_us()
    }

    /// Reference (master) time at local time `now_us`; the local clock until
    /// the first clock sample.
    pub fn reference_now(&mut self, now_us: u64) -> i64 {
        let local = now_us as i64;
        if self.clock.estimate().is_some() {
            self.clock.reference_time(local).unwrap_or(local)
        } else {
            local
        }
    }

    fn due(&self, now_us: u64) -> bool {
        now_us >= self.next_us
    }

    pub fn next_us(&self) -> u64 {
        self.next_us
    }

    /// Send a clock ping to `master` on `endpoint` if one is due (S9).
    pub fn ping_if_due(&mut self, now_us: u64, master: u8, endpoint: &mut Endpoint) {
        if !self.due(now_us) {
            return;
        }
        let _ = endpoint.send(master, &turn::encode_ping(now_us as i64));
        self.sent(now_us);
    }

    /// A pong from the `master` (S9): a clock sample.
    pub fn on_pong(&mut self, now_us: u64, t0: i64, t1: i64, t2: i64) -> Result<()> {
        let t3 = now_us as i64;
        let sample = ClockSample::new(t0, t1, t2, t3)?;
        self.clock.add_sample(sample, t3).map(|_| ())
    }

    /// A ping went out at `now_us`.
    fn sent(&mut self, now_us: u64) {
        self.sent = self.sent.saturating_add(1);
        let interval = if self.sent < FIRST_PINGS {
            FIRST_PING_INTERVAL_US
        } else {
            PING_INTERVAL_US
        };
        self.next_us = now_us.saturating_add(interval);
    }
}
