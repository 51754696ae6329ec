//! A lockstep session over rungs' own transport (S5, S8, S9): rungs carries
//! the engine's commands, runs the adaptive timing, and paces the frames.
//!
//! One [`LockstepSession`] per machine, sans-IO: the caller feeds datagrams
//! and its local clock (µs), sends what [`LockstepSession::poll_transmit`]
//! writes, and calls [`LockstepSession::advance`] whenever the next frame may
//! be due ([`LockstepDriver`] does all of that over a UDP socket). The engine
//! submits commands between frames and applies the commands each executed
//! frame hands back; every machine executes the same commands on the same
//! frames.
//!
//! The pieces, one concern each:
//! - [`turns`]: the shared schedule of send frames, the outbox, the item
//!   store, the assembly of peers' turns — all bounded (S8);
//! - [`drops`]: votes, cuts and relays for players whose machines vanished;
//! - [`checksums`]: desync checks;
//! - [`pings`]: clock samples from the master (S9);
//! - [`update`]: the update loop every caller shares (the `rungs-net`
//!   crate wraps it around a socket).
//!
//! **Turns** (seed 000's compressed mode). On every send frame `s` each
//! machine sends every peer one *turn*: the commands issued since its
//! previous send frame, tagged `s + look_ahead(s)` (S5), plus rungs' own
//! events (its report, the master's timing event, a removal), its state
//! checksums and, from the master, the frame-clock anchor. Turns travel as
//! reliable, ordered link messages, split into numbered parts when large
//! ([`crate::wire::turn`]); an empty turn still goes out, because it says
//! "nothing from me up to here".
//!
//! **Readiness.** The send frames and their tags are the same on every
//! machine, so a machine knows which turns may hold commands due by frame
//! `F`: every turn up to the last send frame whose tag is at or before `F`.
//! Frame `F` runs only when every present peer's turns up to there have
//! arrived — and every link can take this machine's next turn (S8
//! backpressure: a frame is never half run); otherwise the machine waits,
//! and the wait goes into its reports (S3). Commands due on a frame that is
//! not a send frame execute on the next send frame (S5), in (tag, seat,
//! issue order).
//!
//! **What a peer's turn must be.** Its send frame is the next one of the
//! schedule after that peer's previous turn, and its tag the one the
//! schedule gives that frame; a turn ahead of this machine's own schedule is
//! held (bounded) until the schedule reaches it and is checked then. A turn
//! beyond the horizon a peer can legitimately be at is refused and counted.
//!
//! **Authority (S4.7)**, checked on execution, so identically everywhere: a
//! removal executes only for its sender's own seat or out of the agreed drop;
//! a timing event only from the seat that was master when its turn was sent.
//! Refusals are counted in [`LockstepStats::refused_items`].
//!
//! **Clock and pacing (S9).** Every machine other than the master pings the
//! master; the master answers with its *reference time* (for the first
//! master, its own clock). Samples feed a [`ClockSync`] (seed 003's filter,
//! slewed). Each machine paces frames with a [`FramePacer`] on reference
//! time; the master's turns carry an anchor "frame N ideally starts at T" so
//! every pacer steers toward the same schedule.
//!
//! **Checksums.** The engine hands in a state checksum every
//! `checksum_interval` frames; it travels with the next turn and every
//! machine compares the values it has for a frame; a mismatch is reported as
//! a desync (frame, seats that differ from the lowest seat's value).
//!
//! **Leaving and dropping.** A player that quits calls
//! [`LockstepSession::leave`]: its removal is a command like any other and
//! it keeps running until that executes. A player whose machine vanished —
//! its link lost for the liveness timeout, or its machine restarted — is
//! dropped by every survivor, who agree on the cut of its turns ([`drops`],
//! [`agreement`]); an engine that wants to decide itself sets
//! [`LockstepConfig::manual_drops`] and calls
//! [`LockstepSession::drop_player`].

pub mod agreement;
mod arrivals;
mod checksums;
mod drops;
mod pings;
mod relay;
mod stalls;
mod turns;
mod update;

use std::collections::VecDeque;
use std::net::SocketAddr;

use crate::clock::{ClockSync, ClockSyncConfig, FramePacer, PacerConfig};
use crate::error::{Error, Result};
use crate::link::{Endpoint, EndpointConfig, LinkConfig, LinkEvent, Transmit};
use crate::report::record::MAX_SEATS;
use crate::report::Measurements;
use crate::timing::{MachineConfig, Output, TimingMachine};
use crate::wire::packet::{SessionKey, MAX_MESSAGE_BYTES};
use crate::wire::turn::{self, Item, Message, Record};

use arrivals::TurnArrivals;
use checksums::Checksums;
use drops::Drops;
use pings::ClockPings;
use relay::RelayLockstep;
pub use relay::{
    OrderKind, OrderReceipt, RelaySettings, DEFAULT_JITTER_TICKS, MAX_OPEN_AI_DECISIONS,
    MAX_PENDING_AI_ORDERS,
};
use stalls::StallWatch;
use turns::{Inbound, ItemStore, Origin, Outbox, SendSchedule, Stored, TurnBuffers};
pub use update::{Wake, IDLE_WAKE_US};

/// Control messages (votes, relay requests, relays, pongs) waiting for room
/// on a full link, at most.
const MAX_PENDING_CONTROL: usize = 4096;

