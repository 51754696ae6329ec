//! The original games' engines, modelled for the baselines `ra`,
//! `protocol0` and `protocol0-ts`: each machine runs its game's own queue,
//! wait rule, connections, resends, response time and pacing, so a
//! baseline loses what the real game loses — no more, no less. The rules
//! are [`rungs_core::timing::baselines`]; `docs/baselines.md` cites every fact
//! and lists what still differs.
//!
//! A machine's loop, as `Queue_AI_Multiplayer` runs it (Red Alert's
//! `QUEUE.CPP`; Tiberian Sun and Red Alert 2 descend from it):
//! - **Every frame**: on multiples of 128 (not 0) every machine queues a
//!   PROCESS_TIME event (its average whole ticks per frame) and sets its
//!   connections' resend delay to its response time plus 10 ticks; the
//!   master (seat 0) then queues a TIMING event (Red Alert: MaxAhead from
//!   the worst of *its own* connections, the frame rate from the slowest
//!   PROCESS_TIME; protocol 0: a pending level's timing at 60 fps, else the
//!   timing in force at that frame rate). Under protocol 0 each machine
//!   also queues its RESPONSE_TIME_2 on its own cadence.
//! - **Send frames only** (multiples of FrameSendRate): one packet to every
//!   peer — a FRAMEINFO (this send frame, the frame its events execute on,
//!   how many events this machine has sent in all) and the queued events,
//!   fewer when the connections' queues fill; it asks for an
//!   acknowledgement when it carries events. Then the wait: the frame runs
//!   once every peer's latest announced frame is within MaxAhead of it and
//!   every event the peers announced has arrived ([`red_alert::can_advance`]);
//!   a waiting machine re-announces its frame (FRAMESYNC) every `MaxAhead << 3`
//!   ticks. Then the events due execute.
//! - **Pacing**: the next frame starts when the 60 Hz timer has counted
//!   `60 / rate` ticks from this frame's start, or at once if the frame
//!   took longer.
//!
//! What the model keeps of rungs: the schedule (S5) applies TIMING events
//! (an increase at once, a decrease staged until every event sent under
//! the old MaxAhead has come due, where the originals apply both at once),
//! and a frame also waits for the packets whose events are due on it when
//! a look-ahead has just grown (the originals' `NewMaxAheadFrame` window
//! reschedules such events instead). Datagrams are the simulator's layout
//! (`packet.rs`).

mod connection;
mod packet;

use std::collections::VecDeque;
use std::net::SocketAddr;

use connection::Connection;
use packet::{Event, FrameInfo, Packet};

use rungs_core::error::{Error, Result};
use rungs_core::link::Transmit;
use rungs_core::report::MAX_SEATS;
use rungs_core::session::{Advance, ExecutedCommand, LockstepStats, SessionEvent};
use rungs_core::timing::baselines::protocol0::{self, ResponseEvent};
use rungs_core::timing::baselines::{
    red_alert, tick_edge_us, ticks_at, LatencyLevels, OriginalGame,
};
use rungs_core::timing::{Changed, Output, Schedule, SendHistory, Timing, TimingEvent};

/// The master's seat: the first human in house order (every seat of a
/// simulated game is human).
const MASTER: u8 = 0;
/// A wait of at most this share of a frame is no stall (as rungs' own
/// count: nothing a player sees).
const ON_RATE_SLACK_DIVISOR: u64 = 256;
/// Room for a packet's events (the original's packets hold 546 bytes less
/// their header).
const MAX_EVENT_BYTES: usize = 500;

/// How one machine of a modelled game is set up.
#[derive(Debug, Clone)]
pub struct ClassicConfig {
    pub game: OriginalGame,
    /// This machine's seat.
    pub seat: u8,
    /// Players, seats `0..players`.
    pub players: u8,
    /// The frame rate the game speed allows.
    pub speed_fps: u8,
    /// Every other player's address.
    pub peers: Vec<(u8, SocketAddr)>,
    /// The lobby's response time as this machine measured it, ticks (Red
    /// Alert starts from it).
    pub lobby_response_ticks: u32,
}

