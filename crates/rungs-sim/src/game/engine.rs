//! What runs on a simulated machine: rungs' [`LockstepSession`], or an
//! original game's engine ([`ClassicEngine`], the baselines `ra`,
//! `protocol0`, `protocol0-ts`). The host drives both through the same
//! calls.

use std::net::SocketAddr;

use crate::classic::ClassicEngine;
use rungs_core::error::{Error, Result};
use rungs_core::link::Transmit;
use rungs_core::session::{Advance, ExecutedCommand, LockstepSession, LockstepStats, SessionEvent};

/// A machine's engine.
// The rungs session is the hot path of every other game; the machine
// holding it is boxed already.
#[allow(clippy::large_enum_variant)]
pub(super) enum Engine {
    Rungs(LockstepSession),
    Classic(Box<ClassicEngine>),
}

macro_rules! either {
    ($engine:expr, $e:ident => $body:expr) => {
        match $engine {
            Engine::Rungs($e) => $body,
            Engine::Classic($e) => $body,
        }
    };
}

impl Engine {
    /// The rungs session, for what only it does (faults, restarts); the
    /// spec refuses those for the original games' engines.
    pub(super) fn rungs_mut(&mut self) -> Result<&mut LockstepSession> {
        match self {
            Engine::Rungs(session) => Ok(session),
            Engine::Classic(_) => Err(Error::State(
                "an original game's engine plays no faults (crash, quit, restart, attack, ...)",
            )),
        }
    }

    pub(super) fn handle_datagram(&mut self, now_us: u64, source: SocketAddr, datagram: &[u8]) {
        either!(self, e => e.handle_datagram(now_us, source, datagram))
    }

    pub(super) fn handle_timeout(&mut self, now_us: u64) {
        either!(self, e => e.handle_timeout(now_us))
    }

    pub(super) fn advance(&mut self, now_us: u64) -> Result<Advance> {
        either!(self, e => e.advance(now_us))
    }

    pub(super) fn add_frame_work_us(&mut self, us: u64) {
        match self {
            Engine::Rungs(session) => session.measurements().add_frame_work_us(us),
            Engine::Classic(engine) => engine.add_frame_work_us(us),
        }
    }

    pub(super) fn executed(&self) -> &[ExecutedCommand] {
        either!(self, e => e.executed())
    }

    /// The engine's state checksum after `frame`: rungs compares them
    /// (desyncs); the original games' own CRC check is not modelled (the
    /// spec refuses `--diverge` for them).
    pub(super) fn submit_checksum(&mut self, frame: u32, checksum: u64) -> Result<()> {
        match self {
            Engine::Rungs(session) => session.submit_checksum(frame, checksum),
            Engine::Classic(_) => Ok(()),
        }
    }

    pub(super) fn submit_command(&mut self, bytes: &[u8]) -> Result<u32> {
        either!(self, e => e.submit_command(bytes))
    }

    pub(super) fn held_bytes(&self) -> usize {
        either!(self, e => e.held_bytes())
    }

    pub(super) fn poll_event(&mut self) -> Option<SessionEvent> {
        either!(self, e => e.poll_event())
    }

    pub(super) fn stats(&self) -> LockstepStats {
        either!(self, e => e.stats())
    }

    pub(super) fn frame(&self) -> Option<u32> {
        either!(self, e => e.frame())
    }

    pub(super) fn has_left(&self) -> bool {
        match self {
            Engine::Rungs(session) => session.has_left(),
            Engine::Classic(_) => false,
        }
    }

    pub(super) fn poll_transmit(&mut self, now_us: u64, buf: &mut [u8]) -> Option<Transmit> {
        either!(self, e => e.poll_transmit(now_us, buf))
    }

    pub(super) fn poll_timeout(&mut self) -> Option<u64> {
        either!(self, e => e.poll_timeout())
    }

    pub(super) fn waiting_for(&self) -> u32 {
        either!(self, e => e.waiting_for())
    }
}
