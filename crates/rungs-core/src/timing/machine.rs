//! The timing machine: one object per machine of a game that an engine
//! drives frame by frame (S3–S6).
//!
//! It composes the record (S3), the master's policy (S4), the schedule in
//! force (S5) and the player feedback (S6). All of it is integer-only and
//! fed only executed events, so every machine holds the same state.
//!
//! A frame, in order (the vector replay order of `tests/vectors/README.md`):
//! 1. [`TimingMachine::begin_frame`] — a staged decrease activates or steps
//!    down; the answer says whether this frame executes commands;
//! 2. on such a send frame, [`TimingMachine::pop_due`] yields the queued
//!    commands due; the engine executes them, passing timing events to
//!    [`TimingMachine::execute_timing_event`];
//! 3. other executed events: [`TimingMachine::execute_report`],
//!    [`TimingMachine::execute_removal`];
//! 4. [`TimingMachine::end_frame`] — the master's evaluation; on the
//!    master's machine it returns the timing event to queue as a command;
//! 5. if [`TimingMachine::is_send_frame`] (under the timing now in force),
//!    the engine sends its commands, tagged [`TimingMachine::command_tag`].
//!
//! Before executing a frame, an engine with its own queue asks
//! [`TimingMachine::required_send_frame`] which packet it must hold from
//! every peer (S5, frame readiness).
//!
//! Outputs for callbacks (timing or rate changed, player message, master
//! changed) queue up and are drained with [`TimingMachine::poll_output`].

use std::collections::VecDeque;

use super::baselines::{PolicyKind, Protocol0Policy, Protocol0Table, RedAlertPolicy};
use super::ladder::{Tier, Timing};
use super::policy::{MasterPolicy, Verdict};
use super::queue::{CommandQueue, Queued};
use super::readiness::{answer, SendHistory};
use super::schedule::{Applied, Changed, Schedule};
use super::seats::Seats;
use super::tick_timer::TickTimer;
use super::tracking::{InForce, TrackingPolicy};
use super::TimingEvent;
use crate::error::{Error, Result};
use crate::report::record::Effect;
use crate::report::{Record, Report};

/// Room reserved for queued commands and outputs, so a game in steady state
/// never allocates.
const QUEUE_CAPACITY: usize = 256;
const OUTPUT_CAPACITY: usize = 32;

/// How a machine is set up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MachineConfig {
    /// The rate the game speed allows, 1–255 fps (S4.2). The game starts at it.
    pub speed_fps: u8,
    /// One flag per seat in house order: `true` for a human player. AI seats
    /// keep their place in the house order but never report.
    pub human_seats: Vec<bool>,
    /// This machine's seat, or `None` for an observer (a recording player)
    /// that follows the timing but never sends.
    pub local_seat: Option<u8>,
    /// Which rule chooses the timing: rungs' adaptive ladder, or a baseline
    /// for comparison (`rungs-sim --policy`).
    pub policy: PolicyKind,
}

impl MachineConfig {
    /// An adaptive machine (S4): `speed_fps`, one human flag per seat in
    /// house order, and this machine's seat.
    pub fn adaptive(
        speed_fps: u8,
        human_seats: Vec<bool>,
        local_seat: Option<u8>,
    ) -> MachineConfig {
        MachineConfig {
            speed_fps,
            human_seats,
            local_seat,
            policy: PolicyKind::Adaptive,
        }
    }
}

/// The rule a machine runs; every machine runs the same one. The relay
/// runs it too, as the master of a relayed match (`relay::sequencer`).
#[derive(Debug, Clone)]
pub(crate) enum Policy {
    Adaptive(MasterPolicy),
    Fixed { timing: Timing, rate: u8 },
    RedAlert(RedAlertPolicy),
    Protocol0(Protocol0Policy),
    Tracking(TrackingPolicy),
}

impl Policy {
    /// The rule `kind` names. `lobby` is refused: it is a fixed timing
    /// worked out from a lobby's pings before the game (the simulator
    /// resolves it), so the caller names that fixed timing instead.
    pub(crate) fn new(kind: PolicyKind, speed_fps: u8) -> Result<Policy> {
        Ok(match kind {
            PolicyKind::Adaptive => Policy::Adaptive(MasterPolicy::new(speed_fps)),
            PolicyKind::Fixed(timing) => Policy::Fixed {
                timing,
                rate: speed_fps.max(1),
            },
            PolicyKind::RedAlert => Policy::RedAlert(RedAlertPolicy::new(speed_fps)),
            PolicyKind::Protocol0 => Policy::Protocol0(Protocol0Policy::new(
                Protocol0Table::YurisRevenge,
                speed_fps,
            )),
            PolicyKind::Protocol0Ts => {
                Policy::Protocol0(Protocol0Policy::new(Protocol0Table::TiberianSun, speed_fps))
            }
            PolicyKind::Tracking => Policy::Tracking(TrackingPolicy::new(speed_fps)),
            PolicyKind::Lobby => {
                return Err(Error::invalid_value(
                    "policy",
                    "lobby",
                    "the fixed timing a lobby set from its pings before the game, \
                     named as such (fixed:SP/LA)",
                ))
            }
        })
    }

