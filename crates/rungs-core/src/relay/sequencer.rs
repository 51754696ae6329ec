//! One match's state machine on the relay (S10), sans-IO: seats, the load
//! barrier, the relay clock, execution tick assignment, the turn log, the
//! bundle stream per connection, presence, the reconnect grace, checksum
//! comparison ([`super::checksums`]), each seat's timing
//! (`relay/seat_timing.rs`), ephemeral orders, the records that let the
//! match survive a relay restart ([`super::durable`]), and the end of the
//! match.
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
//! that is a multiple of `bundle_interval` (1 by default), the horizon moves
//! to that tick: every tick below it is final and goes out in a TurnBundle,
//! empty or not.
//!
//! # Timing (S4 on the relay, per seat)
//!
//! With a timing policy in the setup (`timing_policy`, adaptive by default)
//! the relay runs the policy once per seat, on that seat's TimingReports
//! alone, and announces the look-ahead it chooses — how far behind the
//! horizon that client runs, its jitter buffer — to that seat only: a near
//! client does not pay for a far one's latency (`relay/seat_timing.rs`).
//! The clock and the bundle interval are the match's; the tick rate follows
//! the slowest machine only when the setup says so (`pace_to_slowest`).
//!
//! # Tick assignment
//!
//! An order from a seat gets tick `max(horizon, next free tick of the seat)`:
//! the earliest tick not yet broadcast, one order per seat per tick, later
//! ones queued onto later ticks (at most `max_queued_ticks` ahead). A
//! submission at or below the highest sequence the relay judged is a resend
//! and ignored; anything above it is judged on its own: accepted, or refused
//! with an OrderRefused naming the sequence and the reason — and the orders
//! after a refused one are judged on their own too, so a refusal never
//! blocks a seat.

use std::collections::VecDeque;

pub use super::checksums::DesyncNotice;
use super::checksums::{ChecksumRounds, Decisions};
use super::chunk::{write_chunk, Stream};
use super::durable::{DurableRecord, MatchState};
pub use super::log_entry::LogEntry;
use super::seat_timing::SeatTiming;
pub use super::setup::MatchSetup;
use super::timing::TimingPlan;
use crate::error::Result;
use crate::wire::relay::{
    ClientMessage, EntryKind, MatchOverReason, RefusalReason, RejectReason, SeatPresence,
    ServerMessage, TimingChange, Welcome, MAX_SEATS,
};

/// Most desync notices a match keeps (later ones are counted only).
pub(crate) const MAX_DESYNC_NOTICES: usize = 256;
/// Refusals a seat's new connection hears again (before its Welcome): those
/// of the last this many sequences the relay judged. A client holds at most
/// this many unconfirmed orders ([`super::client::MAX_UNCONFIRMED`]), so a
/// refusal it may have missed when its connection dropped is among them.
pub(crate) const REFUSALS_REPEATED: u32 = 256;
/// Ephemeral orders a seat may have waiting for one horizon step; more are
/// dropped and counted (they are best effort by nature).
pub(crate) const MAX_EPHEMERAL_PER_STEP: usize = 8;
/// Ephemeral orders waiting to go out on one connection at most (a client
/// that does not keep up loses the oldest).
pub(crate) const MAX_EPHEMERAL_QUEUED: usize = 256;
/// With persistence on, the horizon moves only up to a recorded lease; a
/// new lease reaches this many ticks past the horizon (about a second at
/// 30 ticks/s: two records a second per match)...
pub(crate) const LEASE_TICKS: u32 = 32;
/// ...and is recorded when the horizon comes within this many ticks of the
/// old one.
pub(crate) const LEASE_RENEW_TICKS: u32 = 16;

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
    /// An order was refused (the client was told).
    OrderRefused {
        /// Seat.
        seat: u8,
        /// Its client sequence.
        sequence: u32,
        /// Why.
        reason: RefusalReason,
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
    /// Orders accepted and sequenced (quits included).
    pub orders_accepted: u64,
    /// Submissions at or below the highest sequence judged (resends).
    pub duplicate_submissions: u64,
    /// Orders refused (the client was told which and why): the seat's
    /// queue is full, the match's tick limit is reached, or the seat is
    /// leaving.
    pub orders_refused: u64,
    /// Messages from a seat that has left or is leaving (other than orders).
    pub from_departed_seat: u64,
    /// Checksum reports for a tick that is not a checksum tick, not yet
    /// reportable, or too old.
    pub bad_checksum_reports: u64,
    /// ResyncRequests beyond the horizon.
    pub bad_resync_requests: u64,
    /// Resyncs served.
    pub resyncs: u64,
    /// Desyncs beyond the 256 kept (`MAX_DESYNC_NOTICES`).
    pub desyncs_not_kept: u64,
    /// TimingReports taken in.
    pub timing_reports: u64,
    /// TimingReports refused: before the start, from a departed seat.
    pub bad_timing_reports: u64,
    /// Timing changes announced (each seat's first timing included).
    pub timing_changes: u64,
    /// Ephemeral orders broadcast.
    pub ephemeral_orders: u64,
    /// Ephemeral orders dropped: over the per-step bound, from a departed
    /// seat, or a connection's queue full.
    pub ephemeral_dropped: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Loading,
    /// Tick 0 started at `start_us` (before this process's clock began, for
    /// a match restored from its records: then negative).
    Running {
        start_us: i64,
    },
    Over {
        reason: MatchOverReason,
    },
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

/// An ephemeral order waiting to go out on a connection.
type EphemeralOut = (u32, u8, Box<[u8]>);

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
    /// The highest sequence accepted or refused.
    highest_judged: u32,
    next_free_tick: u32,
    /// Sequenced entries not yet broadcast, in tick order.
    queue: VecDeque<LogEntry>,
    /// Refusals (sequence, reason), oldest first, of the last
    /// [`REFUSALS_REPEATED`] sequences judged.
    refused: VecDeque<(u32, RefusalReason)>,
    /// Index into `refused` of the next refusal to send the connection.
    refusals_sent: usize,
    welcome_due: Option<u32>,
    pong_due: Option<(i64, i64)>,
    presence_sent: u64,
    /// Its timing under the match's policy, when the setup names one.
    timing: Option<SeatTiming>,
    /// Index of the next desync notice to send the connection.
    desyncs_sent: usize,
    /// Ephemeral orders it sent for the next horizon step.
    ephemeral_pending: usize,
    /// Ephemeral orders waiting to go out on its connection.
    ephemeral_out: VecDeque<EphemeralOut>,
    over_sent: bool,
    /// It connected since the match was restored (its horizon then came
    /// from this relay's log).
    connected_since_restore: bool,
}

