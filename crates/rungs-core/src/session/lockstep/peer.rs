//! The peer-to-peer lockstep session (S5, S8, S9): a link to every other
//! human seat, and the turns, drops, clock and checks agreed between the
//! machines. [`PeerSession`] composes the sub-states, each of which owns its
//! data and is handed what else it needs by argument:
//! - [`turns`](super::turns): the shared schedule of send frames, the
//!   outbox, the item store, the assembly of peers' turns — all bounded (S8);
//! - [`drops`](super::drops): votes, cuts and relays for players whose
//!   machines vanished ([`agreement`](super::agreement) decides the cut);
//! - [`control`](super::control): control messages waiting for room on a link;
//! - [`checksums`](super::checksums): desync checks;
//! - [`pings`](super::pings): clock samples from the master (S9);
//! - [`stalls`](super::stalls) and [`arrivals`](super::arrivals): what a
//!   frame waited for and what look-ahead it needed, for the reports (S3).
//!
//! **Turns** (`docs/turns.md`). On every send frame `s` each
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
//! master, its own clock). Samples feed a
//! [`ClockSync`](crate::clock::ClockSync) (S9's filter, slewed). Each
//! machine paces frames with a [`FramePacer`] on reference time; the
//! master's turns carry an anchor "frame N ideally starts at T" so every
//! pacer steers toward the same schedule.
//!
//! **Checksums.** The engine hands in a state checksum every
//! `checksum_interval` frames; it travels with the next turn and every
//! machine compares the values it has for a frame; a mismatch is reported as
//! a desync (frame, seats that differ from the lowest seat's value).
//!
//! **Leaving and dropping.** A player that quits calls
//! [`LockstepSession::leave`](super::LockstepSession::leave): its removal
//! is a command like any other and it keeps running until that executes. A player whose machine vanished —
//! its link lost for the liveness timeout, or its machine restarted — is
//! dropped by every survivor, who agree on the cut of its turns
//! ([`drops`](super::drops), [`agreement`](super::agreement)); an engine that wants to decide itself sets
//! [`LockstepConfig::manual_drops`] and calls
//! [`LockstepSession::drop_player`](super::LockstepSession::drop_player).

use std::collections::VecDeque;
use std::net::SocketAddr;

use crate::clock::{FramePacer, PacerConfig};
use crate::error::{Error, Result};
use crate::link::{
    DropReason, Endpoint, EndpointConfig, HeardVersions, LinkEvent, Protocol, ProtocolMismatch,
    Transmit,
};
use crate::report::record::MAX_SEATS;
use crate::report::Measurements;
use crate::timing::{Output, TimingMachine};
use crate::wire::packet::{SessionKey, MAX_MESSAGE_BYTES};
use crate::wire::turn::{self, Item, Message, Record, TurnPart};

use super::agreement::Holding;
use super::arrivals::TurnArrivals;
use super::checksums::Checksums;
use super::control::ControlQueue;
use super::drops::{DropAction, Drops, GameFacts};
use super::pings::ClockPings;
use super::stalls::StallWatch;
use super::turns::{Origin, Placement, Refusal, Stored, Turn, Turns};
use super::{
    check_link_keys, Advance, ExecutedCommand, LockstepConfig, LockstepStats, OrderKind,
    OrderReceipt, SessionEvent,
};

/// One machine's peer-to-peer session: the sub-states, and the frame loop
/// and message handling that compose them. Every call of the lockstep API
/// for this topology lands here (the protocol is written on
/// [`LockstepSession`](super::LockstepSession)).
pub(super) struct PeerSession {
    machine: TimingMachine,
    endpoint: Endpoint,
    measurements: Measurements,
    local_seat: u8,
    /// The schedule, the outbox, the queued items and the turns received
    /// ([`Turns`]).
    turns: Turns,
    drops: Drops,
    control: ControlQueue,
    checksums: Checksums,
    clock: ClockPings,
    pacer: Option<FramePacer>,
    /// The open wait for turns, and what counts as a stall ([`stalls`](super::stalls)).
    stalls: StallWatch,
    /// When each peer's turns arrived: the look-ahead frames needed.
    arrivals: TurnArrivals,
    left: bool,
    /// `leave` was called: no more commands.
    leaving: bool,
    frame: Option<u32>,
    executed: Vec<ExecutedCommand>,
    events: VecDeque<SessionEvent>,
    last_local_us: u64,
    stats: LockstepStats,
    receive_buffer: Vec<u8>,
    /// Per seat: the link's sample count last fed to the measurements.
    rtt_samples_seen: [u64; MAX_SEATS],
    /// Per-pair keys, applied as each peer is added.
    link_keys: Vec<(u8, SessionKey)>,
    /// Per seat: the other turn layout versions its messages carried.
    turn_versions: [HeardVersions; MAX_SEATS],
}

