//! A lockstep session over rungs' own transport (S5, S8, S9): rungs carries
//! the engine's commands, runs the adaptive timing, and paces the frames.
//!
//! One [`LockstepSession`] per machine, sans-IO: the caller feeds datagrams
//! and its local clock (µs), sends what [`LockstepSession::poll_transmit`]
//! writes, and calls [`LockstepSession::advance`] whenever the next frame may
//! be due. The engine submits commands between frames and applies the
//! commands each executed frame hands back; every machine executes the same
//! commands on the same frames.
//!
//! **Turns** (seed 000's compressed mode). On every send frame `s` each
//! machine sends every peer one *turn*: the commands issued since its
//! previous send frame, tagged `s + look_ahead(s)` (S5), plus rungs' own
//! events (its report, the master's timing event, a removal), its state
//! checksums and, from the master, the frame-clock anchor. Turns travel as
//! reliable, ordered link messages (split when large); an empty turn still
//! goes out, because it says "nothing from me up to here".
//!
//! **Readiness.** The send frames and their tags are the same on every
//! machine, so a machine knows which turns may hold commands due by frame
//! `F`: every turn up to the last send frame whose tag is at or before `F`.
//! Frame `F` runs only when every present peer's turns up to there have
//! arrived; otherwise the machine waits, and the wait goes into its reports
//! (S3). Commands due on a frame that is not a send frame execute on the
//! next send frame (S5), in (tag, seat, issue order).
//!
//! **Clock and pacing (S9).** Every machine other than the master pings the
//! master; the master answers with its *reference time* (for the first
//! master, its own clock). Samples feed a [`ClockSync`] (seed 003's filter,
//! slewed). Each machine paces frames with a [`FramePacer`] on reference
//! time; the master's turns carry an anchor "frame N ideally starts at T" so
//! every pacer steers toward the same schedule, and a machine ahead slows
//! while one behind speeds up, by at most a tenth of a frame. Because the
//! master answers in reference time, a new master after a handoff keeps the
//! same clock.
//!
//! **Checksums.** The engine hands in a state checksum every
//! `checksum_interval` frames; it travels with the next turn and every
//! machine compares the values it has for a frame; a mismatch is reported as
//! a desync (frame, seats that differ from the lowest seat's value).
//!
//! **Leaving and dropping.** A player that quits calls
//! [`LockstepSession::leave`]: its removal is a command like any other and
//! it keeps running until that executes. A player whose machine vanished is
//! dropped with [`LockstepSession::drop_player`] (the engine's decision,
//! usually after [`SessionEvent::LinkLost`]): every remaining machine votes
//! with the last turn it holds from that player; once every vote is in, the
//! highest is the *cut*, whoever holds the turns up to the cut relays them to
//! whoever lacks them, later turns from that player are void, and the
//! removal executes on the tag of the first turn nobody has — a frame no
//! machine can have passed. Nothing the dropped player sent executes on one
//! machine and not on another.

use std::collections::VecDeque;
use std::net::SocketAddr;

use crate::clock::{ClockSample, ClockSync, ClockSyncConfig, FramePacer, PacerConfig};
use crate::error::{Error, Result};
use crate::link::{Endpoint, EndpointConfig, LinkConfig, LinkEvent, Transmit};
use crate::report::record::MAX_SEATS;
use crate::report::{is_report_frame, Measurements};
use crate::timing::{MachineConfig, Output, TimingMachine};
use crate::wire::packet::{SessionKey, MAX_MESSAGE_BYTES};
use crate::wire::turn::{self, Item, Message, Record, ITEM_HEADER_BYTES, TURN_HEADER_BYTES};

/// Turns kept per peer for relaying after a drop.
const KEPT_TURNS: usize = 256;
/// Checksum frames kept for comparison.
const KEPT_CHECKSUM_FRAMES: usize = 64;
/// Clock pings: fast at first, then a steady re-sampling during play.
const FIRST_PINGS: u32 = 8;
const FIRST_PING_INTERVAL_US: u64 = 100_000;
const PING_INTERVAL_US: u64 = 1_000_000;