    /// The timing the game starts at.
    pub(crate) fn initial_timing(&self) -> Timing {
        match self {
            Policy::Adaptive(_) => Timing::START,
            Policy::Fixed { timing, .. } => *timing,
            Policy::RedAlert(_) => RedAlertPolicy::start(),
            Policy::Protocol0(_) => Protocol0Policy::start(),
            Policy::Tracking(p) => p.target(),
        }
    }

    /// `in_force`: the schedule the events execute in, where the caller
    /// keeps one (the timing machine; the relay's sequencer does not).
    pub(crate) fn evaluate(
        &mut self,
        record: &Record,
        frame: u32,
        in_force: Option<InForce>,
    ) -> (Verdict, Option<TimingEvent>) {
        match self {
            Policy::Adaptive(p) => p.evaluate(record, frame),
            Policy::Fixed { .. } => (Verdict::NoEvaluation, None),
            Policy::RedAlert(p) => (Verdict::NoEvaluation, p.evaluate(record, frame)),
            Policy::Protocol0(p) => (Verdict::NoEvaluation, p.evaluate(record, frame)),
            Policy::Tracking(p) => (Verdict::NoEvaluation, p.evaluate(record, frame, in_force)),
        }
    }

    fn target(&self) -> (Timing, u8) {
        match self {
            Policy::Adaptive(p) => (p.target(), p.rate()),
            Policy::Fixed { timing, rate } => (*timing, *rate),
            Policy::RedAlert(p) => (p.target(), p.rate()),
            Policy::Protocol0(p) => (p.target(), p.rate()),
            Policy::Tracking(p) => (p.target(), p.rate()),
        }
    }

    /// Whether players report on `frame`: S3's frames, or the policy's own
    /// cadence (every machine of a game runs the same policy).
    fn is_report_frame(&self, frame: u32) -> bool {
        super::tracking::is_report_frame_of_game(self.frequent_reports(), frame)
    }

    /// Whether players report on `tracking`'s own cadence (every 16
    /// frames) rather than S3's frames.
    pub(crate) fn frequent_reports(&self) -> bool {
        matches!(self, Policy::Tracking(_))
    }

    /// The tier players are shown for `timing` at `fps` (S6): by rung on
    /// the ladder; by look-ahead duration under `tracking`, whose `1/L`
    /// timings are off it (docs/tracking.md).
    fn tier(&self, timing: Timing, fps: u8) -> Tier {
        match self {
            Policy::Tracking(_) => timing.tier_by_duration(fps),
            _ => timing.tier(),
        }
    }

    fn adaptive(&self) -> Option<&MasterPolicy> {
        match self {
            Policy::Adaptive(p) => Some(p),
            _ => None,
        }
    }

    pub(crate) fn adaptive_mut(&mut self) -> Option<&mut MasterPolicy> {
        match self {
            Policy::Adaptive(p) => Some(p),
            _ => None,
        }
    }

    fn set_speed_fps(&mut self, speed_fps: u8) {
        match self {
            Policy::Adaptive(p) => p.set_speed_fps(speed_fps),
            Policy::RedAlert(p) => p.set_speed_fps(speed_fps),
            Policy::Tracking(p) => p.set_speed_fps(speed_fps),
            Policy::Fixed { .. } | Policy::Protocol0(_) => {}
        }
    }
}

/// Something the engine should hear about (callbacks in the C API).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    /// From `frame` the timing in force is `timing`.
    TimingChanged {
        /// The first frame under the new timing.
        frame: u32,
        /// The timing in force from `frame`.
        timing: Timing,
    },
    /// From `frame` the engine paces at `fps`.
    FrameRateChanged {
        /// The first frame at the new rate.
        frame: u32,
        /// The rate, frames a second.
        fps: u8,
    },
    /// Show `Connection quality target: <tier>` (S6).
    PlayerMessage {
        /// The frame the timing event with the new target executed on.
        frame: u32,
        /// The new target's tier.
        tier: Tier,
    },
    /// The master is now `seat` (`None` when no human is left) (S4.6).
    MasterChanged {
        /// The frame the removal that handed over the role executed on.
        frame: u32,
        /// The new master's seat; `None` when no human is left.
        seat: Option<u8>,
    },
}

