//! One match's state machine on the relay (S10), sans-IO: seats, the load
//! barrier, the relay clock, execution tick assignment, the turn log, the
//! bundle stream per connection, presence, the reconnect grace, checksum
//! comparison and the end of the match.
//!
//! It works on decoded messages and connection events; [`super::server`]
//! does tickets, links and datagrams. Time is a microsecond instant on any
//! monotonic clock (`now_us`), as for links and sessions.
//!
//! Everything the clients must agree on — which order runs at which tick,
//! when a seat leaves — is decided here from arrival order alone, with
//! integer arithmetic, and reaches clients only through the turn log.
//!
//! # The clock
//!
//! Tick `t` starts `t * 1_000_000 / tick_rate_millihz` whole milliseconds
//! after the match starts ([`tick_start_ms`]). At the start of every tick
//! that is a multiple of `bundle_interval`, the horizon moves to that tick:
//! every tick below it is final and goes out in a TurnBundle, empty or not.
//!
//! # Timing (S4 on the relay)
//!
//! With a timing policy in the setup (`timing_policy`, adaptive by default)
//! the relay is the master: clients send TimingReports (round trip to the
//! relay, processing time, waits: S3's report); the sequencer keeps them in
//! a [`Record`] of the seats connected now and runs the same policy a
//! peer-to-peer master runs ([`crate::timing::machine`]'s), on its own ticks
//! as frames. The policy's send period becomes the bundle interval, its
//! look-ahead the ticks clients run behind the horizon, its frame rate the
//! relay's tick rate (capped by the setup's). A change is announced as a
//! Timing message from the next bundle boundary on, before the bundle that
//! reaches it, so every client applies it at the same tick
//! ([`super::timing::TimingPlan`]). Decisions use only arrival order and
//! ticks: the same inputs give the same plan.
//!
//! # Tick assignment
//!
//! An order from a seat gets tick `max(horizon, next free tick of the seat)`:
//! the earliest tick not yet broadcast, one order per seat per tick, later
//! ones queued onto later ticks (at most `max_queued_ticks` ahead).

use std::collections::{BTreeMap, VecDeque};

use super::timing::TimingPlan;
use crate::error::{Error, Result};
use crate::report::{Record, Report};
use crate::timing::machine::Policy;
use crate::timing::PolicyKind;
use crate::wire::relay::{
    BundleEntry, BundleWriter, ClientMessage, EntryKind, MatchOverReason, RejectReason,
    SeatPresence, ServerMessage, TimingChange, Welcome, BUNDLE_HEADER_BYTES, ENTRY_HEADER_BYTES,
    MAX_SEATS,
};

/// Default relay tick rate: 30 ticks per second.
pub const DEFAULT_TICK_RATE_MILLIHZ: u32 = 30_000;
/// Default load barrier: 60 s.
pub const DEFAULT_START_BARRIER_US: u64 = 60_000_000;
/// Default reconnect grace: 60 s.
pub const DEFAULT_RECONNECT_GRACE_US: u64 = 60_000_000;
/// Checksum reports older than this many ticks behind the horizon are
/// decided with whatever arrived, then forgotten (bounds the memory).
pub const CHECKSUM_WINDOW_TICKS: u32 = 900;
/// A checksum round still missing reports this many ticks behind the
/// horizon is decided with the reports it has (a seat that stays away must
/// not hide a desync of the others); later reports are checked against it.
pub const CHECKSUM_DECIDE_TICKS: u32 = 150;
/// Most desync notices a match keeps (later ones are counted only).
pub const MAX_DESYNC_NOTICES: usize = 256;

/// The setup of one match.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MatchSetup {
    /// The lobby's id of the match (tickets name it).
    pub match_id: u64,
    /// Seats, 1–16.
    pub seat_count: u8,
    /// Bit `s`: seat `s` is human; others are AI, computed by every client.
    pub human_mask: u16,
    /// Relay ticks per 1000 s (30000 = 30 ticks/s).
    pub tick_rate_millihz: u32,
    /// Ticks per bundle, 1–255, when `timing_policy` is `None`; otherwise
    /// the policy chooses it.
    pub bundle_interval: u8,
    /// The rule that sets the timing (S4 with the relay as master):
    /// `Some(Adaptive)` by default, `Some(Tracking)`, a fixed `S/L`, or
    /// `None` for the fixed timing of the setup (`bundle_interval`, and the
    /// jitter buffer each client chose).
    pub timing_policy: Option<PolicyKind>,
    /// Clients report a checksum every this many ticks; 0 disables.
    pub checksum_interval: u16,
    /// An AI decision at tick `t` yields an order for `t + ai_order_delay`, 0–8.
    pub ai_order_delay: u8,
    /// Start the clock this long after the match was created even if some
    /// human seats have not said Hello.
    pub start_barrier_us: u64,
    /// A seat without a connection for this long (counted from the start for
    /// seats that never connected) is dropped.
    pub reconnect_grace_us: u64,
    /// The match ends when the horizon reaches this tick.
    pub max_ticks: u32,
    /// An order is refused when its seat's queue would reach this many ticks
    /// past the horizon (a flooding client cannot grow the relay's memory).
    pub max_queued_ticks: u32,
}

impl MatchSetup {
    /// A setup with the defaults of S10: 30 ticks/s, the adaptive timing
    /// policy (a bundle every tick if it is turned off), a checksum every 30
    /// ticks, `ai_order_delay` 8, 60 s barrier and grace, four hours at most.
    pub fn new(match_id: u64, seat_count: u8, human_mask: u16) -> MatchSetup {
        MatchSetup {
            match_id,
            seat_count,
            human_mask,
            tick_rate_millihz: DEFAULT_TICK_RATE_MILLIHZ,
            bundle_interval: 1,
            timing_policy: Some(PolicyKind::Adaptive),
            checksum_interval: 30,
            ai_order_delay: 8,
            start_barrier_us: DEFAULT_START_BARRIER_US,
            reconnect_grace_us: DEFAULT_RECONNECT_GRACE_US,
            max_ticks: 4 * 3600 * 30,
            max_queued_ticks: 256,
        }
    }

    /// Check every field's range.
    pub fn validate(&self) -> Result<()> {
        let n = usize::from(self.seat_count);
        if !(1..=MAX_SEATS).contains(&n) {
            return Err(Error::InvalidArgument("seat_count must be 1 to 16"));
        }
        if n < MAX_SEATS && self.human_mask >> n != 0 {
            return Err(Error::InvalidArgument(
                "human_mask names a seat at or above seat_count",
            ));
        }
        if self.human_mask == 0 {
            return Err(Error::InvalidArgument("human_mask has no human seat"));
        }
        if !(1..=1_000_000_000).contains(&self.tick_rate_millihz) {
            return Err(Error::InvalidArgument(
                "tick_rate_millihz must be 1 to 1000000000",
            ));
        }
        if self.bundle_interval == 0 {
            return Err(Error::InvalidArgument("bundle_interval must be 1 to 255"));
        }
        if self.ai_order_delay > 8 {
            return Err(Error::InvalidArgument("ai_order_delay must be 0 to 8"));
        }
        if self.max_ticks == 0 || self.max_queued_ticks == 0 {
            return Err(Error::InvalidArgument(
                "max_ticks and max_queued_ticks must be positive",
            ));
        }
        Ok(())
    }

    fn is_human(&self, seat: u8) -> bool {
        usize::from(seat) < MAX_SEATS && self.human_mask & (1 << seat) != 0
    }