impl Seat {
    fn new(human: bool) -> Seat {
        Seat {
            human,
            departure: Departure::Present,
            said_hello: false,
            stream: None,
            disconnected_since_us: None,
            highest_accepted: 0,
            highest_judged: 0,
            next_free_tick: 0,
            queue: VecDeque::new(),
            refused: VecDeque::new(),
            refusals_sent: 0,
            welcome_due: None,
            pong_due: None,
            presence_sent: 0,
            timing: None,
            desyncs_sent: 0,
            ephemeral_pending: 0,
            ephemeral_out: VecDeque::new(),
            over_sent: false,
            connected_since_restore: false,
        }
    }

    /// Whether `sequence` was judged already (accepted, or refused).
    fn has_judged(&self, sequence: u32) -> bool {
        sequence <= self.highest_judged
    }

    fn refuse(&mut self, sequence: u32, reason: RefusalReason) {
        self.highest_judged = self.highest_judged.max(sequence);
        self.refused.push_back((sequence, reason));
        let oldest = self.highest_judged.saturating_sub(REFUSALS_REPEATED);
        while self.refused.front().is_some_and(|r| r.0 <= oldest) {
            self.refused.pop_front();
            self.refusals_sent = self.refusals_sent.saturating_sub(1);
        }
    }
}

/// One match. See the module docs.
#[derive(Debug)]
pub struct Sequencer {
    setup: MatchSetup,
    created_us: i64,
    phase: Phase,
    seats: Vec<Seat>,
    horizon: u32,
    log: Vec<LogEntry>,
    checksums: ChecksumRounds,
    /// Desync notices, and the horizon each was decided at.
    desyncs: Vec<DesyncNotice>,
    desync_horizons: Vec<u32>,
    presence_version: u64,
    events: VecDeque<MatchEvent>,
    counters: MatchCounters,
    /// The match clock and bundle interval in force and announced (the
    /// look-ahead field is unused here: each seat has its own).
    plan: TimingPlan,
    /// Ephemeral orders for the next horizon step: (seat, order).
    ephemeral: Vec<(u8, Box<[u8]>)>,
    /// With persistence on: the records not yet taken, and the lease.
    durable: Option<VecDeque<DurableRecord>>,
    lease: u32,
    /// Restored from its records after a relay restart: the last tick the
    /// records cover. A client beyond it ran ticks whose records were lost
    /// (a power loss beyond the sync interval): it reloads, rather than
    /// being told it holds a game this relay never had (`LogLost`).
    restored_end: Option<u32>,
    /// No reconnect grace counts from before this (the restore: seats get a
    /// whole grace to come back to a relay that was down).
    grace_floor_us: u64,
}

impl Sequencer {
    /// A match created at `now_us`: loading until every human seat has said
    /// Hello or the start barrier runs out.
    pub fn new(setup: MatchSetup, now_us: u64) -> Result<Sequencer> {
        setup.validate()?;
        let plan = TimingPlan::new(TimingChange {
            from_tick: 0,
            anchor_tick: 0,
            anchor_ms: 0,
            tick_rate_millihz: setup.tick_rate_millihz,
            bundle_interval: setup.bundle_interval,
            look_ahead: 1,
        });
        let seats = (0..setup.seat_count)
            .map(|s| {
                let mut seat = Seat::new(setup.is_human(s));
                if seat.human {
                    seat.timing = setup
                        .timing_policy
                        .map(|kind| SeatTiming::new(kind, setup.speed_fps(), &plan))
                        .transpose()?;
                }
                Ok(seat)
            })
            .collect::<Result<Vec<_>>>()?;
        let first_timings = seats.iter().filter(|s| s.timing.is_some()).count() as u64;
        Ok(Sequencer {
            setup,
            created_us: now_us as i64,
            phase: Phase::Loading,
            seats,
            horizon: 0,
            log: Vec::new(),
            checksums: ChecksumRounds::default(),
            desyncs: Vec::new(),
            desync_horizons: Vec::new(),
            presence_version: 1,
            events: VecDeque::new(),
            counters: MatchCounters {
                timing_changes: first_timings,
                ..MatchCounters::default()
            },
            plan,
            ephemeral: Vec::new(),
            durable: None,
            lease: 0,
            restored_end: None,
            grace_floor_us: 0,
        })
    }

    /// Turn persistence on: from now on the sequencer emits the records a
    /// restarted relay resumes the match from ([`poll_durable`](Self::poll_durable)),
    /// starting with the match's creation, and moves the horizon only up to
    /// a recorded lease. The caller writes every record before it sends
    /// anything the same call caused (see [`DurableRecord`]).
    pub fn enable_durable(&mut self) {
        if self.durable.is_some() {
            return;
        }
        let mut records = VecDeque::new();
        let state = self.state();
        records.extend(state.records());
        self.lease = self.lease.max(self.horizon);
        self.durable = Some(records);
    }

    /// The next record to persist, with persistence on.
    pub fn poll_durable(&mut self) -> Option<DurableRecord> {
        self.durable.as_mut()?.pop_front()
    }

    fn record(&mut self, record: DurableRecord) {
        if let Some(records) = self.durable.as_mut() {
            records.push_back(record);
        }
    }

    /// The match's durable state now (what its records fold into): for an
    /// export, or to copy a live match into a new journal.
    pub fn state(&self) -> MatchState {
        let mut state = MatchState::new(self.setup, self.created_us);
        if let Phase::Running { start_us } = self.phase {
            state.started_us = Some(start_us);
        }
        for e in self
            .log
            .iter()
            .chain(self.seats.iter().flat_map(|s| s.queue.iter()))
        {
            state.entries.insert((e.tick, e.seat), e.clone());
        }
        for (i, s) in self.seats.iter().enumerate() {
            for &(sequence, reason) in &s.refused {
                state.refusals.push((i as u8, sequence, reason));
            }
        }
        state.clock = self.plan.changes().skip(1).copied().collect();
        state.lease = self.lease.max(self.horizon);
        if let Phase::Over { reason } = self.phase {
            state.over = Some((self.horizon, reason));
        }
        state
    }