/// The text of a player message: `Connection quality target: <Tier>` (S6).
pub fn player_message_text(tier: Tier) -> &'static str {
    let text = player_message_c_text(tier);
    // The table is ASCII with one trailing NUL.
    std::str::from_utf8(&text[..text.len() - 1]).unwrap_or("")
}

/// The same text with a terminating NUL, for C callbacks.
pub fn player_message_c_text(tier: Tier) -> &'static [u8] {
    match tier {
        Tier::Fast => b"Connection quality target: Fast\0",
        Tier::Normal => b"Connection quality target: Normal\0",
        Tier::Poor => b"Connection quality target: Poor\0",
        Tier::Bad => b"Connection quality target: Bad\0",
    }
}

/// What the engine needs at the start of a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameStart {
    /// The frame executes queued commands that are due (it is a send frame
    /// under the timing in force after step 1).
    pub executes_commands: bool,
}

/// The state a UI or a log needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Status {
    /// The frame running or last ended (0 before the first).
    pub frame: u32,
    /// The timing in force (S5).
    pub timing: Timing,
    /// The frame rate in force, frames a second.
    pub fps: u8,
    /// The master's target timing (what the policy last chose, S4).
    pub target: Timing,
    /// The target's frame rate, frames a second (under a tick timer, the
    /// fastest rate it hits that is not above the policy's).
    pub target_fps: u8,
    /// A staged decrease's target while it has not finished (S5).
    pub staged_target: Option<Timing>,
    /// The tier players are shown for the timing in force (S6).
    pub tier: Tier,
    /// The master's seat; `None` when no human is left (S4.6).
    pub master: Option<u8>,
    /// The adaptive master is still calibrating (S4.3); `false` under
    /// other policies.
    pub calibrating: bool,
    /// The adaptive master's qualifying evaluations in a row towards an
    /// improvement (S4.4); 0 under other policies.
    pub qualifying_in_a_row: u8,
    /// The adaptive master is descending the ladder (S4.4); `false` under
    /// other policies.
    pub descent_running: bool,
    /// Where the latest evaluation stopped.
    pub last_verdict: Verdict,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    NotStarted,
    InFrame(u32),
    Ended(u32),
}

/// One machine's adaptive timing.
#[derive(Debug, Clone)]
pub struct TimingMachine {
    local_seat: Option<u8>,
    seats: Seats,
    record: Record,
    policy: Policy,
    schedule: Schedule,
    /// Target of the latest executed timing event (`2/6` before any): the
    /// "previous target" of S6 messages and of S4.4 c's changes.
    executed_target: Timing,
    /// The frame rate of the last executed timing event (the speed cap
    /// before any): with the target, what the player message's tier reads.
    executed_fps: u8,
    phase: Phase,
    executes_commands: bool,
    last_verdict: Verdict,
    queue: CommandQueue<u64>,
    /// Ended send frames and their tags, for frame readiness.
    sends: SendHistory,
    outputs: VecDeque<Output>,
    /// The last frame [`TimingMachine::report_due`] said to report on.
    last_report_frame: Option<u32>,
    /// The master's last raise for its own stall
    /// ([`TimingMachine::raise_for_own_stall`]): the frame by which it has
    /// executed, and its look-ahead.
    own_raise: Option<(u32, u8)>,
    /// The engine's tick timer, when it paces by one: every rate is one it
    /// hits (`timing::tick_timer`).
    tick_timer: Option<TickTimer>,
}

impl TimingMachine {
    /// A machine on the eve of frame 0.
    pub fn new(config: &MachineConfig) -> Result<TimingMachine> {
        TimingMachine::with_tick_timer(config, None)
    }