/// How to set up a lockstep session.
#[derive(Debug, Clone)]
pub struct LockstepConfig {
    /// Speed, seats, this machine's seat (required), timing policy.
    pub machine: MachineConfig,
    /// The game's session id and key, the same on every machine (S8).
    pub session_id: u32,
    pub key: SessionKey,
    /// Per-pair link keys: `(peer seat, key)` for the link between this
    /// machine and that peer, used instead of `key` (S8). Game setup gives
    /// both ends of each pair the same key and nobody else; then no player
    /// can sign a packet as another, which the single game key (known to
    /// every player) cannot prevent.
    pub link_keys: Vec<(u8, SessionKey)>,
    /// This run's connection epoch (S8, never 0): a machine that restarts
    /// must use a newer one (serial order), e.g. milliseconds of wall-clock
    /// time modulo 2^32.
    pub epoch: u32,
    /// Link tunables.
    pub link: LinkConfig,
    /// Frames between state checksums; 0 for none.
    pub checksum_interval: u32,
    /// Peer-to-peer links, or a relay (S10).
    pub topology: Topology,
    /// `false` (the default): a player whose link is lost for the liveness
    /// timeout (`link.liveness_timeout_us`) or whose machine restarted is
    /// dropped at once (S4.7). `true`: the engine decides, calling
    /// [`LockstepSession::drop_player`] (the survivors still join a drop
    /// another machine started once they lose that player too).
    pub manual_drops: bool,
}

impl LockstepConfig {
    /// A relay-topology session (S10) for `machine` (speed, seats, this
    /// machine's seat: the ticket's), reporting checksums every
    /// `checksum_interval` frames: the fields only peer-to-peer uses are
    /// left at neutral values.
    pub fn relay(
        machine: MachineConfig,
        checksum_interval: u32,
        settings: RelaySettings,
    ) -> LockstepConfig {
        LockstepConfig {
            machine,
            session_id: 0,
            key: SessionKey([0; 16]),
            link_keys: Vec::new(),
            epoch: 1,
            link: LinkConfig::default(),
            checksum_interval,
            topology: Topology::Relay(settings),
            manual_drops: false,
        }
    }
}

/// How a session's commands travel: the same session API either way.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Topology {
    /// A link to every other human seat ([`LockstepSession::add_peer`]),
    /// turns and timing agreed between the machines (this module).
    #[default]
    PeerToPeer,
    /// One link to a relay that sequences every order and owns the clock
    /// (see [`relay`](self::relay)); `session_id`, `key`, `link_keys`,
    /// `epoch`, `link` and the timing policy are unused (the relay link has
    /// its own settings, [`crate::relay::relay_link_config`]), there are no
    /// peers to add, and a frame is one relay tick: the relay's tick rate is
    /// the game's frame rate.
    Relay(RelaySettings),
}

/// What the engine should hear about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionEvent {
    /// The timing machine's notices: timing in force changed (also on frame
    /// 0), frame rate changed, a player message (S6), a new master (S4.6).
    Timing(Output),
    /// `seat` left or was dropped; its removal executed on `frame`.
    PlayerRemoved { frame: u32, seat: u8 },
    /// State checksums for `frame` differ: bit `i` of `seats` set for each
    /// seat whose value differs from the lowest reporting seat's.
    Desync { frame: u32, seats: u32 },
    /// Nothing heard from `seat` for the liveness timeout (S8): rungs drops
    /// it (unless [`LockstepConfig::manual_drops`]: then the engine decides).
    LinkLost { seat: u8 },
    /// `seat` is heard again.
    LinkRecovered { seat: u8 },
    /// `seat`'s machine restarted (a new connection, S8): its link was
    /// reset, and what it had sent or was owed is gone; a restarted machine
    /// cannot rejoin a running game, so rungs drops it (unless
    /// [`LockstepConfig::manual_drops`]: then the engine does).
    PeerRestarted { seat: u8 },
    /// Behind a relay: the relay refused the order with this id
    /// ([`LockstepSession::submit_order`]); it never runs, and the orders
    /// after it go on. A refused quit leaves the player in the game.
    CommandRefused {
        id: u64,
        reason: crate::wire::relay::RefusalReason,
    },
}

/// What [`LockstepSession::advance`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Advance {
    /// Frame `frame` ran; its commands are in [`LockstepSession::executed`].
    Ran { frame: u32 },
    /// The next frame is due at local time `at_us`.
    NotDue { at_us: u64 },
    /// The next frame is due but waits for peers' turns, for room on a
    /// link (backpressure) or, before frame 0, for the first clock sample.
    Waiting,
    /// This machine's player has left the game.
    Left,
}

/// A command executed on a frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecutedCommand {
    /// Who issued it.
    pub seat: u8,
    /// The frame it was tagged for (it executed on the first send frame at or after).
    pub tag: u32,
    /// The engine's bytes.
    pub bytes: Vec<u8>,
}