/// One peer as the queue and the connection manager see it.
#[derive(Debug)]
struct Peer {
    seat: u8,
    address: SocketAddr,
    connection: Connection,
    /// The latest frame it announced (`their_frame`).
    their_frame: u32,
    /// Events it announced (`their_sent`) and events received (`their_recv`).
    their_sent: u32,
    their_recv: u32,
}

/// A send frame waiting for the other players.
#[derive(Debug, Clone, Copy)]
struct Wait {
    since_us: u64,
    framesync_tick: u64,
}

/// An event on the DoList: it executes on the first send frame at or
/// after `tag`, in (tag, seat, the sender's event order).
#[derive(Debug, Clone)]
struct Due {
    tag: u32,
    seat: u8,
    seq: u32,
    event: Event,
}

/// One machine of an original game. Sans-IO, like [`rungs_core::session::LockstepSession`],
/// whose calls it answers: the simulator drives either the same way.
#[derive(Debug)]
pub struct ClassicEngine {
    game: OriginalGame,
    seat: u8,
    players: u8,
    speed_fps: u8,
    schedule: Schedule,
    sends: SendHistory,
    /// The latest frame run.
    frame: Option<u32>,
    /// The frame begun and not yet run (its packet sent, waiting).
    open: Option<(u32, Option<u32>, Option<Wait>)>,
    /// When the next frame is due (`None` before frame 0: at once).
    next_due_us: Option<u64>,
    frame_period_us: u64,
    last_executed_send_frame: Option<u32>,
    out_list: VecDeque<Event>,
    do_list: Vec<Due>,
    /// Events sent in all (`my_sent`).
    my_sent: u32,
    peers: Vec<Peer>,
    work_us: u64,
    work_frames: u32,
    /// Each player's last executed PROCESS_TIME (`ProcessTime`, -1 before).
    process_ticks: [Option<u32>; MAX_SEATS],
    levels: Option<LatencyLevels>,
    next_response_frame: u32,
    executed: Vec<ExecutedCommand>,
    events: VecDeque<SessionEvent>,
    outbox: VecDeque<(usize, Vec<u8>)>,
    stats: LockstepStats,
    scratch: Vec<u8>,
}

impl ClassicEngine {
    /// A machine on the eve of frame 0.
    pub fn new(config: &ClassicConfig) -> Result<ClassicEngine> {
        if config.seat >= config.players || usize::from(config.players) > MAX_SEATS {
            return Err(Error::invalid("seat", "one of the players"));
        }
        let (start, fps, retry_ticks, levels) = match config.game {
            OriginalGame::RedAlert => {
                let sp = red_alert::FRAME_SEND_RATE;
                let la = red_alert::lan_start_max_ahead(config.lobby_response_ticks, sp);
                (
                    Timing::new(sp, la)?,
                    red_alert::START_FPS,
                    config.lobby_response_ticks + red_alert::START_RETRY_MARGIN_TICKS,
                    None,
                )
            }
            OriginalGame::Protocol0(table) => {
                let (sp, la) = protocol0::START;
                (
                    Timing::new(sp, la)?,
                    config.speed_fps.clamp(1, 60),
                    protocol0::START_RETRY_TICKS,
                    Some(LatencyLevels::new(table)),
                )
            }
        };
        let next_response_frame = match config.game {
            OriginalGame::Protocol0(table) => table.first_send_frame(start.send_period()),
            OriginalGame::RedAlert => u32::MAX,
        };
        Ok(ClassicEngine {
            game: config.game,
            seat: config.seat,
            players: config.players,
            speed_fps: config.speed_fps.max(1),
            schedule: Schedule::starting_at(start, fps),
            sends: SendHistory::new(),
            frame: None,
            open: None,
            next_due_us: None,
            frame_period_us: 0,
            last_executed_send_frame: None,
            out_list: VecDeque::new(),
            do_list: Vec::new(),
            my_sent: 0,
            peers: config
                .peers
                .iter()
                .map(|(seat, address)| Peer {
                    seat: *seat,
                    address: *address,
                    connection: Connection::new(retry_ticks),
                    their_frame: 0,
                    their_sent: 0,
                    their_recv: 0,
                })
                .collect(),
            work_us: 0,
            work_frames: 0,
            process_ticks: [None; MAX_SEATS],
            levels,
            next_response_frame,
            executed: Vec::new(),
            events: VecDeque::new(),
            outbox: VecDeque::new(),
            stats: LockstepStats::default(),
            scratch: Vec::with_capacity(64),
        })
    }

