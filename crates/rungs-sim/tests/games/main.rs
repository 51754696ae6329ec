//! Whole seeded games on the simulator, judged on invariants: lockstep
//! peer-to-peer and relayed, drops, faults, soaks, baselines, the latency
//! floor, engine sessions, transport under simulated networks and sweeps.
//!
//! One test binary for many files: each file is a module, the helpers
//! they share are modules here too.

mod hello;
mod sound;

mod baseline_games;
mod engine_sessions;
mod latency_floor;
mod lockstep_drops;
mod lockstep_faults;
mod lockstep_games;
mod lockstep_relay;
mod lockstep_soak;
mod relay_games;
mod relay_hello;
mod sweep;
mod transport_sim;
