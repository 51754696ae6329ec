//! A player's side of a relayed match (S10), sans-IO.
//!
//! Fed datagrams and time, it says what to send, like a link. It
//!
//! * says Hello (every `hello_interval_us` until a Welcome comes; at once
//!   again with the relay's cookie when its Cookie comes) and opens a
//!   transport link with the connection key derived from its ticket;
//! * keeps every order the relay has not judged and resends them, in
//!   order, after each Welcome, so nothing is lost or executed twice across
//!   reconnects (the relay ignores sequences it already judged); an order
//!   the relay refused is dropped and the engine told which and why
//!   ([`ClientEvent::OrderRefused`]), and the orders after it go on;
//! * sends ephemeral orders (voice, map pings) that are neither kept nor
//!   resent, and hands out those of the others with the tick they came
//!   with, when it is live at that tick;
//! * hands out ticks in order, below the relay's horizon, with one
//!   [`SeatTurn`] per seat: the order, a null order, a quit, or an AI seat;
//! * asks for a resend (ResyncRequest) when a bundle does not start at its
//!   horizon;
//! * pings every `ping_interval_us` and follows the relay's match clock
//!   (S9: [`crate::clock::ClockSync`], the filtered offset steering a
//!   slewed clock, so the estimate never jumps);
//! * keeps the relay's timing plan (Timing messages: tick rate, bundle
//!   interval, look-ahead from a tick on, [`super::timing::TimingPlan`])
//!   and sends the TimingReports the relay's policy reads;
//! * reports checksums the engine computes;
//! * reconnects by itself (fresh nonce, `have_horizon` = its horizon) when
//!   the link is lost, and tells the engine to reload and fast-forward when
//!   the relay cannot resume where it stopped.
//!
//! Randomness (connection nonces) comes from `nonce_seed`: give each client
//! process a different, unpredictable seed.

use std::collections::VecDeque;
use std::net::SocketAddr;

use super::sequencer::DesyncNotice;
use super::ticket::Credentials;
use super::timing::TimingPlan;
use super::{receive_link_packet, RELAY_LINK_SEAT};
use crate::clock::{ClockSample, ClockSync, ClockSyncConfig};
use crate::error::{Error, Result};
use crate::link::{canonical_address, Link, LinkConfig, LinkEvent, LinkIdentity};
use crate::report::Report;
use crate::rng::SplitMix64;
use crate::wire::packet::{self, SessionKey};
use crate::wire::relay::{
    read_cookie, read_reject, read_reject_of_any_version, read_server_message, write_hello,
    ClientMessage, EntryKind, Hello, MatchOverReason, RefusalReason, RejectReason, SeatPresence,
    ServerMessage, TimingChange, TurnBundle, Welcome, COOKIE_BYTES, HELLO_BYTES, KIND_COOKIE,
    MAX_ORDER_BYTES, MAX_SEATS, NO_COOKIE,
};

/// Checksum reports a client keeps to send again after a reconnect.
pub(crate) const KEPT_CHECKSUMS: usize = 64;
/// Most orders a client may have submitted and not yet seen judged: the
/// relay repeats the refusals of that many sequences after each Welcome
/// (the sequencer's `REFUSALS_REPEATED`).
pub const MAX_UNCONFIRMED: usize = super::sequencer::REFUSALS_REPEATED as usize;
/// Ephemeral orders held for ticks not yet run, at most (the oldest go).
pub(crate) const MAX_HELD_EPHEMERAL: usize = 1024;

/// Settings of a relay client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientConfig {
    /// Ticket and link secret from the lobby.
    pub credentials: Credentials,
    /// The relay's address (from the lobby, with the ticket).
    pub relay: SocketAddr,
    /// Every tick below it is already held (0 for a fresh start).
    pub have_horizon: u32,
    /// Seed for connection nonces: different and unpredictable per process.
    pub nonce_seed: u64,
    /// Link settings.
    pub link: LinkConfig,
    /// Resend the Hello this often until a Welcome arrives.
    pub hello_interval_us: u64,
    /// Ping the relay this often (S10: 500 ms).
    pub ping_interval_us: u64,
    /// Most orders submitted and not yet judged by the relay, 1 to
    /// [`MAX_UNCONFIRMED`].
    pub max_unconfirmed: usize,
}

impl ClientConfig {
    /// Defaults: 250 ms Hello interval, 500 ms pings, 256 unconfirmed
    /// orders, links with a 5 s liveness timeout.
    pub fn new(credentials: Credentials, relay: SocketAddr, nonce_seed: u64) -> ClientConfig {
        ClientConfig {
            credentials,
            relay,
            have_horizon: 0,
            nonce_seed,
            link: super::relay_link_config(),
            hello_interval_us: 250_000,
            ping_interval_us: 500_000,
            max_unconfirmed: MAX_UNCONFIRMED,
        }
    }
}

/// What one seat does at one tick.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SeatTurn {
    /// An AI seat: the engine computes it locally.
    Ai,
    /// A human seat with no order: a null order.
    Null,
    /// A human order.
    Order(Vec<u8>),
    /// The seat quits at this tick, with its quit as a game order (possibly
    /// empty).
    Quit(Vec<u8>),
    /// The seat is dropped at this tick (its reconnect grace ran out).
    Dropped,
    /// The seat left at an earlier tick.
    Gone,
}

