//! # rungs-sim — a deterministic network simulator for rungs
//!
//! Whole lockstep games of rungs' real session, relay and transport code
//! over a simulated network, for the tests, the benches and the `rungs-sim`
//! tool.
//!
//! [`NetSim`] delivers datagrams between addresses with per-direction delay,
//! jitter, loss, duplication, reordering and outages that can change over
//! time, all drawn from one seeded [`SplitMix64`] on a virtual microsecond
//! clock: a seed and a sequence of calls give the same run, bit for bit
//! (integers only, no wall clock, no hash-map order). [`Cluster`] wires sans-IO
//! [`Endpoint`](rungs_core::link::Endpoint)s to it and runs them event by event.

pub mod classic;
mod cluster;
pub mod faults;
pub mod game;
pub mod instant;
pub mod lobby;
pub mod machine_clock;
mod network;
pub mod oracle;
pub mod relay_game;
pub mod soak;
pub mod sweep;

pub use cluster::{Cluster, SimHost};
pub use faults::{Attack, Fault, TimedFault, TimedKind};
pub use game::{run_game, run_game_parallel, Departure, GameReport, GameSpec, OutageSpec, Spike};
pub use instant::InstantGame;
pub use machine_clock::MachineClock;
pub use network::{Arrival, Conditions, Delivery, HostId, NetSim, NetStats, Outage};
pub use oracle::{find_oracle, stalls_within_oracle_bound, Oracle};
pub use relay_game::{run_relay_game, RelayPlacement};
pub use rungs_core::rng::SplitMix64;