    /// The player's command: it waits in the OutList for the next send
    /// frame's packet.
    pub fn submit_command(&mut self, bytes: &[u8]) -> Result<u32> {
        if bytes.len() > 255 {
            return Err(Error::invalid_value(
                "the command's length",
                bytes.len(),
                "at most one event's",
            ));
        }
        self.out_list.push_back(Event::Command(bytes.to_vec()));
        Ok(self.frame.map_or(0, |f| f + 1))
    }

    /// The frame's logic took `us` of CPU (for PROCESS_TIME).
    pub fn add_frame_work_us(&mut self, us: u64) {
        self.work_us += us;
        self.work_frames += 1;
    }

    /// Run the next frame if it is due at local time `now_us` and its
    /// peers allow it.
    pub fn advance(&mut self, now_us: u64) -> Result<Advance> {
        if let Some((frame, tag, _)) = self.open {
            if !self.ready(frame) {
                return Ok(Advance::Waiting);
            }
            self.finish(frame, tag, now_us);
            return Ok(Advance::Ran { frame });
        }
        if let Some(due) = self.next_due_us.filter(|due| now_us < *due) {
            return Ok(Advance::NotDue { at_us: due });
        }
        let frame = self.frame.map_or(0, |f| f + 1);
        self.begin(frame, now_us)?;
        let tag = self
            .schedule
            .is_send_frame(frame)
            .then(|| frame + u32::from(self.schedule.timing().look_ahead()));
        if let Some(tag) = tag {
            self.send_packet(frame, tag, now_us);
            if frame > 0 && !self.ready(frame) {
                let resend = red_alert::framesync_resend_ticks(self.schedule.timing().look_ahead());
                let wait = Wait {
                    since_us: now_us,
                    framesync_tick: ticks_at(now_us) + resend,
                };
                self.open = Some((frame, Some(tag), Some(wait)));
                return Ok(Advance::Waiting);
            }
        }
        self.finish(frame, tag, now_us);
        Ok(Advance::Ran { frame })
    }

    /// Step 1 of a frame: the schedule, the frame's timer, the events the
    /// frame queues.
    fn begin(&mut self, frame: u32, now_us: u64) -> Result<()> {
        let changed = self.schedule.begin_announced(frame);
        self.announce(frame, changed);
        // The frame's timer is set as it starts, at the rate in force.
        let ticks = red_alert::frame_ticks(self.schedule.fps());
        self.frame_period_us = tick_edge_us(ticks);
        self.next_due_us = Some(tick_edge_us(ticks_at(now_us) + ticks));
        if frame > 0 && frame % red_alert::TIMING_PERIOD == 0 {
            self.timing_period()?;
        }
        if frame >= self.next_response_frame {
            if let Some(levels) = &self.levels {
                let event = ResponseEvent::of(levels.table(), self.response_ticks());
                self.out_list.push_back(Event::ResponseTime(event));
            }
            self.next_response_frame = frame + protocol0::SEND_INTERVAL + 1;
        }
        self.open = Some((frame, None, None));
        Ok(())
    }

    /// The worst of this machine's own connections' response time, ticks
    /// (`IPXManagerClass::Response_Time`).
    fn response_ticks(&self) -> u32 {
        self.peers
            .iter()
            .map(|p| p.connection.response().mean_ticks())
            .max()
            .unwrap_or(0)
    }