/// One tick to execute.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Turn {
    /// The tick.
    pub tick: u32,
    /// One entry per seat.
    pub seats: Vec<SeatTurn>,
    /// Ephemeral orders that came with the tick: (seat, order). Not part
    /// of the game's state: a client that catches up never sees them.
    pub ephemeral: Vec<(u8, Vec<u8>)>,
}

/// Something the engine should know.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientEvent {
    /// The relay accepted this connection.
    Welcomed {
        /// The setup and where the bundles resume.
        welcome: Welcome,
        /// The relay could not resume at our horizon: drop the game state,
        /// reload, and execute from `resume_from_tick` (0).
        reload: bool,
        /// Ticks below it follow at once: execute them as fast as possible.
        fast_forward_until: u32,
    },
    /// The relay refused the Hello for good.
    Rejected(RejectReason),
    /// The relay refused the Hello for a reason worth retrying; retrying.
    Retrying(RejectReason),
    /// The link was lost; reconnecting.
    ConnectionLost,
    /// Seat states changed.
    Presence {
        /// Seats.
        seat_count: u8,
        /// States of seats `0..seat_count`.
        states: [SeatPresence; MAX_SEATS],
    },
    /// Clients disagree about the state at a tick.
    Desync(DesyncNotice),
    /// The match is over: no more ticks after `final_tick`.
    MatchOver {
        /// Final horizon.
        final_tick: u32,
        /// Why.
        reason: MatchOverReason,
    },
    /// The relay refused an order ([`RelayClient::submit_order`]'s id; a
    /// refused quit: the seat stays). It will never run; the orders after
    /// it are judged on their own.
    OrderRefused {
        /// The id `submit_order` (or `quit`) returned.
        id: u64,
        /// Why.
        reason: RefusalReason,
        /// Whether it was the seat's quit.
        quit: bool,
    },
}

/// Counters of a client.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ClientCounters {
    /// Hellos sent.
    pub hellos: u64,
    /// Cookies received (the relay's return-routability challenge, one per
    /// connection attempt).
    pub cookies: u64,
    /// Welcomes received.
    pub welcomes: u64,
    /// Orders resent after a Welcome.
    pub orders_resent: u64,
    /// Bundle chunks wholly below the horizon (duplicates after a resync).
    pub stale_bundles: u64,
    /// Bundle gaps seen.
    pub gaps: u64,
    /// ResyncRequests sent.
    pub resync_requests: u64,
    /// Datagrams dropped (wrong source, other connection, link checks).
    pub dropped: u64,
    /// Messages or entries that did not decode or fit the setup.
    pub bad_messages: u64,
    /// Orders the relay refused.
    pub orders_refused: u64,
    /// Ephemeral orders received and handed out with their tick.
    pub ephemeral_received: u64,
    /// Ephemeral orders dropped: for a tick already run, or too many held.
    pub ephemeral_dropped: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Connecting { last_hello_us: Option<u64> },
    Connected,
    Closed,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Unconfirmed {
    /// The id handed to the caller (never renumbered).
    id: u64,
    sequence: u32,
    quit: bool,
    payload: Vec<u8>,
}

/// A received bundle entry: tick, seat, kind, order.
type HeldEntry = (u32, u8, EntryKind, Vec<u8>);

#[derive(Debug)]
struct Connection {
    nonce: u64,
    key: SessionKey,
    link: Link,
    have_horizon: u32,
    /// The relay's cookie for this nonce, once its Cookie came.
    cookie: [u8; COOKIE_BYTES],
}

/// A player's connection to a relayed match. See the module docs.
#[derive(Debug)]
pub struct RelayClient {
    config: ClientConfig,
    seat: u8,
    rng: SplitMix64,
    phase: Phase,
    conn: Connection,
    welcome: Option<Welcome>,
    ever_welcomed: bool,
    /// Ticks below it are authorised.
    horizon: u32,
    /// Next tick to hand out.
    next_tick: u32,
    /// Entries at or above `next_tick` and below `horizon`, by (tick, seat).
    ready: VecDeque<HeldEntry>,
    /// Entries of a `MORE` chunk series, and its range.
    partial: Option<(u32, u32, Vec<HeldEntry>)>,
    left_mask: u16,
    unconfirmed: VecDeque<Unconfirmed>,
    next_sequence: u32,
    next_id: u64,
    /// Ephemeral orders for ticks not yet handed out: (tick, seat, order).
    ephemeral: VecDeque<(u32, u8, Vec<u8>)>,
    outbox: VecDeque<Vec<u8>>,
    resync_asked: Option<u32>,
    checksums: VecDeque<(u32, u64)>,
    last_ping_us: Option<u64>,
    clock: ClockSync,
    has_clock: bool,
    /// The relay's timing plan, once it announced one (matches with a
    /// timing policy); `plan_fresh`: the next Timing starts it anew (after
    /// a Welcome).
    plan: Option<TimingPlan>,
    plan_fresh: bool,
    over: bool,
    events: VecDeque<ClientEvent>,
    counters: ClientCounters,
    /// When `handle_datagram` or `handle_timeout` last ran (freeze detection).
    last_call_us: Option<u64>,
    /// The relay protocol version of a relay that refused this client
    /// because it speaks another (read from its Reject).
    relay_version: Option<u8>,
}

