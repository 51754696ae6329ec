//! The engine integration session (S3, S5, S7): adaptive timing for an
//! engine that keeps its own transport, its own event queue and its own
//! event IDs.
//!
//! One [`EngineSession`] per machine composes the timing machine (S4–S6),
//! this machine's measurements (S3) and the event payloads (S7). The engine:
//!
//! 1. calls [`EngineSession::frame_begin`]; when the answer says the frame
//!    executes commands, it executes every queued event whose frame is at or
//!    before this one (S5), in (frame, seat, issue order), and passes each of
//!    rungs' events (TIMING, NETWORK_REPORT, LATENCYFUDGE) to
//!    [`EngineSession::event_executed`]; a removal of its own goes to
//!    [`EngineSession::player_removed`];
//! 2. measures: frame work, waits for other players, round trips per peer;
//! 3. calls [`EngineSession::frame_end`]. The session then hands it the
//!    events to queue (this machine's report on report frames, the master's
//!    timing event) and, on a send frame, says "send now" with the tag every
//!    event collected since the previous send frame is stamped with.
//!
//! Everything the engine should hear comes out as [`SessionOutput`]s
//! (callbacks in the C API).
//!
//! **Frame readiness.** Before executing frame `F` the engine must hold, from
//! every peer, the packet of the last send frame whose tag is at or before
//! `F`, and every packet before it. The engine hands rungs each packet as it
//! arrives ([`EngineSession::packet_received`]: the peer, its packet number,
//! its send frame) and asks [`EngineSession::peers_ready`]; rungs keeps the
//! contiguous watermark per peer and refuses a packet whose send frame cannot
//! be right (`timing::readiness`). "A packet tagged at or after `F` from
//! every peer" is not enough: during a staged decrease two consecutive send
//! frames carry the same tag (S5), and a transport that resends a lost packet
//! after later ones delivers them out of order.
//!
//! **The engine's own rules** (S7, [`EngineRules`]): an engine that runs an
//! event only on its exact frame restamps the events due on an executing
//! frame to it ([`EngineSession::due_tags`]: a tag between two executing
//! frames executes on the later one, S5) and keeps its fatal check for
//! anything older; an engine that sends before it executes (Tiberian Sun's
//! frame order) gets its send from `frame_begin` ([`SendOrder`]); an engine
//! that paces and measures with a tick timer is only asked for rates the
//! timer hits and may give its measurements in ticks.

use std::collections::VecDeque;
use std::fmt::Write as _;

use crate::error::{Error, Result};
use crate::report::{Effect, Measurements};
use crate::timing::readiness::{answer, PeerStreams, SendHistory};
use crate::timing::{MachineConfig, Output, TickTimer, TimingEvent, TimingMachine, Verdict};
use crate::wire::events::{ReportLayout, TimingLayout, TS_EVENT_DATA_LEN};

/// The engine's own event IDs for rungs' events (S7). rungs never invents one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventIds {
    /// TIMING (31 in Tiberian Sun, 29 in Red Alert).
    pub timing: u8,
    /// NETWORK_REPORT: a new event, so an ID no part of the game uses —
    /// neither the original table nor any mod or spawner loaded with it
    /// (in Tiberian Sun with the community spawner, 36 is protocol 0's
    /// RESPONSE_TIME_2). rungs has no default for it (S7).
    pub network_report: u8,
    /// LATENCYFUDGE (35 in Tiberian Sun), if the engine still has it: executed
    /// ones (old recordings) are accepted and ignored; rungs never sends it.
    pub latency_fudge: Option<u8>,
}

/// One of rungs' events, by what it does (S7).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventRole {
    /// TIMING: the master's timing event (S4.2).
    Timing,
    /// NETWORK_REPORT: a player's measurement report (S3).
    NetworkReport,
    /// LATENCYFUDGE: the old engine's event, accepted and ignored.
    LatencyFudge,
}

impl std::fmt::Display for EventRole {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            EventRole::Timing => "TIMING",
            EventRole::NetworkReport => "NETWORK_REPORT",
            EventRole::LatencyFudge => "LATENCYFUDGE",
        })
    }
}

impl EventIds {
    /// Each role with its ID, in this order: TIMING, NETWORK_REPORT,
    /// LATENCYFUDGE (when the engine has one).
    pub fn roles(&self) -> impl Iterator<Item = (EventRole, u8)> {
        [
            (EventRole::Timing, Some(self.timing)),
            (EventRole::NetworkReport, Some(self.network_report)),
            (EventRole::LatencyFudge, self.latency_fudge),
        ]
        .into_iter()
        .filter_map(|(role, id)| Some((role, id?)))
    }

    /// The first two roles that share one ID, and the ID; `None` when every
    /// role has its own.
    pub fn clash(&self) -> Option<(EventRole, EventRole, u8)> {
        let roles: Vec<(EventRole, u8)> = self.roles().collect();
        roles.iter().enumerate().find_map(|(i, &(first, id))| {
            roles[i + 1..]
                .iter()
                .find(|&&(_, other)| other == id)
                .map(|&(second, _)| (first, second, id))
        })
    }

    fn check(&self) -> Result<()> {
        match self.clash() {
            None => Ok(()),
            Some((first, second, id)) => Err(Error::invalid_value(
                format!("the {second} event ID"),
                id,
                format!("an ID other than the {first} event ID's (a distinct ID per role)"),
            )),
        }
    }