    /// A machine for an engine that paces by `tick_timer` (S7): the starting
    /// rate, every rate the policy chooses (S4.2, through the record, so the
    /// round trips are converted at it) and every rate an executed timing
    /// event carries is the largest the timer hits at or below the rate the
    /// rules chose ([`TickTimer::rate_at_most`]). Every machine of a game
    /// must use the same timer. `None` is [`TimingMachine::new`].
    pub fn with_tick_timer(
        config: &MachineConfig,
        tick_timer: Option<TickTimer>,
    ) -> Result<TimingMachine> {
        if config.speed_fps == 0 {
            return Err(Error::invalid_value("speed_fps", 0u8, "1 to 255"));
        }
        let seats = Seats::new(&config.human_seats)?;
        let mut record = Record::new(0, seats.present());
        record.set_tick_timer(tick_timer);
        if let Some(local) = config.local_seat {
            if !seats.is_human(local) {
                return Err(Error::invalid_value(
                    "local_seat",
                    local,
                    "a human seat of the game",
                ));
            }
        }
        let start_fps = record.fit_rate(config.speed_fps);
        let policy = Policy::new(config.policy, start_fps)?;
        let start = policy.initial_timing();
        Ok(TimingMachine {
            local_seat: config.local_seat,
            seats,
            record,
            policy,
            schedule: Schedule::starting_at(start, start_fps),
            executed_target: start,
            executed_fps: start_fps,
            phase: Phase::NotStarted,
            executes_commands: false,
            last_verdict: Verdict::NoEvaluation,
            queue: CommandQueue::with_capacity(QUEUE_CAPACITY),
            sends: SendHistory::new(),
            outputs: VecDeque::with_capacity(OUTPUT_CAPACITY),
            last_report_frame: None,
            own_raise: None,
            tick_timer,
        })
    }

    /// `event` with its rate fitted to the tick timer, if any.
    fn fitted(&self, event: TimingEvent) -> TimingEvent {
        match self.tick_timer {
            Some(timer) => TimingEvent {
                fps: timer.rate_at_most(event.fps),
                ..event
            },
            None => event,
        }
    }

    /// The engine's tick timer, if it paces by one.
    pub fn tick_timer(&self) -> Option<TickTimer> {
        self.tick_timer
    }

    /// Step 1 of `frame`. Frames run 0, 1, 2, ... with no gaps.
    pub fn begin_frame(&mut self, frame: u32) -> Result<FrameStart> {
        let expected = match self.phase {
            Phase::NotStarted => 0,
            Phase::Ended(previous) => previous
                .checked_add(1)
                .ok_or(Error::State("frame counter exhausted"))?,
            Phase::InFrame(open) => {
                return Err(
                    Error::State("the previous frame is still open").detailed(format!(
                        "frame {open} is still open; end it before beginning frame {frame}"
                    )),
                )
            }
        };
        if frame != expected {
            return Err(
                Error::State("frames must run in order without gaps").detailed(format!(
                    "frame is {frame}; expected {expected} (frames run 0, 1, 2, ... without gaps)"
                )),
            );
        }
        self.phase = Phase::InFrame(frame);
        let changed = self.schedule.begin_announced(frame);
        self.announce(frame, changed);
        self.executes_commands = self.schedule.is_send_frame(frame);
        Ok(FrameStart {
            executes_commands: self.executes_commands,
        })
    }

    fn current_frame(&self) -> Result<u32> {
        match self.phase {
            Phase::InFrame(frame) => Ok(frame),
            _ => Err(Error::State(
                "events execute while a frame is open (after beginning it, before ending it)",
            )),
        }
    }

    /// Queue a command from `seat` tagged for `tag`; `item` is the caller's
    /// handle for it. Commands from one seat arrive in issue order. A tag on
    /// a frame already executed is refused: it would execute on one machine
    /// and not on another.
    pub fn queue_command(&mut self, tag: u32, seat: u8, item: u64) -> Result<()> {
        if !self.seats.is_seat(seat) {
            return Err(Error::UnknownSeat(seat));
        }
        let earliest_allowed = match self.phase {
            Phase::NotStarted => 0,
            Phase::InFrame(f) if !self.executes_commands => f,
            Phase::InFrame(f) | Phase::Ended(f) => f.saturating_add(1),
        };
        if tag < earliest_allowed {
            let late = Error::State("command tagged for a frame that already executed");
            return Err(late.detailed(format!(
                "tag is {tag}; expected {earliest_allowed} or later \
                 (frame {tag} already executed its commands)"
            )));
        }
        self.queue.push(tag, seat, item);
        Ok(())
    }

    /// The next queued command due on this frame, in (tag, seat, issue
    /// order); `None` when none is due or the frame executes no commands.
    pub fn pop_due(&mut self) -> Option<Queued<u64>> {
        match self.phase {
            Phase::InFrame(frame) if self.executes_commands => self.queue.pop_due(frame),
            _ => None,
        }
    }

    /// Number of queued commands.
    pub fn queued_commands(&self) -> usize {
        self.queue.len()
    }

