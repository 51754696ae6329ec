//! Sessions: the pieces composed for an engine's frame loop (S5, S7).

mod engine;
mod lockstep;

pub use engine::{
    EngineRules, EngineSession, EventIds, EventRole, LogLevel, LogText, Payload, Phase, Readiness,
    SendOrder, SessionConfig, SessionOutput,
};
/// The drop agreement (S4.7) on its own, pure and sans-IO: what the session
/// runs for a dropped seat, public so that the model checker
/// (`tools/drop-model`) drives this same code through every interleaving.
/// A game never uses it directly.
pub use lockstep::agreement;
#[cfg(any(test, feature = "testing"))]
pub use lockstep::Tamper;
pub use lockstep::{
    Advance, ExecutedCommand, LockstepConfig, LockstepSession, LockstepStats, OrderKind,
    OrderReceipt, RelaySettings, SessionEvent, Topology, Wake, DEFAULT_JITTER_TICKS,
};