impl RelayClient {
    /// A client that starts saying Hello at `now_us`.
    pub fn new(config: ClientConfig, now_us: u64) -> Result<RelayClient> {
        config.link.validate()?;
        if !(1..=MAX_UNCONFIRMED).contains(&config.max_unconfirmed) {
            return Err(Error::invalid_value(
                "max_unconfirmed",
                config.max_unconfirmed,
                "1 to 256 (the refusals the relay repeats)",
            ));
        }
        let fields = config.credentials.fields()?;
        let mut rng = SplitMix64::new(config.nonce_seed);
        let conn = Self::open(&config, fields.seat, &mut rng, config.have_horizon, now_us)?;
        Ok(RelayClient {
            config,
            seat: fields.seat,
            rng,
            phase: Phase::Connecting {
                last_hello_us: None,
            },
            conn,
            welcome: None,
            ever_welcomed: false,
            horizon: config.have_horizon,
            next_tick: config.have_horizon,
            ready: VecDeque::new(),
            partial: None,
            left_mask: 0,
            unconfirmed: VecDeque::new(),
            next_sequence: 1,
            next_id: 1,
            ephemeral: VecDeque::new(),
            outbox: VecDeque::new(),
            resync_asked: None,
            checksums: VecDeque::new(),
            last_ping_us: None,
            clock: ClockSync::new(ClockSyncConfig::default())?,
            has_clock: false,
            plan: None,
            plan_fresh: true,
            over: false,
            events: VecDeque::new(),
            counters: ClientCounters::default(),
            last_call_us: None,
            relay_version: None,
        })
    }

    fn open(
        config: &ClientConfig,
        seat: u8,
        rng: &mut SplitMix64,
        have_horizon: u32,
        now_us: u64,
    ) -> Result<Connection> {
        let mut nonce = 0;
        while nonce == 0 {
            nonce = rng.next_u64();
        }
        let key = SessionKey(config.credentials.link_secret.connection_key(nonce));
        let link = Link::new(
            config.link,
            LinkIdentity {
                session_id: nonce as u32,
                key,
                local_seat: seat,
                peer_seat: RELAY_LINK_SEAT,
            },
            now_us,
        )?;
        Ok(Connection {
            nonce,
            key,
            link,
            have_horizon,
            cookie: NO_COOKIE,
        })
    }

    fn reconnect(&mut self, now_us: u64) {
        if let Ok(conn) = Self::open(&self.config, self.seat, &mut self.rng, self.horizon, now_us) {
            self.conn = conn;
            self.phase = Phase::Connecting {
                last_hello_us: None,
            };
            self.outbox.clear();
            self.partial = None;
            self.resync_asked = None;
        }
    }

    /// Reconnect at once when this process was not run for most of the
    /// liveness timeout (a freeze: a debugger, a swapped-out machine, a long
    /// load); whether it did.
    ///
    /// The relay's link to us went silent for as long and it closes the
    /// connection after its liveness timeout (5 s, the same link settings),
    /// but our own link may look alive: the socket buffered what the relay
    /// sent before closing, so without this the client would wait out its
    /// own 5 s liveness timeout before saying Hello again. A gap of 3/4 of
    /// the timeout leaves a margin for the relay having heard us last a
    /// little before our last call; reconnecting when the relay still held
    /// the connection costs one Hello and Welcome (the new connection
    /// replaces the old, bundles resume at our horizon, unconfirmed orders
    /// are resent), nothing executed twice or lost.
    fn reconnect_after_freeze(&mut self, now_us: u64) -> bool {
        let gap = self
            .last_call_us
            .map_or(0, |last| now_us.saturating_sub(last));
        self.last_call_us = Some(now_us);
        let suspect = gap >= self.conn.link.liveness_timeout_us() / 4 * 3;
        if suspect && self.phase == Phase::Connected && !self.over {
            self.events.push_back(ClientEvent::ConnectionLost);
            self.reconnect(now_us);
            return true;
        }
        false
    }

    /// Hold a whole turn log instead of talking to a relay (a replay,
    /// [`crate::session::LockstepSession::replay`]): welcomed with the
    /// log's setup, every tick below its end authorised, the match over
    /// after it; nothing is ever sent. `Invalid` when this client's
    /// seat is not a human seat of the log's match.
    pub fn load_turn_log(&mut self, log: &super::TurnLog) -> Result<()> {
        if usize::from(self.seat) >= usize::from(log.seat_count)
            || log.human_mask & (1 << self.seat) == 0
        {
            return Err(Error::invalid_value(
                "the replaying seat",
                self.seat,
                "a human seat of the turn log's match",
            ));
        }
        let welcome = Welcome {
            seat: self.seat,
            seat_count: log.seat_count,
            human_mask: log.human_mask,
            tick_rate_millihz: log.tick_rate_millihz,
            bundle_interval: 1,
            ai_order_delay: log.ai_order_delay,
            checksum_interval: log.checksum_interval,
            relay_tick: log.end_tick,
            resume_from_tick: 0,
            horizon_tick: log.end_tick,
            highest_accepted_sequence: 0,
            match_started: true,
            frequent_reports: false,
        };
        self.welcome = Some(welcome);
        self.ever_welcomed = true;
        self.phase = Phase::Closed;
        self.over = true;
        self.horizon = log.end_tick;
        self.next_tick = 0;
        self.left_mask = 0;
        self.ready = log
            .entries
            .iter()
            .map(|e| (e.tick, e.seat, e.kind, e.payload.to_vec()))
            .collect();
        self.outbox.clear();
        self.unconfirmed.clear();
        self.events.push_back(ClientEvent::Welcomed {
            welcome,
            reload: false,
            fast_forward_until: log.end_tick,
        });
        self.events.push_back(ClientEvent::MatchOver {
            final_tick: log.end_tick,
            reason: log.over.unwrap_or(MatchOverReason::Ended),
        });
        Ok(())
    }