    /// A timing event from `seat` executes on the current frame (S5, S6).
    pub fn execute_timing_event(&mut self, seat: u8, event: TimingEvent) -> Result<Applied> {
        let frame = self.current_frame()?;
        // A removed master's last event may still execute after its removal,
        // on every machine alike; so any human seat of the game is accepted.
        self.human_seat(seat)?;
        if event.fps == 0 {
            return Err(Error::invalid_value(
                "the timing event's fps",
                0u8,
                "1 to 255",
            ));
        }
        // A rate the engine's timer cannot hit (an event from a build
        // without the timer) runs at the rate every machine fits it to.
        let event = self.fitted(event);
        let tier = self.policy.tier(event.target, event.fps);
        if tier != self.policy.tier(self.executed_target, self.executed_fps) {
            self.push_output(Output::PlayerMessage { frame, tier });
        }
        if event.target != self.executed_target {
            if let Some(policy) = self.policy.adaptive_mut() {
                policy.note_change_executed(frame);
            }
        }
        self.executed_target = event.target;
        self.executed_fps = event.fps;
        let (applied, changed) = self.schedule.apply(frame, event);
        self.announce(frame, changed);
        Ok(applied)
    }

    /// A player's report executes on the current frame (S3). A report from
    /// a player already removed is a late no-op ([`Effect::LateNoOp`]); only
    /// a seat that never was a human player is refused (`UnknownSeat`).
    pub fn execute_report(&mut self, seat: u8, report: Report) -> Result<Effect> {
        let frame = self.current_frame()?;
        self.human_seat(seat)?;
        self.record.apply_report(seat, frame, report)
    }

    /// Refuse a seat that never was a human player of the game (removed
    /// ones still were), saying which seats were.
    fn human_seat(&self, seat: u8) -> Result<()> {
        if self.seats.is_human(seat) {
            return Ok(());
        }
        let humans: Vec<String> = (0..self.seats.count())
            .filter(|&s| self.seats.is_human(s))
            .map(|s| s.to_string())
            .collect();
        Err(Error::UnknownSeat(seat).detailed(format!(
            "seat {seat} never was a human seat of this game; expected one of the human seats {}",
            humans.join(", ")
        )))
    }

    /// A player's removal executes on the current frame (S3, S4.6). A second
    /// removal of the same seat is a late no-op ([`Effect::LateNoOp`]); only
    /// a seat that never was a human player is refused (`UnknownSeat`).
    pub fn execute_removal(&mut self, seat: u8) -> Result<Effect> {
        let frame = self.current_frame()?;
        self.human_seat(seat)?;
        if self.record.remove(seat)? == Effect::LateNoOp {
            return Ok(Effect::LateNoOp);
        }
        if self.seats.remove(seat)? {
            if let Some(policy) = self.policy.adaptive_mut() {
                policy.hand_off(frame);
            }
            self.push_output(Output::MasterChanged {
                frame,
                seat: self.seats.master(),
            });
        }
        Ok(Effect::Applied)
    }

    /// Change the rate the game speed allows (S6 Speed slider). Call it on
    /// every machine on the same frame, e.g. when the engine's speed event
    /// executes; the master's next evaluation with fresh reports applies it.
    pub fn set_speed_fps(&mut self, speed_fps: u8) -> Result<()> {
        if speed_fps == 0 {
            return Err(Error::invalid_value("speed_fps", 0u8, "1 to 255"));
        }
        self.policy.set_speed_fps(speed_fps);
        Ok(())
    }

    /// Whether this machine's player reports on `frame`: S3's report
    /// frames (32, 64, then every 128), except under `tracking`, which has
    /// its own cadence (every 16 frames, docs/tracking.md).
    pub fn is_report_frame(&self, frame: u32) -> bool {
        self.policy.is_report_frame(frame)
    }

    /// Whether this machine's player reports at the end of `frame`, its
    /// measurements holding `unreported_stalls` stalled frames since its
    /// last report: on the game's report frames ([`Self::is_report_frame`]),
    /// and under `tracking` also on the first frame after a stall, at most
    /// every 4 frames (the tracking cadence's `STALL_REPORT_MIN_FRAMES`), so the
    /// master hears of a spike's first stall at once instead of up to 16 slowed frames later
    /// (docs/tracking.md). A session asks once per frame, at its end; the
    /// answer is remembered as the last report.
    pub fn report_due(&mut self, frame: u32, unreported_stalls: u32) -> bool {
        super::tracking::report_due(
            self.policy.frequent_reports(),
            frame,
            unreported_stalls,
            &mut self.last_report_frame,
        )
    }