    /// Every 128 frames: PROCESS_TIME, the resend delay, the master's TIMING.
    fn timing_period(&mut self) -> Result<()> {
        let real = self.response_ticks();
        // Protocol 0's spawner answers `Response_Time` with the worst
        // response time the players sent, so the resend delay follows it.
        let response = self.levels.as_ref().map_or(real, |l| l.worst_max_ahead());
        for peer in &mut self.peers {
            peer.connection
                .set_retry_ticks(response + red_alert::RETRY_MARGIN_TICKS);
        }
        let average = red_alert::average_ticks(self.work_us, self.work_frames);
        (self.work_us, self.work_frames) = (0, 0);
        self.out_list
            .push_back(Event::ProcessTime(average.min(u32::from(u16::MAX)) as u16));
        if self.seat != MASTER {
            return Ok(());
        }
        let known: Option<Vec<u32>> = (0..self.players)
            .map(|s| self.process_ticks[usize::from(s)])
            .collect();
        let Some(highest) = known.map(|t| t.into_iter().max().unwrap_or(0)) else {
            return Ok(()); // not every player's PROCESS_TIME has executed
        };
        let fps = red_alert::desired_fps(highest, self.speed_fps);
        let (timing, fps) = match (self.game, self.levels.as_mut()) {
            (OriginalGame::RedAlert, _) => {
                if self.my_sent < red_alert::EVENTS_BEFORE_TIMING {
                    return Ok(());
                }
                let sp = red_alert::FRAME_SEND_RATE;
                (Timing::new(sp, red_alert::max_ahead(real, fps, sp))?, fps)
            }
            (OriginalGame::Protocol0(_), Some(levels)) => levels
                .take_pending()
                .unwrap_or((self.schedule.timing(), fps)),
            (OriginalGame::Protocol0(_), None) => return Ok(()),
        };
        self.out_list.push_back(Event::Timing {
            fps,
            max_ahead: timing.look_ahead(),
            send_period: timing.send_period(),
        });
        Ok(())
    }

    /// The send frame's packet to every peer.
    fn send_packet(&mut self, frame: u32, tag: u32, now_us: u64) {
        let queued = self
            .peers
            .iter()
            .map(|p| p.connection.queued())
            .max()
            .unwrap_or(0);
        let mut count = red_alert::events_per_packet(queued, self.out_list.len());
        let mut bytes = 0;
        for (at, event) in self.out_list.iter().enumerate().take(count) {
            bytes += match event {
                Event::Command(b) => 2 + b.len(),
                _ => 4,
            };
            if bytes > MAX_EVENT_BYTES {
                count = at;
                break;
            }
        }
        let events: Vec<Event> = self.out_list.drain(..count).collect();
        for (at, event) in events.iter().enumerate() {
            self.do_list.push(Due {
                tag,
                seat: self.seat,
                seq: self.my_sent + at as u32,
                event: event.clone(),
            });
        }
        self.my_sent += count as u32;
        let info = FrameInfo {
            seat: self.seat,
            send_frame: frame,
            tag,
            command_count: self.my_sent as u16,
        };
        let tick = ticks_at(now_us);
        for (index, peer) in self.peers.iter_mut().enumerate() {
            let ack_id = (count > 0).then(|| peer.connection.next_id());
            packet::data(&mut self.scratch, ack_id, info, &events);
            if let Some(id) = ack_id {
                peer.connection.keep(id, self.scratch.clone(), tick);
            }
            self.outbox.push_back((index, self.scratch.clone()));
        }
    }

    /// `Can_Advance`, and the packets whose events are due on `frame`.
    fn ready(&self, frame: u32) -> bool {
        if frame == 0 {
            return true;
        }
        let needed = self.sends.required_send_frame(frame).ok().flatten();
        let max_ahead = self.schedule.timing().look_ahead();
        red_alert::can_advance(
            frame,
            max_ahead,
            self.peers.iter().map(|p| {
                let holds_due = needed.map_or(true, |n| p.their_frame >= n);
                (
                    Some(p.their_frame),
                    p.their_recv >= p.their_sent && holds_due,
                )
            }),
        )
    }