    /// This client's seat.
    pub fn seat(&self) -> u8 {
        self.seat
    }

    /// The match setup, once welcomed.
    pub fn welcome(&self) -> Option<&Welcome> {
        self.welcome.as_ref()
    }

    /// Whether a connection is up.
    pub fn is_connected(&self) -> bool {
        self.phase == Phase::Connected
    }

    /// Whether the client is done (refused for good, quit and closed, or match over).
    pub fn is_closed(&self) -> bool {
        self.phase == Phase::Closed
    }

    /// Ticks below it are authorised for execution.
    pub fn horizon(&self) -> u32 {
        self.horizon
    }

    /// The next tick [`next_turn`](Self::next_turn) hands out.
    pub fn next_tick(&self) -> u32 {
        self.next_tick
    }

    /// Orders not yet judged by the relay.
    pub fn unconfirmed(&self) -> usize {
        self.unconfirmed.len()
    }

    /// Bytes held for the engine and the relay: ticks received and not yet
    /// handed out, a bundle being assembled, unconfirmed orders, messages
    /// waiting for the link, kept checksum reports (all bounded: the
    /// horizon only moves forward by what the relay sends, orders by
    /// `max_unconfirmed`).
    pub fn held_bytes(&self) -> usize {
        let entry = |e: &HeldEntry| e.3.len() + 8;
        self.ready.iter().map(entry).sum::<usize>()
            + self
                .partial
                .as_ref()
                .map_or(0, |p| p.2.iter().map(entry).sum::<usize>())
            + self
                .unconfirmed
                .iter()
                .map(|u| u.payload.len() + 8)
                .sum::<usize>()
            + self.outbox.iter().map(Vec::len).sum::<usize>()
            + self.checksums.len() * 12
            + self.ephemeral.iter().map(|e| e.2.len() + 8).sum::<usize>()
    }

    /// Counters.
    pub fn counters(&self) -> &ClientCounters {
        &self.counters
    }

    /// The relay protocol version the relay speaks, when it refused this
    /// client for speaking another ([`ClientEvent::Rejected`] with
    /// `WrongVersion`): its Reject's version byte. `None` otherwise.
    pub fn relay_version(&self) -> Option<u8> {
        self.relay_version
    }

    /// The link of the current connection (round trip, stats).
    pub fn link(&self) -> &Link {
        &self.conn.link
    }

    /// The relay's match clock minus the local clock (µs) as applied now
    /// (slewing toward the filtered estimate), once pongs came.
    pub fn clock_offset_us(&self) -> Option<i64> {
        self.has_clock.then(|| self.clock.applied_offset_us())
    }

    /// The filtered estimate of the offset the applied one slews toward.
    pub fn clock_estimate_us(&self) -> Option<i64> {
        self.clock.estimate().map(|e| e.offset_us)
    }

    /// The relay's match clock at local time `now_us` (µs), once pinged:
    /// never backwards, never a jump (S9). Advances the slew to `now_us`.
    pub fn relay_clock_us(&mut self, now_us: u64) -> Option<i64> {
        if !self.has_clock {
            return None;
        }
        self.clock.reference_time(now_us as i64).ok()
    }

    /// The relay's timing plan, once it announced one.
    pub fn timing_plan(&self) -> Option<&TimingPlan> {
        self.plan.as_ref()
    }

    /// When this client runs `tick`: relay match time in ms, by the relay's
    /// timing plan, or for a match without a timing policy by the Welcome's
    /// rate and bundle interval with `look_ahead = local_jitter_ticks`.
    /// `None` before the Welcome.
    pub fn due_ms(&self, tick: u32, local_jitter_ticks: u8) -> Option<u64> {
        if let Some(plan) = &self.plan {
            return Some(plan.tick_start_ms(plan.due_tick(tick)));
        }
        let fixed = self.fixed_timing(local_jitter_ticks)?;
        Some(fixed.tick_start_ms(fixed.due_tick(tick)))
    }

    /// The single timing of a match without a policy, from the Welcome.
    fn fixed_timing(&self, local_jitter_ticks: u8) -> Option<TimingChange> {
        let w = self.welcome?;
        Some(TimingChange {
            from_tick: 0,
            anchor_tick: 0,
            anchor_ms: 0,
            tick_rate_millihz: w.tick_rate_millihz,
            bundle_interval: w.bundle_interval,
            look_ahead: local_jitter_ticks.max(1),
        })
    }

    /// The relay tick estimated at local time `now_us`, once welcomed and pinged.
    pub fn estimated_relay_tick(&self, now_us: u64) -> Option<u32> {
        let elapsed = now_us as i64 + self.clock_offset_us()?;
        let elapsed = u64::try_from(elapsed).unwrap_or(0);
        match &self.plan {
            Some(plan) => Some(plan.tick_at(elapsed)),
            None => Some(self.fixed_timing(1)?.tick_at(elapsed)),
        }
    }