    /// Under `tracking`, on the master's machine: the timing event for
    /// the stall its own `report` shows, to send with that report, which
    /// it has just taken on the current frame ([`Self::report_due`]), or
    /// `None` (not the master, another policy, no raise, or one already on
    /// its way); `State` when no frame is open. The evaluation of the
    /// report, where it executes, makes
    /// the same raise a look-ahead later: sent now, the raise is in force
    /// one look-ahead sooner, one run of a spike's stalls fewer (decision
    /// 50 in docs/decisions.md). An engine session may send it the same
    /// way: as a timing event of the master, like those `end_frame` gives.
    pub fn raise_for_own_stall(&mut self, report: &Report) -> Result<Option<TimingEvent>> {
        let frame = self.current_frame()?;
        let Policy::Tracking(policy) = &self.policy else {
            return Ok(None);
        };
        if !self.is_master() {
            return Ok(None);
        }
        let in_force = self.in_force();
        let Some(event) = policy.raise_for_own_stall(&self.record, report, frame, in_force) else {
            return Ok(None);
        };
        let on_its_way = self.own_raise.is_some_and(|(until, look_ahead)| {
            frame <= until && look_ahead >= event.target.look_ahead()
        });
        if on_its_way {
            return Ok(None);
        }
        let executes_by = frame + u32::from(in_force.timing.look_ahead()) + 1;
        self.own_raise = Some((executes_by, event.target.look_ahead()));
        Ok(Some(event))
    }

    /// The schedule the policy's events execute in, as `tracking` reads it.
    fn in_force(&self) -> InForce {
        InForce {
            timing: self.schedule.timing(),
            staged: self.schedule.staged_target(),
        }
    }

    /// Ends the current frame with the master's evaluation (S4). Every
    /// machine evaluates; on the master's machine the timing event to queue
    /// as a command is returned.
    pub fn end_frame(&mut self) -> Result<Option<TimingEvent>> {
        let frame = self.current_frame()?;
        let in_force = self.in_force();
        let (verdict, event) = self.policy.evaluate(&self.record, frame, Some(in_force));
        if verdict != Verdict::NoEvaluation {
            self.last_verdict = verdict;
        }
        self.phase = Phase::Ended(frame);
        // The schedule cannot change again on this frame: its send (if any)
        // and tag are final.
        let send = self.is_send_frame().then(|| self.command_tag());
        self.sends.frame_ended(frame, send);
        Ok(event.filter(|_| self.is_master()))
    }

    /// Frame readiness (S5, [`SendHistory`](super::SendHistory)): the send frame whose
    /// packet, from every peer, `frame` needs before it executes — the last
    /// send frame tagged at or before `frame` — or `None` when nothing is
    /// needed. Answerable once `frame - 1` has ended, and for 256 frames
    /// back from there; otherwise `State`.
    pub fn required_send_frame(&self, frame: u32) -> Result<Option<u32>> {
        answer(self.sends.required_send_frame(frame), frame)
    }

    /// The send frames and tags of the recent past.
    pub fn send_history(&self) -> &SendHistory {
        &self.sends
    }

    /// Seats in house order, human and AI.
    pub fn seat_count(&self) -> u8 {
        self.seats.count()
    }

    /// Whether this machine is the master.
    pub fn is_master(&self) -> bool {
        self.local_seat.is_some() && self.local_seat == self.seats.master()
    }

    /// The master's seat, if any human is left.
    pub fn master(&self) -> Option<u8> {
        self.seats.master()
    }

    /// Who is in the game: seats, humans, who is present, the master.
    pub fn seats(&self) -> &Seats {
        &self.seats
    }

    /// Whether the current frame is a send frame under the timing in force
    /// now (after any event that executed on it).
    pub fn is_send_frame(&self) -> bool {
        self.schedule.is_send_frame(self.status_frame())
    }

    /// The timing in force.
    pub fn timing(&self) -> Timing {
        self.schedule.timing()
    }

    /// The frame rate in force.
    pub fn fps(&self) -> u8 {
        self.schedule.fps()
    }

    /// The tag of a command sent on this frame: `frame + look_ahead` under
    /// the timing in force now. On a frame that is not a send frame this is
    /// [`TimingMachine::forecast_tag`] for the current frame.
    pub fn command_tag(&self) -> u32 {
        self.forecast_tag(self.status_frame())
    }