    /// "TIMING 31, NETWORK_REPORT 36 or LATENCYFUDGE 35", for messages.
    fn listed(&self) -> String {
        let mut roles: Vec<String> = self.roles().map(|(r, id)| format!("{r} {id}")).collect();
        let last = roles.pop().unwrap_or_default();
        if roles.is_empty() {
            last
        } else {
            format!("{} or {last}", roles.join(", "))
        }
    }
}

/// When the engine sends a send frame's packet, relative to executing that
/// frame's events (S5, S7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SendOrder {
    /// begin → execute → end → send: the send comes from
    /// [`EngineSession::frame_end`], under the timing in force after the
    /// frame's events executed (decision 2).
    #[default]
    AfterExecute,
    /// Tiberian Sun's order: a send frame sends first, then waits for its
    /// peers, then executes. The send comes from
    /// [`EngineSession::frame_begin`], tagged under the timing in force
    /// before the frame's events execute, and the frames that execute are
    /// exactly the send frames (decision 65).
    BeforeExecute,
}

/// The engine's own rules that rungs keeps to rather than replaces (S7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct EngineRules {
    /// The timer the engine paces and measures by, if it counts ticks: every
    /// rate is one it hits (`timing::tick_timer`), and
    /// [`EngineSession::rtt_sample_ticks`] / [`EngineSession::add_frame_ticks`]
    /// take its ticks. Every machine of a game uses the same one.
    pub tick_timer: Option<TickTimer>,
    /// When the engine sends.
    pub send_order: SendOrder,
}

/// Whether the current frame may execute ([`EngineSession::peers_ready`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Readiness {
    /// Every packet it needs is here (or it executes nothing).
    pub ready: bool,
    /// When not ready: the first peer, in house order, whose packets are
    /// missing (for `wait_begin_for`).
    pub waiting_for: Option<u8>,
}

/// How to set up a session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionConfig {
    /// Game speed's rate, seats in house order, local seat (S4).
    pub machine: MachineConfig,
    /// The engine's event IDs.
    pub ids: EventIds,
    /// TIMING payload layout: Tiberian Sun's 5 bytes, with the fog-of-war bias
    /// the engine keeps (S7). Red Alert's 4-byte layout has no send period, so
    /// it cannot carry the ladder; a Red Alert engine uses this layout under its
    /// own TIMING ID.
    pub timing_layout: TimingLayout,
    /// NETWORK_REPORT payload layout (compact ms or extended µs).
    pub report_layout: ReportLayout,
    /// The engine's own rules (tick timer, send order).
    pub rules: EngineRules,
}

/// An event payload, at most Tiberian Sun's 36-byte event union.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Payload {
    bytes: [u8; TS_EVENT_DATA_LEN],
    len: u8,
}

impl Payload {
    /// The payload bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }
}

impl std::fmt::Debug for Payload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:02x?}", self.as_bytes())
    }
}

/// Log levels (C: `RUNGS_LOG_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
pub enum LogLevel {
    /// An error (`RUNGS_LOG_ERROR`).
    Error = 0,
    /// Something refused while the game goes on: an executed event the
    /// session could not accept (`RUNGS_LOG_WARN`).
    Warn = 1,
    /// A decision or change: the master's timing, a removal, a new master
    /// (`RUNGS_LOG_INFO`).
    Info = 2,
    /// Detail for debugging the session itself (`RUNGS_LOG_DEBUG`).
    Debug = 3,
}

/// A log line without allocation (longer text is cut).
#[derive(Clone, Copy)]
pub struct LogText {
    bytes: [u8; LogText::CAPACITY],
    len: u8,
}

impl LogText {
    /// Longest line in bytes.
    pub const CAPACITY: usize = 160;

    fn new() -> LogText {
        LogText {
            bytes: [0; LogText::CAPACITY],
            len: 0,
        }
    }

    /// The text.
    pub fn as_str(&self) -> &str {
        let bytes = &self.bytes[..usize::from(self.len)];
        // Cutting may split a character only if one was written; only ASCII is.
        std::str::from_utf8(bytes).unwrap_or("")
    }
}

impl std::fmt::Write for LogText {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let start = usize::from(self.len);
        let room = LogText::CAPACITY - start;
        let take = s.len().min(room);
        self.bytes[start..start + take].copy_from_slice(&s.as_bytes()[..take]);
        self.len += take as u8;
        Ok(())
    }
}

impl std::fmt::Debug for LogText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.as_str())
    }
}

/// Something the engine should do or hear (a callback in the C API).
#[derive(Debug, Clone, Copy)]
pub enum SessionOutput {
    /// Queue an event of `type_id` with `payload` into your own network
    /// stream, from this machine's seat; it goes out with your next packet.
    QueueEvent {
        /// The frame running when the event was made (the one ending, for
        /// the events `frame_end` queues).
        frame: u32,
        /// The engine's event ID for it, from [`EventIds`].
        type_id: u8,
        /// The event's data, in the layout the session was configured with.
        payload: Payload,
    },
    /// Send frame `frame`: flush your packet now, stamping every event
    /// collected since the previous send frame with `tag` (S5). Put `frame`
    /// in the packet too: frame readiness counts packets by send frame,
    /// because two consecutive send frames can share a tag.
    SendFrame {
        /// The send frame, to put into the packet.
        frame: u32,
        /// The frame the collected events execute on or after (S5).
        tag: u32,
    },
    /// The timing machine's notices: timing in force changed, pace at a new
    /// frame rate (S4.2), a player message (S6), a new master (S4.6).
    Timing(Output),
    /// A log line.
    Log {
        /// How much the line matters.
        level: LogLevel,
        /// The line, without a newline.
        text: LogText,
    },
}