    /// The frame rate the setup's tick rate stands for (the game speed's
    /// cap, S4.2), 1–255.
    pub fn speed_fps(&self) -> u8 {
        (self.tick_rate_millihz / 1000).clamp(1, 255) as u8
    }

    /// The tick rate for a frame rate the policy chose: the setup's own at
    /// the speed's cap, `fps` ticks per second below it.
    fn tick_rate_for(&self, fps: u8) -> u32 {
        if fps >= self.speed_fps() {
            self.tick_rate_millihz
        } else {
            u32::from(fps.max(1)) * 1000
        }
    }
}

/// When tick `t` starts, in whole milliseconds after the match start.
pub fn tick_start_ms(tick: u32, tick_rate_millihz: u32) -> u64 {
    u64::from(tick) * 1_000_000 / u64::from(tick_rate_millihz.max(1))
}

/// The tick running `elapsed_us` after the match start: the largest `t` with
/// `tick_start_ms(t) * 1000 <= elapsed_us` (saturating at `u32::MAX`).
pub fn tick_at(elapsed_us: u64, tick_rate_millihz: u32) -> u32 {
    let ms = u128::from(elapsed_us / 1000);
    let rate = u128::from(tick_rate_millihz.max(1));
    // t * 1e6 / rate <= ms  <=>  t * 1e6 < (ms + 1) * rate
    let t = ((ms + 1) * rate - 1) / 1_000_000;
    u32::try_from(t).unwrap_or(u32::MAX)
}

/// One sequenced entry of the turn log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogEntry {
    /// Execution tick.
    pub tick: u32,
    /// Seat.
    pub seat: u8,
    /// Order, quit or dropped.
    pub kind: EntryKind,
    /// The order.
    pub payload: Box<[u8]>,
}

/// A desync the relay found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DesyncNotice {
    /// The tick.
    pub tick: u32,
    /// Seats whose checksums were compared.
    pub reported_mask: u16,
    /// Seats outside the largest agreeing group (every reporter on a tie).
    pub disagreeing_mask: u16,
}

/// What happened to the match, for the server's log and for tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MatchEvent {
    /// The clock started (every human said Hello, or the barrier ran out).
    Started {
        /// Whether every human seat had said Hello.
        all_present: bool,
    },
    /// A seat's connection was accepted.
    Connected {
        /// Seat.
        seat: u8,
        /// Where its bundles resume.
        resume_from_tick: u32,
    },
    /// A seat lost its connection (its grace runs).
    Disconnected {
        /// Seat.
        seat: u8,
    },
    /// A seat's leave reached the turn log.
    SeatLeft {
        /// Seat.
        seat: u8,
        /// Tick of its quit or dropped entry.
        tick: u32,
        /// Quit (`Quit`) or dropped after the grace (`Dropped`).
        kind: EntryKind,
    },
    /// A desync.
    Desync(DesyncNotice),
    /// The match ended.
    Over {
        /// Final horizon.
        final_tick: u32,
        /// Why.
        reason: MatchOverReason,
    },
}

/// Inputs refused, counted by cause.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MatchCounters {
    /// Orders accepted and sequenced.
    pub orders_accepted: u64,
    /// Submissions at or below the highest accepted sequence (resends).
    pub duplicate_submissions: u64,
    /// Submissions skipping a sequence number.
    pub out_of_order_submissions: u64,
    /// Orders refused: the seat's queue is full or the match's tick limit is reached.
    pub orders_refused: u64,
    /// Messages from a seat that has left or is leaving.
    pub from_departed_seat: u64,
    /// Checksum reports for a tick that is not a checksum tick, not yet
    /// executable, or too old.
    pub bad_checksum_reports: u64,
    /// ResyncRequests beyond the horizon.
    pub bad_resync_requests: u64,
    /// Resyncs served.
    pub resyncs: u64,
    /// Desyncs beyond [`MAX_DESYNC_NOTICES`].
    pub desyncs_not_kept: u64,
    /// TimingReports taken into the record.
    pub timing_reports: u64,
    /// TimingReports refused: before the start, from a departed seat.
    pub bad_timing_reports: u64,
    /// Timing changes announced (the first timing included).
    pub timing_changes: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Loading,
    Running { start_us: u64 },
    Over { reason: MatchOverReason },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Departure {
    /// In the match.
    Present,
    /// A quit or drop is queued but not yet broadcast.
    Leaving,
    /// Its quit or drop is in the turn log.
    Left,
}

/// Position of a connection's bundle stream: the next tick to send, and how
/// many entries of that tick already went out in `MORE` chunks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stream {
    tick: u32,
    skip: usize,
}

#[derive(Debug)]
struct Seat {
    human: bool,
    departure: Departure,
    /// Whether it ever said Hello.
    said_hello: bool,
    /// The current connection's stream; `None` without a connection.
    stream: Option<Stream>,
    /// Since when the seat has had no connection (grace clock), once running.
    disconnected_since_us: Option<u64>,
    highest_accepted: u32,
    next_free_tick: u32,
    /// Sequenced entries not yet broadcast, in tick order.
    queue: VecDeque<LogEntry>,
    welcome_due: Option<u32>,
    pong_due: Option<(i64, i64)>,
    presence_sent: u64,
    /// Serial of the next timing change to send this connection.
    timing_sent: u64,
    /// The latest TimingReport and the horizon when it arrived.
    report: Option<(Report, u32)>,
    desyncs_sent: usize,
    over_sent: bool,
}

#[derive(Debug, Default)]
struct ChecksumRound {
    values: [u64; MAX_SEATS],
    reported: u16,
    /// The agreed value once decided (`None`: undecided, or no majority).
    decided: Option<Option<u64>>,
}

/// One match. See the module docs.
#[derive(Debug)]
pub struct Sequencer {
    setup: MatchSetup,
    created_us: u64,
    phase: Phase,
    seats: Vec<Seat>,
    horizon: u32,
    log: Vec<LogEntry>,
    checksums: BTreeMap<u32, ChecksumRound>,
    desyncs: Vec<DesyncNotice>,
    presence_version: u64,
    events: VecDeque<MatchEvent>,
    counters: MatchCounters,
    /// The timing in force and announced (S10 with S4).
    plan: TimingPlan,
    /// Changes announced so far; the plan holds the latest ones.
    announced: u64,
    /// The master's policy, when the setup names one.
    policy: Option<Policy>,
    /// The reports of the seats connected now (S3, with the relay's ticks as
    /// frames); rebuilt when that set changes.
    record: Record,
    /// The seats in the record.
    record_seats: u16,
}