    /// The frame runs: its stall, its due events, its place in the history.
    fn finish(&mut self, frame: u32, tag: Option<u32>, now_us: u64) {
        // A frame that waited for the other players stalled by the wait:
        // it began when its timer (or its own work) let it. The frame's
        // timer ran meanwhile: the next frame is due a period after this
        // one began, or at once.
        let wait = self.open.take().and_then(|(_, _, w)| w);
        if let Some(wait) = wait {
            let stall = now_us.saturating_sub(wait.since_us);
            if stall * ON_RATE_SLACK_DIVISOR > self.frame_period_us {
                self.stats.stalled_frames += 1;
                self.stats.stall_us += stall;
            }
        }
        self.executed.clear();
        if tag.is_some() {
            self.execute_due(frame);
            self.last_executed_send_frame = Some(frame);
        }
        self.sends.frame_ended(frame, tag);
        self.frame = Some(frame);
    }

    /// Execute the events due on send frame `frame`.
    fn execute_due(&mut self, frame: u32) {
        let mut due: Vec<Due> = Vec::new();
        self.do_list.retain(|d| {
            if d.tag <= frame {
                due.push(d.clone());
                false
            } else {
                true
            }
        });
        due.sort_by_key(|d| (d.tag, d.seat, d.seq));
        for d in due {
            match d.event {
                Event::Command(bytes) => self.executed.push(ExecutedCommand {
                    seat: d.seat,
                    tag: d.tag,
                    bytes,
                }),
                Event::ProcessTime(ticks) => {
                    self.process_ticks[usize::from(d.seat)] = Some(u32::from(ticks));
                }
                Event::Timing {
                    fps,
                    max_ahead,
                    send_period,
                } => {
                    let Ok(target) = Timing::new(send_period, max_ahead) else {
                        self.stats.refused_items += 1;
                        continue;
                    };
                    let (_, changed) = self.schedule.apply(
                        frame,
                        TimingEvent {
                            target,
                            fps: fps.max(1),
                        },
                    );
                    self.announce(frame, changed);
                }
                Event::ResponseTime(event) => {
                    if let Some(levels) = self.levels.as_mut() {
                        levels.execute(d.seat, event, frame);
                    }
                }
            }
        }
    }

    fn announce(&mut self, frame: u32, changed: Changed) {
        if changed.timing {
            self.events
                .push_back(SessionEvent::Timing(Output::TimingChanged {
                    frame,
                    timing: self.schedule.timing(),
                }));
        }
        if changed.fps {
            self.events
                .push_back(SessionEvent::Timing(Output::FrameRateChanged {
                    frame,
                    fps: self.schedule.fps(),
                }));
        }
    }

    /// A datagram from `source` at local time `now_us`.
    pub fn handle_datagram(&mut self, now_us: u64, source: SocketAddr, datagram: &[u8]) {
        let Some(index) = self.peers.iter().position(|p| p.address == source) else {
            self.stats.malformed_messages += 1;
            return;
        };
        let Some(packet) = packet::read(datagram) else {
            self.stats.malformed_messages += 1;
            return;
        };
        let tick = ticks_at(now_us);
        match packet {
            Packet::Ack(id) => self.peers[index].connection.acknowledged(id, tick),
            Packet::FrameSync(info) => self.announced(index, info),
            Packet::Data {
                ack_id,
                info,
                events,
            } => {
                if let Some(id) = ack_id {
                    packet::ack(&mut self.scratch, id);
                    self.outbox.push_back((index, self.scratch.clone()));
                    if !self.peers[index].connection.arrived(id) {
                        return;
                    }
                }
                self.announced(index, info);
                let peer = &mut self.peers[index];
                peer.their_recv += events.len() as u32;
                let first = u32::from(info.command_count).saturating_sub(events.len() as u32);
                let seat = peer.seat;
                for (at, event) in events.into_iter().enumerate() {
                    if self.last_executed_send_frame.is_some_and(|f| info.tag <= f) {
                        // The original's fatal "packet received too late";
                        // the wait rule above keeps it from happening.
                        self.stats.refused_messages += 1;
                        continue;
                    }
                    self.do_list.push(Due {
                        tag: info.tag,
                        seat,
                        seq: first + at as u32,
                        event,
                    });
                }
            }
        }
    }