/// Where a session is in its frame loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Before frame 0's `frame_begin`.
    NotStarted,
    /// Between `frame_begin(f)` and `frame_end`.
    Running(u32),
    /// After `frame_end` of frame `f`; `f + 1` begins next.
    Ended(u32),
}

impl Phase {
    /// The frame `frame_begin` expects next; `None` while one is running.
    pub fn next_frame(self) -> Option<u32> {
        match self {
            Phase::NotStarted => Some(0),
            Phase::Running(_) => None,
            Phase::Ended(f) => f.checked_add(1),
        }
    }
}

/// One machine's adaptive timing inside an engine's frame loop.
pub struct EngineSession {
    machine: TimingMachine,
    measurements: Measurements,
    ids: EventIds,
    timing_layout: TimingLayout,
    report_layout: ReportLayout,
    local_seat: Option<u8>,
    phase: Phase,
    outputs: VecDeque<SessionOutput>,
    rules: EngineRules,
    /// The send frames this session announced and their tags, in the
    /// engine's order: what frame readiness reads.
    sends: SendHistory,
    /// The packets the engine received from its peers.
    streams: PeerStreams,
    /// The last frame that executed events, and the current frame's due
    /// tags (first, last) while it executes.
    last_executing: Option<u32>,
    due: Option<(u32, u32)>,
}

impl EngineSession {
    /// A session on the eve of frame 0. Refuses two roles sharing an ID.
    pub fn new(config: &SessionConfig) -> Result<EngineSession> {
        config.ids.check()?;
        if let TimingLayout::RedAlert { .. } = config.timing_layout {
            return Err(Error::invalid_value(
                "timing_layout",
                "Red Alert's (which has no send period)",
                "the Tiberian Sun layout",
            ));
        }
        let machine = TimingMachine::with_tick_timer(&config.machine, config.rules.tick_timer)?;
        let mut measurements = Measurements::new();
        if let Some(local) = config.machine.local_seat {
            // Round trips are measured to every other human player (S3).
            for (seat, human) in config.machine.human_seats.iter().enumerate() {
                if *human && seat as u8 != local {
                    measurements.add_peer(seat as u8)?;
                }
            }
        }
        Ok(EngineSession {
            machine,
            measurements,
            ids: config.ids,
            timing_layout: config.timing_layout,
            report_layout: config.report_layout,
            local_seat: config.machine.local_seat,
            phase: Phase::NotStarted,
            outputs: VecDeque::with_capacity(32),
            rules: config.rules,
            sends: SendHistory::new(),
            streams: PeerStreams::new(),
            last_executing: None,
            due: None,
        })
    }

    /// Start `frame` (0, 1, 2, ... without gaps). `true` when the frame
    /// executes commands: execute every queued event tagged at or before it
    /// ([`due_tags`](Self::due_tags)). Under [`SendOrder::BeforeExecute`] a
    /// send frame's [`SessionOutput::SendFrame`] comes now, before the
    /// engine waits and executes.
    pub fn frame_begin(&mut self, frame: u32) -> Result<bool> {
        let start = self.machine.begin_frame(frame)?;
        self.phase = Phase::Running(frame);
        let executes = start.executes_commands;
        self.due = executes.then(|| (self.last_executing.map_or(0, |last| last + 1), frame));
        if executes {
            self.last_executing = Some(frame);
        }
        self.collect_machine_outputs();
        if self.rules.send_order == SendOrder::BeforeExecute {
            // The frames that execute are the send frames; the tag is the
            // one in force before this frame's events run.
            let send = executes.then(|| self.machine.command_tag());
            if let Some(tag) = send {
                self.outputs
                    .push_back(SessionOutput::SendFrame { frame, tag });
            }
            self.sends.frame_ended(frame, send);
            self.streams.check(&self.sends);
        }
        Ok(executes)
    }

    /// The tags that execute on the current frame, `(first, last)` with
    /// `last` the frame itself: every tag after the previous executing frame
    /// (S5: a command executes on the first executing frame at or after its
    /// tag). An engine that runs an event only on its exact frame restamps
    /// its queued events tagged in this range to the current frame and keeps
    /// its fatal check for anything older, which never fires when the frame
    /// waited for [`peers_ready`](Self::peers_ready). `None` while the
    /// current frame executes nothing, or no frame is running.
    pub fn due_tags(&self) -> Option<(u32, u32)> {
        match self.phase {
            Phase::Running(_) => self.due,
            _ => None,
        }
    }

    fn in_frame(&self, frame: u32) -> Result<()> {
        match self.phase {
            Phase::Running(current) if current == frame => Ok(()),
            Phase::Running(current) => Err(Error::State("event frame is not the current frame")
                .detailed(format!(
                    "got frame {frame}; expected the current frame {current}"
                ))),
            _ => Err(self.no_frame_running("events execute during a frame")),
        }
    }