impl Sequencer {
    /// A match created at `now_us`: loading until every human seat has said
    /// Hello or the start barrier runs out.
    pub fn new(setup: MatchSetup, now_us: u64) -> Result<Sequencer> {
        setup.validate()?;
        let seats = (0..setup.seat_count)
            .map(|s| Seat {
                human: setup.is_human(s),
                departure: Departure::Present,
                said_hello: false,
                stream: None,
                disconnected_since_us: None,
                highest_accepted: 0,
                next_free_tick: 0,
                queue: VecDeque::new(),
                welcome_due: None,
                pong_due: None,
                presence_sent: 0,
                timing_sent: 0,
                report: None,
                desyncs_sent: 0,
                over_sent: false,
            })
            .collect();
        let policy = setup
            .timing_policy
            .map(|kind| Policy::new(kind, setup.speed_fps()))
            .transpose()?;
        let (bundle_interval, look_ahead) = match &policy {
            Some(p) => {
                let t = p.initial_timing();
                (t.send_period(), t.look_ahead())
            }
            // Unused: clients of a match without a policy keep their own.
            None => (setup.bundle_interval, 1),
        };
        let plan = TimingPlan::new(TimingChange {
            from_tick: 0,
            from_ms: 0,
            tick_rate_millihz: setup.tick_rate_millihz,
            bundle_interval,
            look_ahead,
        });
        Ok(Sequencer {
            setup,
            created_us: now_us,
            phase: Phase::Loading,
            seats,
            horizon: 0,
            log: Vec::new(),
            checksums: BTreeMap::new(),
            desyncs: Vec::new(),
            presence_version: 1,
            events: VecDeque::new(),
            counters: MatchCounters {
                timing_changes: u64::from(policy.is_some()),
                ..MatchCounters::default()
            },
            announced: u64::from(policy.is_some()),
            plan,
            policy,
            record: Record::new(0, []),
            record_seats: 0,
        })
    }

    /// The timing plan: the change in force and those announced.
    pub fn timing_plan(&self) -> &TimingPlan {
        &self.plan
    }

    /// The record of the connected seats' reports the policy reads.
    pub fn record(&self) -> &Record {
        &self.record
    }

    /// Keep the record to the seats connected and present now that have
    /// ever reported (a client that sends no reports at all, such as a bare
    /// `RelayClient`, does not hold the others' timing); a seat that comes
    /// back brings its last report (fresh or not, by its tick).
    fn refresh_record(&mut self) {
        let members = self
            .seats
            .iter()
            .enumerate()
            .filter(|(_, s)| {
                s.human
                    && s.departure == Departure::Present
                    && s.stream.is_some()
                    && s.report.is_some()
            })
            .fold(0u16, |m, (i, _)| m | 1 << i);
        if members == self.record_seats {
            return;
        }
        self.record_seats = members;
        let seats = (0..MAX_SEATS as u8).filter(|i| members & (1 << i) != 0);
        self.record = Record::new(self.horizon, seats);
        for (i, s) in self.seats.iter().enumerate() {
            if let Some((report, at)) = s.report.filter(|_| members & (1 << i) != 0) {
                let _ = self.record.apply_report(i as u8, at, report);
            }
        }
    }

    /// Evaluate the policy on the ticks from `from` to `to` (the horizon
    /// just passed them); announce a change from the next boundary on.
    fn evaluate_timing(&mut self, from: u32, to: u32) {
        let Some(policy) = self.policy.as_mut() else {
            return;
        };
        let mut chosen = None;
        for frame in from..=to {
            if let (_, Some(event)) = policy.evaluate(&self.record, frame, None) {
                chosen = Some(event);
            }
        }
        let Some(event) = chosen else {
            return;
        };
        let from_tick = self.plan.next_boundary(self.horizon);
        let in_force = *self.plan.in_force(from_tick);
        let change = self.plan.change_at(
            from_tick,
            self.setup.tick_rate_for(event.fps),
            event.target.send_period(),
            event.target.look_ahead(),
        );
        let unchanged = (
            change.tick_rate_millihz,
            change.bundle_interval,
            change.look_ahead,
        ) == (
            in_force.tick_rate_millihz,
            in_force.bundle_interval,
            in_force.look_ahead,
        );
        if (change.bundle_interval, change.look_ahead)
            != (in_force.bundle_interval, in_force.look_ahead)
        {
            if let Some(adaptive) = policy.adaptive_mut() {
                adaptive.note_change_executed(from_tick);
            }
        }
        if unchanged || !self.plan.announce(change) {
            return;
        }
        self.announced += 1;
        self.counters.timing_changes += 1;
    }

    /// The setup.
    pub fn setup(&self) -> &MatchSetup {
        &self.setup
    }

    /// Every tick below it has been broadcast.
    pub fn horizon(&self) -> u32 {
        self.horizon
    }

    /// The turn log so far (every broadcast entry, by tick and seat).
    pub fn log(&self) -> &[LogEntry] {
        &self.log
    }

    /// Desyncs found so far.
    pub fn desyncs(&self) -> &[DesyncNotice] {
        &self.desyncs
    }

    /// Counters of refused input.
    pub fn counters(&self) -> &MatchCounters {
        &self.counters
    }

    /// Whether the match has ended.
    pub fn is_over(&self) -> bool {
        matches!(self.phase, Phase::Over { .. })
    }

    /// Whether the clock has started.
    pub fn has_started(&self) -> bool {
        !matches!(self.phase, Phase::Loading)
    }

    /// The next event for the log.
    pub fn poll_event(&mut self) -> Option<MatchEvent> {
        self.events.pop_front()
    }

    /// The relay tick at `now_us` (0 before the start).
    pub fn tick(&self, now_us: u64) -> u32 {
        match self.phase {
            Phase::Running { start_us } => self.plan.tick_at(now_us.saturating_sub(start_us)),
            Phase::Loading => 0,
            Phase::Over { .. } => self.horizon,
        }
    }

    /// The match clock: µs since the start; before it, minus the time left
    /// to the start barrier.
    pub fn match_clock_us(&self, now_us: u64) -> i64 {
        match self.phase {
            Phase::Running { start_us } => now_us as i64 - start_us as i64,
            _ => now_us as i64 - (self.created_us + self.setup.start_barrier_us) as i64,
        }
    }

    /// Presence of every seat now.
    pub fn presence(&self) -> [SeatPresence; MAX_SEATS] {
        let mut out = [SeatPresence::Ai; MAX_SEATS];
        for (o, s) in out.iter_mut().zip(&self.seats) {
            *o = if !s.human {
                SeatPresence::Ai
            } else if s.departure == Departure::Left {
                SeatPresence::Left
            } else if s.stream.is_some() {
                SeatPresence::Connected
            } else if !s.said_hello {
                SeatPresence::Loading
            } else {
                SeatPresence::Reconnecting
            };
        }
        out
    }

    fn presence_changed(&mut self) {
        self.presence_version += 1;
    }

    /// A valid Hello for `seat` (the server checked the ticket): accept it,
    /// replacing any connection the seat has, or say why not. The new
    /// connection's bundles resume from `have_horizon` when it is at most
    /// the horizon, else from 0.
    pub fn connect(
        &mut self,
        seat: u8,
        have_horizon: u32,
        now_us: u64,
    ) -> std::result::Result<u32, RejectReason> {
        if self.is_over() {
            return Err(RejectReason::MatchOver);
        }
        let Some(s) = self.seats.get_mut(usize::from(seat)) else {
            return Err(RejectReason::BadTicket);
        };
        if !s.human {
            return Err(RejectReason::BadTicket);
        }
        if s.departure != Departure::Present {
            return Err(RejectReason::SeatLeft);
        }
        let resume = if have_horizon <= self.horizon {
            have_horizon
        } else {
            0
        };
        s.said_hello = true;
        s.stream = Some(Stream {
            tick: resume,
            skip: 0,
        });
        s.disconnected_since_us = None;
        s.welcome_due = Some(resume);
        s.pong_due = None;
        // The new connection gets the current presence, timing and every
        // notice anew.
        s.presence_sent = 0;
        s.timing_sent = 0;
        s.desyncs_sent = 0;
        self.presence_changed();
        self.refresh_record();
        self.events.push_back(MatchEvent::Connected {
            seat,
            resume_from_tick: resume,
        });
        if self.phase == Phase::Loading && self.seats.iter().all(|s| !s.human || s.said_hello) {
            self.start(now_us, true);
        }
        Ok(resume)
    }