    /// Send what this client measured over its last report interval (S3)
    /// to the relay's timing policy. Dropped while not connected (the next
    /// report follows within 128 ticks, 16 under `tracking`).
    pub fn report_timing(&mut self, report: Report) {
        // A round trip beyond the protocol's bound is reported as the bound
        // (every one of them, so the detail's order still holds).
        let bound = |ms: Option<u32>| ms.map(|ms| ms.min(crate::wire::relay::MAX_REPORTED_RTT_MS));
        let report = Report {
            worst_rtt_ms: bound(report.worst_rtt_ms),
            detail: report.detail.map(|d| crate::report::ReportDetail {
                median_rtt_ms: bound(d.median_rtt_ms),
                p90_rtt_ms: bound(d.p90_rtt_ms),
                latest_rtt_ms: bound(d.latest_rtt_ms),
                ..d
            }),
            ..report
        };
        let message = ClientMessage::TimingReport(report).to_vec();
        if self.phase == Phase::Connected && !message.is_empty() {
            self.outbox.push_back(message);
        }
    }

    /// The next event.
    pub fn poll_event(&mut self) -> Option<ClientEvent> {
        self.events.pop_front()
    }

    /// Submit an order; it is sent now if connected, and kept until the
    /// relay has judged it. Its id (for [`ClientEvent::OrderRefused`]).
    /// `Error::Full` when `max_unconfirmed` are waiting.
    pub fn submit_order(&mut self, payload: &[u8]) -> Result<u64> {
        if payload.len() > MAX_ORDER_BYTES {
            return Err(Error::invalid_value(
                "the order's length",
                payload.len(),
                "at most 512 bytes",
            ));
        }
        self.submit(false, payload)
    }

    /// Leave the match: the quit is sequenced like an order. Its id.
    pub fn quit(&mut self) -> Result<u64> {
        self.submit(true, &[])
    }

    /// Leave the match with the seat's quit as a game order (`payload`, at
    /// most 512 bytes): it runs on every client on the tick the seat
    /// leaves, with its removal. Its id.
    pub fn quit_with_order(&mut self, payload: &[u8]) -> Result<u64> {
        if payload.len() > MAX_ORDER_BYTES {
            return Err(Error::invalid_value(
                "the order's length",
                payload.len(),
                "at most 512 bytes",
            ));
        }
        self.submit(true, payload)
    }

    /// Send an ephemeral order (voice, a ping on the map): at most 512
    /// bytes, not kept, never resent, never in the turn log; it runs with
    /// the tick the relay gives it on every client that is live then, and
    /// on no other. `Error::State` when not connected (it would not be
    /// sent at all).
    pub fn submit_ephemeral(&mut self, payload: &[u8]) -> Result<()> {
        if payload.len() > MAX_ORDER_BYTES {
            return Err(Error::invalid_value(
                "the order's length",
                payload.len(),
                "at most 512 bytes",
            ));
        }
        if self.phase != Phase::Connected || self.over {
            return Err(Error::State(
                "not connected to the relay: ephemeral orders are not kept",
            ));
        }
        self.outbox
            .push_back(ClientMessage::EphemeralSubmit { payload }.to_vec());
        Ok(())
    }

    fn submit(&mut self, quit: bool, payload: &[u8]) -> Result<u64> {
        if self.over || self.phase == Phase::Closed {
            return Err(Error::State("the match is over for this client"));
        }
        if self.unconfirmed.len() >= self.config.max_unconfirmed {
            return Err(Error::Full("unconfirmed orders"));
        }
        if self.unconfirmed.back().is_some_and(|u| u.quit) {
            return Err(Error::State("already quitting"));
        }
        let id = self.next_id;
        self.next_id += 1;
        let entry = Unconfirmed {
            id,
            sequence: self.next_sequence,
            quit,
            payload: payload.to_vec(),
        };
        self.next_sequence += 1;
        if self.phase == Phase::Connected {
            self.outbox.push_back(Self::encode(&entry));
        }
        self.unconfirmed.push_back(entry);
        Ok(id)
    }

    fn encode(u: &Unconfirmed) -> Vec<u8> {
        if u.quit {
            ClientMessage::Quit {
                sequence: u.sequence,
                payload: &u.payload,
            }
            .to_vec()
        } else {
            ClientMessage::OrderSubmit {
                sequence: u.sequence,
                payload: &u.payload,
            }
            .to_vec()
        }
    }

    /// Report the state checksum *before* tick `tick` runs (after `tick - 1`;
    /// for tick 0 the initial state), on every `checksum_interval`-th tick.
    /// The latest 64 reports (`KEPT_CHECKSUMS`) are kept and sent again after
    /// each Welcome, so a report made while disconnected still reaches the
    /// relay (which ignores repeats).
    pub fn report_checksum(&mut self, tick: u32, checksum: u64) {
        if self.checksums.len() >= KEPT_CHECKSUMS {
            self.checksums.pop_front();
        }
        self.checksums.push_back((tick, checksum));
        if self.phase == Phase::Connected {
            self.outbox
                .push_back(ClientMessage::ChecksumReport { tick, checksum }.to_vec());
        }
    }

