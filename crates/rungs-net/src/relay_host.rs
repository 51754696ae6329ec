//! A relay inside a player's game (a LAN host, S10): the host player's
//! process runs the relay for one match on its own UDP socket and worker
//! thread, hands every player a ticket, and plays the match itself through
//! an ordinary relay-topology session pointed at its own relay — the other
//! players connect to the host's address the same way. Nothing else
//! changes: the same protocol, clock, sequencing and reconnects as a
//! dedicated `rungs-relay`.
//!
//! The host keeps no turn log on disk: the relay lives and dies with the
//! host's game, which is also the host's own player, so there is no one to
//! resume a match for after the process is gone (a match goes on from a
//! saved game instead). A dedicated relay keeps its matches across
//! restarts (`rungs-relay serve --state`).
//!
//! The worker thread polls the socket every millisecond (S7: a thread only
//! because the host asked for one); the match's lobby secret is the host's
//! own, fresh per host unless it brings one.

use std::net::SocketAddr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rungs_core::error::{Error, Result};
use rungs_core::io::Datagrams;
use rungs_core::link::Transmit;
use rungs_core::relay::ticket::{issue, Credentials, LobbySecret, TicketFields};
use rungs_core::relay::{MatchSetup, Relay, RelayConfig, Sequencer, RELAY_LINK_SEAT};
use rungs_core::rng::SplitMix64;
use rungs_core::wire::relay::{SeatPresence, MAX_SEATS};

use crate::udp::UdpDriver;
use crate::worker::{MonotonicClock, Worker, WorkerStatus};

/// How long the tickets a host issues stay valid.
pub const HOST_TICKET_LIFETIME_S: u64 = 24 * 3600;
/// The worker thread's poll period.
const HOST_TICK: Duration = Duration::from_millis(1);

/// How to host a match.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostConfig {
    /// Where the relay listens (`0.0.0.0:0`: every interface, a port the
    /// OS picks; ask [`RelayHost::local_addr`]).
    pub listen: SocketAddr,
    /// The match (its id is the tickets').
    pub setup: MatchSetup,
    /// The secret the tickets are made with; `None`: a fresh one.
    pub lobby_secret: Option<LobbySecret>,
}

/// A relay on its own socket, the wall clock for ticket expiry: what the
/// worker thread polls.
#[derive(Debug)]
pub(crate) struct HostedRelay {
    relay: Relay,
}

fn unix_now_s() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl Datagrams for HostedRelay {
    fn handle_datagram(&mut self, now_us: u64, source: SocketAddr, datagram: &[u8]) {
        self.relay
            .handle_datagram(now_us, unix_now_s(), source, datagram);
    }
    fn handle_timeout(&mut self, now_us: u64) {
        if self.relay.poll_timeout().is_some_and(|t| t <= now_us) {
            self.relay.handle_timeout(now_us);
        }
        while self.relay.poll_event().is_some() {}
    }
    fn poll_transmit(&mut self, now_us: u64, buf: &mut [u8]) -> Option<Transmit> {
        let (destination, len) = self.relay.poll_transmit(now_us, buf)?;
        Some(Transmit {
            seat: RELAY_LINK_SEAT,
            destination,
            len,
        })
    }
}

/// What a host sees of its match.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostStatus {
    /// The clock started.
    pub started: bool,
    /// The match is over.
    pub over: bool,
    /// The relay's tick now.
    pub tick: u32,
    /// Every tick below it has been broadcast.
    pub horizon: u32,
    /// Seats of the match.
    pub seat_count: u8,
    /// Each seat's presence (AI, loading, connected, reconnecting, left).
    pub presence: [SeatPresence; MAX_SEATS],
}

/// A running LAN host. See the module docs.
#[derive(Debug)]
pub struct RelayHost {
    worker: Worker<HostedRelay>,
    secret: LobbySecret,
    match_id: u64,
    local_addr: SocketAddr,
}