    /// The seat's connection is gone (link lost, or replaced by nothing):
    /// its reconnect grace starts (once the match runs).
    pub fn disconnect(&mut self, seat: u8, now_us: u64) {
        let running = matches!(self.phase, Phase::Running { .. });
        let Some(s) = self.seats.get_mut(usize::from(seat)) else {
            return;
        };
        if s.stream.take().is_some() {
            if running {
                s.disconnected_since_us = Some(now_us);
            }
            self.presence_changed();
            self.events.push_back(MatchEvent::Disconnected { seat });
            self.refresh_record();
        }
    }

    /// Whether `seat` has a connection.
    pub fn is_connected(&self, seat: u8) -> bool {
        self.seats
            .get(usize::from(seat))
            .is_some_and(|s| s.stream.is_some())
    }

    fn start(&mut self, start_us: u64, all_present: bool) {
        self.phase = Phase::Running { start_us };
        // The record (and the silent grace, S3) starts with the clock.
        self.record_seats = 0;
        self.refresh_record();
        for s in &mut self.seats {
            if s.human && s.stream.is_none() {
                s.disconnected_since_us = Some(start_us);
            }
        }
        self.presence_changed();
        self.events.push_back(MatchEvent::Started { all_present });
    }

    /// Act on a message from `seat`'s current connection.
    pub fn handle_message(&mut self, seat: u8, now_us: u64, message: &ClientMessage<'_>) {
        let horizon = self.horizon;
        let running = matches!(self.phase, Phase::Running { .. });
        let clock = self.match_clock_us(now_us);
        let Some(s) = self.seats.get_mut(usize::from(seat)) else {
            return;
        };
        if s.stream.is_none() {
            return;
        }
        match *message {
            ClientMessage::OrderSubmit { sequence, payload } => {
                self.sequence(seat, sequence, EntryKind::Order, payload);
            }
            ClientMessage::Quit { sequence } => {
                self.sequence(seat, sequence, EntryKind::Quit, &[]);
            }
            ClientMessage::Ping { t0_us } => {
                s.pong_due = Some((t0_us, clock));
            }
            ClientMessage::ResyncRequest { horizon: h } => {
                if h > horizon {
                    self.counters.bad_resync_requests += 1;
                } else {
                    s.stream = Some(Stream { tick: h, skip: 0 });
                    self.counters.resyncs += 1;
                }
            }
            ClientMessage::TimingReport(report) => {
                if running && s.departure == Departure::Present {
                    s.report = Some((report, horizon));
                    self.counters.timing_reports += 1;
                    if self.record_seats & (1 << seat) != 0 {
                        let _ = self.record.apply_report(seat, horizon, report);
                    } else {
                        self.refresh_record(); // its first report: it joins
                    }
                } else {
                    self.counters.bad_timing_reports += 1;
                }
            }
            ClientMessage::ChecksumReport { tick, checksum } => {
                let interval = u32::from(self.setup.checksum_interval);
                let valid = running
                    && interval > 0
                    && tick % interval == 0
                    && tick < horizon
                    && tick + CHECKSUM_WINDOW_TICKS >= horizon
                    && s.departure == Departure::Present;
                if valid {
                    self.checksum(seat, tick, checksum);
                } else {
                    self.counters.bad_checksum_reports += 1;
                }
            }
        }
    }

    fn sequence(&mut self, seat: u8, sequence: u32, kind: EntryKind, payload: &[u8]) {
        let horizon = self.horizon;
        let max_ticks = self.setup.max_ticks;
        let max_queued = self.setup.max_queued_ticks;
        let s = &mut self.seats[usize::from(seat)];
        if s.departure != Departure::Present {
            self.counters.from_departed_seat += 1;
            return;
        }
        if sequence <= s.highest_accepted {
            self.counters.duplicate_submissions += 1;
            return;
        }
        if sequence != s.highest_accepted.wrapping_add(1) {
            self.counters.out_of_order_submissions += 1;
            return;
        }
        let tick = horizon.max(s.next_free_tick);
        if tick >= max_ticks || tick - horizon >= max_queued {
            self.counters.orders_refused += 1;
            return;
        }
        s.highest_accepted = sequence;
        s.next_free_tick = tick + 1;
        s.queue.push_back(LogEntry {
            tick,
            seat,
            kind,
            payload: payload.into(),
        });
        if kind == EntryKind::Quit {
            s.departure = Departure::Leaving;
        }
        self.counters.orders_accepted += 1;
    }

    fn checksum(&mut self, seat: u8, tick: u32, checksum: u64) {
        let bit = 1u16 << seat;
        let expected = self.expected_reporters();
        let round = self.checksums.entry(tick).or_default();
        match round.decided {
            Some(agreed) => {
                // A late report (e.g. after a reload): checked against the
                // agreed value on its own.
                if round.reported & bit != 0 {
                    return;
                }
                round.reported |= bit;
                round.values[usize::from(seat)] = checksum;
                if agreed.is_some_and(|v| v != checksum) {
                    let notice = DesyncNotice {
                        tick,
                        reported_mask: round.reported,
                        disagreeing_mask: bit,
                    };
                    self.record_desync(notice);
                }
            }
            None => {
                if round.reported & bit != 0 {
                    return;
                }
                round.reported |= bit;
                round.values[usize::from(seat)] = checksum;
                if round.reported & expected == expected {
                    self.decide(tick);
                }
            }
        }
    }

    fn expected_reporters(&self) -> u16 {
        self.seats
            .iter()
            .enumerate()
            .filter(|(_, s)| s.human && s.departure == Departure::Present)
            .fold(0u16, |m, (i, _)| m | 1 << i)
    }

    fn decide(&mut self, tick: u32) {
        let Some(round) = self.checksums.get_mut(&tick) else {
            return;
        };
        // Groups of equal values, by seat order: deterministic.
        let mut best: Option<(u64, u32)> = None;
        let mut tie = false;
        let mut distinct = 0;
        let seats = || (0..MAX_SEATS).filter(|&i| round.reported & (1 << i) != 0);
        for i in seats() {
            let v = round.values[i];
            if seats().take_while(|&j| j < i).any(|j| round.values[j] == v) {
                continue; // counted with an earlier seat
            }
            distinct += 1;
            let count = seats().filter(|&j| round.values[j] == v).count() as u32;
            match best {
                Some((_, c)) if c > count => {}
                Some((_, c)) if c == count => tie = true,
                _ => {
                    best = Some((v, count));
                    tie = false;
                }
            }
        }
        let reported = round.reported;
        if distinct <= 1 {
            round.decided = Some(best.map(|b| b.0));
            return;
        }
        let agreed = if tie { None } else { best.map(|b| b.0) };
        round.decided = Some(agreed);
        let disagreeing = match agreed {
            Some(v) => seats()
                .filter(|&i| round.values[i] != v)
                .fold(0u16, |m, i| m | 1 << i),
            None => reported,
        };
        self.record_desync(DesyncNotice {
            tick,
            reported_mask: reported,
            disagreeing_mask: disagreeing,
        });
    }

