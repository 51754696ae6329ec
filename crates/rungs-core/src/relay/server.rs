//! The relay server, sans-IO: many matches behind one UDP port (S10).
//!
//! It owns the tickets check, one transport link (S8) per connection, and
//! one [`Sequencer`] per match. Fed datagrams and time, it says what to send.
//! The `rungs-relay` binary drives it over a socket; tests drive it over the
//! simulator.
//!
//! # Receiving
//!
//! * A relay datagram (`0xB8`): only a Hello is valid. It is checked in this
//!   order, each failure counted: version and structure; the cookie; without
//!   a valid cookie, the per-address rate limit (before any MAC); ticket MAC
//!   and expiry; the Hello's tag under the ticket's link secret; the match.
//!   A well-formed Hello that fails is answered with a Reject naming the
//!   reason; one that passes but carries no valid cookie is answered with a
//!   Cookie and nothing else ([`super::admission`]). With a valid cookie
//!   come the connection rules (a resend of the live connection's Hello, a
//!   cookie no newer than the seat's last connection's — a replay —, the
//!   per-ticket rate limit, a connection id in use, the relay full) and the
//!   match's own (seat left, match over). **Nothing is allocated for a
//!   source before all of that passes**, and nothing larger than a Hello
//!   goes to an address that has not returned a cookie: a flood of forged
//!   Hellos costs at most four SipHash computations each and is answered
//!   byte for byte with less.
//! * A transport packet (`0xB7`): routed by its session id (the connection
//!   id, the low 32 bits of the Hello's nonce) to one connection, then the
//!   sender seat, the tag under that connection's key, the structure and the
//!   link's own checks. Only the newest packet of the connection that passes
//!   everything may move it to a new source address (NAT rebinding): an old
//!   packet replayed from elsewhere is dropped.
//! * Anything else is counted and dropped.
//!
//! One match's input only ever reaches that match's sequencer and its own
//! connections, so a misbehaving client cannot disturb another match.
//!
//! # Connections
//!
//! A valid Hello for a seat that has a connection replaces it (a reconnect):
//! the old connection id stops routing at once. A repeated Hello (same nonce,
//! same address: the Welcome was slow) is ignored; the live connection's
//! nonce from another address, or a cookie no newer than the one that
//! opened the seat's last connection, is refused as `Replayed`. A link
//! reported lost is closed and the seat's reconnect grace starts. A seat
//! that left, and every seat once the match is over, is closed after
//! `close_linger_us` so the link can deliver its last bundles.
//!
//! # Persistence
//!
//! With [`RelayConfig::persistent`] every match emits the records that let
//! it survive a relay restart ([`super::durable`]); the caller takes them
//! with [`Relay::poll_durable`] and writes them **before** it sends the
//! datagrams [`Relay::poll_transmit`] writes next (write-ahead). A relay
//! restarted with the records gets each match back with
//! [`Relay::restore_match`].

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;

use super::admission::{AddressLimiter, CookieClock, CookieKey, HelloLimits, SeatAdmission};
use super::durable::{DurableRecord, MatchState};
use super::schedule::Schedule;
use super::sequencer::{MatchEvent, MatchSetup, Sequencer};
use super::ticket::{verify, LobbySecret};
use super::{receive_link_packet, RELAY_LINK_SEAT};
use crate::error::{Error, Result};
use crate::link::{canonical_address, DropCounts, Link, LinkConfig, LinkEvent, LinkIdentity};
use crate::wire::packet::{self, SessionKey};
use crate::wire::relay::{
    peek_datagram, read_client_message, read_hello, verify_hello_tag, write_cookie, write_reject,
    CookieChallenge, DatagramPeek, Hello, Reject, RejectReason, COOKIE_DATAGRAM_BYTES, KIND_HELLO,
    MAX_MESSAGE_BYTES,
};

/// Most Rejects and Cookies waiting to be sent; beyond it they are counted,
/// not queued.
pub(crate) const MAX_QUEUED_REJECTS: usize = 1024;
/// Most log events held; beyond it the oldest are dropped and counted.
pub(crate) const MAX_QUEUED_EVENTS: usize = 4096;

const COOKIE_KEY_LABEL: &[u8] = b"rungs-relay cookie key v1";

