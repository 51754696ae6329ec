//! The socket2 UDP driver: the only code in rungs that does network I/O.
//!
//! [`UdpDriver`] owns one non-blocking socket (IPv4, IPv6 or dual-stack) and
//! one sans-IO [`Endpoint`](crate::link::Endpoint). The engine polls it from
//! its frame loop with its own clock, or starts a [`Worker`] thread
//! explicitly (S7: never behind its back).

// Submodules stay out of include/rungs.h.
mod udp;
mod worker;

pub use udp::{IoCounters, PollOutcome, UdpDriver, MAX_DATAGRAMS_PER_POLL};
pub use worker::{MonotonicClock, Worker};