    /// A FRAMEINFO or FRAMESYNC from peer `index`: its frame and count.
    fn announced(&mut self, index: usize, info: FrameInfo) {
        let peer = &mut self.peers[index];
        peer.their_frame = peer.their_frame.max(info.send_frame);
        peer.their_sent = peer.their_sent.max(u32::from(info.command_count));
    }

    /// Timers due at local time `now_us`: resends, a waiting machine's
    /// FRAMESYNC.
    pub fn handle_timeout(&mut self, now_us: u64) {
        let tick = ticks_at(now_us);
        for (index, peer) in self.peers.iter_mut().enumerate() {
            let outbox = &mut self.outbox;
            peer.connection
                .resends(tick, |bytes| outbox.push_back((index, bytes.to_vec())));
        }
        let Some((frame, Some(tag), Some(mut wait))) = self.open else {
            return;
        };
        if tick >= wait.framesync_tick {
            let info = FrameInfo {
                seat: self.seat,
                send_frame: frame,
                tag,
                command_count: self.my_sent as u16,
            };
            packet::frame_sync(&mut self.scratch, info);
            for index in 0..self.peers.len() {
                self.outbox.push_back((index, self.scratch.clone()));
            }
            wait.framesync_tick =
                tick + red_alert::framesync_resend_ticks(self.schedule.timing().look_ahead());
            self.open = Some((frame, Some(tag), Some(wait)));
        }
    }

    /// The earliest local time something is due: the next frame (unless
    /// one is waiting: a datagram releases it), a resend, a FRAMESYNC.
    pub fn poll_timeout(&self) -> Option<u64> {
        let mut next = match self.open {
            Some((_, _, Some(wait))) => tick_edge_us(wait.framesync_tick),
            Some(_) => u64::MAX,
            None => self.next_due_us.unwrap_or(u64::MAX),
        };
        for peer in &self.peers {
            if let Some(tick) = peer.connection.next_resend_tick() {
                next = next.min(tick_edge_us(tick));
            }
        }
        (next != u64::MAX).then_some(next)
    }

    /// The next datagram to send, written into `buf`.
    pub fn poll_transmit(&mut self, _now_us: u64, buf: &mut [u8]) -> Option<Transmit> {
        let (index, bytes) = self.outbox.pop_front()?;
        let len = bytes.len().min(buf.len());
        buf[..len].copy_from_slice(&bytes[..len]);
        let peer = &self.peers[index];
        Some(Transmit {
            seat: peer.seat,
            destination: peer.address,
            len,
        })
    }

    pub fn poll_event(&mut self) -> Option<SessionEvent> {
        self.events.pop_front()
    }

    /// The commands the latest frame run executed.
    pub fn executed(&self) -> &[ExecutedCommand] {
        &self.executed
    }

    pub fn frame(&self) -> Option<u32> {
        self.frame
    }

    pub fn stats(&self) -> LockstepStats {
        self.stats
    }

    /// The seats the open frame waits for.
    pub fn waiting_for(&self) -> u32 {
        let Some((frame, _, Some(_))) = self.open else {
            return 0;
        };
        let max_ahead = u64::from(self.schedule.timing().look_ahead());
        self.peers
            .iter()
            .filter(|p| {
                p.their_recv < p.their_sent
                    || u64::from(frame) >= u64::from(p.their_frame) + max_ahead
            })
            .fold(0, |mask, p| mask | 1 << p.seat)
    }

    /// Bytes held: queued events and packets kept for resends.
    pub fn held_bytes(&self) -> usize {
        let events = self.out_list.len() + self.do_list.len();
        events * 8
            + self
                .peers
                .iter()
                .map(|p| p.connection.held_bytes())
                .sum::<usize>()
            + self.outbox.iter().map(|(_, b)| b.len()).sum::<usize>()
    }

    /// The timing in force.
    pub fn timing(&self) -> Timing {
        self.schedule.timing()
    }