/// Settings of a relay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RelayConfig {
    /// The secret shared with the lobby.
    pub lobby_secret: LobbySecret,
    /// Settings of every connection's link.
    pub link: LinkConfig,
    /// Most live connections over all matches.
    pub max_connections: usize,
    /// How long a finished seat's connection stays, so its last bundles arrive.
    pub close_linger_us: u64,
    /// How long a finished match stays before it is removed.
    pub over_linger_us: u64,
    /// The key the relay's cookies are made with. **Give every relay
    /// process its own random key** (the `rungs-relay` binary does): a
    /// process that restarts with the key it had could take a Hello
    /// captured just before the restart as fresh.
    pub cookie_key: CookieKey,
    /// Rate limits and the cookie lifetime of the Hello path.
    pub hello_limits: HelloLimits,
    /// Emit every match's durable records ([`Relay::poll_durable`]).
    pub persistent: bool,
}

impl RelayConfig {
    /// Defaults: links with a 5 s liveness timeout, 65536 connections, 2 s
    /// close linger, 30 s linger for finished matches, the default Hello
    /// limits, and a cookie key derived from the lobby secret — the same
    /// for every relay of the lobby and every run, which suits tests and
    /// simulations; a served relay sets a random one.
    pub fn new(lobby_secret: LobbySecret) -> RelayConfig {
        RelayConfig {
            lobby_secret,
            link: super::relay_link_config(),
            max_connections: 65_536,
            close_linger_us: 2_000_000,
            over_linger_us: 30_000_000,
            cookie_key: CookieKey(lobby_secret.derive(COOKIE_KEY_LABEL)),
            hello_limits: HelloLimits::default(),
            persistent: false,
        }
    }
}

/// What the relay counted (bad input by cause, and work done).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RelayCounters {
    /// Datagrams received.
    pub datagrams: u64,
    /// Neither a relay datagram nor a transport packet.
    pub not_relay: u64,
    /// Relay datagrams that are not a well-formed Hello.
    pub malformed_hellos: u64,
    /// Hellos refused, by reason (index: reason value − 1).
    pub rejected: [u64; RejectReason::ALL.len()],
    /// Rejects and Cookies not sent because the queue was full.
    pub rejects_not_queued: u64,
    /// Repeats of an accepted Hello (ignored).
    pub duplicate_hellos: u64,
    /// Cookies sent (Hellos without a valid cookie that passed every other check).
    pub cookies_sent: u64,
    /// Hellos without a valid cookie dropped by the per-address rate limit.
    pub hellos_limited_by_address: u64,
    /// Hellos with a valid cookie dropped by the per-ticket rate limit.
    pub hellos_limited_by_ticket: u64,
    /// Bytes of relay datagrams received without a valid cookie (from
    /// addresses the relay has not verified).
    pub unverified_bytes_in: u64,
    /// Bytes sent in answer to them (Cookies and Rejects): never more than
    /// `unverified_bytes_in`.
    pub unverified_bytes_out: u64,
    /// Connections opened.
    pub connections_opened: u64,
    /// Transport packets with no connection for their session id.
    pub unknown_connection: u64,
    /// Transport packets dropped by a connection (seat, tag, structure, link checks).
    pub link_drops: u64,
    /// The same drops by the link's reason (their sum is `link_drops`): the
    /// connections' own counts go with them when they close.
    pub link_drops_by_reason: DropCounts,
    /// Link messages that are not a valid client message.
    pub bad_messages: u64,
    /// Connections moved to a new source address.
    pub rebinds: u64,
    /// Authentic packets from a new address that were not the connection's
    /// newest (replayed from elsewhere): dropped, the connection not moved.
    pub moves_refused: u64,
    /// Log events dropped because nobody read them.
    pub events_dropped: u64,
}

/// An event worth a log line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RelayEvent {
    /// A Hello was refused.
    Rejected {
        /// From.
        source: SocketAddr,
        /// Why.
        reason: RejectReason,
    },
    /// A connection was opened for a seat.
    Opened {
        /// Match.
        match_id: u64,
        /// Seat.
        seat: u8,
        /// From.
        source: SocketAddr,
        /// Whether it replaced a live connection.
        replaced: bool,
    },
    /// A connection moved to a new address.
    Rebound {
        /// Match.
        match_id: u64,
        /// Seat.
        seat: u8,
        /// New address.
        source: SocketAddr,
    },
    /// A connection was closed.
    Closed {
        /// Match.
        match_id: u64,
        /// Seat.
        seat: u8,
        /// Its link was lost (else: the seat finished).
        lost: bool,
    },
    /// Something happened in a match.
    Match {
        /// Match.
        match_id: u64,
        /// What.
        event: MatchEvent,
    },
    /// A finished match was removed.
    Removed {
        /// Match.
        match_id: u64,
    },
}