/// Counters for tools and diagnostics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LockstepStats {
    /// Frames that had to wait for peers' turns.
    pub stalled_frames: u64,
    /// Total time spent waiting, µs.
    pub stall_us: u64,
    /// Turn messages sent (one per peer per send frame, more if split).
    pub turn_messages: u64,
    /// Messages from peers that did not decode (never acted on).
    pub malformed_messages: u64,
    /// Desyncs detected.
    pub desyncs: u64,
    /// Items refused by the authority checks (S4.7), identically on every
    /// machine: a removal of another seat outside a drop, a timing event
    /// from a seat that was not the master.
    pub refused_items: u64,
    /// Messages refused on receipt: a turn outside the schedule or beyond
    /// the bounds (S8), a relay from a machine this one did not ask or
    /// outside a drop it joined, a relay request to a machine that is not
    /// in that drop.
    pub refused_messages: u64,
    /// Frames that waited because a link could not take the next turn.
    pub backpressure_waits: u64,
}

/// One machine's lockstep session. See the module docs.
pub struct LockstepSession {
    machine: TimingMachine,
    endpoint: Endpoint,
    measurements: Measurements,
    local_seat: u8,
    checksum_interval: u32,
    store: ItemStore,
    outbox: Outbox,
    schedule: SendSchedule,
    inbound: Vec<Inbound>,
    drops: Drops,
    /// Control messages waiting for room on a full link.
    pending_control: VecDeque<(u8, Vec<u8>)>,
    /// Players that left whose links linger until lost: they may still
    /// need a drop decided to run their last frames ([`drops`]).
    lingering: u32,
    /// The engine drops vanished players itself.
    manual_drops: bool,
    left: bool,
    /// `leave` was called: no more commands.
    leaving: bool,
    checksums: Checksums,
    frame: Option<u32>,
    executed: Vec<ExecutedCommand>,
    events: VecDeque<SessionEvent>,
    clock: ClockSync,
    pings: ClockPings,
    pacer: Option<FramePacer>,
    /// The open wait for turns, and what counts as a stall ([`stalls`]).
    stalls: StallWatch,
    last_local_us: u64,
    stats: LockstepStats,
    receive_buffer: Vec<u8>,
    turn_buffers: TurnBuffers,
    /// Per seat: the link's sample count last fed to the measurements.
    rtt_samples_seen: [u64; MAX_SEATS],
    /// Per-pair keys, applied as each peer is added.
    link_keys: Vec<(u8, SessionKey)>,
    /// The relay topology, when chosen: it then answers every call of the
    /// session API, and the peer-to-peer state above stays idle.
    relay: Option<Box<RelayLockstep>>,
    /// When each peer's turns arrived: the look-ahead frames needed.
    arrivals: TurnArrivals,
}

impl LockstepSession {
    /// A session on the eve of frame 0, at local time `now_us`. Add every
    /// other human seat's address with [`add_peer`](Self::add_peer) before
    /// the first [`advance`](Self::advance).
    pub fn new(config: &LockstepConfig, now_us: u64) -> Result<LockstepSession> {
        let local_seat = config.machine.local_seat.ok_or(Error::InvalidArgument(
            "a lockstep session needs a local seat",
        ))?;
        let machine = TimingMachine::new(&config.machine)?;
        let relay = match &config.topology {
            Topology::PeerToPeer => None,
            Topology::Relay(settings) => Some(Box::new(RelayLockstep::new(
                settings,
                local_seat,
                &config.machine.human_seats,
                config.checksum_interval,
                now_us,
            )?)),
        };
        // The idle peer-to-peer endpoint of a relay session needs some key.
        let key = match &config.topology {
            Topology::Relay(settings) if config.key.is_zero() => {
                SessionKey(settings.credentials.link_secret.0)
            }
            _ => config.key,
        };
        let mut endpoint = Endpoint::new(EndpointConfig {
            session_id: config.session_id,
            key,
            local_seat,
            link: config.link,
        })?;
        endpoint.set_epoch(config.epoch)?;
        let seats = machine.seats().clone();
        for (seat, key) in &config.link_keys {
            let valid = seats.is_human(*seat) && *seat != local_seat;
            if !valid {
                return Err(Error::InvalidArgument(
                    "link_keys names a seat that is not another human seat",
                ));
            }
            if key.is_zero() {
                return Err(Error::InvalidArgument("a link key is all zero"));
            }
        }
        let mut measurements = Measurements::new();
        let arrivals = TurnArrivals::new(
            seats
                .present()
                .filter(|s| *s != local_seat && relay.is_none()),
        );
        if relay.is_some() {
            // Behind a relay the one round trip that matters is to the relay.
            measurements.add_peer(crate::relay::RELAY_LINK_SEAT)?;
        } else {
            for seat in seats.present().filter(|s| *s != local_seat) {
                measurements.add_peer(seat)?;
            }
        }
        let max_message_bytes = config.link.max_message_bytes();
        Ok(LockstepSession {
            machine,
            endpoint,
            measurements,
            local_seat,
            checksum_interval: config.checksum_interval,
            store: ItemStore::default(),
            outbox: Outbox::new(max_message_bytes),
            schedule: SendSchedule::default(),
            inbound: (0..MAX_SEATS).map(|_| Inbound::default()).collect(),
            drops: Drops::default(),
            pending_control: VecDeque::new(),
            lingering: 0,
            manual_drops: config.manual_drops,
            left: false,
            leaving: false,
            checksums: Checksums::default(),
            frame: None,
            executed: Vec::new(),
            events: VecDeque::new(),
            clock: ClockSync::new(ClockSyncConfig::default())?,
            pings: ClockPings::new(now_us),
            pacer: None,
            stalls: StallWatch::default(),
            last_local_us: now_us,
            stats: LockstepStats::default(),
            receive_buffer: Vec::new(),
            turn_buffers: TurnBuffers::default(),
            rtt_samples_seen: [0; MAX_SEATS],
            link_keys: config.link_keys.clone(),
            arrivals,
            relay,
        })
    }