    /// A match resumed from its records (`state`) at `now_us`, after the
    /// relay restarted: its clock where the records put it, every sequenced
    /// entry at its tick, each seat's highest sequence and refusals, the
    /// horizon at the lease (at or above any tick ever broadcast); every
    /// human seat disconnected with a fresh reconnect grace. Clients resume
    /// from their horizon. `durable`: keep persisting.
    pub fn restore(state: &MatchState, now_us: u64, durable: bool) -> Result<Sequencer> {
        let mut s = Sequencer::new(state.setup, now_us)?;
        s.created_us = state.created_us;
        s.restored_end = Some(state.end_tick());
        s.grace_floor_us = now_us;
        for change in &state.clock {
            if s.plan.announce(*change) {
                for seat in s.seats.iter_mut().filter_map(|x| x.timing.as_mut()) {
                    seat.clock_changed(*change);
                }
            }
        }
        let entries: Vec<&LogEntry> = state.log().collect();
        if let Some((final_tick, reason)) = state.over {
            s.phase = Phase::Over { reason };
            s.horizon = final_tick;
            s.log = entries.into_iter().cloned().collect();
            for seat in &mut s.seats {
                seat.departure = Departure::Left;
            }
        } else if let Some(start_us) = state.started_us {
            s.phase = Phase::Running { start_us };
            // The first boundary at or after every tick a bundle may have
            // reached: nothing new lands on a tick a client already ran.
            let floor = state.end_tick();
            let mut horizon = s.plan.boundary_at_or_before(0, floor);
            if horizon < floor {
                horizon = s.plan.next_boundary(horizon);
            }
            s.horizon = horizon;
            for e in entries {
                let seat = &mut s.seats[usize::from(e.seat)];
                if e.kind != EntryKind::Dropped {
                    seat.highest_accepted = seat.highest_accepted.max(e.sequence);
                }
                seat.next_free_tick = seat.next_free_tick.max(e.tick.saturating_add(1));
                if e.kind != EntryKind::Order {
                    seat.departure = if e.tick < horizon {
                        Departure::Left
                    } else {
                        Departure::Leaving
                    };
                }
                if e.tick < horizon {
                    s.log.push(e.clone());
                } else {
                    seat.queue.push_back(e.clone());
                }
            }
            for seat in &mut s.seats {
                seat.said_hello = seat.human;
                seat.highest_judged = seat.highest_accepted;
                if seat.human && seat.departure == Departure::Present {
                    seat.disconnected_since_us = Some(now_us);
                }
            }
        }
        let mut refusals = state.refusals.clone();
        refusals.sort_by_key(|r| r.1);
        for (seat, sequence, reason) in refusals {
            if let Some(seat) = s.seats.get_mut(usize::from(seat)) {
                seat.refuse(sequence, reason);
            }
        }
        s.lease = state.lease.max(s.horizon);
        if durable {
            s.durable = Some(VecDeque::new());
        }
        Ok(s)
    }

    /// The match's clock plan: tick rate and bundle interval from a tick on.
    pub fn timing_plan(&self) -> &TimingPlan {
        &self.plan
    }

    /// `seat`'s plan (the match clock with its look-ahead), in a match with
    /// a timing policy.
    pub fn seat_timing_plan(&self, seat: u8) -> Option<&TimingPlan> {
        self.seats
            .get(usize::from(seat))?
            .timing
            .as_ref()
            .map(SeatTiming::plan)
    }