    /// The running frame, or `rule` broken outside a frame (the message says
    /// which frame begins next).
    pub fn running_frame(&self, rule: &'static str) -> Result<u32> {
        match self.phase {
            Phase::Running(frame) => Ok(frame),
            _ => Err(self.no_frame_running(rule)),
        }
    }

    /// `rule` broken outside a frame: the message says which frame begins next.
    fn no_frame_running(&self, rule: &'static str) -> Error {
        let next = self.phase.next_frame().unwrap_or(u32::MAX);
        Error::State(rule).detailed(format!(
            "no frame is running ({rule}); begin frame {next} first"
        ))
    }

    /// One of rungs' events executed on `frame` (the current frame), sent by
    /// `seat`. TIMING and NETWORK_REPORT are decoded and applied; an executed
    /// LATENCYFUDGE is accepted and ignored (S7). A report from a player
    /// already removed is accepted and changes nothing (S3: it was in flight
    /// when the removal was issued). Any other ID is refused with
    /// `UnregisteredEvent`; a bad payload with `Malformed`; a seat that never
    /// was a human player with `UnknownSeat` — each changes nothing.
    pub fn event_executed(
        &mut self,
        type_id: u8,
        seat: u8,
        frame: u32,
        payload: &[u8],
    ) -> Result<()> {
        self.in_frame(frame)?;
        let malformed = |role: EventRole, expected: usize, e: Error| {
            e.clone().detailed(format!(
                "{role} payload of {} bytes from seat {seat} is malformed ({e}); expected \
                 {expected} bytes in the session's layout",
                payload.len()
            ))
        };
        let outcome = if type_id == self.ids.timing {
            let expected = self.timing_layout.payload_len();
            self.timing_layout
                .decode(payload)
                .map_err(|e| malformed(EventRole::Timing, expected, e))
                .and_then(|event| self.machine.execute_timing_event(seat, event).map(|_| ()))
        } else if type_id == self.ids.network_report {
            let expected = self.report_layout.payload_len();
            match self
                .report_layout
                .decode(payload)
                .map_err(|e| malformed(EventRole::NetworkReport, expected, e))
                .and_then(|report| self.machine.execute_report(seat, report))
            {
                Ok(Effect::LateNoOp) => {
                    self.log(
                        LogLevel::Info,
                        format_args!(
                            "frame {frame}: report from removed seat {seat} ignored (late, S3)"
                        ),
                    );
                    Ok(())
                }
                Ok(Effect::Applied) => Ok(()),
                Err(e) => Err(e),
            }
        } else if Some(type_id) == self.ids.latency_fudge {
            Ok(())
        } else {
            Err(Error::UnregisteredEvent(type_id).detailed(format!(
                "type_id {type_id} is not one of the session's event IDs; expected {}",
                self.ids.listed()
            )))
        };
        if let Err(e) = &outcome {
            self.log(
                LogLevel::Warn,
                format_args!("frame {frame}: event {type_id} from seat {seat} refused: {e}"),
            );
        }
        self.collect_machine_outputs();
        outcome
    }

    /// The engine's removal of `seat` executed on the current frame (S3);
    /// removing the master hands over the role (S4.6). A second removal of a
    /// seat already removed (every machine may issue one for the same lost
    /// player) is accepted and changes nothing; only a seat that never was a
    /// human player is refused with `UnknownSeat`.
    pub fn player_removed(&mut self, seat: u8) -> Result<()> {
        let Phase::Running(frame) = self.phase else {
            return Err(self.no_frame_running("removals execute during a frame"));
        };
        if self.machine.execute_removal(seat)? == Effect::LateNoOp {
            self.log(
                LogLevel::Info,
                format_args!("frame {frame}: seat {seat} already removed; ignored (S3)"),
            );
            self.collect_machine_outputs();
            return Ok(());
        }
        // The removed player's round trips no longer count (it may be a peer or not).
        let _ = self.measurements.remove_peer(seat);
        self.log(
            LogLevel::Info,
            format_args!("frame {frame}: seat {seat} removed"),
        );
        self.collect_machine_outputs();
        Ok(())
    }

    /// End the current frame: this machine's report on report frames (S3),
    /// the master's evaluation (S4), and on a send frame the send (S5).
    pub fn frame_end(&mut self) -> Result<()> {
        let Phase::Running(frame) = self.phase else {
            return Err(self.no_frame_running("a frame ends after it begins"));
        };
        let seated = self
            .local_seat
            .is_some_and(|seat| self.machine.record().contains(seat));
        if seated
            && self
                .machine
                .report_due(frame, self.measurements.unreported_stalls())
        {
            let report = self.measurements.take_report();
            // The master raises for its own stall with the report, not a
            // look-ahead after it (tracking; decision 50).
            if let Some(event) = self.machine.raise_for_own_stall(&report)? {
                self.queue_timing_event(frame, event, "for its own stall")?;
            }
            let payload = encode_with(|buf| self.report_layout.encode(&report, buf))?;
            self.outputs.push_back(SessionOutput::QueueEvent {
                frame,
                type_id: self.ids.network_report,
                payload,
            });
        }
        if let Some(event) = self.machine.end_frame()? {
            let verdict = self.machine.status().last_verdict;
            self.queue_timing_event(frame, event, &format!("{verdict:?}"))?;
        }
        if self.rules.send_order == SendOrder::AfterExecute {
            let send = self
                .machine
                .is_send_frame()
                .then(|| self.machine.command_tag());
            if let Some(tag) = send {
                self.outputs
                    .push_back(SessionOutput::SendFrame { frame, tag });
            }
            self.sends.frame_ended(frame, send);
            self.streams.check(&self.sends);
        }
        self.phase = Phase::Ended(frame);
        self.collect_machine_outputs();
        Ok(())
    }

