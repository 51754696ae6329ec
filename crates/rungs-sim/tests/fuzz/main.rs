//! Deterministic fuzzing of every decoder and of sessions fed hostile input:
//! events, transport packets, lockstep turns, relay messages.
//!
//! One test binary for many files: each file is a module, the helpers
//! they share are modules here too.

mod common_fuzz;

mod event_fuzz;
mod relay_fuzz;
mod transport_fuzz;
mod turn_fuzz;