    /// The frame rate in force.
    pub fn fps(&self) -> u8 {
        self.schedule.fps()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rungs_core::timing::baselines::Protocol0Table;

    fn address(seat: u8) -> SocketAddr {
        SocketAddr::from(([10, 0, 0, seat + 1], 4000))
    }

    /// Seat 0 of a two-player Red Alert game whose lobby measured 150 ms
    /// (9 ticks): it starts at 3/6 and resends after 11 ticks.
    fn red_alert() -> ClassicEngine {
        ClassicEngine::new(&ClassicConfig {
            game: OriginalGame::RedAlert,
            seat: 0,
            players: 2,
            speed_fps: 30,
            peers: vec![(1, address(1))],
            lobby_response_ticks: 9,
        })
        .unwrap()
    }

    /// Run frames until `frame` is open or has run; the local time reached.
    fn run_to(engine: &mut ClassicEngine, frame: u32, mut now: u64) -> (Advance, u64) {
        loop {
            match engine.advance(now).unwrap() {
                Advance::NotDue { at_us } => now = at_us,
                Advance::Ran { frame: f } if f < frame => {}
                other => return (other, now),
            }
        }
    }

    /// Seat 1's packet of send frame `send_frame` (3/6: tagged 6 later),
    /// with its events so far.
    fn from_seat_1(send_frame: u32, command_count: u16, events: &[Event]) -> Vec<u8> {
        let mut out = Vec::new();
        let info = FrameInfo {
            seat: 1,
            send_frame,
            tag: send_frame + 6,
            command_count,
        };
        let ack = (!events.is_empty()).then_some(send_frame + 1);
        packet::data(&mut out, ack, info, events);
        out
    }

    #[test]
    fn red_alert_starts_at_the_lan_timing_and_30_fps() {
        let mut engine = red_alert();
        let (advance, _) = run_to(&mut engine, 0, 1_000);
        assert_eq!(advance, Advance::Ran { frame: 0 });
        assert_eq!(
            (engine.timing().to_string(), engine.fps()),
            ("3/6".to_owned(), 30)
        );
        assert_eq!(
            engine.poll_event(),
            Some(SessionEvent::Timing(Output::TimingChanged {
                frame: 0,
                timing: Timing::new(3, 6).unwrap()
            }))
        );
        // Frames are two whole ticks apart: the next is due at tick 2.
        assert_eq!(
            engine.advance(1_000).unwrap(),
            Advance::NotDue { at_us: 33_334 }
        );
    }

    #[test]
    fn a_send_frame_waits_for_the_peers_packet_one_send_period_past_its_commands() {
        let mut engine = red_alert();
        let command = Event::Command(vec![1, 0, 0, 0, 0]);
        // Frame 3 needs nothing yet (their frame 0 is within 6 of it).
        let (advance, now) = run_to(&mut engine, 3, 0);
        assert_eq!(advance, Advance::Ran { frame: 3 });
        // Frame 6 executes seat 1's command of send frame 0 (tagged 6), but
        // waits for its packet of send frame 3: 6 < 3 + 6.
        engine.handle_datagram(
            now,
            address(1),
            &from_seat_1(0, 1, std::slice::from_ref(&command)),
        );
        let (advance, now) = run_to(&mut engine, 6, now);
        assert_eq!(advance, Advance::Waiting);
        assert_eq!(engine.waiting_for(), 0b10);
        engine.handle_datagram(now + 5_000, address(1), &from_seat_1(3, 1, &[]));
        assert_eq!(
            engine.advance(now + 5_000).unwrap(),
            Advance::Ran { frame: 6 }
        );
        assert_eq!(engine.executed().len(), 1);
        assert_eq!(engine.executed()[0].seat, 1);
        // It waited 5 ms past its due time: one stalled frame.
        assert_eq!(
            (engine.stats().stalled_frames, engine.stats().stall_us),
            (1, 5_000)
        );
    }

    #[test]
    fn a_later_packet_does_not_release_a_frame_while_an_announced_event_is_missing() {
        let mut engine = red_alert();
        let (_, now) = run_to(&mut engine, 3, 0);
        // Send frame 0's packet (one event) is lost; send frame 3's says two
        // events were sent in all and carries the second.
        let second = Event::Command(vec![1, 1, 0, 0, 0]);
        engine.handle_datagram(now, address(1), &from_seat_1(3, 2, &[second]));
        let (advance, now) = run_to(&mut engine, 6, now);
        assert_eq!(
            advance,
            Advance::Waiting,
            "their frame is 3, but an event is missing"
        );
        let first = Event::Command(vec![1, 0, 0, 0, 0]);
        engine.handle_datagram(now, address(1), &from_seat_1(0, 1, &[first]));
        assert_eq!(engine.advance(now).unwrap(), Advance::Ran { frame: 6 });
    }

    #[test]
    fn a_command_packet_is_resent_after_the_retry_delay_and_acknowledged_at_once() {
        let mut engine = red_alert();
        engine.submit_command(&[0, 0, 0, 0, 0]).unwrap();
        let (_, now) = run_to(&mut engine, 0, 0);
        let mut buf = [0u8; 1500];
        let sent = engine.poll_transmit(now, &mut buf).unwrap();
        let first = buf[..sent.len].to_vec();
        assert!(matches!(
            packet::read(&first),
            Some(Packet::Data {
                ack_id: Some(1),
                ..
            })
        ));
        // The lobby's 9 ticks + 2: resent once more than 11 ticks have passed.
        assert_eq!(engine.peers[0].connection.next_resend_tick(), Some(12));
        engine.handle_timeout(tick_edge_us(11));
        assert!(engine.poll_transmit(tick_edge_us(11), &mut buf).is_none());
        engine.handle_timeout(tick_edge_us(12));
        let again = engine.poll_transmit(tick_edge_us(12), &mut buf).unwrap();
        assert_eq!(&buf[..again.len], &first[..]);
        // Acknowledged on tick 20: 20 ticks from the first send.
        let mut ack = Vec::new();
        packet::ack(&mut ack, 1);
        engine.handle_datagram(tick_edge_us(20), address(1), &ack);
        assert_eq!(engine.response_ticks(), 20);
        // A data packet is acknowledged at once, and again when it repeats.
        let packet = from_seat_1(0, 1, &[Event::Command(vec![1, 0, 0, 0, 0])]);
        for _ in 0..2 {
            engine.handle_datagram(tick_edge_us(21), address(1), &packet);
            let reply = engine.poll_transmit(tick_edge_us(21), &mut buf).unwrap();
            assert_eq!(packet::read(&buf[..reply.len]), Some(Packet::Ack(1)));
        }
        let from_peer = engine.do_list.iter().filter(|d| d.seat == 1).count();
        assert_eq!(from_peer, 1, "passed on once");
    }

    #[test]
    fn protocol0_sends_its_response_time_from_its_spawners_first_frame() {
        for (table, first) in [
            (Protocol0Table::YurisRevenge, 243),
            (Protocol0Table::TiberianSun, 181),
        ] {
            let mut engine = ClassicEngine::new(&ClassicConfig {
                game: OriginalGame::Protocol0(table),
                seat: 1,
                players: 2,
                speed_fps: 30,
                peers: vec![(0, address(0))],
                lobby_response_ticks: 9,
            })
            .unwrap();
            assert_eq!(engine.timing().to_string(), "2/12");
            engine.run_alone_to(first - 1);
            assert!(!engine
                .out_list
                .iter()
                .any(|e| matches!(e, Event::ResponseTime(_))));
            engine.run_alone_to(first);
            assert!(engine
                .out_list
                .iter()
                .any(|e| matches!(e, Event::ResponseTime(_))));
            assert_eq!(engine.next_response_frame, first + 31);
        }
    }

    impl ClassicEngine {
        /// Begin and finish frames up to `frame` with no peer in the way
        /// (as if every peer were far ahead): what a frame queues.
        fn run_alone_to(&mut self, frame: u32) {
            for peer in &mut self.peers {
                peer.their_frame = u32::MAX / 2;
            }
            let mut now = 0;
            while self.frame.map_or(true, |f| f < frame) {
                match self.advance(now).unwrap() {
                    Advance::NotDue { at_us } => now = at_us,
                    Advance::Ran { .. } => {}
                    other => panic!("{other:?}"),
                }
            }
        }
    }
}