    /// Queue the master's timing event as an engine event on `frame`.
    fn queue_timing_event(&mut self, frame: u32, event: TimingEvent, why: &str) -> Result<()> {
        let payload = encode_with(|buf| self.timing_layout.encode(&event, buf))?;
        self.outputs.push_back(SessionOutput::QueueEvent {
            frame,
            type_id: self.ids.timing,
            payload,
        });
        self.log(
            LogLevel::Info,
            format_args!(
                "frame {frame}: master sends {} at {} fps ({why})",
                event.target, event.fps
            ),
        );
        Ok(())
    }

    /// The frame a command the engine issues now will execute on or after
    /// (S5). Exact on a send frame before `frame_end`; otherwise a forecast
    /// for the next send frame, which a timing event executing on that frame
    /// can still change — the tag given with [`SessionOutput::SendFrame`] is
    /// the final one.
    pub fn submit_command(&self) -> Result<u32> {
        match self.phase {
            Phase::Running(frame) => Ok(self.machine.forecast_tag(frame)),
            Phase::Ended(frame) => Ok(self.machine.forecast_tag(frame.saturating_add(1))),
            Phase::NotStarted => Ok(self.machine.forecast_tag(0)),
        }
    }

    /// Frame readiness (S5): the send frame whose packet the engine must
    /// hold from every peer before `frame` executes — the last send frame
    /// tagged at or before `frame` — or `None` when nothing is needed yet.
    /// The answer is the same for every peer, and on an in-order link
    /// holding that packet means holding every earlier one. Ask for the next
    /// frame (after `frame_end` of the previous one) or the current one;
    /// frames further ahead are `State` (their send frames are not final),
    /// and so are frames more than 256 back.
    pub fn required_send_frame(&self, frame: u32) -> Result<Option<u32>> {
        answer(self.sends.required_send_frame(frame), frame)
    }

    /// Whether `frame` may execute, given `held(seat)`: the latest send frame
    /// the engine holds from `seat` *with every packet before it* (`None`:
    /// nothing yet). Only [`peers`](Self::peers) are asked. Same window as
    /// [`required_send_frame`](Self::required_send_frame). A held value
    /// that ended here without being a send frame (a tag passed for a send
    /// frame) is refused. Prefer [`packet_received`](Self::packet_received)
    /// and [`peers_ready`](Self::peers_ready), which keep the watermark.
    pub fn frame_ready(&self, frame: u32, held: impl Fn(u8) -> Option<u32>) -> Result<bool> {
        let peers: Vec<(u8, Option<u32>)> = self.peers().map(|seat| (seat, held(seat))).collect();
        for &(seat, value) in &peers {
            if let Some(value) = value {
                self.sends.check_held(seat, value)?;
            }
        }
        answer(
            self.sends
                .frame_ready(frame, peers.into_iter().map(|(_, value)| value)),
            frame,
        )
    }

    /// A packet from `seat` arrived: its packet number (0 for the packet of
    /// send frame 0, then one more per send frame) and the send frame it
    /// carries ([`SessionOutput::SendFrame`]'s `frame` on its sender). Copies
    /// are accepted; packets from a player already removed are ignored (they
    /// were in flight). Refused, changing nothing: your own seat, a seat that
    /// never was a human player, a send frame that is not the game's
    /// `number`-th, a packet far ahead, a packet past the seat's cut
    /// (`timing::readiness::PeerStreams::received`).
    pub fn packet_received(&mut self, seat: u8, number: u32, send_frame: u32) -> Result<()> {
        self.check_peer_seat(seat)?;
        if !self.machine.seats().present().any(|s| s == seat) {
            return Ok(());
        }
        self.streams.received(&self.sends, seat, number, send_frame)
    }

    /// The drop procedure of the engine agreed where `seat`'s packets end
    /// (S4.7: the engine decides removals): packets through `last` count
    /// (`None`: none does). Frames that would need a later packet of it no
    /// longer wait for it; the engine executes its removal on the first of
    /// them. Refused when packets past `last` are already held contiguously.
    pub fn peer_cut(&mut self, seat: u8, last: Option<u32>) -> Result<()> {
        self.check_peer_seat(seat)?;
        self.streams.cut(seat, last)
    }

    /// The tag of the first send frame after a cut that ends a stream at
    /// packet `last` (`None`: no packet): the first frame that needs a
    /// packet past the cut executes the seat's removal, so no machine can
    /// have run it with a packet the others lack. Stamp the removal with
    /// this tag ([`due_tags`](Self::due_tags) puts it on its executing
    /// frame). `None` until this machine has had that send frame.
    pub fn cut_tag(&self, last: Option<u32>) -> Option<u32> {
        self.sends.tag_at(last.map_or(0, |l| l + 1))
    }