impl PeerSession {
    /// A session on the eve of frame 0, at local time `now_us`, for the
    /// local seat `local_seat` of `config` (checked by the caller).
    pub(super) fn new(config: &LockstepConfig, local_seat: u8, now_us: u64) -> Result<PeerSession> {
        let machine = TimingMachine::new(&config.machine)?;
        let mut endpoint = Endpoint::new(EndpointConfig {
            session_id: config.session_id,
            key: config.key,
            local_seat,
            link: config.link,
        })?;
        endpoint.set_epoch(config.epoch)?;
        check_link_keys(config, &machine, local_seat)?;
        let seats = machine.seats().clone();
        let mut measurements = Measurements::new();
        for seat in seats.present().filter(|s| *s != local_seat) {
            measurements.add_peer(seat)?;
        }
        Ok(PeerSession {
            machine,
            endpoint,
            measurements,
            local_seat,
            turns: Turns::new(config.link.max_message_bytes()),
            drops: Drops::new(config.manual_drops),
            control: ControlQueue::default(),
            checksums: Checksums::new(config.checksum_interval),
            clock: ClockPings::new(now_us)?,
            pacer: None,
            stalls: StallWatch::default(),
            arrivals: TurnArrivals::new(seats.present().filter(|s| *s != local_seat)),
            left: false,
            leaving: false,
            frame: None,
            executed: Vec::new(),
            events: VecDeque::new(),
            last_local_us: now_us,
            stats: LockstepStats::default(),
            receive_buffer: Vec::new(),
            rtt_samples_seen: [0; MAX_SEATS],
            link_keys: config.link_keys.clone(),
            turn_versions: [HeardVersions::default(); MAX_SEATS],
        })
    }