    fn record_desync(&mut self, notice: DesyncNotice) {
        self.events.push_back(MatchEvent::Desync(notice));
        if self.desyncs.len() < MAX_DESYNC_NOTICES {
            self.desyncs.push(notice);
        } else {
            self.counters.desyncs_not_kept += 1;
        }
    }

    /// End the match now (operator, shutdown).
    pub fn end(&mut self, _now_us: u64) {
        if !self.is_over() {
            self.finish(MatchOverReason::Ended);
        }
    }

    fn finish(&mut self, reason: MatchOverReason) {
        self.phase = Phase::Over { reason };
        self.events.push_back(MatchEvent::Over {
            final_tick: self.horizon,
            reason,
        });
    }

    /// When [`handle_timeout`](Self::handle_timeout) next has work: the
    /// start barrier, the next bundle boundary, the earliest grace expiry.
    pub fn poll_timeout(&self) -> Option<u64> {
        match self.phase {
            Phase::Loading => Some(self.created_us + self.setup.start_barrier_us),
            Phase::Running { start_us } => {
                let next = self.plan.next_boundary(self.horizon);
                let boundary = start_us + self.plan.tick_start_ms(next) * 1000;
                let grace = self
                    .seats
                    .iter()
                    .filter(|s| s.departure == Departure::Present)
                    .filter_map(|s| s.disconnected_since_us)
                    .map(|t| t + self.setup.reconnect_grace_us)
                    .min();
                Some(grace.map_or(boundary, |g| g.min(boundary)))
            }
            Phase::Over { .. } => None,
        }
    }

    /// Start the clock, move the horizon, drop seats whose grace ran out.
    pub fn handle_timeout(&mut self, now_us: u64) {
        if self.phase == Phase::Loading && now_us >= self.created_us + self.setup.start_barrier_us {
            self.start(self.created_us + self.setup.start_barrier_us, false);
        }
        let Phase::Running { start_us } = self.phase else {
            return;
        };
        let grace = self.setup.reconnect_grace_us;
        let horizon = self.horizon;
        for (i, s) in self.seats.iter_mut().enumerate() {
            let expired = s.departure == Departure::Present
                && s.disconnected_since_us.is_some_and(|t| now_us >= t + grace);
            if expired {
                let tick = horizon.max(s.next_free_tick);
                s.next_free_tick = tick + 1;
                s.queue.push_back(LogEntry {
                    tick,
                    seat: i as u8,
                    kind: EntryKind::Dropped,
                    payload: Box::new([]),
                });
                s.departure = Departure::Leaving;
            }
        }
        let current = self.plan.tick_at(now_us - start_us.min(now_us));
        let boundary = self
            .plan
            .boundary_at_or_before(self.horizon, current)
            .min(self.setup.max_ticks);
        if boundary > self.horizon {
            self.advance(boundary);
        }
    }

    /// Move the horizon to `to`: queued entries below it enter the log.
    fn advance(&mut self, to: u32) {
        let mut moved: Vec<LogEntry> = Vec::new();
        for s in &mut self.seats {
            while s.queue.front().is_some_and(|e| e.tick < to) {
                if let Some(e) = s.queue.pop_front() {
                    moved.push(e);
                }
            }
        }
        moved.sort_by_key(|e| (e.tick, e.seat));
        let mut left_changed = false;
        for e in &moved {
            if e.kind != EntryKind::Order {
                let s = &mut self.seats[usize::from(e.seat)];
                s.departure = Departure::Left;
                left_changed = true;
                self.events.push_back(MatchEvent::SeatLeft {
                    seat: e.seat,
                    tick: e.tick,
                    kind: e.kind,
                });
            }
        }
        self.log.extend(moved);
        let from = self.horizon;
        self.horizon = to;
        if left_changed {
            self.presence_changed();
            self.refresh_record();
        }
        self.evaluate_timing(from + 1, to);
        self.plan.forget_before(to);
        // Checksum rounds that fell out of the window are decided with what
        // arrived, then forgotten.
        let oldest = to.saturating_sub(CHECKSUM_WINDOW_TICKS);
        let stale: Vec<u32> = self.checksums.range(..oldest).map(|(t, _)| *t).collect();
        for tick in stale {
            if self
                .checksums
                .get(&tick)
                .is_some_and(|r| r.decided.is_none())
            {
                self.decide(tick);
            }
            self.checksums.remove(&tick);
        }
        // Rounds waiting on a seat that has now left, or for too long.
        let expected = self.expected_reporters();
        let overdue = to.saturating_sub(CHECKSUM_DECIDE_TICKS);
        let ready: Vec<u32> = self
            .checksums
            .iter()
            .filter(|(t, r)| {
                r.decided.is_none() && (r.reported & expected == expected || **t < overdue)
            })
            .map(|(t, _)| *t)
            .collect();
        for tick in ready {
            self.decide(tick);
        }
        if self
            .seats
            .iter()
            .all(|s| !s.human || s.departure == Departure::Left)
        {
            self.finish(MatchOverReason::AllLeft);
        } else if to >= self.setup.max_ticks {
            self.finish(MatchOverReason::TickLimit);
        }
    }

    /// Write the next message for `seat`'s connection into `buf` (sized to
    /// what one link message may carry, at least 600 bytes): its length, or
    /// `None` when it has nothing to send. Order: Welcome, Presence, Pong,
    /// desync notices, bundle chunks from its stream position to the
    /// horizon, MatchOver.
    pub fn poll_message(&mut self, seat: u8, now_us: u64, buf: &mut [u8]) -> Option<usize> {
        let relay_tick = self.tick(now_us);
        let clock = self.match_clock_us(now_us);
        let presence = self.presence();
        let started = self.has_started();
        let over = match self.phase {
            Phase::Over { reason } => Some(reason),
            _ => None,
        };
        let horizon = self.horizon;
        let setup = self.setup;
        let version = self.presence_version;
        let plan_interval = self.plan.in_force(horizon).bundle_interval;
        let frequent_reports = self.policy.as_ref().is_some_and(Policy::frequent_reports);
        let held = self.plan.changes().count() as u64;
        let first_held = self.announced.saturating_sub(held);
        let s = self.seats.get_mut(usize::from(seat))?;
        let stream = s.stream?;
        if let Some(resume) = s.welcome_due.take() {
            let w = Welcome {
                seat,
                seat_count: setup.seat_count,
                human_mask: setup.human_mask,
                tick_rate_millihz: setup.tick_rate_millihz,
                bundle_interval: plan_interval,
                ai_order_delay: setup.ai_order_delay,
                checksum_interval: setup.checksum_interval,
                relay_tick,
                resume_from_tick: resume,
                horizon_tick: horizon,
                highest_accepted_sequence: s.highest_accepted,
                match_started: started,
                frequent_reports,
            };
            return ServerMessage::Welcome(w).write(buf);
        }
        // Timing before any bundle: a change reaches every client before
        // the bundle that reaches its tick (the link keeps the order).
        if s.timing_sent < self.announced {
            let serial = s.timing_sent.max(first_held);
            s.timing_sent = serial + 1;
            if let Some(change) = self.plan.changes().nth((serial - first_held) as usize) {
                return ServerMessage::Timing(*change).write(buf);
            }
        }
        if s.presence_sent < version {
            s.presence_sent = version;
            return ServerMessage::Presence {
                tick: relay_tick,
                seat_count: setup.seat_count,
                states: presence,
            }
            .write(buf);
        }
        if let Some((t0_us, t1_us)) = s.pong_due.take() {
            return ServerMessage::Pong {
                t0_us,
                t1_us,
                t2_us: clock,
                relay_tick,
                highest_accepted_sequence: s.highest_accepted,
            }
            .write(buf);
        }
        if let Some(d) = self.desyncs.get(s.desyncs_sent) {
            s.desyncs_sent += 1;
            return ServerMessage::Desync {
                tick: d.tick,
                reported_mask: d.reported_mask,
                disagreeing_mask: d.disagreeing_mask,
            }
            .write(buf);
        }
        if stream.tick < horizon {
            let (len, next) = write_chunk(&self.log, stream, horizon, buf)?;
            s.stream = Some(next);
            return Some(len);
        }
        if let Some(reason) = over {
            if !s.over_sent {
                s.over_sent = true;
                return ServerMessage::MatchOver {
                    final_tick: horizon,
                    reason,
                }
                .write(buf);
            }
        }
        None
    }