    /// The next tick to execute, if the relay has authorised it.
    pub fn next_turn(&mut self) -> Option<Turn> {
        let w = self.welcome?;
        if self.next_tick >= self.horizon {
            return None;
        }
        let tick = self.next_tick;
        let mut seats: Vec<SeatTurn> = (0..w.seat_count)
            .map(|s| {
                if w.human_mask & (1 << s) == 0 {
                    SeatTurn::Ai
                } else if self.left_mask & (1 << s) != 0 {
                    SeatTurn::Gone
                } else {
                    SeatTurn::Null
                }
            })
            .collect();
        while self.ready.front().is_some_and(|e| e.0 == tick) {
            let Some((_, seat, kind, payload)) = self.ready.pop_front() else {
                break;
            };
            let Some(slot) = seats.get_mut(usize::from(seat)) else {
                continue;
            };
            if *slot != SeatTurn::Null {
                continue; // validated on receipt; a Gone seat cannot act
            }
            *slot = match kind {
                EntryKind::Order => SeatTurn::Order(payload),
                EntryKind::Quit => SeatTurn::Quit(payload),
                EntryKind::Dropped => SeatTurn::Dropped,
            };
            if kind != EntryKind::Order {
                self.left_mask |= 1 << seat;
            }
        }
        while self.ephemeral.front().is_some_and(|e| e.0 < tick) {
            self.ephemeral.pop_front(); // for a tick handed out before it came
            self.counters.ephemeral_dropped += 1;
        }
        let mut ephemeral = Vec::new();
        while self.ephemeral.front().is_some_and(|e| e.0 == tick) {
            if let Some((_, seat, order)) = self.ephemeral.pop_front() {
                ephemeral.push((seat, order));
            }
        }
        self.next_tick += 1;
        if let Some(plan) = self.plan.as_mut() {
            plan.forget_before(tick);
        }
        Some(Turn {
            tick,
            seats,
            ephemeral,
        })
    }

    /// Validate and act on a datagram from `source`.
    pub fn handle_datagram(&mut self, now_us: u64, source: SocketAddr, bytes: &[u8]) {
        self.reconnect_after_freeze(now_us);
        if canonical_address(source) != canonical_address(self.config.relay)
            || self.phase == Phase::Closed
        {
            self.counters.dropped += 1;
            return;
        }
        match bytes.first() {
            Some(&crate::wire::relay::MAGIC) if bytes.get(2) == Some(&KIND_COOKIE) => {
                self.handle_cookie(bytes)
            }
            Some(&crate::wire::relay::MAGIC) => self.handle_reject(now_us, bytes),
            Some(&packet::MAGIC) => self.handle_packet(now_us, bytes),
            _ => self.counters.dropped += 1,
        }
    }

    /// The relay's return-routability challenge: say Hello again at once,
    /// with the cookie.
    fn handle_cookie(&mut self, bytes: &[u8]) {
        let Ok(challenge) = read_cookie(bytes) else {
            self.counters.dropped += 1;
            return;
        };
        if challenge.nonce != self.conn.nonce || !matches!(self.phase, Phase::Connecting { .. }) {
            self.counters.dropped += 1; // not ours, or stale
            return;
        }
        self.counters.cookies += 1;
        self.conn.cookie = challenge.cookie;
        self.phase = Phase::Connecting {
            last_hello_us: None,
        };
    }

    fn handle_reject(&mut self, now_us: u64, bytes: &[u8]) {
        let Ok(reject) = read_reject(bytes) else {
            self.handle_reject_of_another_version(bytes);
            return;
        };
        if reject.nonce != self.conn.nonce || self.phase == Phase::Connected {
            self.counters.dropped += 1; // not ours, or stale
            return;
        }
        if reject.reason.is_retryable() {
            self.events.push_back(ClientEvent::Retrying(reject.reason));
            self.reconnect(now_us);
        } else {
            self.events.push_back(ClientEvent::Rejected(reject.reason));
            self.phase = Phase::Closed;
        }
    }

    /// A Reject this build cannot read as its own: one of another relay
    /// protocol version for this connection's nonce means the relay speaks
    /// that version (whatever its reason byte says: this build cannot
    /// connect to it), final; anything else is dropped.
    fn handle_reject_of_another_version(&mut self, bytes: &[u8]) {
        let foreign = read_reject_of_any_version(bytes).ok().filter(|r| {
            r.version != crate::wire::relay::VERSION
                && r.nonce == self.conn.nonce
                && self.phase != Phase::Connected
        });
        let Some(reject) = foreign else {
            self.counters.dropped += 1;
            return;
        };
        self.relay_version = Some(reject.version);
        self.events
            .push_back(ClientEvent::Rejected(RejectReason::WrongVersion));
        self.phase = Phase::Closed;
    }

    fn handle_packet(&mut self, now_us: u64, bytes: &[u8]) {
        let valid_prefix = packet::peek(bytes)
            .is_ok_and(|p| p.session_id == self.conn.nonce as u32 && p.sender == RELAY_LINK_SEAT);
        if !valid_prefix
            || receive_link_packet(
                &mut self.conn.link,
                &self.conn.key,
                self.seat,
                false,
                now_us,
                bytes,
            )
            .is_err()
        {
            self.counters.dropped += 1;
            return;
        }
        while let Some(message) = self.conn.link.recv() {
            match read_server_message(&message) {
                Ok(m) => self.handle_message(now_us, m),
                Err(_) => self.counters.bad_messages += 1,
            }
        }
    }