    /// Bind the human `seat` to `address` (before frame 0).
    pub fn add_peer(&mut self, seat: u8, address: SocketAddr, now_us: u64) -> Result<()> {
        if self.relay.is_some() {
            return Err(Error::State(
                "a relay-topology session has no peers to add: the relay connects the seats",
            ));
        }
        if !self.is_human(seat) {
            return Err(Error::UnknownSeat(seat));
        }
        self.endpoint.add_peer(seat, address, now_us)?;
        if let Some((_, key)) = self.link_keys.iter().find(|(s, _)| *s == seat) {
            self.endpoint.set_link_key(seat, *key)?;
        }
        Ok(())
    }

    /// The human seats other than this one that have no address yet: what a
    /// forgotten [`add_peer`](Self::add_peer) leaves.
    pub fn peers_without_address(&self) -> u32 {
        if self.relay.is_some() {
            return 0;
        }
        (0..self.machine.seats().count())
            .filter(|s| {
                *s != self.local_seat && self.is_human(*s) && self.endpoint.link(*s).is_none()
            })
            .fold(0, |mask, s| mask | 1 << s)
    }

    fn is_human(&self, seat: u8) -> bool {
        self.machine.seats().is_human(seat)
    }

    /// Whether `seat` is a human player still in the game.
    fn is_present(&self, seat: u8) -> bool {
        self.machine.seats().is_present(seat)
    }