/// How to set up a lockstep session.
#[derive(Debug, Clone)]
pub struct LockstepConfig {
    /// Speed, seats, this machine's seat (required), timing policy.
    pub machine: MachineConfig,
    /// The game's session id and key, the same on every machine (S8).
    pub session_id: u32,
    pub key: SessionKey,
    /// Link tunables.
    pub link: LinkConfig,
    /// Frames between state checksums; 0 for none.
    pub checksum_interval: u32,
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
    /// Nothing heard from `seat` for the liveness timeout (S8); the engine
    /// decides whether to drop it.
    LinkLost { seat: u8 },
    /// `seat` is heard again.
    LinkRecovered { seat: u8 },
}

/// What [`LockstepSession::advance`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Advance {
    /// Frame `frame` ran; its commands are in [`LockstepSession::executed`].
    Ran { frame: u32 },
    /// The next frame is due at local time `at_us`.
    NotDue { at_us: u64 },
    /// The next frame is due but waits for peers' turns (or, before frame 0,
    /// for the first clock sample).
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

/// Drop bookkeeping for one player.
#[derive(Debug, Clone, Default)]
struct Drop {
    /// Votes by seat: the last turn (send frame) that voter holds.
    votes: [Option<Option<u32>>; MAX_SEATS],
    voted: bool,
    /// Once every vote is in: the last valid turn of the dropped player.
    cut: Option<Option<u32>>,
    /// Removal queued (after the cut is reached locally).
    removal_queued: bool,
}

