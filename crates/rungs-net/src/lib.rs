//! # rungs-net — the socket drivers of rungs
//!
//! The only code in rungs that does network I/O or starts threads. Each
//! driver owns one non-blocking UDP socket (IPv4, IPv6 or dual-stack) and
//! one sans-IO state machine of `rungs-core` that implements the core's I/O
//! seam, [`Datagrams`]: an [`Endpoint`](rungs_core::link::Endpoint), a
//! [`LockstepSession`](rungs_core::session::LockstepSession) or a
//! [`RelayClient`](rungs_core::relay::RelayClient). The engine polls a
//! driver from its frame loop with its own clock, or starts a [`Worker`]
//! thread explicitly (S7: never behind its back).
//!
//! - [`UdpDriver`]: a socket and any [`Datagrams`] machine;
//! - [`LockstepDriver`]: a lockstep session's update loop around a socket;
//! - [`Worker`]: a thread polling a driver every tick;
//! - [`RelayHost`]: a relay inside a host player's game (a LAN game, S10);
//! - [`process_seed`], [`seed_connection_nonces`]: per-process entropy for
//!   nonces and secrets (the core draws none of its own).

#![warn(missing_docs, unreachable_pub)]

mod entropy;
mod lockstep_driver;
mod relay_host;
mod udp;
mod worker;

pub use entropy::{process_seed, seed_connection_nonces};
pub use lockstep_driver::LockstepDriver;
pub use relay_host::{HostConfig, HostStatus, RelayHost, HOST_TICKET_LIFETIME_S};
pub use rungs_core::io::Datagrams;
pub use udp::{IoCounters, PollOutcome, RawSocket, UdpDriver, MAX_DATAGRAMS_PER_POLL};
pub use worker::{MonotonicClock, Worker, WorkerStatus};