    /// Seats present in the game (human, not removed), this one included.
    fn present(&self) -> impl Iterator<Item = u8> + '_ {
        self.machine.seats().present()
    }

    /// Present peers this machine still plays with (not being dropped).
    fn peers(&self) -> impl Iterator<Item = u8> + '_ {
        self.present()
            .filter(|s| *s != self.local_seat && !self.drops.is_dropping(*s))
    }

    /// Issue a command (the engine's bytes) now: it goes out with this
    /// machine's next turn. Returns the frame it is forecast to execute on or
    /// after (S5). Nothing changes when it fails: `Error::Full` when this
    /// machine's next turn cannot take it (S8 backpressure: run a frame, or
    /// send fewer or smaller commands).
    pub fn submit_command(&mut self, bytes: &[u8]) -> Result<u32> {
        if let Some(relay) = self.relay.as_mut() {
            return relay.submit_command(bytes);
        }
        if self.left || self.leaving {
            return Err(Error::State(
                "this player has left (or is leaving) the game",
            ));
        }
        let room = self.endpoint.config().link.max_message_bytes()
            - turn::TURN_HEADER_BYTES
            - turn::ITEM_HEADER_BYTES;
        if bytes.len() > room.min(usize::from(u16::MAX)) {
            return Err(Error::InvalidArgument("command too large for one packet"));
        }
        let item = Item::Command(bytes.to_vec());
        if !self.outbox.has_room_for(&item) {
            return Err(Error::Full(
                "this machine's next turn is full; run a frame before submitting more",
            ));
        }
        self.outbox.push_command(item);
        let issued_on = match self.frame {
            Some(f) => f.saturating_add(1),
            None => 0,
        };
        Ok(self.machine.forecast_tag(issued_on))
    }

    /// Behind a relay: an order the engine's AI decided for the AI `seat`
    /// with the state after the last frame run, i.e. at tick `F + 1`. Every
    /// machine computes the same AI, so the order stays local: it executes
    /// with the commands of tick `F + 1 + ai_order_delay` (the match setup's,
    /// 0–8, S10), delivered like a human order with that seat. Returns that
    /// tick. `State` peer-to-peer (the engine runs its AI itself there) and
    /// before the relay's Welcome; `InvalidArgument` for a seat that is not
    /// an AI seat of the match or an order over 512 bytes (as a human
    /// order); `Full` beyond 4096 orders waiting.
    pub fn submit_ai_order(&mut self, seat: u8, bytes: &[u8]) -> Result<u32> {
        match self.relay.as_mut() {
            Some(relay) => relay.submit_ai_order(seat, bytes),
            None => Err(Error::State(
                "AI orders go through the session only behind a relay; peer-to-peer the engine runs its AI itself",
            )),
        }
    }

    /// The engine's state checksum after `frame` executed. Only frames that
    /// are multiples of the checksum interval are compared.
    pub fn submit_checksum(&mut self, frame: u32, checksum: u64) -> Result<()> {
        if let Some(relay) = self.relay.as_mut() {
            return relay.submit_checksum(frame, checksum);
        }
        if self.checksum_interval == 0 || frame % self.checksum_interval != 0 {
            return Err(Error::InvalidArgument("not a checksum frame"));
        }
        self.outbox.push_record(Record::Checksum {
            frame,
            value: checksum,
        });
        self.note_checksum(frame, self.local_seat, checksum);
        Ok(())
    }

    /// Leave the game: the removal of this seat is a command like any other;
    /// keep calling `advance` until it returns [`Advance::Left`].
    pub fn leave(&mut self) -> Result<()> {
        if let Some(relay) = self.relay.as_mut() {
            return relay.leave();
        }
        if self.left || self.leaving {
            return Err(Error::State("already left or leaving"));
        }
        self.leaving = true;
        self.outbox.push_own(Item::Removal(self.local_seat));
        Ok(())
    }

    /// Drop `seat`, whose machine no longer answers (see [`drops`]); rungs
    /// does it by itself unless [`LockstepConfig::manual_drops`]. Every
    /// remaining machine follows once it loses that player too. Dropping a
    /// seat already being dropped changes nothing.
    pub fn drop_player(&mut self, seat: u8) -> Result<()> {
        if self.relay.is_some() {
            return Err(Error::State(
                "a relay-topology session drops no one: the relay drops a seat after its reconnect grace",
            ));
        }
        if seat == self.local_seat || !self.is_present(seat) {
            return Err(Error::UnknownSeat(seat));
        }
        self.join_drop(seat);
        Ok(())
    }

    /// Send a control message now, or once the link has room.
    fn send_control(&mut self, seat: u8, message: &[u8]) {
        // Behind a message already waiting for the same seat, to keep order.
        let waiting = self.pending_control.iter().any(|(s, _)| *s == seat);
        if !waiting && self.endpoint.send(seat, message).is_ok() {
            return;
        }
        if self.pending_control.len() < MAX_PENDING_CONTROL {
            self.pending_control.push_back((seat, message.to_vec()));
        }
    }

    /// Send what waits for room, per seat in order; a full link holds back
    /// only its own messages (a vanished peer's full link must not hold the
    /// votes that drop it).
    fn flush_control(&mut self) {
        let mut blocked = 0u32;
        let mut index = 0;
        while index < self.pending_control.len() {
            let (seat, message) = &self.pending_control[index];
            let seat = *seat;
            if blocked & (1 << seat) != 0 {
                index += 1;
                continue;
            }
            let gone = self.reachable() & 1 << seat == 0;
            match if gone {
                Ok(0)
            } else {
                self.endpoint.send(seat, message)
            } {
                Err(Error::Full(_)) => {
                    blocked |= 1 << seat;
                    index += 1;
                }
                // Sent, or for a seat that is gone: done with it.
                Ok(_) | Err(_) => {
                    self.pending_control.remove(index);
                }
            }
        }
    }

    /// Validate and act on one datagram from `source` at local time `now_us`.
    pub fn handle_datagram(&mut self, now_us: u64, source: SocketAddr, datagram: &[u8]) {
        if let Some(relay) = self.relay.as_mut() {
            return relay.handle_datagram(now_us, source, datagram, &mut self.measurements);
        }
        self.last_local_us = self.last_local_us.max(now_us);
        let Ok(from) = self.endpoint.handle_datagram(now_us, source, datagram) else {
            self.collect_link_events();
            return; // dropped and counted by the endpoint
        };
        // Every round-trip sample goes into the report interval as it is
        // taken (S3: the interval's worst), even while frames stall.
        if let Some(link) = self.endpoint.link(from) {
            let samples = link.rtt().samples();
            if samples != self.rtt_samples_seen[usize::from(from)] {
                self.rtt_samples_seen[usize::from(from)] = samples;
                let _ = self.measurements.sample_rtt(
                    from,
                    link.has_clean_measurement(),
                    link.latest_rtt_ms(),
                );
            }
        }
        // Messages are copied into one reused buffer: no allocation per message.
        let mut message = std::mem::take(&mut self.receive_buffer);
        message.resize(MAX_MESSAGE_BYTES, 0);
        // Only the link this datagram came to has messages: every call
        // drains them all.
        while let Ok(Some(len)) = self.endpoint.recv_from_into(from, &mut message) {
            if self.handle_message(now_us, from, &message[..len]).is_err() {
                self.stats.malformed_messages += 1;
            }
        }
        self.receive_buffer = message;
        self.collect_link_events();
        self.flush_control();
    }

    /// Whether this machine hears nothing from `seat` (its link is lost).
    fn is_unheard(&self, seat: u8) -> bool {
        self.endpoint.link(seat).map_or(true, |link| link.is_lost())
    }

    fn collect_link_events(&mut self) {
        while let Some((seat, event)) = self.endpoint.poll_event() {
            let gone = matches!(event, LinkEvent::Lost | LinkEvent::Restarted);
            if gone && self.lingering & 1 << seat != 0 {
                // A player that left is gone for good now.
                self.lingering &= !(1 << seat);
                let _ = self.endpoint.remove_peer(seat);
                self.progress_drops();
                continue;
            }
            // Dropped by default; else only once others drop it and this
            // machine lost it too.
            let named = event == LinkEvent::Lost && self.drops.is_named(seat);
            if gone && (!self.manual_drops || named) && self.is_present(seat) {
                self.join_drop(seat);
            }
            self.events.push_back(match event {
                LinkEvent::Lost => SessionEvent::LinkLost { seat },
                LinkEvent::Recovered => SessionEvent::LinkRecovered { seat },
                LinkEvent::Restarted => SessionEvent::PeerRestarted { seat },
            });
        }
    }

    fn handle_message(&mut self, now_us: u64, seat: u8, message: &[u8]) -> Result<()> {
        let buffers = &mut self.turn_buffers;
        buffers.ready_for_decode();
        match turn::decode_reusing(message, &mut buffers.next_items, &mut buffers.next_records)? {
            Message::Turn(part) => {
                self.receive_part(seat, part, message, false);
                Ok(())
            }
            Message::Ping { t0 } => {
                self.on_ping(now_us, seat, t0);
                Ok(())
            }
            Message::Pong { t0, t1, t2 } => self.on_pong(now_us, seat, t0, t1, t2),
            Message::DropVote {
                dropped,
                holds,
                dropping,
            } => self.on_drop_vote(seat, dropped, holds, dropping),
            Message::RelayRequest { dropped, after } => self.on_relay_request(seat, dropped, after),
            Message::DropDecided { dropped, cut } => self.on_drop_decided(seat, dropped, cut),
            Message::Relay { dropped, part } => {
                self.on_relay(seat, dropped, part, &message[turn::RELAY_HEADER_BYTES..]);
                Ok(())
            }
        }
    }

    /// Reference (master) time at local time `now_us`; the local clock until
    /// the first clock sample.
    fn reference_now(&mut self, now_us: u64) -> i64 {
        let local = now_us as i64;
        if self.clock.estimate().is_some() {
            self.clock.reference_time(local).unwrap_or(local)
        } else {
            local
        }
    }

    fn is_master(&self) -> bool {
        self.machine.master() == Some(self.local_seat)
    }

    /// Fire transport timers and send clock pings that are due.
    pub fn handle_timeout(&mut self, now_us: u64) {
        if let Some(relay) = self.relay.as_mut() {
            return relay.handle_timeout(now_us);
        }
        self.last_local_us = self.last_local_us.max(now_us);
        self.endpoint.handle_timeout(now_us);
        self.collect_link_events();
        self.flush_control();
        self.send_ping_if_due(now_us);
    }

    /// The earliest local time at which something is due: a transport timer,
    /// a clock ping, or the next frame (unless it is waiting for turns: then
    /// an arriving datagram is what can release it). After leaving only the
    /// transport's timers remain (its last acks), never a time in the past.
    pub fn poll_timeout(&mut self) -> Option<u64> {
        if let Some(relay) = self.relay.as_ref() {
            return relay.poll_timeout();
        }
        let mut next = self.endpoint.poll_timeout();
        if self.left {
            return next;
        }
        if !self.is_master() {
            let ping = self.pings.next_us();
            next = Some(next.map_or(ping, |t| t.min(ping)));
        }
        // A frame waiting for turns is released by a datagram, not by time.
        if !self.stalls.is_waiting() {
            if let Some(due) = self.next_frame_local_due() {
                next = Some(next.map_or(due, |t| t.min(due)));
            }
        }
        next
    }

    /// Local time at which the next frame is due, if paced yet.
    fn next_frame_local_due(&mut self) -> Option<u64> {
        let due = self.pacer.as_ref()?.next_frame_due().due_us;
        let offset = self.reference_now(self.last_local_us) - self.last_local_us as i64;
        Some((due - offset).max(0) as u64)
    }

    /// Write the next datagram to send into `buf`.
    pub fn poll_transmit(&mut self, now_us: u64, buf: &mut [u8]) -> Option<Transmit> {
        if let Some(relay) = self.relay.as_mut() {
            return relay.poll_transmit(now_us, buf);
        }
        self.endpoint.poll_transmit(now_us, buf)
    }

    /// The next event for the engine.
    pub fn poll_event(&mut self) -> Option<SessionEvent> {
        if let Some(relay) = self.relay.as_mut() {
            return relay.poll_event();
        }
        self.events.pop_front()
    }

    /// Commands executed by the latest frame [`advance`](Self::advance) ran,
    /// in execution order.
    pub fn executed(&self) -> &[ExecutedCommand] {
        if let Some(relay) = self.relay.as_ref() {
            return relay.executed();
        }
        &self.executed
    }

    /// The seats the next frame is waiting for (their turns have not all
    /// arrived), as a bit mask: what a "waiting for players" screen shows.
    pub fn waiting_for(&self) -> u32 {
        if let Some(relay) = self.relay.as_ref() {
            return relay.waiting_for();
        }
        let next = self.frame.map_or(0, |f| f + 1);
        self.missing_for(next)
            .fold(0, |mask, seat| mask | 1 << seat)
    }

    /// Run the next frame if it is due at local time `now_us` and ready.
    /// Once a frame starts it runs whole: an error leaves no frame half run.
    pub fn advance(&mut self, now_us: u64) -> Result<Advance> {
        if let Some(relay) = self.relay.as_mut() {
            return relay.advance(now_us, &mut self.measurements);
        }
        self.last_local_us = self.last_local_us.max(now_us);
        if self.left {
            return Ok(Advance::Left);
        }
        let next_frame = self.frame.map_or(0, |f| f + 1);
        if next_frame == 0 && self.peers_without_address() != 0 {
            return Err(Error::State(
                "a human seat has no address: call add_peer (C: rungs_lockstep_add_peer) for every other human seat before the first update",
            ));
        }
        if next_frame == 0 && !self.is_master() && self.clock.estimate().is_none() {
            return Ok(Advance::Waiting);
        }
        let now_ref = self.reference_now(now_us);
        if self.pacer.is_none() {
            self.pacer = Some(FramePacer::new(PacerConfig {
                fps: self.machine.fps(),
                reference_frame: next_frame,
                reference_start_us: now_ref,
                max_nudge_permille: crate::clock::pacer::DEFAULT_MAX_NUDGE_PERMILLE,
            })?);
        }
        let due = self
            .pacer
            .as_ref()
            .map_or(now_ref, |p| p.next_frame_due().due_us);
        if now_ref < due {
            let offset = now_ref - now_us as i64;
            return Ok(Advance::NotDue {
                at_us: (due - offset).max(0) as u64,
            });
        }
        let ready = self.missing_for(next_frame).next().is_none();
        let room = self.links_have_room();
        if !room {
            self.stats.backpressure_waits += 1;
        }
        if !ready || !room {
            if !self.stalls.is_waiting() {
                // Whose turn it waits for goes into the report (tracking);
                // looked up once, as the wait opens.
                let seat = self.missing_for(next_frame).next();
                self.stalls.waiting(now_us, || seat);
            }
            return Ok(Advance::Waiting);
        }
        let frame_us = 1_000_000 / u64::from(self.machine.fps().max(1));
        if let Some(until) = self.stalls.cushion(now_us, frame_us) {
            return Ok(Advance::NotDue { at_us: until });
        }
        let due_local = u64::try_from(due - (now_ref - now_us as i64)).unwrap_or(0);
        self.measure_need(next_frame, now_us, due_local, frame_us);
        let late =
            self.stalls
                .frame_starts(now_us, frame_us, &mut self.measurements, &mut self.stats);
        if self.is_master() {
            // The master's schedule is where it actually is: re-anchor so
            // nobody races to catch up after a stall, nor while the master
            // itself runs more than a frame behind (a CPU slower than the
            // rate was, before the rate came down to it: the others would
            // wait for its turns on every frame until it caught up).
            if let Some(pacer) = self.pacer.as_mut() {
                let frame_us = 1_000_000 / i64::from(pacer.fps().max(1));
                if late || now_ref - due > frame_us {
                    let _ = pacer.set_reference(next_frame, now_ref);
                }
            }
        }
        self.run_frame(next_frame, now_ref)?;
        Ok(if self.left {
            Advance::Left
        } else {
            Advance::Ran { frame: next_frame }
        })
    }

    fn run_frame(&mut self, frame: u32, now_ref: i64) -> Result<()> {
        self.executed.clear();
        // Checked before anything changes: the only way `begin_frame` fails.
        let start = self.machine.begin_frame(frame)?;
        self.frame = Some(frame);
        if start.executes_commands {
            while let Some(due) = self.machine.pop_due() {
                let Some(stored) = self.store.take(due.item) else {
                    continue;
                };
                self.execute(frame, due.seat, due.tag, stored);
            }
        }
        if let Some(pacer) = self.pacer.as_mut() {
            let _ = pacer.frame_started(frame, now_ref);
        }
        self.collect_machine_outputs();
        if !self.left {
            if self
                .machine
                .report_due(frame, self.measurements.unreported_stalls())
            {
                let report = self.measurements.take_report();
                // The master raises for its own stall with the report, not
                // a look-ahead after it (decision 50).
                // Fails only with no frame open; this one is.
                if let Ok(Some(event)) = self.machine.raise_for_own_stall(&report) {
                    self.outbox.push_own(Item::Timing(event));
                }
                self.outbox.push_own(Item::Report(report));
            }
            // Fails only out of frame order, which `begin_frame` just ruled out.
            if let Ok(Some(event)) = self.machine.end_frame() {
                self.outbox.push_own(Item::Timing(event));
            }
            if self.machine.is_send_frame() {
                self.send_turn(frame);
            }
        }
        self.accept_reached_turns();
        Ok(())
    }

    /// Execute one due item, after the authority checks (S4.7).
    fn execute(&mut self, frame: u32, seat: u8, tag: u32, stored: Stored) {
        match (stored.item, stored.origin) {
            (Item::Command(bytes), _) => self.executed.push(ExecutedCommand { seat, tag, bytes }),
            (Item::Report(report), _) => {
                let _ = self.machine.execute_report(seat, report);
            }
            (Item::Timing(event), Origin::Turn { send_frame }) => {
                let master_when_sent = self.schedule.get(send_frame).and_then(|s| s.master);
                if master_when_sent == Some(seat) {
                    let _ = self.machine.execute_timing_event(seat, event);
                } else {
                    self.stats.refused_items += 1;
                }
            }
            (Item::Removal(removed), Origin::Turn { .. }) if removed == seat => {
                self.execute_removal(frame, removed, true)
            }
            (Item::Removal(removed), Origin::Drop) => self.execute_removal(frame, removed, false),
            (Item::Removal(_), Origin::Turn { .. }) | (Item::Timing(_), Origin::Drop) => {
                self.stats.refused_items += 1;
            }
        }
    }

    /// `seat`'s removal executes: it `left` by itself, or it was dropped.
    fn execute_removal(&mut self, frame: u32, seat: u8, left: bool) {
        // A repeated removal is a late no-op (S3): nothing to tear down twice.
        if self.machine.execute_removal(seat) != Ok(crate::report::Effect::Applied) {
            return;
        }
        let _ = self.measurements.remove_peer(seat);
        if seat == self.local_seat {
            self.left = true;
        } else if left && !self.drops.is_dropping(seat) && !self.is_unheard(seat) {
            // It may still be running its last frames: its link lingers
            // for the drops it needs decided.
            self.lingering |= 1 << seat;
        } else {
            let _ = self.endpoint.remove_peer(seat);
        }
        self.events
            .push_back(SessionEvent::PlayerRemoved { frame, seat });
        // One participant fewer: a drop may be decided now.
        self.progress_drops();
    }

    fn collect_machine_outputs(&mut self) {
        while let Some(output) = self.machine.poll_output() {
            if let Output::FrameRateChanged { frame, fps } = output {
                if let Some(pacer) = self.pacer.as_mut() {
                    if frame > 0 {
                        let _ = pacer.set_fps(fps, frame);
                    }
                }
            }
            self.events.push_back(SessionEvent::Timing(output));
        }
    }

    /// The timing machine (read-only): timing in force, target, status.
    /// Behind a relay it stays idle: see [`timing_status`](Self::timing_status).
    pub fn machine(&self) -> &TimingMachine {
        &self.machine
    }

    /// The timing in force and its target, for a UI or a log, and whether
    /// this machine is the master. Peer-to-peer: the timing machine's
    /// status. Behind a relay: the relay's timing plan (in force at the
    /// next frame, and the latest announced as the target); the relay is
    /// the master (`master` is `None`: no seat), and the policy's own state
    /// (calibration, count, descent) is the relay's, not shown here.
    pub fn timing_status(&self) -> (crate::timing::Status, bool) {
        let status = self.machine.status();
        match self.relay.as_ref() {
            Some(relay) => (relay.timing_status(status), false),
            None => (status, self.is_master()),
        }
    }

    /// The endpoint (read-only): per-link round trips and diagnostics.
    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// Re-bind `seat` to `address` (Rust callers that learn of a move out
    /// of band; a move is also followed on an authenticated packet, S8).
    pub fn set_peer_address(&mut self, seat: u8, address: SocketAddr) -> Result<()> {
        if self.relay.is_some() {
            return Err(Error::State("a relay-topology session has no peers"));
        }
        self.endpoint.set_peer_address(seat, address)
    }

    /// The relay client, in the relay topology (connection, horizon,
    /// counters); `None` peer-to-peer.
    pub fn relay_client(&self) -> Option<&crate::relay::RelayClient> {
        self.relay.as_deref().map(RelayLockstep::client)
    }

    /// This machine's measurements: the engine adds its frame work here.
    pub fn measurements(&mut self) -> &mut Measurements {
        &mut self.measurements
    }

    /// The latest frame run, if any.
    pub fn frame(&self) -> Option<u32> {
        if let Some(relay) = self.relay.as_ref() {
            return relay.frame();
        }
        self.frame
    }

    /// Counters.
    pub fn stats(&self) -> LockstepStats {
        if let Some(relay) = self.relay.as_ref() {
            return relay.stats();
        }
        self.stats
    }

    /// Whether this player has left (its removal executed).
    pub fn has_left(&self) -> bool {
        if let Some(relay) = self.relay.as_ref() {
            return relay.has_left();
        }
        self.left
    }

    /// The clock offset applied to reach reference time, µs.
    pub fn clock_offset_us(&self) -> i64 {
        if let Some(relay) = self.relay.as_ref() {
            return relay.clock_offset_us();
        }
        self.clock.applied_offset_us()
    }

    /// Bytes this session holds on behalf of remote input and the engine:
    /// queued items, turns being assembled or held ahead, turns kept for
    /// relaying, the outbox, waiting control messages. S8 requires it
    /// bounded whatever peers send.
    pub fn held_bytes(&self) -> usize {
        if let Some(relay) = self.relay.as_ref() {
            return relay.held_bytes();
        }
        self.store.bytes()
            + self.inbound.iter().map(Inbound::bytes).sum::<usize>()
            + self.outbox.bytes()
            + self
                .pending_control
                .iter()
                .map(|(_, m)| m.len() + 8)
                .sum::<usize>()
    }

    /// What a *modified client* can do with its own key: put any item in
    /// its own turns and send any message on its own links. The simulator's
    /// fault injection drives attacks through this; an honest game never
    /// calls it. Every other machine must refuse what it should not obey
    /// (S4.7) and stay bounded (S8).
    pub fn tamper(&mut self) -> Tamper<'_> {
        Tamper { session: self }
    }
}

/// See [`LockstepSession::tamper`].
pub struct Tamper<'a> {
    session: &'a mut LockstepSession,
}

impl Tamper<'_> {
    /// Put `item` into this machine's next turn, unchecked.
    pub fn queue_item(&mut self, item: Item) {
        self.session.outbox.push_unchecked(item);
    }

    /// Send raw `message` on the link to `seat`.
    pub fn send(&mut self, seat: u8, message: &[u8]) -> Result<()> {
        self.session.endpoint.send(seat, message).map(|_| ())
    }

    /// This machine's latest send frame and its tag.
    pub fn last_turn(&self) -> Option<(u32, u32)> {
        self.session.schedule.latest().map(|s| (s.frame, s.tag))
    }

    /// Largest link message.
    pub fn max_message_bytes(&self) -> usize {
        self.session.endpoint.config().link.max_message_bytes()
    }
}