    /// Whether the current frame may execute: every peer's packets through
    /// the last send frame tagged at or before it are here (S5), from what
    /// [`packet_received`](Self::packet_received) was given. A frame that
    /// executes nothing is always ready. Returns a peer's fault — a packet
    /// that turned out not to carry the send frame its number says — as an
    /// error rather than a frame executed early. `State` when no frame is
    /// running.
    pub fn peers_ready(&self) -> Result<Readiness> {
        let Phase::Running(frame) = self.phase else {
            return Err(self.no_frame_running("readiness is asked for the running frame"));
        };
        // A wrong packet fails the question whatever else is missing.
        if let Some(fault) = self.peers().find_map(|seat| self.streams.fault(seat)) {
            return Err(fault.clone());
        }
        let ready = Readiness {
            ready: true,
            waiting_for: None,
        };
        if self.due.is_none() {
            return Ok(ready);
        }
        let Some(needed) = self.required_send_frame(frame)? else {
            return Ok(ready);
        };
        for seat in self.peers() {
            if !self.streams.holds(&self.sends, seat, needed)? {
                return Ok(Readiness {
                    ready: false,
                    waiting_for: Some(seat),
                });
            }
        }
        Ok(ready)
    }

    /// The contiguous watermark of `seat`'s packets here: the last packet
    /// number held with every one before it (what the engine's drop
    /// procedure votes). `None` before packet 0.
    pub fn packet_watermark(&self, seat: u8) -> Option<u32> {
        self.streams.watermark(seat)
    }

    /// Refuse a seat that cannot send this machine packets: its own, or
    /// one that never was a human player. (The C API names the function in
    /// front of the message, so the message does not.)
    pub fn check_peer_seat(&self, seat: u8) -> Result<()> {
        if Some(seat) == self.local_seat {
            return Err(Error::invalid_value(
                "seat",
                seat,
                "a peer's seat, not this machine's own (your own packets need no readiness)",
            ));
        }
        if !self.machine.seats().is_human(seat) {
            return Err(Error::UnknownSeat(seat).detailed(format!(
                "seat {seat} never was a human player of this game; expected a peer"
            )));
        }
        Ok(())
    }

    /// The players whose packets frame readiness waits for: every human
    /// player still in the game except this machine's own seat.
    pub fn peers(&self) -> impl Iterator<Item = u8> + '_ {
        let local = self.local_seat;
        // The one seat model (timing::Seats) the timing machine and the
        // lockstep session also read.
        self.machine
            .seats()
            .present()
            .filter(move |&seat| Some(seat) != local)
    }

    /// This machine's measurements (S3): frame work, waits, round trips.
    pub fn measurements(&mut self) -> &mut Measurements {
        &mut self.measurements
    }

    /// A round trip to `peer`: `clean` when taken from a packet sent once
    /// (S8). Only human players other than this one are peers. A sample
    /// from a player already removed is a late event of normal play (the
    /// acknowledgement was on its way when the removal executed): accepted,
    /// and it changes nothing (S3).
    pub fn rtt_sample(&mut self, peer: u8, rtt_ms: u32, clean: bool) -> Result<()> {
        let seats = self.machine.seats();
        if Some(peer) != self.local_seat && seats.is_human(peer) && !seats.is_present(peer) {
            return Ok(());
        }
        if !self.peers().any(|p| p == peer) {
            let peers: Vec<String> = self.peers().map(|p| p.to_string()).collect();
            let peers = if peers.is_empty() {
                "none".to_string()
            } else {
                peers.join(", ")
            };
            return Err(Error::UnknownSeat(peer).detailed(format!(
                "peer {peer} is not measured; expected another human player still in the \
                 game: {peers}"
            )));
        }
        self.measurements.add_rtt_sample(peer, rtt_ms, clean)
    }

    /// A round trip to `peer` in ticks of the engine's timer, as Tiberian
    /// Sun measures one: from a packet's first send to its acknowledgement.
    /// `resent`: the packet went out more than once, so the sample is not
    /// clean (S8) and never replaces a measured value. `State` without a
    /// tick timer in [`EngineRules`].
    pub fn rtt_sample_ticks(&mut self, peer: u8, ticks: u32, resent: bool) -> Result<()> {
        let timer = self.tick_timer()?;
        self.rtt_sample(peer, timer.ticks_to_ms(ticks), !resent)
    }

    /// One frame's work took `ticks` whole ticks of the engine's timer (S3
    /// processing time, as Tiberian Sun counts it). `State` without a tick
    /// timer.
    pub fn add_frame_ticks(&mut self, ticks: u32) -> Result<()> {
        let timer = self.tick_timer()?;
        self.measurements.add_frame_ticks(ticks, timer);
        Ok(())
    }

    fn tick_timer(&self) -> Result<TickTimer> {
        self.rules.tick_timer.ok_or_else(|| {
            Error::State("no tick timer configured").detailed(
                "the session has no tick timer; set the engine's ticks per second \
                 (EngineRules::tick_timer, config->tick_hz) to give measurements in ticks"
                    .to_string(),
            )
        })
    }

    /// Take the round trips to every peer from rungs' own transport (S8): an
    /// engine that sends its events through an [`Endpoint`](crate::link::Endpoint)
    /// calls this each frame (or before report frames) instead of
    /// [`rtt_sample`](Self::rtt_sample). Links to seats that are not this
    /// session's peers are ignored.
    pub fn sample_links(&mut self, endpoint: &crate::link::Endpoint, now_us: u64) {
        for (seat, _) in endpoint.peers() {
            if let Some(link) = endpoint.link(seat) {
                self.sample_link(seat, link.report_rtt(now_us));
            }
        }
    }

    /// One link's round trip for the reports (what [`sample_links`](Self::sample_links)
    /// does per peer); a seat that is not a peer is ignored.
    pub fn sample_link(&mut self, seat: u8, link: crate::link::ReportRtt) {
        let _ = self.measurements.sample_link(seat, link);
    }

    /// Change the game speed's cap (call on every machine on the same frame).
    pub fn set_speed_fps(&mut self, speed_fps: u8) -> Result<()> {
        self.machine.set_speed_fps(speed_fps)
    }

    /// Where the session is in its frame loop.
    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// The engine's event IDs and the payload layouts the session was made with.
    pub fn event_ids(&self) -> EventIds {
        self.ids
    }

    /// The TIMING payload layout.
    pub fn timing_layout(&self) -> TimingLayout {
        self.timing_layout
    }

    /// The NETWORK_REPORT payload layout.
    pub fn report_layout(&self) -> ReportLayout {
        self.report_layout
    }

    /// The engine's own rules the session keeps to.
    pub fn rules(&self) -> EngineRules {
        self.rules
    }

    /// The timing machine (read-only): timing in force, target, status.
    pub fn machine(&self) -> &TimingMachine {
        &self.machine
    }

    /// The next output, oldest first.
    pub fn poll_output(&mut self) -> Option<SessionOutput> {
        self.outputs.pop_front()
    }

    fn collect_machine_outputs(&mut self) {
        while let Some(output) = self.machine.poll_output() {
            if let Output::MasterChanged { frame, seat } = output {
                self.log(
                    LogLevel::Info,
                    format_args!("frame {frame}: master is now {seat:?}"),
                );
            }
            self.outputs.push_back(SessionOutput::Timing(output));
        }
    }

    fn log(&mut self, level: LogLevel, args: std::fmt::Arguments<'_>) {
        let mut text = LogText::new();
        let _ = text.write_fmt(args);
        self.outputs.push_back(SessionOutput::Log { level, text });
    }

    /// Where the latest evaluation stopped.
    pub fn last_verdict(&self) -> Verdict {
        self.machine.status().last_verdict
    }
}