    /// Evaluate each connected seat's policy on the ticks from `from` to
    /// `to` (the horizon just passed them); announce changes from the next
    /// boundary on. With `pace_to_slowest`, the match clock follows the
    /// slowest reporting seat.
    fn evaluate_timing(&mut self, from: u32, to: u32) {
        if self.setup.timing_policy.is_none() {
            return;
        }
        let from_tick = self.plan.next_boundary(self.horizon);
        let mut changes = 0;
        let mut slowest: Option<u8> = None;
        for seat in &mut self.seats {
            let connected = seat.stream.is_some() && seat.departure == Departure::Present;
            let Some(timing) = seat.timing.as_mut().filter(|_| connected) else {
                continue;
            };
            if timing.evaluate(from, to, from_tick, &self.plan) {
                changes += 1;
            }
            if timing.has_reported() {
                slowest = Some(slowest.map_or(timing.fps(), |f| f.min(timing.fps())));
            }
        }
        self.counters.timing_changes += changes;
        let Some(fps) = slowest.filter(|_| self.setup.pace_to_slowest) else {
            return;
        };
        let rate = self.setup.tick_rate_for(fps);
        let in_force = *self.plan.in_force(from_tick);
        if rate == in_force.tick_rate_millihz {
            return;
        }
        let change = self
            .plan
            .change_at(from_tick, rate, in_force.bundle_interval, 1);
        if !self.plan.announce(change) {
            return;
        }
        for timing in self.seats.iter_mut().filter_map(|s| s.timing.as_mut()) {
            timing.clock_changed(change);
            self.counters.timing_changes += 1;
        }
        self.record(DurableRecord::Clock(change));
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

    /// Whether the match was restored from its records after a restart.
    pub fn is_restored(&self) -> bool {
        self.restored_end.is_some()
    }

    /// The next event for the log.
    pub fn poll_event(&mut self) -> Option<MatchEvent> {
        self.events.pop_front()
    }

    /// µs since tick 0 started, at `now_us` (0 before).
    fn elapsed_us(start_us: i64, now_us: u64) -> u64 {
        u64::try_from(now_us as i64 - start_us).unwrap_or(0)
    }

    /// The relay tick at `now_us` (0 before the start).
    pub fn tick(&self, now_us: u64) -> u32 {
        match self.phase {
            Phase::Running { start_us } => self.plan.tick_at(Self::elapsed_us(start_us, now_us)),
            Phase::Loading => 0,
            Phase::Over { .. } => self.horizon,
        }
    }

    /// The match clock: µs since the start; before it, minus the time left
    /// to the start barrier.
    pub fn match_clock_us(&self, now_us: u64) -> i64 {
        match self.phase {
            Phase::Running { start_us } => now_us as i64 - start_us,
            _ => now_us as i64 - (self.created_us + self.setup.start_barrier_us as i64),
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
    /// the horizon. A client beyond the horizon holds ticks this match does
    /// not: refused with `LogLost`. In a match restored after a relay
    /// restart, a client beyond the end of the records ran ticks whose
    /// records were lost (a power loss beyond the sync interval): it
    /// resumes from 0 and reloads, so it runs what the relay holds.
    pub fn connect(
        &mut self,
        seat: u8,
        have_horizon: u32,
        now_us: u64,
    ) -> std::result::Result<u32, RejectReason> {
        if self.is_over() {
            return Err(RejectReason::MatchOver);
        }
        let horizon = self.horizon;
        let restored_end = self.restored_end;
        let Some(s) = self.seats.get_mut(usize::from(seat)) else {
            return Err(RejectReason::BadTicket);
        };
        if !s.human {
            return Err(RejectReason::BadTicket);
        }
        if s.departure != Departure::Present {
            return Err(RejectReason::SeatLeft);
        }
        // Beyond the records, in its first Hello since the restore: it ran
        // ticks of the lost tail.
        let lost_tail =
            restored_end.is_some_and(|end| have_horizon > end) && !s.connected_since_restore;
        let resume = match have_horizon {
            _ if lost_tail => 0,
            h if h <= horizon => h,
            _ => return Err(RejectReason::LogLost),
        };
        s.connected_since_restore = true;
        s.said_hello = true;
        s.stream = Some(Stream::at(resume));
        s.disconnected_since_us = None;
        s.welcome_due = Some(resume);
        s.pong_due = None;
        // The new connection gets the current presence and timing anew, the
        // refusals it may have missed, and the desync notices decided since
        // the horizon it holds (a reload: all of them).
        s.presence_sent = 0;
        if let Some(timing) = s.timing.as_mut() {
            timing.connected();
        }
        let repeat_after = s.highest_judged.saturating_sub(REFUSALS_REPEATED);
        s.refusals_sent = s.refused.partition_point(|r| r.0 <= repeat_after);
        s.desyncs_sent = if resume == 0 {
            0
        } else {
            self.desync_horizons.partition_point(|&h| h < resume)
        };
        s.ephemeral_out.clear();
        self.presence_changed();
        self.events.push_back(MatchEvent::Connected {
            seat,
            resume_from_tick: resume,
        });
        if self.phase == Phase::Loading && self.seats.iter().all(|s| !s.human || s.said_hello) {
            self.start(now_us as i64, true);
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
            s.ephemeral_out.clear();
            self.presence_changed();
            self.events.push_back(MatchEvent::Disconnected { seat });
        }
    }

    /// Whether `seat` has a connection.
    pub fn is_connected(&self, seat: u8) -> bool {
        self.seats
            .get(usize::from(seat))
            .is_some_and(|s| s.stream.is_some())
    }

    fn start(&mut self, start_us: i64, all_present: bool) {
        self.phase = Phase::Running { start_us };
        let grace_from = (start_us.max(0) as u64).max(self.grace_floor_us);
        for s in &mut self.seats {
            if s.human && s.stream.is_none() {
                s.disconnected_since_us = Some(grace_from);
            }
        }
        self.presence_changed();
        self.events.push_back(MatchEvent::Started { all_present });
        self.record(DurableRecord::Started { at_us: start_us });
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
            ClientMessage::Quit { sequence, payload } => {
                self.sequence(seat, sequence, EntryKind::Quit, payload);
            }
            ClientMessage::EphemeralSubmit { payload } => {
                if running
                    && s.departure == Departure::Present
                    && s.ephemeral_pending < MAX_EPHEMERAL_PER_STEP
                {
                    s.ephemeral_pending += 1;
                    self.ephemeral.push((seat, payload.into()));
                } else {
                    self.counters.ephemeral_dropped += 1;
                }
            }
            ClientMessage::Ping { t0_us } => {
                s.pong_due = Some((t0_us, clock));
            }
            ClientMessage::ResyncRequest { horizon: h } => {
                if h > horizon {
                    self.counters.bad_resync_requests += 1;
                } else {
                    s.stream = Some(Stream::at(h));
                    self.counters.resyncs += 1;
                }
            }
            ClientMessage::TimingReport(report) => {
                if running && s.departure == Departure::Present {
                    if let Some(timing) = s.timing.as_mut() {
                        timing.report(seat, horizon, report);
                    }
                    self.counters.timing_reports += 1;
                } else {
                    self.counters.bad_timing_reports += 1;
                }
            }
            ClientMessage::ChecksumReport { tick, checksum } => {
                let valid = running
                    && s.departure == Departure::Present
                    && ChecksumRounds::accepts(tick, horizon, self.setup.checksum_interval);
                if valid {
                    let expected = self.expected_reporters();
                    let mut out = Decisions::default();
                    self.checksums
                        .report(seat, tick, checksum, expected, &mut out);
                    self.take_decisions(out);
                } else {
                    self.counters.bad_checksum_reports += 1;
                }
            }
        }
    }

    /// Judge a submission (order or quit) of `seat`: a resend is ignored;
    /// anything new is accepted onto the seat's next free tick, or refused
    /// with its reason. A refusal never blocks the orders after it.
    fn sequence(&mut self, seat: u8, sequence: u32, kind: EntryKind, payload: &[u8]) {
        let horizon = self.horizon;
        let max_ticks = self.setup.max_ticks;
        let max_queued = self.setup.max_queued_ticks;
        let s = &mut self.seats[usize::from(seat)];
        if s.has_judged(sequence) {
            self.counters.duplicate_submissions += 1;
            return;
        }
        let tick = horizon.max(s.next_free_tick);
        let refusal = if s.departure != Departure::Present {
            Some(RefusalReason::Leaving)
        } else if tick >= max_ticks {
            Some(RefusalReason::TickLimit)
        } else if tick - horizon >= max_queued {
            Some(RefusalReason::QueueFull)
        } else {
            None
        };
        if let Some(reason) = refusal {
            s.refuse(sequence, reason);
            self.counters.orders_refused += 1;
            self.events.push_back(MatchEvent::OrderRefused {
                seat,
                sequence,
                reason,
            });
            self.record(DurableRecord::Refused {
                seat,
                sequence,
                reason,
            });
            return;
        }
        s.highest_accepted = sequence;
        s.highest_judged = sequence;
        s.next_free_tick = tick + 1;
        let entry = LogEntry {
            tick,
            seat,
            kind,
            sequence,
            payload: payload.into(),
        };
        s.queue.push_back(entry.clone());
        if kind == EntryKind::Quit {
            s.departure = Departure::Leaving;
        }
        self.counters.orders_accepted += 1;
        self.record(DurableRecord::Entry(entry));
    }

    fn expected_reporters(&self) -> u16 {
        self.seats
            .iter()
            .enumerate()
            .filter(|(_, s)| s.human && s.departure == Departure::Present)
            .fold(0u16, |m, (i, _)| m | 1 << i)
    }

    /// Keep what checksum rounds decided: desync notices (sent to every
    /// connection), and the decided rounds as records.
    fn take_decisions(&mut self, out: Decisions) {
        for round in out.decided {
            self.record(DurableRecord::Checksums(round));
        }
        for notice in out.desyncs {
            self.events.push_back(MatchEvent::Desync(notice));
            if self.desyncs.len() < MAX_DESYNC_NOTICES {
                self.desyncs.push(notice);
                self.desync_horizons.push(self.horizon);
            } else {
                self.counters.desyncs_not_kept += 1;
            }
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
        self.record(DurableRecord::Over {
            final_tick: self.horizon,
            reason,
        });
    }

    /// When [`handle_timeout`](Self::handle_timeout) next has work: the
    /// start barrier, the next bundle boundary, the earliest grace expiry.
    pub fn poll_timeout(&self) -> Option<u64> {
        match self.phase {
            Phase::Loading => {
                Some((self.created_us + self.setup.start_barrier_us as i64).max(0) as u64)
            }
            Phase::Running { start_us } => {
                let next = self.plan.next_boundary(self.horizon);
                let boundary =
                    (start_us + self.plan.tick_start_ms(next) as i64 * 1000).max(0) as u64;
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
        let barrier = self.created_us + self.setup.start_barrier_us as i64;
        if self.phase == Phase::Loading && now_us as i64 >= barrier {
            self.start(barrier, false);
        }
        let Phase::Running { start_us } = self.phase else {
            return;
        };
        let grace = self.setup.reconnect_grace_us;
        let horizon = self.horizon;
        let mut dropped = Vec::new();
        for (i, s) in self.seats.iter_mut().enumerate() {
            let expired = s.departure == Departure::Present
                && s.disconnected_since_us.is_some_and(|t| now_us >= t + grace);
            if expired {
                let tick = horizon.max(s.next_free_tick);
                s.next_free_tick = tick + 1;
                let entry = LogEntry {
                    tick,
                    seat: i as u8,
                    kind: EntryKind::Dropped,
                    sequence: 0,
                    payload: Box::new([]),
                };
                s.queue.push_back(entry.clone());
                s.departure = Departure::Leaving;
                dropped.push(entry);
            }
        }
        for entry in dropped {
            self.record(DurableRecord::Entry(entry));
        }
        let current = self.plan.tick_at(Self::elapsed_us(start_us, now_us));
        let boundary = self
            .plan
            .boundary_at_or_before(self.horizon, current)
            .min(self.setup.max_ticks);
        if boundary > self.horizon {
            if self.durable.is_some() && boundary.saturating_add(LEASE_RENEW_TICKS) > self.lease {
                // Recorded before any bundle that reaches past the old one.
                self.lease = boundary.saturating_add(LEASE_TICKS);
                self.record(DurableRecord::Lease { tick: self.lease });
            }
            self.advance(boundary);
        }
    }

    /// Move the horizon to `to`: queued entries below it enter the log,
    /// ephemeral orders go to the connections that are live.
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
        self.release_ephemeral(from);
        if left_changed {
            self.presence_changed();
        }
        self.evaluate_timing(from + 1, to);
        self.plan.forget_before(to);
        for timing in self.seats.iter_mut().filter_map(|s| s.timing.as_mut()) {
            timing.forget_before(to);
        }
        let expected = self.expected_reporters();
        let mut out = Decisions::default();
        self.checksums.advance(to, expected, &mut out);
        self.take_decisions(out);
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

    /// The ephemeral orders of the step that just ended (`tick`, the old
    /// horizon) go to every connection that is live — whose stream had
    /// reached that horizon, so the bundle with `tick` is its next — and to
    /// none that is catching up.
    fn release_ephemeral(&mut self, tick: u32) {
        if self.ephemeral.is_empty() {
            return;
        }
        let orders = std::mem::take(&mut self.ephemeral);
        self.counters.ephemeral_orders += orders.len() as u64;
        for s in &mut self.seats {
            s.ephemeral_pending = 0;
            if !s.stream.is_some_and(|st| st.tick >= tick) {
                continue;
            }
            for (seat, order) in &orders {
                if s.ephemeral_out.len() >= MAX_EPHEMERAL_QUEUED {
                    s.ephemeral_out.pop_front();
                    self.counters.ephemeral_dropped += 1;
                }
                s.ephemeral_out.push_back((tick, *seat, order.clone()));
            }
        }
    }

    /// Write the next message for `seat`'s connection into `buf` (sized to
    /// what one link message may carry, at least 600 bytes): its length, or
    /// `None` when it has nothing to send. Order: the refusals the client
    /// may not know, Welcome, Timing, Presence, Pong, desync notices,
    /// ephemeral orders, bundle chunks from its stream position to the
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
        let s = self.seats.get_mut(usize::from(seat))?;
        let stream = s.stream?;
        // Refusals before anything that confirms a later sequence (Welcome,
        // Pong): the client drops a refused order before it takes the
        // highest sequence judged as a confirmation.
        if let Some(&(sequence, reason)) = s.refused.get(s.refusals_sent) {
            s.refusals_sent += 1;
            return ServerMessage::OrderRefused { sequence, reason }.write(buf);
        }
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
                highest_accepted_sequence: s.highest_judged,
                match_started: started,
                frequent_reports: s.timing.as_ref().is_some_and(SeatTiming::frequent_reports),
            };
            return ServerMessage::Welcome(w).write(buf);
        }
        // Timing before any bundle: a change reaches the client before the
        // bundle that reaches its tick (the link keeps the order).
        if let Some(change) = s.timing.as_mut().and_then(SeatTiming::next_to_send) {
            return ServerMessage::Timing(change).write(buf);
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
                highest_accepted_sequence: s.highest_judged,
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
        // Ephemeral orders before the bundle that reaches their tick.
        if let Some((tick, from, order)) = s.ephemeral_out.pop_front() {
            return ServerMessage::Ephemeral {
                tick,
                seat: from,
                payload: &order,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;
    use crate::relay::setup::NO_TICK_LIMIT;
    use crate::relay::timing::{tick_at, tick_start_ms};
    use crate::report::Report;
    use crate::timing::PolicyKind;
    use crate::wire::relay::read_server_message;

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
            let c = *s.seat_timing_plan(0).unwrap().in_force(tick);
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
        // Start 2/6 (a bundle every tick, six ticks of look-ahead);
        // calibrated to 1/4 at 64; 600 ms needs 5/15 (9 frames one way);
        // then three calm evaluations and a descent a rung per evaluation
        // back to 1/4. The bundle interval stays the setup's 1.
        assert_eq!(seen.first(), Some(&(0, 1, 6)));
        assert!(seen.iter().all(|e| e.1 == 1), "{seen:?}");
        assert_eq!((seen[1].1, seen[1].2), (1, 4), "{seen:?}");
        let widest = seen.iter().map(|e| e.2).max().unwrap_or(0);
        assert_eq!(widest, 15, "{seen:?}");
        assert_eq!(seen.last().map(|e| (e.1, e.2)), Some((1, 4)), "{seen:?}");
        // Every change starts on a bundle boundary after the horizon that
        // decided it, and was announced to its seat (one Timing message per
        // change and seat: both seats reported the same).
        assert_eq!(s.counters().timing_changes as usize, 2 * seen.len());
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
    fn paced_to_the_slowest_the_tick_rate_follows_it_without_a_jump() {
        // A machine needs 45 ms a frame: 22 ticks a second (S4.2), from a
        // bundle boundary on, the clock continuous across the change.
        let setup = MatchSetup {
            pace_to_slowest: true,
            ..MatchSetup::new(1, 2, 0b11)
        };
        let mut s = Sequencer::new(setup, 0).unwrap();
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
        assert_eq!(c.bundle_interval, 1);
        let seat_plan = s.seat_timing_plan(0).unwrap().latest();
        assert_eq!(
            (seat_plan.tick_rate_millihz, seat_plan.look_ahead),
            (22_000, 4),
            "each seat's plan keeps the match clock"
        );
        let before = tick_start_ms(c.from_tick, 30_000);
        assert_eq!(
            (c.anchor_tick, c.anchor_ms),
            (c.from_tick, before),
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
    fn unpaced_a_slow_machine_slows_only_itself() {
        // The same slow seat without pace_to_slowest: the match keeps its
        // rate; the slow machine falls behind on its own.
        let mut s = Sequencer::new(MatchSetup::new(1, 2, 0b11), 0).unwrap();
        s.connect(0, 0, 0).unwrap();
        s.connect(1, 0, 0).unwrap();
        let slow = |_| Report {
            process_us: 45_000,
            max_wait_ms: 0,
            worst_rtt_ms: Some(40),
            detail: None,
        };
        drive(&mut s, 0, 400, slow);
        assert_eq!(s.timing_plan().latest().tick_rate_millihz, 30_000);
        assert_eq!(
            s.seat_timing_plan(1).unwrap().latest().tick_rate_millihz,
            30_000
        );
    }

    #[test]
    fn each_seat_gets_the_buffer_its_own_link_needs() {
        // Seat 0 is 20 ms from the relay, seat 1 400 ms: the near seat's
        // jitter buffer follows its own round trip, not the far one's.
        let mut s = Sequencer::new(MatchSetup::new(1, 2, 0b11), 0).unwrap();
        s.connect(0, 0, 0).unwrap();
        s.connect(1, 0, 0).unwrap();
        let mut buf = [0u8; 1024];
        for tick in 0..1200 {
            let now = s.timing_plan().tick_start_ms(tick) * MS;
            s.handle_timeout(now);
            if crate::report::is_report_frame(tick) {
                for (seat, rtt) in [(0u8, 20u32), (1, 400)] {
                    let report = Report {
                        process_us: 5000,
                        max_wait_ms: 0,
                        worst_rtt_ms: Some(rtt),
                        detail: None,
                    };
                    s.handle_message(seat, now, &ClientMessage::TimingReport(report));
                }
            }
            for seat in 0..2 {
                while s.poll_message(seat, now, &mut buf).is_some() {}
            }
        }
        let near = s.seat_timing_plan(0).unwrap().in_force(1199).look_ahead;
        let far = s.seat_timing_plan(1).unwrap().in_force(1199).look_ahead;
        assert_eq!(near, 4, "rung 1: 1/4");
        assert!(far >= 12, "400 ms needs a wide buffer: {far}");
        // The Timing messages each connection got carry its own look-ahead.
        s.connect(0, s.horizon(), 1200 * 34 * MS).unwrap();
        let sent: Vec<u8> = messages(&mut s, 0, 1200 * 34 * MS)
            .iter()
            .filter_map(|m| match read_server_message(m) {
                Ok(ServerMessage::Timing(c)) => Some(c.look_ahead),
                _ => None,
            })
            .collect();
        assert_eq!(sent, vec![4]);
    }

    /// A running two-seat match (no timing policy) with both connected and
    /// everything they were owed polled.
    fn running_pair(setup: MatchSetup) -> Sequencer {
        let mut s = Sequencer::new(setup, 0).unwrap();
        s.connect(0, 0, 0).unwrap();
        s.connect(1, 0, 0).unwrap();
        messages(&mut s, 0, 0);
        messages(&mut s, 1, 0);
        s
    }

    fn submit(s: &mut Sequencer, seat: u8, sequence: u32, now: u64) {
        s.handle_message(
            seat,
            now,
            &ClientMessage::OrderSubmit {
                sequence,
                payload: &sequence.to_le_bytes(),
            },
        );
    }

    fn refusals(s: &mut Sequencer, seat: u8, now: u64) -> Vec<(u32, RefusalReason)> {
        messages(s, seat, now)
            .iter()
            .filter_map(|m| match read_server_message(m) {
                Ok(ServerMessage::OrderRefused { sequence, reason }) => Some((sequence, reason)),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_burst_past_the_queue_limit_is_refused_explicitly_and_blocks_nothing() {
        let setup = MatchSetup {
            max_queued_ticks: 4,
            timing_policy: None,
            ..MatchSetup::new(1, 2, 0b11)
        };
        let mut s = running_pair(setup);
        // Six orders in one tick: ticks 0..4 take four; 5 and 6 are refused.
        for sequence in 1..=6 {
            submit(&mut s, 0, sequence, 0);
        }
        assert_eq!(
            refusals(&mut s, 0, 0),
            vec![(5, RefusalReason::QueueFull), (6, RefusalReason::QueueFull)]
        );
        assert_eq!(s.counters().orders_refused, 2);
        // The next order (7) is judged on its own: once the queue drained a
        // little, it is accepted — the refusal blocked nothing.
        s.handle_timeout(2 * 33_334);
        submit(&mut s, 0, 7, 2 * 33_334);
        assert!(refusals(&mut s, 0, 2 * 33_334).is_empty());
        s.handle_timeout(300 * MS);
        let seqs: Vec<u32> = s.log().iter().map(|e| e.sequence).collect();
        assert_eq!(seqs, vec![1, 2, 3, 4, 7]);
        // A resubmission storm of everything, refused ones included,
        // changes nothing and is counted.
        let before = s.counters().orders_accepted;
        for _ in 0..3 {
            for sequence in 1..=7 {
                submit(&mut s, 0, sequence, 300 * MS);
            }
        }
        assert_eq!(s.counters().orders_accepted, before);
        assert_eq!(s.counters().duplicate_submissions, 21);
        assert!(refusals(&mut s, 0, 300 * MS).is_empty(), "told once");
        // After the storm, new orders still go through.
        submit(&mut s, 0, 8, 300 * MS);
        s.handle_timeout(400 * MS);
        assert_eq!(s.log().last().map(|e| e.sequence), Some(8));
    }

    #[test]
    fn an_order_past_the_tick_limit_is_refused_and_the_match_ends() {
        let setup = MatchSetup {
            max_ticks: 3,
            timing_policy: None,
            ..MatchSetup::new(1, 2, 0b11)
        };
        let mut s = running_pair(setup);
        for sequence in 1..=4 {
            submit(&mut s, 1, sequence, 0);
        }
        assert_eq!(refusals(&mut s, 1, 0), vec![(4, RefusalReason::TickLimit)]);
        s.handle_timeout(200 * MS);
        assert!(s.is_over());
        assert_eq!(s.log().len(), 3);
        // Without a limit set, there is none (no four-hour end).
        assert_eq!(MatchSetup::new(1, 2, 0b11).max_ticks, NO_TICK_LIMIT);
    }

    #[test]
    fn a_match_naming_the_lobby_baseline_is_refused_at_creation() {
        // `lobby` is a fixed timing chosen before the game: a relay cannot
        // run it, and says so instead of panicking or running another.
        let setup = MatchSetup {
            timing_policy: Some(PolicyKind::Lobby),
            ..MatchSetup::new(1, 2, 0b11)
        };
        assert!(matches!(
            Sequencer::new(setup, 0),
            Err(Error::Invalid(e))
                if e.field() == "policy" && e.got() == Some(&crate::error::Got::from("lobby"))
        ));
    }

    #[test]
    fn refusals_a_client_may_have_missed_come_before_its_next_welcome() {
        let setup = MatchSetup {
            max_queued_ticks: 1,
            timing_policy: None,
            ..MatchSetup::new(1, 2, 0b11)
        };
        let mut s = running_pair(setup);
        submit(&mut s, 0, 1, 0);
        submit(&mut s, 0, 2, 0); // refused: the queue holds one tick
                                 // The connection drops before the refusal went out; the client
                                 // reconnects: the refusal comes first, then the Welcome, whose
                                 // highest sequence (2) covers both.
        s.disconnect(0, 10);
        s.connect(0, 0, 20).unwrap();
        let m = messages(&mut s, 0, 20);
        assert!(matches!(
            read_server_message(&m[0]),
            Ok(ServerMessage::OrderRefused {
                sequence: 2,
                reason: RefusalReason::QueueFull
            })
        ));
        let Ok(ServerMessage::Welcome(w)) = read_server_message(&m[1]) else {
            panic!("{:?}", read_server_message(&m[1]));
        };
        assert_eq!(w.highest_accepted_sequence, 2);
    }

    #[test]
    fn a_quit_carries_the_seats_quit_order_and_nothing_runs_after_it() {
        let mut s = running_pair(MatchSetup {
            timing_policy: None,
            ..MatchSetup::new(1, 2, 0b11)
        });
        s.handle_message(
            1,
            0,
            &ClientMessage::Quit {
                sequence: 1,
                payload: b"surrender",
            },
        );
        submit(&mut s, 1, 2, 0);
        assert_eq!(refusals(&mut s, 1, 0), vec![(2, RefusalReason::Leaving)]);
        s.handle_timeout(100 * MS);
        let quit = &s.log()[0];
        assert_eq!(
            (quit.kind, &quit.payload[..], quit.tick),
            (EntryKind::Quit, &b"surrender"[..], 0)
        );
        assert_eq!(s.presence()[1], SeatPresence::Left);
    }

    #[test]
    fn ephemeral_orders_reach_live_clients_only_and_stay_out_of_the_log() {
        let mut s = running_pair(MatchSetup {
            timing_policy: None,
            ..MatchSetup::new(1, 3, 0b111)
        });
        s.connect(2, 0, 0).unwrap();
        s.handle_timeout(200 * MS);
        // Seats 0 and 1 are live; seat 2 has not been sent anything yet: it
        // is catching up.
        messages(&mut s, 0, 200 * MS);
        messages(&mut s, 1, 200 * MS);
        let h = s.horizon();
        s.handle_message(
            0,
            200 * MS,
            &ClientMessage::EphemeralSubmit { payload: b"hi" },
        );
        s.handle_timeout(250 * MS);
        let kinds = |m: &[Vec<u8>]| -> Vec<String> {
            m.iter()
                .map(|b| match read_server_message(b) {
                    Ok(ServerMessage::Ephemeral {
                        tick,
                        seat,
                        payload,
                    }) => {
                        format!("eph {tick} {seat} {}", String::from_utf8_lossy(payload))
                    }
                    Ok(ServerMessage::TurnBundle(b)) => format!("bundle {}", b.from_tick),
                    Ok(other) => format!("{other:?}").chars().take(8).collect(),
                    Err(e) => format!("{e:?}"),
                })
                .collect()
        };
        let live = kinds(&messages(&mut s, 1, 250 * MS));
        assert_eq!(live[0], format!("eph {h} 0 hi"), "{live:?}");
        assert_eq!(
            live[1],
            format!("bundle {h}"),
            "before the bundle with its tick"
        );
        let behind = kinds(&messages(&mut s, 2, 250 * MS));
        assert!(!behind.iter().any(|m| m.starts_with("eph")), "{behind:?}");
        assert!(s.log().is_empty());
        assert_eq!(s.counters().ephemeral_orders, 1);
        // Bounded per seat and step.
        for _ in 0..MAX_EPHEMERAL_PER_STEP + 3 {
            s.handle_message(
                0,
                250 * MS,
                &ClientMessage::EphemeralSubmit { payload: b"x" },
            );
        }
        assert_eq!(s.counters().ephemeral_dropped, 3);
    }

    #[test]
    fn a_client_beyond_the_horizon_gets_log_lost_unless_the_match_was_restored() {
        let mut fresh = Sequencer::new(MatchSetup::new(1, 2, 0b11), 0).unwrap();
        assert_eq!(fresh.connect(0, 500, 0), Err(RejectReason::LogLost));
        assert_eq!(fresh.connect(0, 0, 0), Ok(0));
        let mut state = MatchState::new(MatchSetup::new(1, 2, 0b11), 0);
        state.started_us = Some(0);
        state.lease = 100;
        let mut restored = Sequencer::restore(&state, 10 * MS, false).unwrap();
        assert_eq!(restored.connect(0, 100, 10 * MS), Ok(100));
        assert_eq!(
            restored.connect(1, 101, 10 * MS),
            Ok(0),
            "it ran ticks the records lost: reload"
        );
        // Later, a horizon beyond the records came from this relay.
        restored.handle_timeout(10_000 * MS);
        assert!(restored.horizon() > 200);
        assert_eq!(restored.connect(0, 200, 10_000 * MS), Ok(200));
    }

    #[test]
    fn a_restored_match_keeps_its_clock_log_sequences_and_never_reuses_a_broadcast_tick() {
        let setup = MatchSetup {
            timing_policy: None,
            ..MatchSetup::new(7, 2, 0b11)
        };
        let mut s = Sequencer::new(setup, 0).unwrap();
        s.enable_durable();
        s.connect(0, 0, 0).unwrap();
        s.connect(1, 0, 0).unwrap();
        let mut records = Vec::new();
        for step in 0..90u64 {
            let now = step * 10 * MS;
            if step % 7 == 0 {
                submit(&mut s, (step % 2) as u8, 1 + (step / 14) as u32, now);
            }
            s.handle_timeout(now);
            messages(&mut s, 0, now);
            messages(&mut s, 1, now);
            while let Some(r) = s.poll_durable() {
                records.push(r);
            }
        }
        // Queue one order beyond the horizon (not broadcast yet).
        submit(&mut s, 0, 100, 890 * MS);
        while let Some(r) = s.poll_durable() {
            records.push(r);
        }
        let broadcast = s.horizon();
        let mut state = MatchState::from_created(&records[0]).unwrap();
        for r in &records {
            state.apply(r);
        }
        assert!(
            state.lease > broadcast,
            "the lease runs ahead of the horizon"
        );
        // The relay comes back 2 s later.
        let mut back = Sequencer::restore(&state, 2_890 * MS, true).unwrap();
        assert!(back.horizon() >= broadcast);
        assert_eq!(back.match_clock_us(2_890 * MS), 2_890 * MS as i64);
        let log: Vec<_> = s.log().to_vec();
        assert_eq!(&back.log()[..log.len()], &log[..], "the log as broadcast");
        assert_eq!(back.presence()[0], SeatPresence::Reconnecting);
        // A resend of an accepted order is a duplicate; a new one lands at
        // or above the restored horizon.
        back.connect(0, broadcast, 2_890 * MS).unwrap();
        submit(&mut back, 0, 100, 2_890 * MS);
        assert_eq!(back.counters().duplicate_submissions, 1);
        submit(&mut back, 0, 101, 2_890 * MS);
        back.handle_timeout(3_500 * MS);
        let queued = back.log().iter().find(|e| e.sequence == 100).unwrap();
        let new = back.log().iter().find(|e| e.sequence == 101).unwrap();
        assert!(new.tick > queued.tick && new.tick >= broadcast);
        // Ended, it stays ended.
        back.end(3_500 * MS);
        let mut state = MatchState::from_created(&records[0]).unwrap();
        while let Some(r) = back.poll_durable() {
            state.apply(&r);
        }
        for r in &records {
            state.apply(r);
        }
        let mut over = Sequencer::restore(&state, 9_000 * MS, true).unwrap();
        assert!(over.is_over());
        assert_eq!(over.connect(1, 0, 9_000 * MS), Err(RejectReason::MatchOver));
    }

    #[test]
    fn a_resumed_connection_hears_only_the_desyncs_decided_since_its_horizon() {
        let mut setup = MatchSetup::new(1, 2, 0b11);
        setup.checksum_interval = 1;
        setup.timing_policy = None;
        let mut s = running_pair(setup);
        s.handle_timeout(400 * MS);
        for tick in [2u32, 4] {
            for (seat, v) in [(0u8, 1u64), (1, 2)] {
                s.handle_message(
                    seat,
                    400 * MS,
                    &ClientMessage::ChecksumReport { tick, checksum: v },
                );
            }
        }
        assert_eq!(s.desyncs().len(), 2);
        let desyncs = |s: &mut Sequencer, seat: u8, now: u64| {
            messages(s, seat, now)
                .iter()
                .filter(|m| matches!(read_server_message(m), Ok(ServerMessage::Desync { .. })))
                .count()
        };
        assert_eq!(desyncs(&mut s, 0, 400 * MS), 2);
        // The horizon moves on; the client holds it (it got the notices
        // before the bundles that reached it) and reconnects there: nothing
        // old again.
        s.handle_timeout(500 * MS);
        messages(&mut s, 0, 500 * MS);
        let h = s.horizon();
        s.connect(0, h, 510 * MS).unwrap();
        assert_eq!(desyncs(&mut s, 0, 510 * MS), 0);
        // One more, decided now: a resume hears it; a reload hears all.
        s.handle_timeout(600 * MS);
        for (seat, v) in [(0u8, 1u64), (1, 2)] {
            s.handle_message(
                seat,
                600 * MS,
                &ClientMessage::ChecksumReport {
                    tick: 6,
                    checksum: v,
                },
            );
        }
        s.connect(0, h, 610 * MS).unwrap();
        assert_eq!(desyncs(&mut s, 0, 610 * MS), 1);
        s.connect(1, 0, 610 * MS).unwrap();
        assert_eq!(desyncs(&mut s, 1, 610 * MS), 3);
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
        s.handle_message(
            0,
            500 * MS,
            &ClientMessage::Quit {
                sequence: 1,
                payload: b"",
            },
        );
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
