//! The lockstep update loop, shared by every caller: fire timers, run the
//! next frame if it is due and ready, hand each executed command to the
//! caller, and say when to come back ([`LockstepSession::update`], sans-IO).
//! The `rungs-net` crate's `LockstepDriver` wraps it around a UDP socket for
//! engines (and the C API), which can also wait on the socket itself.

use super::{Advance, ExecutedCommand, LockstepSession};
use crate::error::Result;

/// How long to sleep at most when nothing is scheduled (waiting for peers
/// with no timer, or after leaving with no link left).
pub(crate) const IDLE_WAKE_US: u64 = 100_000;

/// What one [`LockstepSession::update`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wake {
    /// What the frame step did.
    pub advance: Advance,
    /// The frame that ran, else the latest frame run.
    pub frame: Option<u32>,
    /// Call again by this local time (µs), or earlier when a datagram
    /// arrives. Never in the past: a caller that sleeps until then never
    /// spins.
    pub next_us: u64,
    /// Seats the next frame waits for, as a bit mask.
    pub waiting_for: u32,
}

impl LockstepSession {
    /// One step of the engine's loop at local time `now_us`, after the
    /// caller fed it every waiting datagram: fire timers, run the next frame
    /// if due and ready, and hand each of its commands to `on_command`
    /// (frame, command) — every command of every frame run, in order. Send
    /// what [`poll_transmit`](Self::poll_transmit) writes afterwards.
    pub fn update(
        &mut self,
        now_us: u64,
        mut on_command: impl FnMut(u32, &ExecutedCommand),
    ) -> Result<Wake> {
        self.handle_timeout(now_us);
        let advance = self.advance(now_us)?;
        if let Advance::Ran { frame } = advance {
            for command in self.executed() {
                on_command(frame, command);
            }
        }
        let next_us = match advance {
            // Another frame may be due at once (catching up).
            Advance::Ran { .. } => now_us,
            Advance::NotDue { at_us } => self.poll_timeout().map_or(at_us, |t| t.min(at_us)),
            Advance::Waiting | Advance::Left => self
                .poll_timeout()
                .unwrap_or(now_us.saturating_add(IDLE_WAKE_US)),
        };
        // A timer already due is handled by the next call; not earlier than
        // now, and after leaving never sooner than a tick.
        let floor = if matches!(advance, Advance::Left) {
            now_us.saturating_add(1_000)
        } else {
            now_us
        };
        Ok(Wake {
            advance,
            frame: match advance {
                Advance::Ran { frame } => Some(frame),
                _ => self.frame(),
            },
            next_us: next_us.max(floor),
            waiting_for: self.waiting_for(),
        })
    }
}