    fn handle_message(&mut self, now_us: u64, message: ServerMessage<'_>) {
        match message {
            ServerMessage::Welcome(w) => self.on_welcome(w),
            ServerMessage::Presence {
                seat_count, states, ..
            } => self
                .events
                .push_back(ClientEvent::Presence { seat_count, states }),
            ServerMessage::TurnBundle(b) => self.on_bundle(&b),
            ServerMessage::Pong {
                t0_us,
                t1_us,
                t2_us,
                highest_accepted_sequence,
                ..
            } => {
                self.confirm(highest_accepted_sequence);
                if t1_us >= 0 {
                    if let Ok(sample) = ClockSample::new(t0_us, t1_us, t2_us, now_us as i64) {
                        self.has_clock |= self.clock.add_sample(sample, now_us as i64).is_ok();
                    }
                }
            }
            ServerMessage::Timing(change) => self.on_timing(change),
            ServerMessage::Desync {
                tick,
                reported_mask,
                disagreeing_mask,
            } => self.events.push_back(ClientEvent::Desync(DesyncNotice {
                tick,
                reported_mask,
                disagreeing_mask,
            })),
            ServerMessage::MatchOver { final_tick, reason } => {
                self.over = true;
                self.events
                    .push_back(ClientEvent::MatchOver { final_tick, reason });
            }
            ServerMessage::OrderRefused { sequence, reason } => self.on_refused(sequence, reason),
            ServerMessage::Ephemeral {
                tick,
                seat,
                payload,
            } => self.on_ephemeral(tick, seat, payload),
        }
    }

    /// The relay refused `sequence`: drop it (it never runs) and say so.
    /// Refusals come before the Welcome that confirms what follows them; a
    /// fresh process has no orders under the relay's numbering yet.
    fn on_refused(&mut self, sequence: u32, reason: RefusalReason) {
        if !self.ever_welcomed {
            return;
        }
        let Some(at) = self.unconfirmed.iter().position(|u| u.sequence == sequence) else {
            return; // heard before (repeated after a Welcome)
        };
        if let Some(refused) = self.unconfirmed.remove(at) {
            self.counters.orders_refused += 1;
            self.events.push_back(ClientEvent::OrderRefused {
                id: refused.id,
                reason,
                quit: refused.quit,
            });
        }
    }

    /// An ephemeral order for `tick`: held until the tick is handed out.
    fn on_ephemeral(&mut self, tick: u32, seat: u8, payload: &[u8]) {
        if !self.entry_fits_setup(seat) {
            self.counters.bad_messages += 1;
            return;
        }
        if tick < self.next_tick {
            self.counters.ephemeral_dropped += 1;
            return;
        }
        if self.ephemeral.len() >= MAX_HELD_EPHEMERAL {
            self.ephemeral.pop_front();
            self.counters.ephemeral_dropped += 1;
        }
        self.counters.ephemeral_received += 1;
        // The relay sends them in tick order; keep it if one came late.
        let at = self.ephemeral.partition_point(|e| e.0 <= tick);
        self.ephemeral.insert(at, (tick, seat, payload.to_vec()));
    }

    fn on_welcome(&mut self, w: Welcome) {
        if w.seat != self.seat {
            self.counters.bad_messages += 1;
            return;
        }
        self.counters.welcomes += 1;
        let reload = w.resume_from_tick < self.conn.have_horizon;
        if reload || w.resume_from_tick != self.horizon {
            // Start over from where the relay resumes.
            self.horizon = w.resume_from_tick;
            self.next_tick = w.resume_from_tick;
            self.ready.clear();
            self.ephemeral.clear();
            self.left_mask = 0;
        }
        self.partial = None;
        if !self.ever_welcomed {
            // A fresh process numbers its orders after what the relay has.
            let mut sequence = w.highest_accepted_sequence;
            for u in &mut self.unconfirmed {
                sequence += 1;
                u.sequence = sequence;
            }
            self.next_sequence = sequence + 1;
            self.ever_welcomed = true;
        }
        self.confirm(w.highest_accepted_sequence);
        self.next_sequence = self
            .next_sequence
            .max(w.highest_accepted_sequence.saturating_add(1));
        self.outbox.clear();
        for u in &self.unconfirmed {
            self.outbox.push_back(Self::encode(u));
            self.counters.orders_resent += 1;
        }
        if reload {
            self.checksums.clear(); // they describe a state being replaced
        }
        for &(tick, checksum) in &self.checksums {
            self.outbox
                .push_back(ClientMessage::ChecksumReport { tick, checksum }.to_vec());
        }
        self.welcome = Some(w);
        self.plan_fresh = true;
        self.phase = Phase::Connected;
        self.events.push_back(ClientEvent::Welcomed {
            welcome: w,
            reload,
            fast_forward_until: w.horizon_tick,
        });
    }

    fn on_timing(&mut self, change: TimingChange) {
        let taken = match self.plan.as_mut() {
            Some(plan) if !self.plan_fresh => plan.announce(change),
            _ if change.is_valid() => {
                // The first Timing after a Welcome stands for every tick
                // before it too: the relay sends the change in force first.
                let mut plan = TimingPlan::new(change);
                plan.reset(change);
                self.plan = Some(plan);
                true
            }
            _ => false,
        };
        if taken {
            self.plan_fresh = false;
        } else {
            self.counters.bad_messages += 1;
        }
    }

