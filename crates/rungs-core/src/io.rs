//! The I/O seam: what a socket driver needs of a sans-IO state machine.
//!
//! The machines of this crate never touch a socket. A driver (the
//! `rungs-net` crate's UDP driver, the simulator's network, a game's own
//! socket code) feeds each received datagram to [`Datagrams::handle_datagram`],
//! fires timers with [`Datagrams::handle_timeout`], and sends what
//! [`Datagrams::poll_transmit`] writes, all with the caller's clock. The
//! trait sits below the sessions so that the drivers depend on the core and
//! never the other way round.

use std::net::SocketAddr;

use crate::link::{Endpoint, Transmit};
use crate::relay::{RelayClient, RELAY_LINK_SEAT};
use crate::session::LockstepSession;

/// A sans-IO state machine a socket driver can serve: it takes datagrams
/// and time, and says what to send.
pub trait Datagrams {
    /// Validate and act on one datagram (invalid ones are counted inside).
    fn handle_datagram(&mut self, now_us: u64, source: SocketAddr, datagram: &[u8]);
    /// Fire due timers.
    fn handle_timeout(&mut self, now_us: u64);
    /// Write the next datagram into `buf`, or `None` when nothing is due.
    fn poll_transmit(&mut self, now_us: u64, buf: &mut [u8]) -> Option<Transmit>;
}

impl Datagrams for Endpoint {
    fn handle_datagram(&mut self, now_us: u64, source: SocketAddr, datagram: &[u8]) {
        // Invalid datagrams are counted by the endpoint; nothing else to do.
        let _ = Endpoint::handle_datagram(self, now_us, source, datagram);
    }
    fn handle_timeout(&mut self, now_us: u64) {
        Endpoint::handle_timeout(self, now_us);
    }
    fn poll_transmit(&mut self, now_us: u64, buf: &mut [u8]) -> Option<Transmit> {
        Endpoint::poll_transmit(self, now_us, buf)
    }
}

impl Datagrams for LockstepSession {
    fn handle_datagram(&mut self, now_us: u64, source: SocketAddr, datagram: &[u8]) {
        LockstepSession::handle_datagram(self, now_us, source, datagram);
    }
    fn handle_timeout(&mut self, now_us: u64) {
        LockstepSession::handle_timeout(self, now_us);
    }
    fn poll_transmit(&mut self, now_us: u64, buf: &mut [u8]) -> Option<Transmit> {
        LockstepSession::poll_transmit(self, now_us, buf)
    }
}

/// A bare relay client (S10) on its own socket: every datagram goes to the
/// relay, seat [`RELAY_LINK_SEAT`]. (A relay-topology
/// [`LockstepSession`] wraps its client and needs nothing of this.)
impl Datagrams for RelayClient {
    fn handle_datagram(&mut self, now_us: u64, source: SocketAddr, datagram: &[u8]) {
        RelayClient::handle_datagram(self, now_us, source, datagram);
    }
    fn handle_timeout(&mut self, now_us: u64) {
        RelayClient::handle_timeout(self, now_us);
    }
    fn poll_transmit(&mut self, now_us: u64, buf: &mut [u8]) -> Option<Transmit> {
        let (destination, len) = RelayClient::poll_transmit(self, now_us, buf)?;
        Some(Transmit {
            seat: RELAY_LINK_SEAT,
            destination,
            len,
        })
    }
}
