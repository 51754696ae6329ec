//! A match's setup: who plays, how fast the relay ticks, which timing
//! policy sets each client's jitter buffer, and the limits that keep a
//! match bounded (S10). The lobby writes it; the sequencer, the journal and
//! the LAN host read it.

use crate::error::{Error, Result};
use crate::timing::PolicyKind;
use crate::wire::relay::MAX_SEATS;

/// Default relay tick rate: 30 ticks per second.
pub(crate) const DEFAULT_TICK_RATE_MILLIHZ: u32 = 30_000;
/// Default load barrier: 60 s.
pub(crate) const DEFAULT_START_BARRIER_US: u64 = 60_000_000;
/// Default reconnect grace: 60 s.
pub(crate) const DEFAULT_RECONNECT_GRACE_US: u64 = 60_000_000;
/// The setup of one match.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MatchSetup {
    /// The lobby's id of the match (tickets name it).
    pub match_id: u64,
    /// Seats, 1–16.
    pub seat_count: u8,
    /// Bit `s`: seat `s` is human; others are AI, computed by every client.
    pub human_mask: u16,
    /// Relay ticks per 1000 s (30000 = 30 ticks/s).
    pub tick_rate_millihz: u32,
    /// Ticks per bundle, 1–255 (1 by default: a bundle every tick).
    pub bundle_interval: u8,
    /// The rule that sets each client's jitter buffer (S4 with the relay as
    /// master, run per seat): `Some(Adaptive)` by default, `Some(Tracking)`,
    /// a fixed `S/L`, or `None` for the jitter buffer each client chose.
    pub timing_policy: Option<PolicyKind>,
    /// The tick rate follows the slowest machine (the lowest frame rate the
    /// seats' policies chose, S4.2), as peer-to-peer: a slow machine slows
    /// everyone. Off by default: a slow machine falls behind on its own.
    pub pace_to_slowest: bool,
    /// Clients report a checksum every this many ticks; 0 disables.
    pub checksum_interval: u16,
    /// An AI decision at tick `t` yields an order for `t + ai_order_delay`, 0–8.
    pub ai_order_delay: u8,
    /// Start the clock this long after the match was created even if some
    /// human seats have not said Hello.
    pub start_barrier_us: u64,
    /// A seat without a connection for this long (counted from the start for
    /// seats that never connected) is dropped.
    pub reconnect_grace_us: u64,
    /// The match ends when the horizon reaches this tick ([`NO_TICK_LIMIT`]
    /// by default: the match ends when every human has left, or when its
    /// operator ends it).
    pub max_ticks: u32,
    /// An order is refused when its seat's queue would reach this many ticks
    /// past the horizon (a flooding client cannot grow the relay's memory).
    pub max_queued_ticks: u32,
}

/// `max_ticks` of a match without a tick limit (4.5 years at 30 ticks/s).
pub const NO_TICK_LIMIT: u32 = u32::MAX;

impl MatchSetup {
    /// A setup with the defaults of S10: 30 ticks/s, a bundle every tick,
    /// the adaptive timing policy per seat, a checksum every 30 ticks,
    /// `ai_order_delay` 8, 60 s barrier and grace, no tick limit.
    pub fn new(match_id: u64, seat_count: u8, human_mask: u16) -> MatchSetup {
        MatchSetup {
            match_id,
            seat_count,
            human_mask,
            tick_rate_millihz: DEFAULT_TICK_RATE_MILLIHZ,
            bundle_interval: 1,
            timing_policy: Some(PolicyKind::Adaptive),
            pace_to_slowest: false,
            checksum_interval: 30,
            ai_order_delay: 8,
            start_barrier_us: DEFAULT_START_BARRIER_US,
            reconnect_grace_us: DEFAULT_RECONNECT_GRACE_US,
            max_ticks: NO_TICK_LIMIT,
            max_queued_ticks: 256,
        }
    }

    /// Check every field's range.
    pub fn validate(&self) -> Result<()> {
        let n = usize::from(self.seat_count);
        if !(1..=MAX_SEATS).contains(&n) {
            return Err(Error::invalid_value(
                "seat_count",
                self.seat_count,
                "1 to 16",
            ));
        }
        if n < MAX_SEATS && self.human_mask >> n != 0 {
            return Err(Error::invalid_value(
                "human_mask",
                format!("{:#06x}", self.human_mask),
                "seats below seat_count only",
            ));
        }
        if self.human_mask == 0 {
            return Err(Error::invalid_value(
                "human_mask",
                0u16,
                "at least one human seat",
            ));
        }
        if !(1..=1_000_000_000).contains(&self.tick_rate_millihz) {
            return Err(Error::invalid_value(
                "tick_rate_millihz",
                self.tick_rate_millihz,
                "1 to 1000000000",
            ));
        }
        if self.bundle_interval == 0 {
            return Err(Error::invalid_value("bundle_interval", 0u8, "1 to 255"));
        }
        if self.ai_order_delay > 8 {
            return Err(Error::invalid_value(
                "ai_order_delay",
                self.ai_order_delay,
                "0 to 8",
            ));
        }
        if self.max_ticks == 0 {
            return Err(Error::invalid_value("max_ticks", 0u32, "positive"));
        }
        if self.max_queued_ticks == 0 {
            return Err(Error::invalid_value("max_queued_ticks", 0u32, "positive"));
        }
        Ok(())
    }

    pub(super) fn is_human(&self, seat: u8) -> bool {
        usize::from(seat) < MAX_SEATS && self.human_mask & (1 << seat) != 0
    }

    /// The frame rate the setup's tick rate stands for (the game speed's
    /// cap, S4.2), 1–255.
    pub fn speed_fps(&self) -> u8 {
        (self.tick_rate_millihz / 1000).clamp(1, 255) as u8
    }

    /// The tick rate for a frame rate a policy chose: the setup's own at
    /// the speed's cap, `fps` ticks per second below it.
    pub(super) fn tick_rate_for(&self, fps: u8) -> u32 {
        if fps >= self.speed_fps() {
            self.tick_rate_millihz
        } else {
            u32::from(fps.max(1)) * 1000
        }
    }
}