    fn confirm(&mut self, highest: u32) {
        while self
            .unconfirmed
            .front()
            .is_some_and(|u| u.sequence <= highest)
        {
            self.unconfirmed.pop_front();
        }
    }

    fn entry_fits_setup(&self, seat: u8) -> bool {
        self.welcome
            .is_some_and(|w| seat < w.seat_count && w.human_mask & (1 << seat) != 0)
    }

    fn on_bundle(&mut self, b: &TurnBundle<'_>) {
        if b.horizon_tick <= self.horizon {
            self.counters.stale_bundles += 1;
            return;
        }
        let continuing = self
            .partial
            .as_ref()
            .is_some_and(|p| (p.0, p.1) == (b.from_tick, b.horizon_tick));
        if b.from_tick > self.horizon && !continuing {
            self.counters.gaps += 1;
            self.partial = None;
            if self.resync_asked != Some(self.horizon) {
                self.resync_asked = Some(self.horizon);
                self.counters.resync_requests += 1;
                self.outbox.push_back(
                    ClientMessage::ResyncRequest {
                        horizon: self.horizon,
                    }
                    .to_vec(),
                );
            }
            return;
        }
        if !continuing {
            self.partial = Some((b.from_tick, b.horizon_tick, Vec::new()));
        }
        let horizon = self.horizon;
        let mut entries = Vec::new();
        for e in b.entries() {
            if e.tick < horizon {
                continue; // already held (overlap after a resync)
            }
            if !self.entry_fits_setup(e.seat) {
                self.counters.bad_messages += 1;
                continue;
            }
            entries.push((e.tick, e.seat, e.kind, e.payload.to_vec()));
        }
        let Some(partial) = self.partial.as_mut() else {
            return;
        };
        for e in entries {
            if partial.2.last().map_or(true, |l| (l.0, l.1) < (e.0, e.1)) {
                partial.2.push(e);
            }
        }
        if b.more {
            return;
        }
        if let Some((_, to, entries)) = self.partial.take() {
            self.ready.extend(entries);
            self.horizon = to;
            self.resync_asked = None;
        }
    }

    /// Fire due timers: the link's, pings.
    pub fn handle_timeout(&mut self, now_us: u64) {
        if self.phase == Phase::Closed || self.reconnect_after_freeze(now_us) {
            return;
        }
        if self.conn.link.poll_timeout().is_some_and(|t| t <= now_us) {
            self.conn.link.handle_timeout(now_us);
        }
        let mut lost = false;
        while let Some(event) = self.conn.link.poll_event() {
            lost |= event == LinkEvent::Lost;
        }
        if lost && !self.over {
            self.events.push_back(ClientEvent::ConnectionLost);
            self.reconnect(now_us);
            return;
        }
        if self.phase == Phase::Connected
            && self
                .last_ping_us
                .map_or(true, |t| now_us >= t + self.config.ping_interval_us)
        {
            self.last_ping_us = Some(now_us);
            self.outbox.push_back(
                ClientMessage::Ping {
                    t0_us: now_us as i64,
                }
                .to_vec(),
            );
        }
    }

    /// The earliest time [`handle_timeout`](Self::handle_timeout) or
    /// [`poll_transmit`](Self::poll_transmit) has work.
    pub fn poll_timeout(&self) -> Option<u64> {
        if self.phase == Phase::Closed {
            return None;
        }
        let link = self.conn.link.poll_timeout();
        let other = match self.phase {
            Phase::Connecting { last_hello_us } => {
                Some(last_hello_us.map_or(0, |t| t + self.config.hello_interval_us))
            }
            Phase::Connected => Some(
                self.last_ping_us
                    .map_or(0, |t| t + self.config.ping_interval_us),
            ),
            Phase::Closed => None,
        };
        match (link, other) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Write the next datagram into `buf` (at least 1200 bytes): where to and
    /// its length. Call until `None`.
    pub fn poll_transmit(&mut self, now_us: u64, buf: &mut [u8]) -> Option<(SocketAddr, usize)> {
        if self.phase == Phase::Closed {
            return None;
        }
        if let Phase::Connecting { last_hello_us } = self.phase {
            let due = last_hello_us.map_or(true, |t| now_us >= t + self.config.hello_interval_us);
            if due && buf.len() >= HELLO_BYTES {
                let hello = Hello {
                    nonce: self.conn.nonce,
                    have_horizon: self.conn.have_horizon,
                    ticket: self.config.credentials.ticket,
                    cookie: self.conn.cookie,
                };
                let len = write_hello(&hello, &self.config.credentials.link_secret.0, buf)?;
                self.phase = Phase::Connecting {
                    last_hello_us: Some(now_us),
                };
                self.counters.hellos += 1;
                return Some((self.config.relay, len));
            }
        }
        while let Some(message) = self.outbox.pop_front() {
            if let Err(e) = self.conn.link.send(&message) {
                if matches!(e, Error::Full(_)) {
                    self.outbox.push_front(message);
                }
                break;
            }
        }
        let len = self.conn.link.poll_transmit(now_us, buf)?;
        Some((self.config.relay, len))
    }
}
