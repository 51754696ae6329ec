//! Sessions: the pieces composed for an engine's frame loop (S5, S7).

pub mod engine;
pub mod lockstep;

pub use engine::{
    EngineRules, EngineSession, EventIds, EventRole, LogLevel, Payload, Phase, Readiness,
    SendOrder, SessionConfig, SessionOutput,
};
#[cfg(any(test, feature = "testing"))]
pub use lockstep::Tamper;
pub use lockstep::{
    Advance, ExecutedCommand, LockstepConfig, LockstepSession, LockstepStats, OrderKind,
    OrderReceipt, RelaySettings, SessionEvent, Topology, Wake, DEFAULT_JITTER_TICKS,
};