/// One machine's lockstep session. See the module docs.
pub struct LockstepSession {
    machine: TimingMachine,
    endpoint: Endpoint,
    measurements: Measurements,
    local_seat: u8,
    human: [bool; MAX_SEATS],
    seat_count: u8,
    checksum_interval: u32,
    /// Items waiting for a queued command handle to execute.
    store: Vec<Option<Item>>,
    free: Vec<usize>,
    /// Issued since the previous send frame.
    outbox: Vec<Item>,
    /// Checksums and anchors for the next turn.
    records: Vec<Record>,
    /// Own send frames and their tags, oldest first (the same everywhere).
    send_history: VecDeque<(u32, u32)>,
    /// Per seat: the last complete turn received.
    received_through: [Option<u32>; MAX_SEATS],
    /// Per seat: turn parts being assembled (send frame, items so far).
    partial: Vec<Option<(u32, Vec<Item>)>>,
    /// Per seat: the raw messages of recent turns, for relaying.
    kept_turns: Vec<VecDeque<(u32, Vec<u8>)>>,
    drops: Vec<Drop>,
    removed: [bool; MAX_SEATS],
    left: bool,
    /// Checksums by frame: value per seat.
    checksums: VecDeque<(u32, [Option<u64>; MAX_SEATS])>,
    frame: Option<u32>,
    executed: Vec<ExecutedCommand>,
    events: VecDeque<SessionEvent>,
    clock: ClockSync,
    pings_sent: u32,
    next_ping_us: u64,
    pacer: Option<FramePacer>,
    waiting_since: Option<u64>,
    last_local_us: u64,
    stats: LockstepStats,
    receive_buffer: Vec<u8>,
    /// Per seat: the link's sample count last fed to the measurements.
    rtt_samples_seen: [u64; MAX_SEATS],
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
    /// from a seat that was not the master, a relay from anyone but the
    /// drop's holder, a turn outside the schedule.
    pub refused_items: u64,
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
        let endpoint = Endpoint::new(EndpointConfig {
            session_id: config.session_id,
            key: config.key,
            local_seat,
            link: config.link,
        })?;
        let mut human = [false; MAX_SEATS];
        for (seat, is_human) in config.machine.human_seats.iter().enumerate() {
            human[seat] = *is_human;
        }
        let mut measurements = Measurements::new();
        for seat in 0..config.machine.human_seats.len() as u8 {
            if human[usize::from(seat)] && seat != local_seat {
                measurements.add_peer(seat)?;
            }
        }
        Ok(LockstepSession {
            machine,
            endpoint,
            measurements,
            local_seat,
            human,
            seat_count: config.machine.human_seats.len() as u8,
            checksum_interval: config.checksum_interval,
            store: Vec::new(),
            free: Vec::new(),
            outbox: Vec::new(),
            records: Vec::new(),
            send_history: VecDeque::new(),
            received_through: [None; MAX_SEATS],
            partial: vec![None; MAX_SEATS],
            kept_turns: vec![VecDeque::new(); MAX_SEATS],
            drops: vec![Drop::default(); MAX_SEATS],
            removed: [false; MAX_SEATS],
            left: false,
            checksums: VecDeque::new(),
            frame: None,
            executed: Vec::new(),
            events: VecDeque::new(),
            clock: ClockSync::new(ClockSyncConfig::default())?,
            pings_sent: 0,
            next_ping_us: now_us,
            pacer: None,
            waiting_since: None,
            last_local_us: now_us,
            stats: LockstepStats::default(),
            receive_buffer: Vec::new(),
            rtt_samples_seen: [0; MAX_SEATS],
        })
    }

    /// Bind the human `seat` to `address` (before frame 0).
    pub fn add_peer(&mut self, seat: u8, address: SocketAddr, now_us: u64) -> Result<()> {
        if usize::from(seat) >= usize::from(self.seat_count) || !self.human[usize::from(seat)] {
            return Err(Error::UnknownSeat(seat));
        }
        self.endpoint.add_peer(seat, address, now_us)
    }

    fn peers(&self) -> impl Iterator<Item = u8> + '_ {
        (0..self.seat_count).filter(|s| {
            *s != self.local_seat && self.human[usize::from(*s)] && !self.removed[usize::from(*s)]
        })
    }

    /// Issue a command (the engine's bytes) now: it goes out with this
    /// machine's next turn. Returns the frame it is forecast to execute on or
    /// after (S5).
    pub fn submit_command(&mut self, bytes: &[u8]) -> Result<u32> {
        if self.left || self.removed[usize::from(self.local_seat)] {
            return Err(Error::State("this player has left the game"));
        }
        let room =
            self.endpoint.config().link.max_message_bytes() - TURN_HEADER_BYTES - ITEM_HEADER_BYTES;
        if bytes.len() > room.min(usize::from(u16::MAX)) {
            return Err(Error::InvalidArgument("command too large for one packet"));
        }
        self.outbox.push(Item::Command(bytes.to_vec()));
        let issued_on = match self.frame {
            Some(f) => f.saturating_add(1),
            None => 0,
        };
        Ok(self.machine.forecast_tag(issued_on))
    }

    /// The engine's state checksum after `frame` executed. Only frames that
    /// are multiples of the checksum interval are compared.
    pub fn submit_checksum(&mut self, frame: u32, checksum: u64) -> Result<()> {
        if self.checksum_interval == 0 || frame % self.checksum_interval != 0 {
            return Err(Error::InvalidArgument("not a checksum frame"));
        }
        self.records.push(Record::Checksum { frame, value: checksum });
        self.note_checksum(frame, self.local_seat, checksum);
        Ok(())
    }

    /// Leave the game: the removal of this seat is a command like any other;
    /// keep calling `advance` until it returns [`Advance::Left`].
    pub fn leave(&mut self) -> Result<()> {
        if self.left {
            return Err(Error::State("already left"));
        }
        self.outbox.push(Item::Removal(self.local_seat));
        Ok(())
    }

    /// Drop `seat`, whose machine no longer answers (see the module docs).
    /// Every remaining machine follows once it hears this machine's vote.
    pub fn drop_player(&mut self, seat: u8) -> Result<()> {
        if seat == self.local_seat
            || usize::from(seat) >= usize::from(self.seat_count)
            || !self.human[usize::from(seat)]
            || self.removed[usize::from(seat)]
        {
            return Err(Error::UnknownSeat(seat));
        }
        self.vote_drop(seat);
        Ok(())
    }

    fn vote_drop(&mut self, seat: u8) {
        let s = usize::from(seat);
        if self.drops[s].voted {
            return;
        }
        self.drops[s].voted = true;
        let have = self.received_through[s];
        self.drops[s].votes[usize::from(self.local_seat)] = Some(have);
        let dropping = self.dropping_mask();
        let message = turn::encode_drop_vote(seat, have, dropping);
        let peers: Vec<u8> = self.peers().filter(|p| *p != seat).collect();
        for peer in peers {
            let _ = self.endpoint.send(peer, &message);
        }
        self.check_drop(seat);
    }

    /// Every seat this machine is dropping, as a bit mask.
    fn dropping_mask(&self) -> u32 {
        (0..self.seat_count)
            .filter(|s| self.drops[usize::from(*s)].voted)
            .fold(0, |mask, s| mask | 1 << s)
    }

    /// Once every remaining human voted: fix the cut, relay missing turns.
    fn check_drop(&mut self, seat: u8) {
        let s = usize::from(seat);
        if self.drops[s].cut.is_some() {
            return;
        }
        let voters: Vec<u8> = (0..self.seat_count)
            .filter(|v| *v != seat && self.human[usize::from(*v)] && !self.removed[usize::from(*v)])
            .collect();
        if voters
            .iter()
            .any(|v| self.drops[s].votes[usize::from(*v)].is_none())
        {
            return;
        }
        let cut = voters
            .iter()
            .filter_map(|v| self.drops[s].votes[usize::from(*v)].flatten())
            .max();
        self.drops[s].cut = Some(cut);
        // The lowest seat holding the most relays to everyone who lacks turns.
        let holder = voters
            .iter()
            .copied()
            .find(|v| self.drops[s].votes[usize::from(*v)].flatten() == cut);
        if holder == Some(self.local_seat) {
            for voter in voters.iter().copied().filter(|v| *v != self.local_seat) {
                let has = self.drops[s].votes[usize::from(voter)].flatten();
                let turns: Vec<Vec<u8>> = self.kept_turns[s]
                    .iter()
                    .filter(|(frame, _)| has.map_or(true, |h| *frame > h) && Some(*frame) <= cut)
                    .map(|(_, raw)| raw.clone())
                    .collect();
                for raw in turns {
                    let message = turn::encode_relay(seat, &raw);
                    let _ = self.endpoint.send(voter, &message);
                }
            }
        }
        self.maybe_queue_removal(seat);
    }

    /// With the cut known and every turn up to it here, queue the removal on
    /// the tag of the first turn nobody has.
    fn maybe_queue_removal(&mut self, seat: u8) {
        let s = usize::from(seat);
        let Some(cut) = self.drops[s].cut else { return };
        if self.drops[s].removal_queued || self.received_through[s] < cut {
            return;
        }
        let first_missing = match cut {
            None => self.send_history.front().map(|(f, _)| *f).unwrap_or(0),
            Some(c) => match self.send_history.iter().find(|(f, _)| *f > c) {
                Some((f, _)) => *f,
                None => return, // this machine has not reached that send frame yet
            },
        };
        let tag = match self.send_history.iter().find(|(f, _)| *f == first_missing) {
            Some((_, tag)) => *tag,
            None => return,
        };
        let handle = self.store_item(Item::Removal(seat));
        if self.machine.queue_command(tag, seat, handle).is_err() {
            // Unreachable while readiness holds every machine before that tag.
            self.take_item(handle);
            return;
        }
        self.drops[s].removal_queued = true;
    }

    fn store_item(&mut self, item: Item) -> u64 {
        match self.free.pop() {
            Some(index) => {
                self.store[index] = Some(item);
                index as u64 + 1
            }
            None => {
                self.store.push(Some(item));
                self.store.len() as u64
            }
        }
    }

    fn take_item(&mut self, handle: u64) -> Option<Item> {
        if handle == 0 {
            return None;
        }
        let index = (handle - 1) as usize;
        let item = self.store.get_mut(index)?.take();
        if item.is_some() {
            self.free.push(index);
        }
        item
    }

    /// Validate and act on one datagram from `source` at local time `now_us`.
    pub fn handle_datagram(&mut self, now_us: u64, source: SocketAddr, datagram: &[u8]) {
        self.last_local_us = self.last_local_us.max(now_us);
        let Ok(from) = self.endpoint.handle_datagram(now_us, source, datagram) else {
            return; // dropped and counted by the endpoint
        };
        // Every round-trip sample goes into the report interval as it is
        // taken (S3: the interval's worst), even while frames stall.
        if let Some(link) = self.endpoint.link(from) {
            let samples = link.rtt().samples();
            if samples != self.rtt_samples_seen[usize::from(from)] {
                self.rtt_samples_seen[usize::from(from)] = samples;
                let _ = self.measurements.sample_link(from, link.report_rtt(now_us));
            }
        }
        // Messages are copied into one reused buffer: no allocation per message.
        let mut message = std::mem::take(&mut self.receive_buffer);
        message.resize(MAX_MESSAGE_BYTES, 0);
        while let Ok(Some((seat, len))) = self.endpoint.recv_into(&mut message) {
            if self.handle_message(now_us, seat, &message[..len]).is_err() {
                self.stats.malformed_messages += 1;
            }
        }
        self.receive_buffer = message;
        while let Some((seat, event)) = self.endpoint.poll_event() {
            self.events.push_back(match event {
                LinkEvent::Lost => SessionEvent::LinkLost { seat },
                LinkEvent::Recovered => SessionEvent::LinkRecovered { seat },
            });
        }
    }

    fn handle_message(&mut self, now_us: u64, seat: u8, message: &[u8]) -> Result<()> {
        match turn::decode(message)? {
            Message::Turn(part) => self.handle_turn(seat, part, message),
            Message::Ping { t0 } => {
                let now = self.reference_now(now_us);
                let reply = turn::encode_pong(t0, now, now);
                self.endpoint.send(seat, &reply).map(|_| ())
            }
            Message::Pong { t0, t1, t2 } => {
                if self.machine.master() != Some(seat) {
                    return Ok(()); // an answer from a former master
                }
                let t3 = now_us as i64;
                let sample = ClockSample::new(t0, t1, t2, t3)?;
                self.clock.add_sample(sample, t3).map(|_| ())
            }
            Message::DropVote { dropped, holds, .. } => {
                if usize::from(dropped) >= usize::from(self.seat_count) || dropped == seat {
                    return Err(Error::Malformed("bad drop vote"));
                }
                if self.removed[usize::from(dropped)] || dropped == self.local_seat {
                    return Ok(());
                }
                self.drops[usize::from(dropped)].votes[usize::from(seat)] = Some(holds);
                self.vote_drop(dropped);
                self.check_drop(dropped);
                Ok(())
            }
            Message::Relay { dropped, part } => {
                // A turn of a player being dropped, relayed by the machine that
                // holds the most of them. It may arrive before this machine has
                // every vote: accept it anyway (it came over an authenticated
                // link from a seated player); `handle_turn` voids anything past
                // the cut once the cut is known, and the holder never relays
                // past it.
                let valid = usize::from(dropped) < usize::from(self.seat_count)
                    && self.human[usize::from(dropped)]
                    && dropped != self.local_seat
                    && dropped != seat;
                if !valid {
                    return Err(Error::Malformed("bad relay"));
                }
                if self.removed[usize::from(dropped)] {
                    return Ok(());
                }
                self.handle_turn(dropped, part, &message[turn::RELAY_HEADER_BYTES..])
            }
        }
    }

    fn handle_turn(&mut self, seat: u8, part: turn::TurnPart, raw: &[u8]) -> Result<()> {
        let s = usize::from(seat);
        if self.received_through[s].is_some_and(|r| part.send_frame <= r) {
            return Ok(()); // already have it (a relay of a turn that arrived)
        }
        if let Some(Some(cut)) = self.drops[s].cut {
            if part.send_frame > cut {
                return Ok(()); // void: after the dropped player's cut
            }
        }
        // Keep the raw turn for relaying, reusing the oldest buffer.
        let kept = &mut self.kept_turns[s];
        let mut buffer = if kept.len() >= KEPT_TURNS {
            kept.pop_front().map(|(_, b)| b).unwrap_or_default()
        } else {
            Vec::new()
        };
        buffer.clear();
        buffer.extend_from_slice(raw);
        kept.push_back((part.send_frame, buffer));
        for record in part.records {
            match record {
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
        let slot = &mut self.partial[s];
        let items = match slot.take() {
            Some((frame, mut items)) if frame == part.send_frame => {
                items.extend(part.items);
                items
            }
            _ => part.items,
        };
        if part.index + 1 < part.count {
            *slot = Some((part.send_frame, items));
            return Ok(());
        }
        for item in items {
            let handle = self.store_item(item);
            if let Err(e) = self.machine.queue_command(part.tag, seat, handle) {
                self.take_item(handle);
                return Err(e);
            }
        }
        self.received_through[s] = Some(part.send_frame);
        self.maybe_queue_removal(seat);
        Ok(())
    }

    fn note_checksum(&mut self, frame: u32, seat: u8, value: u64) {
        let index = match self.checksums.iter().position(|(f, _)| *f == frame) {
            Some(i) => i,
            None => {
                if self.checksums.len() >= KEPT_CHECKSUM_FRAMES {
                    self.checksums.pop_front();
                }
                self.checksums.push_back((frame, [None; MAX_SEATS]));
                self.checksums.len() - 1
            }
        };
        let values = &mut self.checksums[index].1;
        values[usize::from(seat)] = Some(value);
        let present: Vec<u8> = (0..self.seat_count)
            .filter(|s| self.human[usize::from(*s)] && !self.removed[usize::from(*s)])
            .collect();
        if present.iter().all(|s| values[usize::from(*s)].is_some()) {
            let reference = values[usize::from(present[0])];
            let mut differ = 0u32;
            for s in &present {
                if values[usize::from(*s)] != reference {
                    differ |= 1 << s;
                }
            }
            self.checksums.remove(index);
            if differ != 0 {
                self.stats.desyncs += 1;
                self.events.push_back(SessionEvent::Desync {
                    frame,
                    seats: differ,
                });
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
        self.last_local_us = self.last_local_us.max(now_us);
        self.endpoint.handle_timeout(now_us);
        while let Some((seat, event)) = self.endpoint.poll_event() {
            self.events.push_back(match event {
                LinkEvent::Lost => SessionEvent::LinkLost { seat },
                LinkEvent::Recovered => SessionEvent::LinkRecovered { seat },
            });
        }
        if !self.is_master() && now_us >= self.next_ping_us && !self.left {
            if let Some(master) = self.machine.master() {
                let ping = turn::encode_ping(now_us as i64);
                let _ = self.endpoint.send(master, &ping);
                self.pings_sent += 1;
                let interval = if self.pings_sent < FIRST_PINGS {
                    FIRST_PING_INTERVAL_US
                } else {
                    PING_INTERVAL_US
                };
                self.next_ping_us = now_us + interval;
            }
        }
    }

    /// The earliest local time at which something is due: a transport timer,
    /// a clock ping, or the next frame (unless it is waiting for turns: then
    /// an arriving datagram is what can release it).
    pub fn poll_timeout(&mut self) -> Option<u64> {
        let mut next = self.endpoint.poll_timeout();
        if !self.is_master() && !self.left {
            next = Some(next.map_or(self.next_ping_us, |t| t.min(self.next_ping_us)));
        }
        // A frame waiting for turns is released by a datagram, not by time.
        if self.waiting_since.is_none() {
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
        self.endpoint.poll_transmit(now_us, buf)
    }

    /// The next event for the engine.
    pub fn poll_event(&mut self) -> Option<SessionEvent> {
        self.events.pop_front()
    }

    /// Commands executed by the latest frame [`advance`](Self::advance) ran,
    /// in execution order.
    pub fn executed(&self) -> &[ExecutedCommand] {
        &self.executed
    }

    /// Whether every present peer's turns that may hold commands due by
    /// `frame` are here.
    fn ready(&self, frame: u32) -> bool {
        self.missing_for(frame).next().is_none()
    }

    /// The peers whose turns that may hold commands due by `frame` are not
    /// all here yet.
    fn missing_for(&self, frame: u32) -> impl Iterator<Item = u8> + '_ {
        let needed = self
            .send_history
            .iter()
            .rev()
            .find(|(_, tag)| *tag <= frame)
            .map(|(s, _)| *s);
        self.peers().filter(move |p| {
            let Some(needed) = needed else { return false };
            let s = usize::from(*p);
            let limit = match self.drops[s].cut {
                Some(None) => return false,
                Some(Some(cut)) => needed.min(cut),
                None => needed,
            };
            !self.received_through[s].is_some_and(|r| r >= limit)
        })
    }

    /// The seats the next frame is waiting for (their turns have not all
    /// arrived), as a bit mask: what a "waiting for players" screen shows.
    pub fn waiting_for(&self) -> u32 {
        let next = self.frame.map_or(0, |f| f + 1);
        self.missing_for(next)
            .fold(0, |mask, seat| mask | 1 << seat)
    }

    /// Run the next frame if it is due at local time `now_us` and ready.
    pub fn advance(&mut self, now_us: u64) -> Result<Advance> {
        self.last_local_us = self.last_local_us.max(now_us);
        if self.left {
            return Ok(Advance::Left);
        }
        let next_frame = self.frame.map_or(0, |f| f + 1);
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
        if !self.ready(next_frame) {
            if self.waiting_since.is_none() {
                self.waiting_since = Some(now_us);
                self.measurements.wait_begin(now_us)?;
            }
            return Ok(Advance::Waiting);
        }
        if let Some(since) = self.waiting_since.take() {
            self.measurements.wait_end(now_us.max(since))?;
            self.stats.stalled_frames += 1;
            self.stats.stall_us += now_us.saturating_sub(since);
            if self.is_master() {
                // The master's schedule is where it actually is: re-anchor so
                // nobody races to catch up after a stall.
                if let Some(pacer) = self.pacer.as_mut() {
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
        self.frame = Some(frame);
        let start = self.machine.begin_frame(frame)?;
        if start.executes_commands {
            while let Some(due) = self.machine.pop_due() {
                let Some(item) = self.take_item(due.item) else {
                    continue;
                };
                match item {
                    Item::Command(bytes) => {
                        self.executed.push(ExecutedCommand {
                            seat: due.seat,
                            tag: due.tag,
                            bytes,
                        });
                    }
                    Item::Report(report) => {
                        let _ = self.machine.execute_report(due.seat, report);
                    }
                    Item::Timing(event) => {
                        let _ = self.machine.execute_timing_event(due.seat, event);
                    }
                    Item::Removal(seat) => self.execute_removal(frame, seat),
                }
            }
        }
        if let Some(pacer) = self.pacer.as_mut() {
            let _ = pacer.frame_started(frame, now_ref);
        }
        self.collect_machine_outputs()?;
        if self.left {
            return Ok(());
        }
        if is_report_frame(frame) {
            let report = self.measurements.take_report();
            self.outbox.push(Item::Report(report));
        }
        if let Some(event) = self.machine.end_frame()? {
            self.outbox.push(Item::Timing(event));
        }
        if self.machine.is_send_frame() {
            self.send_turn(frame)?;
        }
        Ok(())
    }

    fn execute_removal(&mut self, frame: u32, seat: u8) {
        if self.machine.execute_removal(seat).is_err() {
            return;
        }
        self.removed[usize::from(seat)] = true;
        let _ = self.measurements.remove_peer(seat);
        if seat == self.local_seat {
            self.left = true;
        } else {
            let _ = self.endpoint.remove_peer(seat);
        }
        self.events
            .push_back(SessionEvent::PlayerRemoved { frame, seat });
    }

    fn collect_machine_outputs(&mut self) -> Result<()> {
        while let Some(output) = self.machine.poll_output() {
            if let Output::FrameRateChanged { frame, fps } = output {
                if let Some(pacer) = self.pacer.as_mut() {
                    if frame > 0 {
                        pacer.set_fps(fps, frame)?;
                    }
                }
            }
            let event = SessionEvent::Timing(output);
            self.events.push_back(event);
        }
        Ok(())
    }

    /// Send this send frame's turn to every peer; keep our own items.
    fn send_turn(&mut self, frame: u32) -> Result<()> {
        let tag = self.machine.command_tag();
        self.send_history.push_back((frame, tag));
        // Readiness and drops only look at recent send frames.
        if self.send_history.len() > KEPT_TURNS {
            self.send_history.pop_front();
        }
        if self.is_master() {
            if let Some(pacer) = self.pacer.as_ref() {
                self.records
                    .push(Record::Anchor {
                        frame,
                        start_us: pacer.ideal_start_us(frame),
                    });
            }
        }
        let items: Vec<Item> = std::mem::take(&mut self.outbox);
        let records = std::mem::take(&mut self.records);
        let max = self.endpoint.config().link.max_message_bytes();
        let messages = turn::encode_turn(frame, tag, &items, &records, max)?;
        let peers: Vec<u8> = self.peers().collect();
        for peer in peers {
            for message in &messages {
                self.endpoint.send(peer, message)?;
                self.stats.turn_messages += 1;
            }
        }
        // Our own items execute here too, in issue order.
        for item in items {
            let handle = self.store_item(item);
            self.machine.queue_command(tag, self.local_seat, handle)?;
        }
        for seat in 0..self.seat_count {
            if self.drops[usize::from(seat)].cut.is_some() {
                self.maybe_queue_removal(seat);
            }
        }
        Ok(())
    }

    /// The timing machine (read-only): timing in force, target, status.
    pub fn machine(&self) -> &TimingMachine {
        &self.machine
    }

    /// The endpoint (read-only): per-link round trips and diagnostics.
    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// This machine's measurements: the engine adds its frame work here.
    pub fn measurements(&mut self) -> &mut Measurements {
        &mut self.measurements
    }

    /// The latest frame run, if any.
    pub fn frame(&self) -> Option<u32> {
        self.frame
    }

    /// Counters.
    pub fn stats(&self) -> LockstepStats {
        self.stats
    }

    /// Whether this player has left (its removal executed).
    pub fn has_left(&self) -> bool {
        self.left
    }

    /// The clock offset applied to reach reference time, µs.
    pub fn clock_offset_us(&self) -> i64 {
        self.clock.applied_offset_us()
    }

    /// Bytes this session holds on behalf of remote input and the engine:
    /// queued items, turns being assembled, turns kept for relaying, the
    /// outbox. S8 requires it bounded whatever peers send.
    pub fn held_bytes(&self) -> usize {
        let item = |i: &Item| i.encoded_len() + 16;
        let stored: usize = self.store.iter().flatten().map(item).sum();
        let partial: usize = self
            .partial
            .iter()
            .flatten()
            .map(|(_, items)| items.iter().map(item).sum::<usize>())
            .sum();
        let kept: usize = self
            .kept_turns
            .iter()
            .map(|k| k.iter().map(|(_, raw)| raw.len() + 8).sum::<usize>())
            .sum();
        let outbox: usize = self.outbox.iter().map(item).sum();
        stored + partial + kept + outbox + self.store.len() * 8
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
        self.session.outbox.push(item);
    }

    /// Send raw `message` on the link to `seat`.
    pub fn send(&mut self, seat: u8, message: &[u8]) -> Result<()> {
        self.session.endpoint.send(seat, message).map(|_| ())
    }

    /// This machine's latest send frame and its tag.
    pub fn last_turn(&self) -> Option<(u32, u32)> {
        self.session.send_history.back().copied()
    }

    /// Largest link message.
    pub fn max_message_bytes(&self) -> usize {
        self.session.endpoint.config().link.max_message_bytes()
    }
}