#[derive(Debug)]
struct Connection {
    nonce: u64,
    address: SocketAddr,
    key: SessionKey,
    link: Link,
    /// A message the link had no room for yet.
    pending: Option<Vec<u8>>,
    finished_since: Option<u64>,
}

#[derive(Debug)]
struct MatchSlot {
    id: u64,
    sequencer: Sequencer,
    connections: Vec<Option<Connection>>,
    /// Per seat: the replay rule's latest cookie and the connection allowance.
    admission: Vec<SeatAdmission>,
    /// When the match was added: only cookies issued after it open a seat.
    created_us: u64,
    over_since: Option<u64>,
}

impl MatchSlot {
    fn next_deadline(&self, config: &RelayConfig) -> Option<u64> {
        let connections = self.connections.iter().flatten().flat_map(|conn| {
            [
                conn.link.poll_timeout(),
                conn.finished_since.map(|t| t + config.close_linger_us),
            ]
        });
        [
            self.sequencer.poll_timeout(),
            self.over_since.map(|t| t + config.over_linger_us),
        ]
        .into_iter()
        .chain(connections)
        .flatten()
        .min()
    }
}

/// A relay: matches, connections, tickets. See the module docs.
#[derive(Debug)]
pub struct Relay {
    config: RelayConfig,
    slots: Vec<Option<MatchSlot>>,
    by_id: HashMap<u64, usize>,
    /// Connection id → (slot, seat).
    routes: HashMap<u32, (usize, u8)>,
    /// Rejects and Cookies to send: (to, bytes, length).
    replies: VecDeque<(SocketAddr, [u8; COOKIE_DATAGRAM_BYTES], u8)>,
    addresses: AddressLimiter,
    cookie_clock: CookieClock,
    events: VecDeque<RelayEvent>,
    counters: RelayCounters,
    /// Matches and connections to drain, and every match's next timer.
    schedule: Schedule,
    /// Matches due in `handle_timeout` (kept to reuse its memory).
    due: Vec<usize>,
    message_buf: Vec<u8>,
    /// Durable records not yet taken (persistence on).
    durable: VecDeque<(u64, DurableRecord)>,
}