    /// Fault injection for tests: move `seat`'s bundle stream `ticks` ticks
    /// forward without sending them, so its next bundle starts past its
    /// horizon (a gap the client must notice and resync).
    pub fn inject_bundle_gap(&mut self, seat: u8, ticks: u32) {
        if let Some(st) = self
            .seats
            .get_mut(usize::from(seat))
            .and_then(|s| s.stream.as_mut())
        {
            st.tick = st.tick.saturating_add(ticks);
            st.skip = 0;
        }
    }

    /// Whether `seat` has left the match and has been sent everything up to
    /// its leave (the server may close its connection once the link is idle).
    pub fn is_finished_for(&self, seat: u8) -> bool {
        self.seats.get(usize::from(seat)).is_some_and(|s| {
            (s.departure == Departure::Left || self.is_over())
                && s.stream.map_or(true, |st| st.tick >= self.horizon)
                && s.welcome_due.is_none()
        })
    }
}

/// Pack the next chunk of `log` for a stream at `from` into `buf`: its length
/// and the stream's next position. See `docs/relay.md` for the rules.
fn write_chunk(
    log: &[LogEntry],
    from: Stream,
    horizon: u32,
    buf: &mut [u8],
) -> Option<(usize, Stream)> {
    let limit = buf.len().min(crate::wire::relay::MAX_MESSAGE_BYTES);
    let start = log.partition_point(|e| e.tick < from.tick) + from.skip;
    let entries = &log[start.min(log.len())..];
    let mut w = BundleWriter::new(buf)?;
    let mut used = BUNDLE_HEADER_BYTES;
    let push = |w: &mut BundleWriter<'_>, e: &LogEntry| {
        w.push(&BundleEntry {
            tick: e.tick,
            seat: e.seat,
            kind: e.kind,
            payload: &e.payload,
        })
    };
    if from.skip > 0 {
        // Inside a tick too large for one message: continue it.
        for (pushed, e) in entries
            .iter()
            .take_while(|e| e.tick == from.tick)
            .enumerate()
        {
            if used + ENTRY_HEADER_BYTES + e.payload.len() > limit || !push(&mut w, e) {
                let len = w.finish(from.tick, from.tick + 1, true)?;
                let next = Stream {
                    tick: from.tick,
                    skip: from.skip + pushed,
                };
                return Some((len, next));
            }
            used += ENTRY_HEADER_BYTES + e.payload.len();
        }
        let len = w.finish(from.tick, from.tick + 1, false)?;
        return Some((
            len,
            Stream {
                tick: from.tick + 1,
                skip: 0,
            },
        ));
    }
    let mut i = 0;
    while i < entries.len() && entries[i].tick < horizon {
        let tick = entries[i].tick;
        let group = entries[i..].iter().take_while(|e| e.tick == tick).count();
        let bytes: usize = entries[i..i + group]
            .iter()
            .map(|e| ENTRY_HEADER_BYTES + e.payload.len())
            .sum();
        if used + bytes <= limit {
            for e in &entries[i..i + group] {
                push(&mut w, e);
            }
            used += bytes;
            i += group;
            continue;
        }
        if w.entry_count() > 0 || tick > from.tick {
            // Close the chunk before this tick.
            let len = w.finish(from.tick, tick, false)?;
            return Some((len, Stream { tick, skip: 0 }));
        }
        // The first tick alone does not fit: split it with MORE.
        let mut pushed = 0;
        for e in &entries[i..i + group] {
            if used + ENTRY_HEADER_BYTES + e.payload.len() > limit || !push(&mut w, e) {
                break;
            }
            used += ENTRY_HEADER_BYTES + e.payload.len();
            pushed += 1;
        }
        let len = w.finish(tick, tick + 1, true)?;
        return Some((len, Stream { tick, skip: pushed }));
    }
    let len = w.finish(from.tick, horizon, false)?;
    Some((
        len,
        Stream {
            tick: horizon,
            skip: 0,
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::relay::{read_server_message, MAX_ORDER_BYTES};

    const MS: u64 = 1000;

    #[test]
    fn clock_is_integer_milliseconds() {
        assert_eq!(tick_start_ms(1, 30_000), 33);
        assert_eq!(tick_start_ms(3, 30_000), 100);
        assert_eq!(tick_start_ms(30, 30_000), 1000);
        assert_eq!(tick_at(0, 30_000), 0);
        assert_eq!(tick_at(32_999, 30_000), 0);
        assert_eq!(tick_at(33_000, 30_000), 1);
        assert_eq!(tick_at(99_999, 30_000), 2);
        assert_eq!(tick_at(100_000, 30_000), 3);
        for rate in [1, 999, 15_000, 30_000, 60_000, 1_000_000_000] {
            for t in [0u32, 1, 2, 29, 30, 31, 1000, 123_457] {
                let start = tick_start_ms(t, rate) * 1000;
                assert_eq!(tick_at(start, rate), t.max(tick_at(start, rate)));
                assert!(tick_at(start, rate) >= t, "rate {rate} tick {t}");
                if start > 0 {
                    assert!(tick_at(start - 1, rate) < t.max(1), "rate {rate} tick {t}");
                }
            }
        }
    }

    fn messages(s: &mut Sequencer, seat: u8, now: u64) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let mut buf = [0u8; 1024];
        while let Some(len) = s.poll_message(seat, now, &mut buf) {
            out.push(buf[..len].to_vec());
        }
        out
    }

    #[test]
    fn barrier_assignment_bundles_and_chunking() {
        let mut setup = MatchSetup::new(1, 3, 0b011);
        setup.start_barrier_us = 1_000 * MS;
        setup.timing_policy = None; // a bundle every tick
        let mut s = Sequencer::new(setup, 0).unwrap();
        assert_eq!(s.connect(0, 0, 10), Ok(0));
        assert_eq!(s.connect(2, 0, 10), Err(RejectReason::BadTicket), "AI seat");
        s.handle_timeout(500 * MS);
        assert!(!s.has_started());
        assert_eq!(s.connect(1, 0, 600 * MS), Ok(0));
        assert!(s.has_started(), "started on the last human Hello");
        // Three orders from seat 0 in one tick: ticks 0, 1, 2.
        for seq in 1..=3 {
            s.handle_message(
                0,
                600 * MS,
                &ClientMessage::OrderSubmit {
                    sequence: seq,
                    payload: &[seq as u8],
                },
            );
        }
        s.handle_message(
            0,
            600 * MS,
            &ClientMessage::OrderSubmit {
                sequence: 2,
                payload: b"",
            },
        );
        assert_eq!(s.counters().duplicate_submissions, 1);
        s.handle_timeout(600 * MS + 100 * MS); // ticks 0..3 done
        assert_eq!(s.horizon(), 3);
        let ticks: Vec<_> = s.log().iter().map(|e| (e.tick, e.seat)).collect();
        assert_eq!(ticks, vec![(0, 0), (1, 0), (2, 0)]);
        let m = messages(&mut s, 1, 700 * MS);
        assert!(matches!(
            read_server_message(&m[0]),
            Ok(ServerMessage::Welcome(_))
        ));
        let ServerMessage::TurnBundle(b) = read_server_message(m.last().unwrap()).unwrap() else {
            panic!()
        };
        assert_eq!((b.from_tick, b.horizon_tick, b.entry_count()), (0, 3, 3));
        // Empty bundles keep coming.
        s.handle_timeout(600 * MS + 133 * MS);
        let m = messages(&mut s, 1, 733 * MS);
        let ServerMessage::TurnBundle(b) = read_server_message(&m[0]).unwrap() else {
            panic!()
        };
        assert_eq!((b.from_tick, b.horizon_tick, b.entry_count()), (3, 4, 0));
    }

    #[test]
    fn a_tick_larger_than_one_message_is_chunked_with_more() {
        let log: Vec<LogEntry> = (0..6u8)
            .map(|seat| LogEntry {
                tick: 5,
                seat,
                kind: EntryKind::Order,
                payload: vec![seat; MAX_ORDER_BYTES].into(),
            })
            .chain(std::iter::once(LogEntry {
                tick: 7,
                seat: 0,
                kind: EntryKind::Order,
                payload: vec![9; 10].into(),
            }))
            .collect();
        let mut stream = Stream { tick: 2, skip: 0 };
        let mut buf = [0u8; 1024];
        let mut seen = Vec::new();
        let mut chunks = Vec::new();
        while stream.tick < 9 {
            let (len, next) = write_chunk(&log, stream, 9, &mut buf).unwrap();
            let ServerMessage::TurnBundle(b) = read_server_message(&buf[..len]).unwrap() else {
                panic!()
            };
            chunks.push((b.from_tick, b.horizon_tick, b.more, b.entry_count()));
            seen.extend(b.entries().map(|e| (e.tick, e.seat)));
            stream = next;
        }
        assert_eq!(
            chunks,
            vec![
                (2, 5, false, 0),
                (5, 6, true, 1),
                (5, 6, true, 1),
                (5, 6, true, 1),
                (5, 6, true, 1),
                (5, 6, true, 1),
                (5, 6, false, 1),
                (6, 9, false, 1)
            ]
        );
        assert_eq!(seen.len(), 7);
    }

    #[test]
    fn desync_names_the_minority_and_ties_name_everyone() {
        let mut setup = MatchSetup::new(1, 3, 0b111);
        setup.checksum_interval = 1;
        let mut s = Sequencer::new(setup, 0).unwrap();
        for seat in 0..3 {
            s.connect(seat, 0, 0).unwrap();
        }
        s.handle_timeout(200 * MS);
        assert!(s.horizon() >= 5);
        for (seat, v) in [(0u8, 7u64), (1, 7), (2, 8)] {
            s.handle_message(
                seat,
                200 * MS,
                &ClientMessage::ChecksumReport {
                    tick: 2,
                    checksum: v,
                },
            );
        }
        assert_eq!(
            s.desyncs(),
            &[DesyncNotice {
                tick: 2,
                reported_mask: 0b111,
                disagreeing_mask: 0b100
            }]
        );
        for (seat, v) in [(0u8, 1u64), (1, 2), (2, 3)] {
            s.handle_message(
                seat,
                200 * MS,
                &ClientMessage::ChecksumReport {
                    tick: 3,
                    checksum: v,
                },
            );
        }
        assert_eq!(s.desyncs()[1].disagreeing_mask, 0b111);
        for seat in 0..3 {
            s.handle_message(
                seat,
                200 * MS,
                &ClientMessage::ChecksumReport {
                    tick: 4,
                    checksum: 5,
                },
            );
        }
        assert_eq!(s.desyncs().len(), 2, "agreement is no desync");
        s.handle_message(
            0,
            200 * MS,
            &ClientMessage::ChecksumReport {
                tick: 1000,
                checksum: 5,
            },
        );
        assert_eq!(s.counters().bad_checksum_reports, 1, "beyond the horizon");
    }

    /// Run `s` tick by tick from `from` to `to` (by its own clock, started
    /// at 0), both seats reporting `report(tick)` on every report tick (S3),
    /// and return the timing in force at each tick where it changed.
    fn drive(
        s: &mut Sequencer,
        from: u32,
        to: u32,
        report: impl Fn(u32) -> Report,
    ) -> Vec<(u32, u8, u8)> {
        drive_reporting(s, from, to, crate::report::is_report_frame, report)
    }

    /// `drive`, with both seats reporting on the ticks `report_tick` names.
    fn drive_reporting(
        s: &mut Sequencer,
        from: u32,
        to: u32,
        report_tick: fn(u32) -> bool,
        report: impl Fn(u32) -> Report,
    ) -> Vec<(u32, u8, u8)> {
        let mut seen = Vec::new();
        let mut buf = [0u8; 1024];
        for tick in from..to {
            let now = s.timing_plan().tick_start_ms(tick) * MS;
            s.handle_timeout(now);
            if report_tick(tick) {
                for seat in 0..2 {
                    s.handle_message(seat, now, &ClientMessage::TimingReport(report(tick)));
                }
            }
            for seat in 0..2 {
                while s.poll_message(seat, now, &mut buf).is_some() {}
            }
            let c = s.timing_plan().in_force(tick);
            if seen.last().map(|l: &(u32, u8, u8)| (l.1, l.2))
                != Some((c.bundle_interval, c.look_ahead))
            {
                seen.push((tick, c.bundle_interval, c.look_ahead));
            }
        }
        seen
    }

    #[test]
    fn the_relay_policy_widens_the_jitter_buffer_when_a_round_trip_rises_and_narrows_it_again() {
        let mut setup = MatchSetup::new(1, 2, 0b11);
        setup.timing_policy = Some(PolicyKind::Adaptive);
        let mut s = Sequencer::new(setup, 0).unwrap();
        s.connect(0, 0, 0).unwrap();
        s.connect(1, 0, 0).unwrap();
        assert!(s.has_started());
        // 40 ms to the relay, then 600 ms from tick 300 to 1000, then 40 again.
        let report = |tick: u32| Report {
            process_us: 5000,
            max_wait_ms: 0,
            worst_rtt_ms: Some(if (300..1000).contains(&tick) { 600 } else { 40 }),
            detail: None,
        };
        let seen = drive(&mut s, 0, 4000, report);
        // Start 2/6; calibrated to 1/4 at 64; 600 ms needs 5/15 (9 frames
        // one way); then three calm evaluations and a descent a rung per
        // evaluation back to 1/4.
        assert_eq!(seen.first(), Some(&(0, 2, 6)));
        assert_eq!((seen[1].1, seen[1].2), (1, 4), "{seen:?}");
        let widest = seen.iter().map(|e| e.2).max().unwrap_or(0);
        assert_eq!(widest, 15, "{seen:?}");
        assert_eq!(seen.last().map(|e| (e.1, e.2)), Some((1, 4)), "{seen:?}");
        // Every change starts on a bundle boundary after the horizon that
        // decided it, and was announced (one Timing message per change).
        assert_eq!(s.counters().timing_changes as usize, seen.len());
        assert_eq!(
            s.counters().timing_reports,
            2 * (0..4000)
                .filter(|t| crate::report::is_report_frame(*t))
                .count() as u64
        );
    }

    #[test]
    fn under_tracking_clients_report_every_16_ticks_and_the_relay_follows_a_spike_and_returns() {
        // The Welcome tells clients the cadence: every 16 ticks under
        // `tracking`, S3's ticks otherwise.
        let welcome_of = |policy: PolicyKind| {
            let mut setup = MatchSetup::new(1, 2, 0b11);
            setup.timing_policy = Some(policy);
            let mut s = Sequencer::new(setup, 0).unwrap();
            s.connect(0, 0, 0).unwrap();
            let mut buf = [0u8; 1024];
            let n = s.poll_message(0, 0, &mut buf).unwrap();
            match read_server_message(&buf[..n]) {
                Ok(ServerMessage::Welcome(w)) => w,
                other => panic!("expected a Welcome, got {other:?}"),
            }
        };
        assert!(welcome_of(PolicyKind::Tracking).frequent_reports);
        assert!(!welcome_of(PolicyKind::Adaptive).frequent_reports);

        let mut setup = MatchSetup::new(1, 2, 0b11);
        setup.timing_policy = Some(PolicyKind::Tracking);
        let mut s = Sequencer::new(setup, 0).unwrap();
        s.connect(0, 0, 0).unwrap();
        s.connect(1, 0, 0).unwrap();
        // 40 ms to the relay, 400 ms for 5 s (ticks 600 to 750), then 40.
        // Detailed reports: the interval's distribution and its latest sample.
        let rtt_at = |tick: u32| if (600..750).contains(&tick) { 400 } else { 40 };
        let report = move |tick: u32| {
            let worst = (tick.saturating_sub(16)..=tick)
                .map(rtt_at)
                .max()
                .unwrap_or(40);
            Report {
                process_us: 5000,
                max_wait_ms: 0,
                worst_rtt_ms: Some(worst),
                detail: Some(crate::report::ReportDetail {
                    median_rtt_ms: Some(rtt_at(tick.saturating_sub(8))),
                    p90_rtt_ms: Some(worst),
                    latest_rtt_ms: Some(rtt_at(tick)),
                    frames: 16,
                    ..crate::report::ReportDetail::default()
                }),
            }
        };
        let seen = drive_reporting(
            &mut s,
            0,
            1500,
            crate::timing::tracking::is_report_frame,
            report,
        );
        let look_ahead_at = |tick: u32| seen.iter().rev().find(|e| e.0 <= tick).map_or(0, |e| e.2);
        let calm = look_ahead_at(590);
        let during = look_ahead_at(740);
        assert!(during > calm, "the spike widens the buffer: {seen:?}");
        // Back to the calm buffer within a few reports of the spike's end,
        // not minutes later.
        assert_eq!(look_ahead_at(850), calm, "{seen:?}");
        // The prior margin has gone after 1024 calm ticks.
        let prior = crate::timing::tracking::PRIOR_MARGIN_FRAMES;
        assert_eq!(look_ahead_at(1499), calm - prior, "{seen:?}");
    }

    #[test]
    fn the_tick_rate_follows_the_slowest_machine_without_a_jump() {
        // A machine needs 45 ms a frame: 22 ticks a second (S4.2), from a
        // bundle boundary on, the clock continuous across the change.
        let mut s = Sequencer::new(MatchSetup::new(1, 2, 0b11), 0).unwrap();
        s.connect(0, 0, 0).unwrap();
        s.connect(1, 0, 0).unwrap();
        let slow = |_| Report {
            process_us: 45_000,
            max_wait_ms: 0,
            worst_rtt_ms: Some(40),
            detail: None,
        };
        drive(&mut s, 0, 200, slow);
        let plan = s.timing_plan().clone();
        let c = *plan.latest();
        assert_eq!(c.tick_rate_millihz, 22_000);
        assert_eq!((c.bundle_interval, c.look_ahead), (1, 4));
        let before = tick_start_ms(c.from_tick, 30_000);
        assert_eq!(
            c.from_ms, before,
            "the change is anchored where tick {} started",
            c.from_tick
        );
        assert_eq!(
            plan.tick_start_ms(c.from_tick + 22),
            before + 1000,
            "22 ticks a second after it"
        );
        // The relay's own clock runs by it.
        let at = (before + 1000) * MS;
        assert_eq!(s.tick(at), c.from_tick + 22);
        // Fast reports again: back to the setup's 30 ticks/s.
        let fast = |_| Report {
            process_us: 5_000,
            max_wait_ms: 0,
            worst_rtt_ms: Some(40),
            detail: None,
        };
        drive(&mut s, 200, 700, fast);
        assert_eq!(s.timing_plan().latest().tick_rate_millihz, 30_000);
    }

    #[test]
    fn a_disconnected_seat_does_not_hold_the_timing() {
        // Seat 1 never reports (it left its connection): the record holds
        // only the connected seat, so the relay is not stuck at the widest
        // timing a silent player would force (S3) on everyone else.
        let mut setup = MatchSetup::new(1, 2, 0b11);
        setup.start_barrier_us = 0;
        let mut s = Sequencer::new(setup, 0).unwrap();
        s.connect(0, 0, 0).unwrap();
        s.handle_timeout(0);
        assert!(s.has_started());
        // Seat 1's reports would be ignored: it has no connection.
        let calm = |_| Report {
            process_us: 5000,
            max_wait_ms: 0,
            worst_rtt_ms: Some(40),
            detail: None,
        };
        drive(&mut s, 0, 1200, calm);
        let c = s.timing_plan().in_force(1199);
        assert_eq!((c.bundle_interval, c.look_ahead), (1, 4));
        assert_eq!(s.record().seats().collect::<Vec<_>>(), vec![0]);
    }

    #[test]
    fn grace_drops_a_seat_and_all_left_ends_the_match() {
        let mut setup = MatchSetup::new(1, 2, 0b11);
        setup.start_barrier_us = 100 * MS;
        setup.reconnect_grace_us = 300 * MS;
        let mut s = Sequencer::new(setup, 0).unwrap();
        s.connect(0, 0, 0).unwrap();
        s.handle_timeout(100 * MS);
        assert!(s.has_started(), "barrier");
        assert_eq!(s.presence()[1], SeatPresence::Loading);
        s.handle_timeout(399 * MS);
        assert!(s.log().is_empty());
        s.handle_timeout(400 * MS + 34 * MS);
        assert_eq!(
            s.log().last().map(|e| (e.seat, e.kind)),
            Some((1, EntryKind::Dropped))
        );
        assert_eq!(s.connect(1, 0, 500 * MS), Err(RejectReason::SeatLeft));
        s.handle_message(0, 500 * MS, &ClientMessage::Quit { sequence: 1 });
        s.handle_timeout(600 * MS);
        assert!(s.is_over());
        assert_eq!(s.connect(0, 0, 700 * MS), Err(RejectReason::MatchOver));
        let m = messages(&mut s, 0, 700 * MS);
        assert!(matches!(
            read_server_message(m.last().unwrap()),
            Ok(ServerMessage::MatchOver {
                reason: MatchOverReason::AllLeft,
                ..
            })
        ));
    }
}
