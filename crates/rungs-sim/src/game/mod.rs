//! Whole games on the simulated network: N machines, each running the real
//! [`LockstepSession`](rungs_core::session::LockstepSession) (timing,
//! record, schedule, transport, clock sync, pacing) over
//! [`NetSim`](crate::NetSim), deterministically from a seed, on a virtual
//! clock — much faster than real time. `rungs-sim`, the soak test and the
//! scenario suite are built on [`run_game`].
//!
//! Three parts, one concept each: `spec` says what the game is (players,
//! network, machines, policy, frames, faults); `host` plays it (steps the
//! machines and carries their datagrams); `outcome` records what each
//! machine did and judges the game (latency, floor, stalls, logs).
//! `parallel` plays the host's game in windows on two threads
//! ([`run_game_parallel`]), with the same report byte for byte.
//!
//! The model, in the words `rungs-sim --help` uses:
//! - **Round trips.** Each player has a base round trip (`--rtt`); the path
//!   between players `i` and `j` has a one-way delay of `(rtt_i + rtt_j) / 4`
//!   (so when everyone has the same base, every pair sees that round trip).
//!   `--jitter J` adds a uniform `0..=J` ms to each datagram's one-way delay.
//!   `--loss P` loses each datagram with probability P.
//! - **Spikes.** `--spike MS@S+D` makes every path's round trip `MS` from
//!   second `S` for `D` seconds (`MS@S+D/P` only player P's paths).
//! - **Machines.** Each player's frame takes `--proc-ms` of its CPU; its
//!   clock runs with an offset and a drift drawn from the seed, so clock sync
//!   has work to do.
//! - **Commands.** Each player issues commands at random, two per second on
//!   average (about 120 actions a minute); a command's latency is from its
//!   issue to its execution on the last machine that runs it (the issuer
//!   may run it sooner when its peers' turns arrived early, but the game has
//!   not acted on it until every machine has).
//! - **Physical floor.** For each command, the larger of two waits no timing
//!   can avoid: the base one-way delay (jitter only adds to it) from the
//!   issuer to the farthest other player at issue time, since every machine
//!   must hold the command before the frame that executes it; and the wait
//!   from the issue to the start of the issuer's second frame at or after
//!   it, since the first carries the command in its turn and S1's
//!   look-ahead (at least one frame) executes it on a later frame at the
//!   earliest. It is a lower bound of the
//!   measured latency on every run, whatever the timing
//!   (`tests/latency_floor.rs` checks it).
//! - **Stalls.** A frame stalls when it is due but a peer's turn has not
//!   arrived. Reported for the worst machine: stalled frames and total ms.
//! - **Desyncs.** Every machine hashes the commands it executed; the hash is
//!   exchanged as the state checksum every 64 frames and compared (S10's
//!   checksum idea, carried by the turns). `--diverge SEAT@FRAME` corrupts
//!   one machine's state on a frame, as an engine bug would.
//! - **Faults** ([`super::faults`]): crashes (several at once, mid-turn),
//!   quits, command bursts and a modified client's attacks on chosen
//!   frames; `--dup`, `--reorder` and `--outage` add duplication, reordering
//!   and outages to the network. A crashed player is dropped by every
//!   survivor once its link is lost. The report's soundness fields judge the
//!   honest machines only.

mod engine;
mod host;
mod outcome;
mod parallel;
pub(crate) mod spec;

pub use outcome::GameReport;
pub use spec::{Departure, GameSpec, OutageSpec, Spike};

pub(super) use outcome::fnv;

use rungs_core::error::Result;

/// Simulate one game. Deterministic: the same spec gives the same report.
pub fn run_game(spec: &GameSpec) -> Result<GameReport> {
    spec.validate()?;
    let mut host = host::Host::new(spec)?;
    host.run()?;
    Ok(host.judge())
}

/// [`run_game`] on two threads where the game allows it: the same report,
/// byte for byte, in less wall-clock time on a machine with a core to spare
/// (the scheme is in `game/parallel.rs`). Games with faults, very
/// short network delays or frames without work are played in order.
pub fn run_game_parallel(spec: &GameSpec) -> Result<GameReport> {
    spec.validate()?;
    let mut host = host::Host::new(spec)?;
    parallel::run(&mut host)?;
    Ok(host.judge())
}