impl Relay {
    /// A relay with no matches.
    pub fn new(config: RelayConfig) -> Result<Relay> {
        config.link.validate()?;
        config.hello_limits.validate()?;
        if config.link.max_message_bytes() < 600 {
            return Err(Error::invalid_value(
                "link.max_packet_bytes",
                config.link.max_packet_bytes,
                "at least 632 (a relay message needs 600 bytes)",
            ));
        }
        Ok(Relay {
            config,
            slots: Vec::new(),
            by_id: HashMap::new(),
            routes: HashMap::new(),
            replies: VecDeque::new(),
            addresses: AddressLimiter::new(),
            cookie_clock: CookieClock::default(),
            events: VecDeque::new(),
            counters: RelayCounters::default(),
            schedule: Schedule::default(),
            due: Vec::new(),
            message_buf: vec![0; MAX_MESSAGE_BYTES],
            durable: VecDeque::new(),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &RelayConfig {
        &self.config
    }

    /// Counters.
    pub fn counters(&self) -> &RelayCounters {
        &self.counters
    }

    /// Add a match created at `now_us`.
    pub fn add_match(&mut self, setup: MatchSetup, now_us: u64) -> Result<()> {
        if self.by_id.contains_key(&setup.match_id) {
            return Err(Error::State("a match with that id exists"));
        }
        let mut sequencer = Sequencer::new(setup, now_us)?;
        if self.config.persistent {
            sequencer.enable_durable();
        }
        self.insert_match(sequencer, now_us);
        Ok(())
    }

    /// Resume a match from its durable records (`state`) at `now_us`, after
    /// the relay restarted ([`Sequencer::restore`]): clients reconnect and
    /// resume from their horizon. A finished match comes back finished
    /// (Hellos get `MatchOver`) and is removed after `over_linger_us`.
    pub fn restore_match(&mut self, state: &MatchState, now_us: u64) -> Result<()> {
        if self.by_id.contains_key(&state.setup.match_id) {
            return Err(Error::State("a match with that id exists"));
        }
        let sequencer = Sequencer::restore(state, now_us, self.config.persistent)?;
        self.insert_match(sequencer, now_us);
        Ok(())
    }

    /// The next durable record to write, with persistence on: (match id,
    /// record). Write every record taken before sending what
    /// [`poll_transmit`](Self::poll_transmit) writes next.
    pub fn poll_durable(&mut self) -> Option<(u64, DurableRecord)> {
        self.durable.pop_front()
    }

    /// A match's durable state now (to copy a live match into a new
    /// journal file, or to export it).
    pub fn match_state(&self, match_id: u64) -> Option<MatchState> {
        self.sequencer(match_id).map(Sequencer::state)
    }

    /// Move a slot's new durable records into the relay's queue.
    fn drain_durable(&mut self, at: usize) {
        if let Some(slot) = self.slots.get_mut(at).and_then(Option::as_mut) {
            while let Some(record) = slot.sequencer.poll_durable() {
                self.durable.push_back((slot.id, record));
            }
        }
    }

    /// Hold `sequencer`'s match from `now_us` on (only cookies issued after
    /// it open a seat).
    fn insert_match(&mut self, sequencer: Sequencer, now_us: u64) {
        let setup = *sequencer.setup();
        let slot = MatchSlot {
            id: setup.match_id,
            sequencer,
            connections: (0..setup.seat_count).map(|_| None).collect(),
            admission: vec![SeatAdmission::default(); usize::from(setup.seat_count)],
            created_us: now_us,
            over_since: None,
        };
        let at = match self.slots.iter().position(Option::is_none) {
            Some(at) => {
                self.slots[at] = Some(slot);
                at
            }
            None => {
                self.slots.push(Some(slot));
                self.slots.len() - 1
            }
        };
        self.by_id.insert(setup.match_id, at);
        self.drain_durable(at);
        self.mark_dirty(at);
    }

    /// End a match now.
    pub fn end_match(&mut self, match_id: u64, now_us: u64) -> Result<()> {
        let at = *self.by_id.get(&match_id).ok_or_else(|| {
            Error::invalid_value("match_id", match_id, "the id of a match of this relay")
        })?;
        if let Some(slot) = self.slots[at].as_mut() {
            slot.sequencer.end(now_us);
        }
        self.drain_durable(at);
        self.mark_dirty(at);
        Ok(())
    }

    /// The sequencer of a match.
    pub fn sequencer(&self, match_id: u64) -> Option<&Sequencer> {
        let at = *self.by_id.get(&match_id)?;
        self.slots[at].as_ref().map(|s| &s.sequencer)
    }

    /// Fault injection for tests: see [`Sequencer::inject_bundle_gap`].
    pub fn inject_bundle_gap(&mut self, match_id: u64, seat: u8, ticks: u32) {
        if let Some(&at) = self.by_id.get(&match_id) {
            if let Some(slot) = self.slots[at].as_mut() {
                slot.sequencer.inject_bundle_gap(seat, ticks);
            }
        }
    }

    /// Ids of the matches held.
    pub fn match_ids(&self) -> impl Iterator<Item = u64> + '_ {
        self.slots.iter().flatten().map(|s| s.id)
    }

    /// Matches held (running, loading or finished and lingering).
    pub fn match_count(&self) -> usize {
        self.by_id.len()
    }

    /// Live connections.
    pub fn connection_count(&self) -> usize {
        self.routes.len()
    }

    /// The next event worth a log line.
    pub fn poll_event(&mut self) -> Option<RelayEvent> {
        self.events.pop_front()
    }

    fn mark_dirty(&mut self, at: usize) {
        if self.slots.get(at).is_some_and(Option::is_some) {
            self.schedule.mark(at);
        }
    }

    fn event(&mut self, event: RelayEvent) {
        if self.events.len() >= MAX_QUEUED_EVENTS {
            self.events.pop_front();
            self.counters.events_dropped += 1;
        }
        self.events.push_back(event);
    }

    /// Queue a small datagram (a Reject or a Cookie) for `to`; whether it
    /// was queued.
    fn reply(&mut self, to: SocketAddr, bytes: &[u8]) -> bool {
        if self.replies.len() >= MAX_QUEUED_REJECTS {
            self.counters.rejects_not_queued += 1;
            return false;
        }
        let mut out = [0u8; COOKIE_DATAGRAM_BYTES];
        out[..bytes.len()].copy_from_slice(bytes);
        self.replies
            .push_back((canonical_address(to), out, bytes.len() as u8));
        true
    }

    fn reject(&mut self, source: SocketAddr, reason: RejectReason, nonce: u64, verified: bool) {
        self.counters.rejected[reason as usize - 1] += 1;
        self.event(RelayEvent::Rejected { source, reason });
        let mut bytes = [0u8; COOKIE_DATAGRAM_BYTES];
        let Some(len) = write_reject(&Reject { reason, nonce }, &mut bytes) else {
            return;
        };
        if self.reply(source, &bytes[..len]) && !verified {
            self.counters.unverified_bytes_out += len as u64;
        }
    }

    /// Validate and act on one datagram from `source` at `now_us`
    /// (`unix_s`: the wall clock, for ticket expiry).
    pub fn handle_datagram(&mut self, now_us: u64, unix_s: u64, source: SocketAddr, bytes: &[u8]) {
        self.counters.datagrams += 1;
        match bytes.first() {
            Some(&crate::wire::relay::MAGIC) => self.handle_hello(now_us, unix_s, source, bytes),
            Some(&packet::MAGIC) => self.handle_packet(now_us, source, bytes),
            _ => self.counters.not_relay += 1,
        }
    }

    /// The Hello path, in the order the module docs give.
    fn handle_hello(&mut self, now_us: u64, unix_s: u64, source: SocketAddr, bytes: &[u8]) {
        let source = canonical_address(source);
        let limits = self.config.hello_limits;
        let hello = match peek_datagram(bytes) {
            Ok(DatagramPeek::Current(KIND_HELLO)) => read_hello(bytes).ok(),
            Ok(DatagramPeek::OtherVersion(Some(nonce))) => {
                self.counters.unverified_bytes_in += bytes.len() as u64;
                if !self.addresses.allow(source, now_us, &limits) {
                    self.counters.hellos_limited_by_address += 1;
                    return;
                }
                // Written in this relay's own version: the Reject's version
                // byte is how the client learns which version the relay
                // speaks, and the twelve bytes every version keeps in place
                // (`wire::relay::MAGIC`) let a client of any version read it.
                return self.reject(source, RejectReason::WrongVersion, nonce, false);
            }
            _ => None,
        };
        let Some(hello) = hello else {
            self.counters.unverified_bytes_in += bytes.len() as u64;
            self.counters.malformed_hellos += 1;
            return;
        };
        let cookie_now = self.cookie_clock.now(now_us);
        let verified = self.config.cookie_key.check(
            &hello.cookie,
            hello.nonce,
            source,
            cookie_now,
            limits.cookie_lifetime_us,
        );
        if verified.is_none() {
            self.counters.unverified_bytes_in += bytes.len() as u64;
            if !self.addresses.allow(source, now_us, &limits) {
                self.counters.hellos_limited_by_address += 1;
                return;
            }
        }
        let is_verified = verified.is_some();
        let ticket = match verify(&self.config.lobby_secret, &hello.ticket, unix_s) {
            Ok(t) => t,
            Err(reason) => return self.reject(source, reason, hello.nonce, is_verified),
        };
        if !verify_hello_tag(bytes, &ticket.link_secret.0) {
            return self.reject(source, RejectReason::BadTicket, hello.nonce, is_verified);
        }
        let Some(&at) = self.by_id.get(&ticket.fields.match_id) else {
            return self.reject(source, RejectReason::UnknownMatch, hello.nonce, is_verified);
        };
        let seat = ticket.fields.seat;
        let Some(slot) = self.slots[at].as_ref() else {
            return self.reject(source, RejectReason::UnknownMatch, hello.nonce, is_verified);
        };
        let Some(current) = slot.connections.get(usize::from(seat)) else {
            return self.reject(source, RejectReason::BadTicket, hello.nonce, is_verified);
        };
        if let Some(c) = current {
            if c.nonce == hello.nonce && c.address == source {
                // The live connection's Hello again (the Welcome was slow).
                self.counters.duplicate_hellos += 1;
                return;
            }
        }
        match verified {
            None => self.send_cookie(now_us, source, hello.nonce),
            Some(issued_us) => self.admit(
                now_us,
                source,
                &hello,
                (at, seat),
                ticket.link_secret,
                issued_us,
            ),
        }
    }

    /// Answer a Hello that passed every check but the cookie: a Cookie for
    /// this address and nonce, smaller than the Hello.
    fn send_cookie(&mut self, now_us: u64, source: SocketAddr, nonce: u64) {
        let issued_us = self.cookie_clock.issue(now_us);
        let cookie = self.config.cookie_key.mint(issued_us, nonce, source);
        let mut bytes = [0u8; COOKIE_DATAGRAM_BYTES];
        let Some(len) = write_cookie(&CookieChallenge { nonce, cookie }, &mut bytes) else {
            return;
        };
        if self.reply(source, &bytes[..len]) {
            self.counters.cookies_sent += 1;
            self.counters.unverified_bytes_out += len as u64;
        }
    }

    /// Open a connection for a Hello whose cookie (issued at `issued_us`)
    /// proved its address: the replay rule, the per-ticket limit, the
    /// connection rules, then the match.
    fn admit(
        &mut self,
        now_us: u64,
        source: SocketAddr,
        hello: &Hello,
        (at, seat): (usize, u8),
        link_secret: super::ticket::LinkSecret,
        issued_us: u64,
    ) {
        let limits = self.config.hello_limits;
        let conn_id = hello.nonce as u32;
        let live = self.routes.len();
        let Some(slot) = self.slots[at].as_mut() else {
            return;
        };
        let s = usize::from(seat);
        let current_nonce = slot.connections[s].as_ref().map(|c| c.nonce);
        let admission = &mut slot.admission[s];
        // A captured Hello: the live connection's from elsewhere, or a
        // cookie no newer than the seat's last connection's (or the match).
        if current_nonce == Some(hello.nonce)
            || issued_us <= admission.latest_cookie_us
            || issued_us <= slot.created_us
        {
            return self.reject(source, RejectReason::Replayed, hello.nonce, true);
        }
        if !admission
            .connections
            .allow(now_us, limits.ticket_burst, limits.ticket_interval_us)
        {
            self.counters.hellos_limited_by_ticket += 1;
            return;
        }
        let replacing = current_nonce.is_some();
        if self.routes.contains_key(&conn_id) {
            return self.reject(source, RejectReason::ConnectionIdTaken, hello.nonce, true);
        }
        if !replacing && live >= self.config.max_connections {
            return self.reject(source, RejectReason::RelayFull, hello.nonce, true);
        }
        let key = SessionKey(link_secret.connection_key(hello.nonce));
        let identity = LinkIdentity {
            session_id: conn_id,
            key,
            local_seat: RELAY_LINK_SEAT,
            peer_seat: seat,
        };
        let Ok(link) = Link::new(self.config.link, identity, now_us) else {
            return;
        };
        // The match decides last (seat left, match over): nothing changes
        // before every check has passed.
        if let Err(reason) = slot.sequencer.connect(seat, hello.have_horizon, now_us) {
            return self.reject(source, reason, hello.nonce, true);
        }
        slot.admission[s].latest_cookie_us = issued_us;
        let old = slot.connections[s].replace(Connection {
            nonce: hello.nonce,
            address: source,
            key,
            link,
            pending: None,
            finished_since: None,
        });
        if let Some(old) = old {
            self.routes.remove(&(old.nonce as u32));
        }
        let match_id = slot.id;
        self.routes.insert(conn_id, (at, seat));
        self.counters.connections_opened += 1;
        self.mark_dirty(at);
        self.drain_durable(at);
        self.drain_match_events(at);
        self.event(RelayEvent::Opened {
            match_id,
            seat,
            source,
            replaced: replacing,
        });
    }

    fn handle_packet(&mut self, now_us: u64, source: SocketAddr, bytes: &[u8]) {
        let Ok(prefix) = packet::peek(bytes) else {
            self.counters.not_relay += 1;
            return;
        };
        let Some(&(at, seat)) = self.routes.get(&prefix.session_id) else {
            self.counters.unknown_connection += 1;
            return;
        };
        let Some(slot) = self.slots[at].as_mut() else {
            self.counters.unknown_connection += 1;
            return;
        };
        let Some(conn) = slot.connections[usize::from(seat)].as_mut() else {
            self.counters.unknown_connection += 1;
            return;
        };
        if prefix.sender != seat {
            conn.link.count_drop(crate::link::DropReason::UnknownSender);
            self.counters.link_drops += 1;
            self.counters
                .link_drops_by_reason
                .count(crate::link::DropReason::UnknownSender);
            return;
        }
        let source = canonical_address(source);
        let rebound = conn.address != source;
        // Only the newest authentic packet may move the connection (S8):
        // an older one from elsewhere is a replay.
        let received = receive_link_packet(
            &mut conn.link,
            &conn.key,
            RELAY_LINK_SEAT,
            rebound,
            now_us,
            bytes,
        );
        if let Err(reason) = received {
            if reason == crate::link::DropReason::SpoofedAddress {
                self.counters.moves_refused += 1;
            }
            self.counters.link_drops += 1;
            self.counters.link_drops_by_reason.count(reason);
            return;
        }
        conn.address = source;
        let mut bad = 0;
        let mut messages = 0;
        // Into the relay's own buffer: no allocation per message.
        let buf = &mut self.message_buf;
        while let Some(len) = conn.link.recv_into(buf) {
            messages += 1;
            match read_client_message(&buf[..len]) {
                Ok(m) => slot.sequencer.handle_message(seat, now_us, &m),
                Err(_) => bad += 1,
            }
        }
        let match_id = slot.id;
        self.counters.bad_messages += bad;
        self.drain_durable(at);
        if messages == bad {
            // Nothing reached the match (an acknowledgement, mostly): only
            // this connection's link has something to send or a new timer.
            self.schedule.mark_link(at, seat);
        } else {
            self.mark_dirty(at);
        }
        if rebound {
            self.counters.rebinds += 1;
            self.event(RelayEvent::Rebound {
                match_id,
                seat,
                source,
            });
        }
    }

    fn drain_match_events(&mut self, at: usize) {
        while let Some((match_id, event)) = self.slots[at]
            .as_mut()
            .and_then(|s| s.sequencer.poll_event().map(|e| (s.id, e)))
        {
            self.event(RelayEvent::Match { match_id, event });
        }
    }

    /// The earliest time [`handle_timeout`](Self::handle_timeout) has work
    /// (a peek at the timer heap, and the timers of matches changed since
    /// they were last drained).
    pub fn poll_timeout(&self) -> Option<u64> {
        self.schedule.earliest(|at| {
            self.slots[at]
                .as_ref()
                .and_then(|slot| slot.next_deadline(&self.config))
        })
    }

    /// Run every due timer: match clocks, links, closing and removal. Only
    /// the matches with a due timer are visited.
    pub fn handle_timeout(&mut self, now_us: u64) {
        let mut due = std::mem::take(&mut self.due);
        let (slots, config) = (&self.slots, &self.config);
        self.schedule.take_due(
            now_us,
            |at| {
                slots[at]
                    .as_ref()
                    .and_then(|slot| slot.next_deadline(config))
                    .is_some_and(|t| t <= now_us)
            },
            &mut due,
        );
        for &at in &due {
            self.run_match_timers(at, now_us);
        }
        self.due = due;
    }

    /// Match `at`'s due timers at `now_us`.
    fn run_match_timers(&mut self, at: usize, now_us: u64) {
        let Some(slot) = self.slots[at].as_mut() else {
            return;
        };
        if slot.sequencer.poll_timeout().is_some_and(|t| t <= now_us) {
            slot.sequencer.handle_timeout(now_us);
        }
        let mut closed: Vec<(u8, bool)> = Vec::new();
        for seat in 0..slot.connections.len() {
            let Some(conn) = slot.connections[seat].as_mut() else {
                continue;
            };
            if conn.link.poll_timeout().is_some_and(|t| t <= now_us) {
                conn.link.handle_timeout(now_us);
            }
            let mut lost = false;
            while let Some(event) = conn.link.poll_event() {
                lost |= event == LinkEvent::Lost;
            }
            let seat = seat as u8;
            if conn.finished_since.is_none()
                && conn.pending.is_none()
                && slot.sequencer.is_finished_for(seat)
            {
                conn.finished_since = Some(now_us);
            }
            let linger_done = conn
                .finished_since
                .is_some_and(|t| now_us >= t + self.config.close_linger_us);
            if lost || linger_done {
                closed.push((seat, lost));
            }
        }
        let match_id = slot.id;
        for &(seat, _) in &closed {
            if let Some(conn) = slot.connections[usize::from(seat)].take() {
                self.routes.remove(&(conn.nonce as u32));
            }
            slot.sequencer.disconnect(seat, now_us);
        }
        if slot.sequencer.is_over() && slot.over_since.is_none() {
            slot.over_since = Some(now_us);
        }
        let remove = slot
            .over_since
            .is_some_and(|t| now_us >= t + self.config.over_linger_us)
            && slot.connections.iter().all(Option::is_none);
        for (seat, lost) in closed {
            self.event(RelayEvent::Closed {
                match_id,
                seat,
                lost,
            });
        }
        self.drain_match_events(at);
        self.drain_durable(at);
        if remove {
            self.slots[at] = None;
            self.schedule.forget(at);
            self.by_id.remove(&match_id);
            self.event(RelayEvent::Removed { match_id });
        } else {
            self.mark_dirty(at);
        }
    }

    /// Move a connection's due messages from its sequencer into its link.
    fn pump(&mut self, at: usize, seat: usize, now_us: u64) {
        let Some(slot) = self.slots[at].as_mut() else {
            return;
        };
        let Some(conn) = slot.connections[seat].as_mut() else {
            return;
        };
        let limit = conn
            .link
            .config()
            .max_message_bytes()
            .min(MAX_MESSAGE_BYTES);
        loop {
            if let Some(message) = conn.pending.take() {
                match conn.link.send(&message) {
                    Ok(_) => {}
                    Err(Error::Full(_)) => {
                        conn.pending = Some(message);
                        return;
                    }
                    Err(_) => {} // larger than a packet: cannot happen (limit)
                }
            }
            // Straight into the link; a copy is kept only when it is full.
            let buf = &mut self.message_buf[..limit];
            let Some(len) = slot.sequencer.poll_message(seat as u8, now_us, buf) else {
                return;
            };
            match conn.link.send(&buf[..len]) {
                Ok(_) => {}
                Err(Error::Full(_)) => {
                    conn.pending = Some(buf[..len].to_vec());
                    return;
                }
                Err(_) => {} // larger than a packet: cannot happen (limit)
            }
        }
    }

    /// Write the next datagram to send into `buf` (at least 1200 bytes):
    /// where to and its length. Call until `None`.
    pub fn poll_transmit(&mut self, now_us: u64, buf: &mut [u8]) -> Option<(SocketAddr, usize)> {
        if let Some((to, bytes, len)) = self.replies.pop_front() {
            let len = usize::from(len);
            buf.get_mut(..len)?.copy_from_slice(&bytes[..len]);
            return Some((to, len));
        }
        // Only matches whose state changed since they were last drained,
        // and connections that only received an acknowledgement, can have
        // something to send: the cost follows the traffic, not the number
        // of matches.
        while let Some(at) = self.schedule.front() {
            let seats = self.slots[at].as_ref().map_or(0, |s| s.connections.len());
            while self.schedule.seat_cursor < seats {
                let seat = self.schedule.seat_cursor;
                self.pump(at, seat, now_us);
                let conn = self.slots[at]
                    .as_mut()
                    .and_then(|s| s.connections[seat].as_mut());
                if let Some(conn) = conn {
                    if let Some(len) = conn.link.poll_transmit(now_us, buf) {
                        return Some((conn.address, len));
                    }
                }
                self.schedule.seat_cursor += 1;
            }
            if self.schedule.pop_front() {
                let deadline = self.slots[at]
                    .as_ref()
                    .and_then(|slot| slot.next_deadline(&self.config));
                self.schedule.set_deadline(at, deadline);
            }
        }
        while let Some((at, seat)) = self.schedule.front_link() {
            if !self.schedule.is_dirty(at) {
                self.pump(at, usize::from(seat), now_us);
                let conn = self.slots[at]
                    .as_mut()
                    .and_then(|s| s.connections.get_mut(usize::from(seat)))
                    .and_then(Option::as_mut);
                if let Some(conn) = conn {
                    if let Some(len) = conn.link.poll_transmit(now_us, buf) {
                        return Some((conn.address, len));
                    }
                    if let Some(t) = conn.link.poll_timeout() {
                        self.schedule.lower_deadline(at, t);
                    }
                }
            }
            self.schedule.pop_link();
        }
        None
    }
}