fn encode_with(encode: impl FnOnce(&mut [u8]) -> Result<usize>) -> Result<Payload> {
    let mut payload = Payload {
        bytes: [0; TS_EVENT_DATA_LEN],
        len: 0,
    };
    let len = encode(&mut payload.bytes)?;
    payload.len = len as u8;
    Ok(payload)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::Report;
    use crate::timing::{Tier, Timing, TimingEvent};

    fn config(local: u8) -> SessionConfig {
        SessionConfig {
            machine: MachineConfig::adaptive(30, vec![true, true, false], Some(local)),
            ids: EventIds {
                timing: 31,
                network_report: 36,
                latency_fudge: Some(35),
            },
            timing_layout: TimingLayout::TIBERIAN_SUN,
            report_layout: ReportLayout::Compact,
            rules: EngineRules::default(),
        }
    }

    /// A compact NETWORK_REPORT payload with round trip `rtt_ms`.
    fn compact_report(rtt_ms: u32) -> [u8; 6] {
        let mut payload = [0u8; 6];
        let report = Report {
            process_us: 8000,
            max_wait_ms: 0,
            worst_rtt_ms: Some(rtt_ms),
            detail: None,
        };
        ReportLayout::Compact.encode(&report, &mut payload).unwrap();
        payload
    }

    fn drain(session: &mut EngineSession) -> Vec<SessionOutput> {
        std::iter::from_fn(|| session.poll_output()).collect()
    }

    #[test]
    fn setup_refuses_shared_ids_and_red_alert_layout() {
        let mut c = config(0);
        c.ids.network_report = 31;
        assert_eq!(
            c.ids.clash(),
            Some((EventRole::Timing, EventRole::NetworkReport, 31))
        );
        assert_eq!(
            EngineSession::new(&c).err().map(|e| e.to_string()),
            Some(
                "the NETWORK_REPORT event ID is 31; expected an ID other than the TIMING event \
                 ID's (a distinct ID per role)"
                    .to_string()
            )
        );
        let mut c = config(0);
        c.ids.latency_fudge = Some(36);
        assert_eq!(
            c.ids.clash(),
            Some((EventRole::NetworkReport, EventRole::LatencyFudge, 36))
        );
        assert!(EngineSession::new(&c).is_err());
        assert_eq!(config(0).ids.clash(), None);
        let mut c = config(0);
        c.timing_layout = TimingLayout::RedAlert { send_period: 3 };
        assert!(EngineSession::new(&c).is_err());
    }

    #[test]
    fn reports_go_out_on_32_and_64_then_every_128() {
        let mut session = EngineSession::new(&config(1)).unwrap();
        let mut report_frames = Vec::new();
        for frame in 0..=200 {
            session.frame_begin(frame).unwrap();
            session.frame_end().unwrap();
            for output in drain(&mut session) {
                if let SessionOutput::QueueEvent {
                    frame, type_id: 36, ..
                } = output
                {
                    report_frames.push(frame);
                }
            }
        }
        assert_eq!(report_frames, vec![32, 64, 192]);
    }

    #[test]
    fn bad_events_are_refused_and_change_nothing() {
        let mut session = EngineSession::new(&config(0)).unwrap();
        session.frame_begin(0).unwrap();
        let before = session.machine().status();
        let refused = session.event_executed(99, 0, 0, &[0; 5]).unwrap_err();
        assert_eq!(refused.kind(), &Error::UnregisteredEvent(99));
        assert_eq!(
            refused.to_string(),
            "type_id 99 is not one of the session's event IDs; expected TIMING 31, \
             NETWORK_REPORT 36 or LATENCYFUDGE 35"
        );
        let short = session.event_executed(31, 0, 0, &[0; 4]).unwrap_err();
        assert!(matches!(short.kind(), Error::Malformed(_)));
        assert!(short
            .to_string()
            .starts_with("TIMING payload of 4 bytes from seat 0 is malformed"));
        assert!(short
            .to_string()
            .ends_with("expected 5 bytes in the session's layout"));
        assert!(matches!(
            session
                .event_executed(36, 0, 0, &[0; 7])
                .map_err(|e| e.kind().clone()),
            Err(Error::Malformed(_))
        ));
        let report = compact_report(20);
        let seat = session.event_executed(36, 2, 0, &report).unwrap_err();
        assert_eq!(seat.kind(), &Error::UnknownSeat(2));
        assert_eq!(
            seat.to_string(),
            "seat 2 never was a human seat of this game; expected one of the human seats 0, 1"
        );
        let late = session.event_executed(36, 0, 5, &report).unwrap_err();
        assert_eq!(
            late.kind(),
            &Error::State("event frame is not the current frame")
        );
        assert_eq!(
            late.to_string(),
            "got frame 5; expected the current frame 0"
        );
        assert_eq!(session.machine().status(), before);
        assert!(session.machine().record().latest(0).is_none());
        // LATENCYFUDGE from an old recording: accepted, ignored.
        session.event_executed(35, 0, 0, &[1, 2, 3, 4]).unwrap();
        assert_eq!(session.machine().status(), before);
        session.event_executed(36, 0, 0, &report).unwrap();
        assert!(session.machine().record().latest(0).is_some());
    }

    #[test]
    fn late_reports_and_repeated_removals_are_accepted_no_ops() {
        let mut session = EngineSession::new(&config(1)).unwrap();
        session.frame_begin(0).unwrap();
        let report = compact_report(900);
        session.player_removed(0).unwrap();
        assert_eq!(session.machine().master(), Some(1));
        drain(&mut session);
        let before = session.machine().status();
        // S3: the same removal from another machine, and a report in flight.
        assert_eq!(session.player_removed(0), Ok(()));
        assert_eq!(session.event_executed(36, 0, 0, &report), Ok(()));
        assert_eq!(session.machine().status(), before);
        assert!(session.machine().record().latest(0).is_none());
        let outputs = drain(&mut session);
        assert!(outputs
            .iter()
            .all(|o| matches!(o, SessionOutput::Log { .. })));
        // Only a seat that never was a human player is an error.
        let kind = |r: Result<()>| r.map_err(|e| e.kind().clone());
        assert_eq!(kind(session.player_removed(2)), Err(Error::UnknownSeat(2)));
        assert_eq!(
            kind(session.event_executed(36, 7, 0, &report)),
            Err(Error::UnknownSeat(7))
        );
    }

    #[test]
    fn timing_events_round_trip_through_the_engine_payload() {
        let mut session = EngineSession::new(&config(0)).unwrap();
        session.frame_begin(0).unwrap();
        let mut payload = [0u8; 5];
        let event = TimingEvent {
            target: Timing::new(3, 9).unwrap(),
            fps: 30,
        };
        TimingLayout::TIBERIAN_SUN
            .encode(&event, &mut payload)
            .unwrap();
        session.event_executed(31, 0, 0, &payload).unwrap();
        assert_eq!(session.machine().timing(), Timing::new(3, 9).unwrap());
        let outputs = drain(&mut session);
        assert!(outputs.iter().any(|o| matches!(
            o,
            SessionOutput::Timing(Output::PlayerMessage {
                tier: Tier::Normal,
                ..
            })
        )));
    }

    #[test]
    fn submit_command_forecasts_the_send_frame_tag() {
        let mut session = EngineSession::new(&config(0)).unwrap();
        session.frame_begin(0).unwrap();
        assert_eq!(session.submit_command().unwrap(), 6); // send frame 0 under 2/6
        session.frame_end().unwrap();
        assert_eq!(session.submit_command().unwrap(), 8); // next send frame 2
        let outputs = drain(&mut session);
        assert!(outputs
            .iter()
            .any(|o| matches!(o, SessionOutput::SendFrame { frame: 0, tag: 6 })));
        session.frame_begin(1).unwrap();
        assert_eq!(session.submit_command().unwrap(), 8);
    }
}
