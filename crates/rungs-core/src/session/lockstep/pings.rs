//! Clock pings (S9): every machine other than the master samples the
//! master's reference time, fast at first, then steadily during play.

use crate::clock::ClockSample;
use crate::error::Result;
use crate::wire::turn;

use super::LockstepSession;

/// Pings sent at the fast interval before settling.
const FIRST_PINGS: u32 = 8;
const FIRST_PING_INTERVAL_US: u64 = 100_000;
const PING_INTERVAL_US: u64 = 1_000_000;

/// When the next ping is due.
#[derive(Debug, Clone, Copy)]
pub struct ClockPings {
    sent: u32,
    next_us: u64,
}

impl ClockPings {
    pub fn new(now_us: u64) -> ClockPings {
        ClockPings {
            sent: 0,
            next_us: now_us,
        }
    }

    pub fn due(&self, now_us: u64) -> bool {
        now_us >= self.next_us
    }

    pub fn next_us(&self) -> u64 {
        self.next_us
    }

    /// A ping went out at `now_us`.
    pub fn sent(&mut self, now_us: u64) {
        self.sent = self.sent.saturating_add(1);
        let interval = if self.sent < FIRST_PINGS {
            FIRST_PING_INTERVAL_US
        } else {
            PING_INTERVAL_US
        };
        self.next_us = now_us.saturating_add(interval);
    }
}

/// Clock pings and pongs, as the session runs them.
impl LockstepSession {
    /// Send a clock ping to the master if one is due (S9).
    pub(super) fn send_ping_if_due(&mut self, now_us: u64) {
        if self.is_master() || !self.pings.due(now_us) || self.left {
            return;
        }
        if let Some(master) = self.machine.master() {
            let _ = self
                .endpoint
                .send(master, &turn::encode_ping(now_us as i64));
            self.pings.sent(now_us);
        }
    }

    /// Answer a ping with this machine's reference time.
    pub(super) fn on_ping(&mut self, now_us: u64, seat: u8, t0: i64) {
        let now = self.reference_now(now_us);
        self.send_control(seat, &turn::encode_pong(t0, now, now));
    }

    /// A pong: a clock sample, if it comes from the master.
    pub(super) fn on_pong(
        &mut self,
        now_us: u64,
        seat: u8,
        t0: i64,
        t1: i64,
        t2: i64,
    ) -> Result<()> {
        if self.machine.master() != Some(seat) {
            return Ok(()); // an answer from a former master
        }
        let t3 = now_us as i64;
        let sample = ClockSample::new(t0, t1, t2, t3)?;
        self.clock.add_sample(sample, t3).map(|_| ())
    }
}