impl RelayHost {
    /// Bind `config.listen`, create the match and start the worker thread.
    pub fn start(config: HostConfig) -> Result<RelayHost> {
        crate::entropy::seed_connection_nonces();
        let secret = match config.lobby_secret {
            Some(secret) => secret,
            None => fresh_secret()?,
        };
        let clock = MonotonicClock::starting_at(0);
        let mut relay = Relay::new(RelayConfig::new(secret))?;
        relay.add_match(config.setup, clock.now_us())?;
        let driver = UdpDriver::bind(config.listen, HostedRelay { relay })?;
        let local_addr = driver.local_addr()?;
        Ok(RelayHost {
            worker: Worker::start(driver, HOST_TICK, clock)?,
            secret,
            match_id: config.setup.match_id,
            local_addr,
        })
    }

    /// The address and port the relay listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// A player's ticket and link secret for `seat` (valid for a day): hand
    /// it to that player only, with the host's address.
    pub fn credentials(&self, seat: u8) -> Result<Credentials> {
        let setup = self.with_sequencer(|s| *s.setup())?;
        if seat >= setup.seat_count || setup.human_mask & (1 << seat) == 0 {
            return Err(Error::invalid_value(
                "seat",
                seat,
                "a human seat of the hosted match",
            ));
        }
        issue(
            &self.secret,
            &TicketFields {
                match_id: self.match_id,
                seat,
                expires_unix_s: unix_now_s() + HOST_TICKET_LIFETIME_S,
                nonce: u64::from(seat) | self.worker.clock().now_us() << 8,
            },
        )
    }

    fn with_sequencer<T>(&self, f: impl FnOnce(&Sequencer) -> T) -> Result<T> {
        if self.worker.status() == WorkerStatus::Panicked {
            return Err(Error::State("the host's relay thread stopped (a panic)"));
        }
        let driver = self.worker.lock();
        let sequencer = driver
            .inner()
            .relay
            .sequencer(self.match_id)
            .ok_or(Error::State("the hosted match is over and gone"))?;
        Ok(f(sequencer))
    }

    /// The match now.
    pub fn status(&self) -> Result<HostStatus> {
        let now = self.worker.clock().now_us();
        self.with_sequencer(|s| HostStatus {
            started: s.has_started(),
            over: s.is_over(),
            tick: s.tick(now),
            horizon: s.horizon(),
            seat_count: s.setup().seat_count,
            presence: s.presence(),
        })
    }

    /// End the match now: every player hears MatchOver.
    pub fn end(&self) -> Result<()> {
        let now = self.worker.clock().now_us();
        self.worker
            .lock()
            .inner_mut()
            .relay
            .end_match(self.match_id, now)
    }

    /// Stop the thread and close the socket (the players' links time out).
    pub fn stop(self) -> Result<()> {
        self.worker.stop().map(|_| ())
    }
}

/// A lobby secret for one host, from the process's unpredictable seed.
fn fresh_secret() -> Result<LobbySecret> {
    let mut rng = SplitMix64::new(crate::entropy::process_seed());
    let mut bytes = [0u8; 16];
    bytes[..8].copy_from_slice(&rng.next_u64().to_le_bytes());
    bytes[8..].copy_from_slice(&(rng.next_u64() | 1).to_le_bytes());
    LobbySecret::new(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_issues_tickets_for_its_human_seats_only() {
        let host = RelayHost::start(HostConfig {
            listen: "127.0.0.1:0".parse().unwrap(),
            setup: MatchSetup::new(77, 3, 0b011),
            lobby_secret: None,
        })
        .unwrap();
        assert_ne!(host.local_addr().port(), 0);
        let c = host.credentials(1).unwrap();
        assert_eq!(c.fields().unwrap().match_id, 77);
        assert!(host.credentials(2).is_err(), "an AI seat");
        assert!(host.credentials(3).is_err(), "no such seat");
        let status = host.status().unwrap();
        assert!(!status.started);
        assert_eq!(status.presence[0], SeatPresence::Loading);
        host.end().unwrap();
        assert!(host.status().unwrap().over);
        host.stop().unwrap();
    }
}
