//! Clock pings (S9): every machine other than the master samples the
//! master's reference time, fast at first, then steadily during play.

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