    /// The tag a command issued on `issued_on` (the current frame or later)
    /// will get: it goes out on the first send frame at or after `issued_on`,
    /// tagged with that frame plus its look-ahead (S5). The schedule in force
    /// is advanced to that frame, so staged decreases are accounted for; a
    /// timing event that has not executed yet can still change it, so the
    /// tag taken on the send frame itself is the final one.
    pub fn forecast_tag(&self, issued_on: u32) -> u32 {
        let current = self.status_frame();
        if issued_on <= current && self.schedule.is_send_frame(current) {
            return current.saturating_add(u32::from(self.schedule.timing().look_ahead()));
        }
        let mut forecast = self.schedule.clone();
        let mut next = current;
        loop {
            next = next.saturating_add(1);
            forecast.begin_frame(next);
            if (next >= issued_on && forecast.is_send_frame(next)) || next == u32::MAX {
                return next.saturating_add(u32::from(forecast.timing().look_ahead()));
            }
        }
    }

    fn status_frame(&self) -> u32 {
        match self.phase {
            Phase::InFrame(f) | Phase::Ended(f) => f,
            Phase::NotStarted => 0,
        }
    }

    /// The shared record (read-only).
    pub fn record(&self) -> &Record {
        &self.record
    }

    /// Everything a UI or log shows.
    pub fn status(&self) -> Status {
        Status {
            frame: self.status_frame(),
            timing: self.timing(),
            fps: self.fps(),
            target: self.policy.target().0,
            target_fps: self.tick_timer.map_or(self.policy.target().1, |t| {
                t.rate_at_most(self.policy.target().1)
            }),
            staged_target: self.schedule.staged_target(),
            tier: self.policy.tier(self.timing(), self.fps()),
            master: self.seats.master(),
            calibrating: self
                .policy
                .adaptive()
                .is_some_and(MasterPolicy::calibrating),
            qualifying_in_a_row: self
                .policy
                .adaptive()
                .map_or(0, MasterPolicy::qualifying_in_a_row),
            descent_running: self
                .policy
                .adaptive()
                .is_some_and(MasterPolicy::descent_running),
            last_verdict: self.last_verdict,
        }
    }

    /// The next output for the engine, oldest first.
    pub fn poll_output(&mut self) -> Option<Output> {
        self.outputs.pop_front()
    }

    fn announce(&mut self, frame: u32, changed: Changed) {
        if changed.timing {
            self.push_output(Output::TimingChanged {
                frame,
                timing: self.schedule.timing(),
            });
        }
        if changed.fps {
            self.push_output(Output::FrameRateChanged {
                frame,
                fps: self.schedule.fps(),
            });
        }
    }

    fn push_output(&mut self, output: Output) {
        self.outputs.push_back(output);
    }
}

#[cfg(test)]
mod report_tests {
    use super::*;

    fn machine(policy: PolicyKind) -> TimingMachine {
        TimingMachine::new(&MachineConfig {
            policy,
            ..MachineConfig::adaptive(30, vec![true, true], Some(0))
        })
        .unwrap()
    }

    #[test]
    fn under_tracking_a_stall_is_reported_on_the_next_frame_at_most_every_four() {
        let mut tracking = machine(PolicyKind::Tracking);
        let due: Vec<u32> = (1..=40)
            .filter(|&frame| {
                // Stalls measured, unreported, on frames 5 to 9 and on 20.
                let stalls = u32::from((5..=9).contains(&frame) || frame == 20);
                tracking.report_due(frame, stalls)
            })
            .collect();
        // The cadence (16, 32) plus the stalls, spaced four frames apart.
        assert_eq!(due, [5, 9, 16, 20, 32]);
        // Every other policy keeps its cadence whatever the stalls.
        let mut adaptive = machine(PolicyKind::Adaptive);
        let due: Vec<u32> = (1..=70).filter(|&f| adaptive.report_due(f, 1)).collect();
        assert_eq!(due, [32, 64]);
    }

    fn report(worst: u32, median: u32, stalled: u32, max_wait_ms: u32) -> Report {
        Report {
            process_us: 5000,
            max_wait_ms,
            worst_rtt_ms: Some(worst),
            detail: Some(crate::report::ReportDetail {
                median_rtt_ms: Some(median),
                p90_rtt_ms: Some(worst),
                latest_rtt_ms: Some(worst),
                frames: 6,
                stalled_frames: stalled,
                stall_ms: max_wait_ms + 3 * stalled.saturating_sub(1),
                waited_for: (stalled > 0).then_some(1),
                needs: None,
            }),
        }
    }

