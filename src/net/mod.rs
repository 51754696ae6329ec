//! The socket2 UDP driver: the only code in rungs that does network I/O.
//!
//! [`UdpDriver`] owns one non-blocking socket (IPv4, IPv6 or dual-stack) and
//! one sans-IO state machine: an [`Endpoint`](crate::link::Endpoint) or a
//! [`LockstepSession`](crate::session::LockstepSession) ([`Datagrams`]). The engine polls it from
//! its frame loop with its own clock, or starts a [`Worker`] thread
//! explicitly (S7: never behind its back).

mod udp;
mod worker;

pub use udp::{Datagrams, IoCounters, PollOutcome, RawSocket, UdpDriver, MAX_DATAGRAMS_PER_POLL};
pub use worker::{MonotonicClock, Worker, WorkerStatus};