    /// Bind the human `seat` to `address` (before frame 0).
    pub(super) fn add_peer(&mut self, seat: u8, address: SocketAddr, now_us: u64) -> Result<()> {
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
    pub(super) fn peers_without_address(&self) -> u32 {
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
    /// The largest command one turn carries: a link message less the turn's
    /// and the item's headers, and no more than an item's 16-bit length.
    pub(super) fn max_command_bytes(&self) -> usize {
        (self.endpoint.config().link.max_message_bytes()
            - turn::TURN_HEADER_BYTES
            - turn::ITEM_HEADER_BYTES)
            .min(usize::from(u16::MAX))
    }

    pub(super) fn submit_command(&mut self, bytes: &[u8]) -> Result<u32> {
        if self.left || self.leaving {
            return Err(Error::State(
                "this player has left (or is leaving) the game",
            ));
        }
        if bytes.len() > self.max_command_bytes() {
            return Err(Error::invalid_value(
                "the command's length",
                bytes.len(),
                format!("at most {} bytes (one packet)", self.max_command_bytes()),
            ));
        }
        if !self.turns.push_command(Item::Command(bytes.to_vec())) {
            return Err(Error::Full(
                "this machine's next turn is full; run a frame before submitting more",
            ));
        }
        let issued_on = match self.frame {
            Some(f) => f.saturating_add(1),
            None => 0,
        };
        Ok(self.machine.forecast_tag(issued_on))
    }

    /// An order of `kind`: a command is [`submit_command`](Self::submit_command)
    /// (id 0: refusals here are immediate errors), a quit a command and
    /// [`leave`](Self::leave); ephemeral orders need a relay.
    pub(super) fn submit_order(&mut self, kind: OrderKind, bytes: &[u8]) -> Result<OrderReceipt> {
        match kind {
            OrderKind::Command => Ok(OrderReceipt {
                id: 0,
                frame: self.submit_command(bytes)?,
            }),
            OrderKind::Quit => {
                if self.left || self.leaving {
                    return Err(Error::State("already left or leaving"));
                }
                let frame = self.submit_command(bytes)?;
                self.leave()?;
                Ok(OrderReceipt { id: 0, frame })
            }
            OrderKind::Ephemeral => Err(Error::State(
                "ephemeral orders need a relay: peer-to-peer every command is game state",
            )),
        }
    }

    /// Whether the state after `frame` is compared: a multiple of the
    /// checksum interval.
    pub(super) fn is_checksum_frame(&self, frame: u32) -> bool {
        self.checksums.is_checksum_frame(frame)
    }

    /// The engine's state checksum after `frame` executed. Only frames that
    /// are multiples of the checksum interval are compared.
    pub(super) fn submit_checksum(&mut self, frame: u32, checksum: u64) -> Result<()> {
        if !self.checksums.is_checksum_frame(frame) {
            return Err(Error::invalid_value(
                "frame",
                frame,
                "a checksum frame, a multiple of checksum_interval (is_checksum_frame)",
            ));
        }
        self.turns.push_record(Record::Checksum {
            frame,
            value: checksum,
        });
        self.note_checksum(frame, self.local_seat, checksum);
        Ok(())
    }

    /// Leave the game: the removal of this seat is a command like any other;
    /// keep calling `advance` until it returns [`Advance::Left`].
    pub(super) fn leave(&mut self) -> Result<()> {
        if self.left || self.leaving {
            return Err(Error::State("already left or leaving"));
        }
        self.leaving = true;
        self.turns.push_own(Item::Removal(self.local_seat));
        Ok(())
    }

    /// Drop `seat`, whose machine no longer answers (see [`drops`](super::drops)); rungs
    /// does it by itself unless [`LockstepConfig::manual_drops`]. Every
    /// remaining machine follows once it loses that player too. Dropping a
    /// seat already being dropped changes nothing.
    pub(super) fn drop_player(&mut self, seat: u8) -> Result<()> {
        if seat == self.local_seat || !self.is_present(seat) {
            return Err(Error::UnknownSeat(seat));
        }
        self.join_drop(seat);
        Ok(())
    }

    /// Send a control message now, or once the link has room.
    fn send_control(&mut self, seat: u8, message: &[u8]) {
        self.control.send(&mut self.endpoint, seat, message);
    }

    /// Send the control messages that wait for room.
    fn flush_control(&mut self) {
        if self.control.is_empty() {
            return;
        }
        let present = self.present().fold(0u32, |mask, s| mask | 1 << s);
        let reachable = self.drops.reachable(present, self.local_seat);
        self.control.flush(&mut self.endpoint, reachable);
    }

    /// Validate and act on one datagram from `source` at local time `now_us`.
    pub(super) fn handle_datagram(&mut self, now_us: u64, source: SocketAddr, datagram: &[u8]) {
        self.last_local_us = self.last_local_us.max(now_us);
        let from = match self.endpoint.handle_datagram(now_us, source, datagram) {
            Ok(from) => from,
            Err(reason) => {
                if reason == DropReason::BadVersion {
                    self.collect_protocol_mismatches();
                }
                self.collect_link_events();
                return; // dropped and counted by the endpoint
            }
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
                if let Some(theirs) = turn::other_version(&message[..len]) {
                    self.note_turn_version(now_us, from, theirs);
                }
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

    /// Report the transport versions the endpoint heard from peers'
    /// addresses (each once per seat and version).
    fn collect_protocol_mismatches(&mut self) {
        while let Some(mismatch) = self.endpoint.poll_protocol_mismatch() {
            self.events.push_back(SessionEvent::ProtocolMismatch {
                mismatch,
                link_lost: false,
            });
        }
    }

    /// A message of `seat`'s that failed to decode said it is of turn
    /// layout version `theirs`: reported once per seat and version.
    fn note_turn_version(&mut self, now_us: u64, seat: u8, theirs: u8) {
        let Some(heard) = self.turn_versions.get_mut(usize::from(seat)) else {
            return;
        };
        if heard.note(theirs, now_us) {
            self.events.push_back(SessionEvent::ProtocolMismatch {
                mismatch: ProtocolMismatch {
                    seat,
                    protocol: Protocol::Turn,
                    theirs,
                    ours: turn::TURN_LAYOUT_VERSION,
                },
                link_lost: false,
            });
        }
    }

    fn collect_link_events(&mut self) {
        while let Some((seat, event, cause)) = self.endpoint.poll_event_explained() {
            // Silent because it speaks another version: say so first.
            if let Some(mismatch) = cause {
                self.events.push_back(SessionEvent::ProtocolMismatch {
                    mismatch,
                    link_lost: true,
                });
            }
            let gone = matches!(event, LinkEvent::Lost | LinkEvent::Restarted);
            if gone && self.drops.stop_lingering(seat) {
                // A player that left is gone for good now.
                let _ = self.endpoint.remove_peer(seat);
                self.progress_drops();
                continue;
            }
            // Dropped by default; else only once others drop it and this
            // machine lost it too.
            let lost = event == LinkEvent::Lost;
            if gone && self.drops.drops_on_loss(seat, lost) && self.is_present(seat) {
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
        match self.turns.decode(message)? {
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

    fn is_master(&self) -> bool {
        self.machine.master() == Some(self.local_seat)
    }

    /// Fire transport timers and send clock pings that are due.
    pub(super) fn handle_timeout(&mut self, now_us: u64) {
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
    pub(super) fn poll_timeout(&mut self) -> Option<u64> {
        let mut next = self.endpoint.poll_timeout();
        if self.left {
            return next;
        }
        if !self.is_master() {
            let ping = self.clock.next_us();
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
        let offset = self.clock.reference_now(self.last_local_us) - self.last_local_us as i64;
        Some((due - offset).max(0) as u64)
    }

    /// Write the next datagram to send into `buf`.
    pub(super) fn poll_transmit(&mut self, now_us: u64, buf: &mut [u8]) -> Option<Transmit> {
        self.endpoint.poll_transmit(now_us, buf)
    }

    /// The next event for the engine.
    pub(super) fn poll_event(&mut self) -> Option<SessionEvent> {
        self.events.pop_front()
    }

    /// Commands executed by the latest frame [`advance`](Self::advance) ran,
    /// in execution order.
    pub(super) fn executed(&self) -> &[ExecutedCommand] {
        &self.executed
    }

    /// The seats the next frame is waiting for (their turns have not all
    /// arrived), as a bit mask: what a "waiting for players" screen shows.
    pub(super) fn waiting_for(&self) -> u32 {
        let next = self.frame.map_or(0, |f| f + 1);
        self.missing_for(next)
            .fold(0, |mask, seat| mask | 1 << seat)
    }

    /// Run the next frame if it is due at local time `now_us` and ready.
    /// Once a frame starts it runs whole: an error leaves no frame half run.
    pub(super) fn advance(&mut self, now_us: u64) -> Result<Advance> {
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
        if next_frame == 0 && !self.is_master() && !self.clock.is_synced() {
            return Ok(Advance::Waiting);
        }
        let now_ref = self.clock.reference_now(now_us);
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
                let Some(stored) = self.turns.take_due(due.item) else {
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
                    self.turns.push_own(Item::Timing(event));
                }
                self.turns.push_own(Item::Report(report));
            }
            // Fails only out of frame order, which `begin_frame` just ruled out.
            if let Ok(Some(event)) = self.machine.end_frame() {
                self.turns.push_own(Item::Timing(event));
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
                let master_when_sent = self.turns.master_when_sent(send_frame);
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
            self.drops.linger(seat);
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
    pub(super) fn machine(&self) -> &TimingMachine {
        &self.machine
    }

    /// The timing machine's status, and whether this machine is the master.
    pub(super) fn timing_status(&self) -> (crate::timing::Status, bool) {
        (self.machine.status(), self.is_master())
    }

    /// The endpoint (read-only): per-link round trips and diagnostics.
    pub(super) fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// Re-bind `seat` to `address` (Rust callers that learn of a move out
    /// of band; a move is also followed on an authenticated packet, S8).
    pub(super) fn set_peer_address(&mut self, seat: u8, address: SocketAddr) -> Result<()> {
        self.endpoint.set_peer_address(seat, address)
    }

    /// This machine's measurements: the engine adds its frame work here.
    pub(super) fn measurements(&mut self) -> &mut Measurements {
        &mut self.measurements
    }

    /// The latest frame run, if any.
    pub(super) fn frame(&self) -> Option<u32> {
        self.frame
    }

    /// Counters.
    pub(super) fn stats(&self) -> LockstepStats {
        self.stats
    }

    /// Whether this player has left (its removal executed).
    pub(super) fn has_left(&self) -> bool {
        self.left
    }

    /// The clock offset applied to reach reference time, µs.
    pub(super) fn clock_offset_us(&self) -> i64 {
        self.clock.applied_offset_us()
    }

    /// Bytes this session holds on behalf of remote input and the engine:
    /// queued items, turns being assembled or held ahead, turns kept for
    /// relaying, the outbox, waiting control messages. S8 requires it
    /// bounded whatever peers send.
    pub(super) fn held_bytes(&self) -> usize {
        self.turns.bytes() + self.control.bytes()
    }

    /// For a modified client ([`Tamper`](super::Tamper)): put `item` into
    /// this machine's next turn, unchecked.
    #[cfg(any(test, feature = "testing"))]
    pub(super) fn tamper_queue_item(&mut self, item: Item) {
        self.turns.push_unchecked(item);
    }

    /// For a modified client: send raw `message` on the link to `seat`.
    #[cfg(any(test, feature = "testing"))]
    pub(super) fn tamper_send(&mut self, seat: u8, message: &[u8]) -> Result<()> {
        self.endpoint.send(seat, message).map(|_| ())
    }

    /// This machine's latest send frame and its tag.
    #[cfg(any(test, feature = "testing"))]
    pub(super) fn last_turn(&self) -> Option<(u32, u32)> {
        self.turns.latest_send().map(|s| (s.frame, s.tag))
    }

    /// The local seat (for `Debug`).
    pub(super) fn local_seat(&self) -> u8 {
        self.local_seat
    }
}

/// Sending and receiving turns, as the session runs them.
impl PeerSession {
    /// One part of `seat`'s turn, direct or `relayed`.
    fn receive_part(&mut self, seat: u8, part: TurnPart, raw: &[u8], relayed: bool) {
        if !self.is_present(seat) || seat == self.local_seat {
            return;
        }
        let Some(limit) = self.turns.limit(self.drops.cut(seat), part.send_frame) else {
            return; // void
        };
        let dropping = self.drops.is_dropping(seat);
        let turn = match self
            .turns
            .add_part(seat, part, raw, limit, relayed || dropping)
        {
            Ok(Some(turn)) => turn,
            Ok(None) | Err(Refusal::Duplicate) => return,
            Err(Refusal::Refused) => {
                self.stats.refused_messages += 1;
                return;
            }
        };
        self.arrivals
            .arrived(seat, turn.send_frame, self.last_local_us);
        self.turns.keep(seat, &turn, raw);
        let executable = self.drops.executable(seat, self.local_seat);
        match self.turns.place(seat, turn, self.frame, executable) {
            Placement::Take(turn) => self.accept_turn(seat, turn),
            Placement::Refused => self.stats.refused_messages += 1,
            Placement::Held => self.accept_reached_turns_of(seat),
        }
        if dropping {
            // It holds more of that seat's turns: its drop may move on.
            self.progress_drop(seat);
        }
        self.maybe_queue_removal(seat);
    }

    /// Turns held ahead whose send frame this machine's schedule reached.
    fn accept_reached_turns(&mut self) {
        for seat in 0..self.machine.seats().count() {
            self.accept_reached_turns_of(seat);
        }
    }

    fn accept_reached_turns_of(&mut self, seat: u8) {
        let executable = self.drops.executable(seat, self.local_seat);
        while let Some(turn) = self.turns.take_reached(seat, self.frame, executable) {
            self.accept_turn(seat, turn);
        }
    }

    /// Check a whole turn against the schedule and queue its items.
    fn accept_turn(&mut self, seat: u8, turn: Turn) {
        if !self.turns.fits(seat, &turn) {
            self.stats.refused_messages += 1;
            return;
        }
        for record in &turn.records {
            match *record {
                Record::Checksum { frame, value } => self.note_checksum(frame, seat, value),
                Record::Anchor { frame, start_us } => {
                    if self.machine.master() == Some(seat) {
                        if let Some(pacer) = self.pacer.as_mut() {
                            let _ = pacer.set_reference(frame, start_us);
                        }
                    }
                }
            }
        }
        self.turns.queue(seat, turn, &mut self.machine);
    }

    /// The peers whose turns that may hold commands due by `frame` are not
    /// all here yet.
    fn missing_for(&self, frame: u32) -> impl Iterator<Item = u8> + '_ {
        let needed = self.turns.last_due_by(frame);
        self.present()
            .filter(|p| *p != self.local_seat)
            .filter(move |p| {
                needed.is_some_and(|needed| self.turns.is_missing(*p, needed, self.drops.cut(*p)))
            })
    }

    /// Whether every link this machine sends turns on can take the next
    /// turn whole (S8: a frame is never half run).
    fn links_have_room(&self) -> bool {
        // The turn as it stands, plus rungs' own items a frame may add.
        let needed = self.turns.parts_needed();
        self.peers().all(|p| {
            self.endpoint
                .link(p)
                .map_or(true, |link| link.send_capacity() >= needed)
        })
    }

    /// Send this send frame's turn to every peer; keep our own items.
    /// `advance` checked that every link has room, so it goes out whole.
    fn send_turn(&mut self, frame: u32) {
        let anchor = match self.pacer.as_ref() {
            Some(pacer) if self.is_master() => Some(Record::Anchor {
                frame,
                start_us: pacer.ideal_start_us(frame),
            }),
            _ => None,
        };
        let peers = self.peers().fold(0u32, |mask, peer| mask | 1 << peer);
        self.stats.turn_messages += self.turns.send(
            frame,
            anchor,
            peers,
            self.local_seat,
            &mut self.machine,
            &mut self.endpoint,
        );
        for seat in 0..self.machine.seats().count() {
            if self.drops.cut(seat).is_some() {
                self.maybe_queue_removal(seat);
            }
        }
    }
}

/// The drop procedure ([`Drops`]), handed what it needs of the game.
impl PeerSession {
    /// What the drop procedure is told of the game now.
    fn game_facts(&self) -> GameFacts {
        let seats = self.machine.seats();
        let mask = |seats: &mut dyn Iterator<Item = u8>| seats.fold(0u32, |m, s| m | 1 << s);
        let mut holds = [None; MAX_SEATS];
        for (seat, hold) in (0..).zip(holds.iter_mut()) {
            *hold = self.turns.held_through(seat);
        }
        GameFacts {
            local: self.local_seat,
            humans: mask(&mut (0..seats.count()).filter(|s| seats.is_human(*s))),
            present: mask(&mut seats.present()),
            unheard: mask(&mut (0..seats.count()).filter(|s| self.is_unheard(*s))),
            holds,
        }
    }

    /// Join the drop of `seat` (see [`Drops::join`]).
    fn join_drop(&mut self, seat: u8) {
        let mut actions = Vec::new();
        self.drops.join(seat, &self.game_facts(), &mut actions);
        self.carry_out(actions);
    }

    /// Move every drop on with what this machine knows now.
    fn progress_drops(&mut self) {
        let mut actions = Vec::new();
        self.drops.progress_all(&self.game_facts(), &mut actions);
        self.carry_out(actions);
    }

    /// Move `seat`'s drop on.
    fn progress_drop(&mut self, seat: u8) {
        let mut actions = Vec::new();
        self.drops.progress(seat, &self.game_facts(), &mut actions);
        self.carry_out(actions);
    }

    /// Do what the drop procedure asked, in order.
    fn carry_out(&mut self, actions: Vec<DropAction>) {
        for action in actions {
            match action {
                DropAction::Send { to, message } => self.send_control(to, &message),
                DropAction::Decided(seat) => self.on_decided(seat),
            }
        }
    }

    /// The cut of `seat` is decided: void its turns after the cut, take
    /// the ones that waited, queue its removal when they are all queued.
    fn on_decided(&mut self, seat: u8) {
        let Some(cut) = self.drops.cut(seat) else {
            return;
        };
        self.turns.void_after(seat, cut.through);
        self.accept_reached_turns();
        self.maybe_queue_removal(seat);
    }

    /// With the cut decided and every turn up to it queued, queue the
    /// removal on the tag of the first send frame after the cut.
    fn maybe_queue_removal(&mut self, seat: u8) {
        let Some(cut) = self.drops.cut(seat) else {
            return;
        };
        if self.drops.is_removal_queued(seat) {
            return;
        }
        if self
            .turns
            .queue_removal(seat, cut.through, &mut self.machine)
        {
            self.drops.set_removal_queued(seat);
        }
    }

    /// A drop vote from `seat` (see [`Drops::on_vote`]).
    fn on_drop_vote(&mut self, seat: u8, dropped: u8, holds: Holding, dropping: u32) -> Result<()> {
        let mut actions = Vec::new();
        let result = self.drops.on_vote(
            seat,
            dropped,
            holds,
            dropping,
            &self.game_facts(),
            &mut actions,
        );
        self.carry_out(actions);
        result
    }

    /// `seat` decided the cut of `dropped`.
    fn on_drop_decided(&mut self, seat: u8, dropped: u8, cut: Holding) -> Result<()> {
        let mut actions = Vec::new();
        let result = self
            .drops
            .on_decided(seat, dropped, cut, &self.game_facts(), &mut actions);
        self.carry_out(actions);
        result
    }

    /// `seat` asks for `dropped`'s turns after `after`: answer with every
    /// one kept, if this machine is in that drop and plays with `seat`.
    fn on_relay_request(&mut self, seat: u8, dropped: u8, after: Holding) -> Result<()> {
        if !self
            .drops
            .answers_relay_request(seat, dropped, &self.game_facts())?
        {
            self.stats.refused_messages += 1;
            return Ok(());
        }
        for relay in self.turns.relays_after(dropped, after) {
            self.send_control(seat, &relay);
        }
        Ok(())
    }

    /// A relayed part of `dropped`'s turn from `seat`: only inside a drop
    /// this machine joined, only from a seat it asked that is not out, only
    /// up to the cut once decided (S4.7).
    fn on_relay(&mut self, seat: u8, dropped: u8, part: TurnPart, raw: &[u8]) {
        if !self.drops.takes_relay(seat, dropped, &self.game_facts()) {
            self.stats.refused_messages += 1;
            return;
        }
        self.receive_part(dropped, part, raw, true);
    }
}

/// Clock pings, checksums and the look-ahead measure, as the session runs them.
impl PeerSession {
    /// Send a clock ping to the master if one is due (S9).
    fn send_ping_if_due(&mut self, now_us: u64) {
        if self.is_master() || self.left {
            return;
        }
        if let Some(master) = self.machine.master() {
            self.clock.ping_if_due(now_us, master, &mut self.endpoint);
        }
    }

    /// Answer a ping with this machine's reference time.
    fn on_ping(&mut self, now_us: u64, seat: u8, t0: i64) {
        let now = self.clock.reference_now(now_us);
        self.send_control(seat, &turn::encode_pong(t0, now, now));
    }

    /// A pong: a clock sample, if it comes from the master.
    fn on_pong(&mut self, now_us: u64, seat: u8, t0: i64, t1: i64, t2: i64) -> Result<()> {
        if self.machine.master() != Some(seat) {
            return Ok(()); // an answer from a former master
        }
        self.clock.on_pong(now_us, t0, t1, t2)
    }

    /// `seat`'s state checksum for `frame`: a desync once every present
    /// seat's value is in and one differs.
    fn note_checksum(&mut self, frame: u32, seat: u8, value: u64) {
        let present: Vec<u8> = self.present().collect();
        if let Some(seats) = self.checksums.note(frame, seat, value, &present) {
            self.stats.desyncs += 1;
            self.events.push_back(SessionEvent::Desync { frame, seats });
        }
    }

    /// `frame` starts at local `now_us`: the look-ahead it needed goes into
    /// the report interval. Its deadline is when it could have started
    /// without counting as a stall — its due time (`due_us`, local), or a
    /// frame period after the last frame started if that is later (what
    /// counts as a stall, `stalls`). A frame that needs no peer's turn (a
    /// player alone, the first frames) is not measured.
    fn measure_need(&mut self, frame: u32, now_us: u64, due_us: u64, frame_us: u64) {
        let Some(needed) = self.turns.last_due_by(frame) else {
            return;
        };
        let deadline = self.stalls.stall_deadline(due_us, frame_us);
        let local = self.local_seat;
        let peers = self.machine.seats().present().filter(|p| *p != local);
        // A peer dropped before this turn has none to wait for.
        if let Some((look_ahead, need)) = self
            .arrivals
            .need(frame, needed, peers, now_us, deadline, frame_us)
        {
            // Both within 1–250 by construction.
            let _ = self.measurements.add_frame_need(look_ahead, need);
        }
    }
}