    /// Frames up to `to` with nothing executed; the master's events, if
    /// any, returned with the frames they were issued on.
    fn run_to(m: &mut TimingMachine, to: u32) -> Vec<(u32, TimingEvent)> {
        let mut events = Vec::new();
        let from = match m.phase {
            Phase::NotStarted => 0,
            Phase::Ended(f) => f + 1,
            Phase::InFrame(_) => unreachable!(),
        };
        for frame in from..=to {
            m.begin_frame(frame).unwrap();
            if let Some(event) = m.end_frame().unwrap() {
                events.push((frame, event));
            }
        }
        events
    }

    #[test]
    fn the_master_raises_for_its_own_stall_with_the_report_and_the_evaluation_agrees() {
        let calm = report(120, 120, 0, 0);
        // Seat 0 is the master; seat 1 is not.
        let mut machines = [machine(PolicyKind::Tracking), {
            TimingMachine::new(&MachineConfig {
                policy: PolicyKind::Tracking,
                ..MachineConfig::adaptive(30, vec![true, true], Some(1))
            })
            .unwrap()
        }];
        let mut opening = None;
        for m in &mut machines {
            run_to(m, 24);
            m.begin_frame(25).unwrap();
            m.execute_report(0, calm).unwrap();
            m.execute_report(1, calm).unwrap();
            opening = m.end_frame().unwrap().or(opening);
        }
        // 120 ms round trips at 30 fps: 2 frames and the prior margin's
        // one, `1/3`, executed where it was sent (the opening look-ahead of
        // 9 frames later).
        let opening = opening.unwrap();
        assert_eq!(opening.target.to_string(), "1/3");
        for m in &mut machines {
            run_to(m, 34);
            m.begin_frame(35).unwrap();
            m.execute_timing_event(0, opening).unwrap();
            m.end_frame().unwrap();
            run_to(m, 59);
        }
        // A 1500 ms spike: the master's frame 60 waited 684 ms; its first
        // round trips are half back (810 ms). A spike's first stall raises
        // nothing (decision 75), and where its report executes, three
        // frames later, the evaluation answers nothing yet either.
        let onset = report(810, 120, 2, 684);
        for m in &mut machines {
            m.begin_frame(60).unwrap();
            assert_eq!(m.raise_for_own_stall(&onset).unwrap(), None);
            m.end_frame().unwrap();
            run_to(m, 62);
            m.begin_frame(63).unwrap();
            m.execute_report(0, onset).unwrap();
            m.execute_report(1, report(810, 120, 0, 0)).unwrap();
            assert_eq!(m.end_frame().unwrap(), None);
        }
        // The master's frame 70 waits as long again: the spike goes on.
        let mut raises = Vec::new();
        for m in &mut machines {
            run_to(m, 69);
            m.begin_frame(70).unwrap();
            raises.push(m.raise_for_own_stall(&onset).unwrap());
            // Once per raise: the same stall again raises nothing more.
            assert_eq!(m.raise_for_own_stall(&onset).unwrap(), None);
            m.end_frame().unwrap();
        }
        // Only the master raises: 3 frames in force, 21 lacking, at most
        // the margin's 9 frames over what the round trips need (13), and
        // the phase frame of a spike's rise (decision 59).
        let raise = raises[0].unwrap();
        assert_eq!(raise.target.to_string(), "1/23");
        assert_eq!(raises[1], None);
        // Sent with the report, it executes with it, three frames later, and
        // the evaluation of that report makes the same raise on every
        // machine: the master sends it again (in force already, it changes
        // nothing where it executes), and every machine holds its target.
        for (seat, m) in machines.iter_mut().enumerate() {
            run_to(m, 72);
            m.begin_frame(73).unwrap();
            m.execute_timing_event(0, raise).unwrap();
            m.execute_report(0, onset).unwrap();
            m.execute_report(1, report(810, 120, 0, 0)).unwrap();
            let again = m.end_frame().unwrap();
            assert_eq!(again, (seat == 0).then_some(raise));
            assert_eq!(m.timing().to_string(), "1/23");
            assert_eq!(m.policy.target().0.to_string(), "1/23");
        }
        // Every other policy leaves the raise to its evaluation.
        let mut adaptive = machine(PolicyKind::Adaptive);
        run_to(&mut adaptive, 59);
        adaptive.begin_frame(60).unwrap();
        assert_eq!(adaptive.raise_for_own_stall(&onset).unwrap(), None);
        assert!(adaptive.end_frame().is_ok());
        assert!(
            adaptive.raise_for_own_stall(&onset).is_err(),
            "no frame open"
        );
    }
}
