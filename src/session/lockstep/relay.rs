//! The relay topology of a [`LockstepSession`](super::LockstepSession)
//! (S10): the same session API, with a relay instead of peer links.
//!
//! The session holds a [`RelayClient`] and executes the relay's ticks as
//! its frames, **one tick per frame**: the relay's tick rate
//! (`tick_rate_millihz` of the match setup) is the game's frame rate. What
//! the engine sees is what it sees peer-to-peer:
//!
//! * **Commands.** Frame `F` is relay tick `F`; its commands are the human
//!   orders of that tick, seats in order, each as an [`ExecutedCommand`]
//!   with `tag == F`. Null orders and AI seats deliver nothing (the engine
//!   runs its AI as usual). A quit or a drop executes as
//!   [`SessionEvent::PlayerRemoved`] on its tick; this machine's own removal
//!   ends the session ([`Advance::Left`]), as does the end of the match once
//!   its last tick ran.
//! * **Checksums** go to the relay, which compares them per tick; its desync
//!   notices surface as [`SessionEvent::Desync`] (frame = tick, seats = the
//!   seats outside the largest agreeing group).
//! * **Pacing (S9).** Frame `F` is due when the relay's clock reaches tick
//!   `F + bundle_interval + look_ahead`: the bundle holding tick `F` left
//!   the relay at most `bundle_interval` ticks after `F` started, so a
//!   one-way delay or jitter up to `look_ahead` ticks costs no stall. The
//!   relay's clock is followed with [`crate::clock::ClockSync`] (the
//!   filtered ping offset steering a slewed clock: it never jumps, and it
//!   follows a drifting local clock). Bundle interval, look-ahead and tick
//!   rate come from the relay's timing plan (the relay's policy, S4, from a
//!   tick on, the same tick on every machine); in a match without a timing
//!   policy, from the Welcome with `look_ahead = jitter_ticks`. A machine
//!   behind (after a reconnect, a slow frame) finds its frames already due
//!   and catches up as fast as the engine runs them. Frame 0 waits for the
//!   first clock sample. A timing change surfaces as
//!   [`SessionEvent::Timing`] on the tick it applies from.
//! * **Reports (S3).** The session's [`Measurements`] measure the round
//!   trip to the relay (seat [`RELAY_LINK_SEAT`]), the engine's frame work
//!   and the waits for bundles; on every report tick (32, 64, then every
//!   128; every 16 when the Welcome says the match runs `tracking`) the
//!   report goes to the relay as a TimingReport.
//! * **AI orders.** [`LockstepSession::submit_ai_order`](super::LockstepSession::submit_ai_order)
//!   queues an AI seat's order locally for `ai_order_delay` ticks (the
//!   match setup's) and delivers it with that tick's commands.
//! * **The relay link** appears as seat [`RELAY_LINK_SEAT`] (`0xFF`) in
//!   link events: [`SessionEvent::LinkLost`] when it is lost (the client
//!   reconnects by itself, resending unconfirmed orders),
//!   [`SessionEvent::LinkRecovered`] on the next Welcome, and
//!   [`SessionEvent::PeerRestarted`] when the relay could not resume where
//!   this machine stopped: drop the game state, reload, and execute again
//!   from the frame after [`LockstepSession::frame`](super::LockstepSession::frame)
//!   (0; the relay resends every tick).
//! * **Waiting.** The relay never waits for players (a slow player delays
//!   only itself), so `waiting_for` names the seats the relay itself waits
//!   for: before the start, the seats still loading; later, seats
//!   reconnecting, when this machine has no tick to run.

use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;

use super::stalls::StallWatch;
use super::{Advance, ExecutedCommand, LockstepStats, SessionEvent};
use crate::error::{Error, Result};
use crate::link::Transmit;
use crate::relay::ticket::Credentials;
use crate::relay::{ClientConfig, ClientEvent, RelayClient, SeatTurn, RELAY_LINK_SEAT};
use crate::report::Measurements;
use crate::timing::tracking::report_due;
use crate::timing::{Output, Status, Timing, Verdict};
use crate::wire::relay::TimingChange;
use crate::wire::relay::{RejectReason, SeatPresence, MAX_ORDER_BYTES, MAX_SEATS};

/// Ticks of jitter buffer by default (67 ms at 30 ticks/s), in matches
/// without a timing policy (otherwise the relay's look-ahead rules).
pub const DEFAULT_JITTER_TICKS: u32 = 2;
/// Most AI orders a session holds for later ticks.
pub const MAX_PENDING_AI_ORDERS: usize = 4096;

/// How to reach the relay: what the lobby hands a player.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RelaySettings {
    /// The relay's address.
    pub relay: SocketAddr,
    /// The ticket and its link secret (the ticket names the match and seat;
    /// the seat must be the session's local seat).
    pub credentials: Credentials,
    /// Every tick below it has already run on this machine (a restarted
    /// process that kept its state); 0 for a fresh start.
    pub have_horizon: u32,
    /// Seed for connection nonces: different and unpredictable per process.
    pub nonce_seed: u64,
    /// How far behind the relay's horizon frames run, in ticks, in a match
    /// without a timing policy (see the module docs); with one, the relay's
    /// look-ahead replaces it.
    pub jitter_ticks: u32,
}

impl RelaySettings {
    /// Settings for a fresh start with the default jitter buffer.
    pub fn new(relay: SocketAddr, credentials: Credentials, nonce_seed: u64) -> RelaySettings {
        RelaySettings {
            relay,
            credentials,
            have_horizon: 0,
            nonce_seed,
            jitter_ticks: DEFAULT_JITTER_TICKS,
        }
    }
}

/// The relay topology's state inside a session.
#[derive(Debug)]
pub(super) struct RelayLockstep {
    client: RelayClient,
    local_seat: u8,
    seat_count: u8,
    human_mask: u16,
    checksum_interval: u32,
    jitter_ticks: u32,
    frame: Option<u32>,
    executed: Vec<ExecutedCommand>,
    events: VecDeque<SessionEvent>,
    presence: [SeatPresence; MAX_SEATS],
    /// The open wait for a bundle, and what counts as a stall.
    stalls: StallWatch,
    left: bool,
    leaving: bool,
    welcomed: bool,
    /// The match ended: no tick at or after it.
    final_tick: Option<u32>,
    /// Why the session cannot go on (refused ticket, setup mismatch).
    fault: Option<&'static str>,
    stats: LockstepStats,
    /// AI orders by the tick they execute on: (seat, order) in submission order.
    ai_orders: BTreeMap<u32, Vec<(u8, Vec<u8>)>>,
    ai_order_count: usize,
    /// The relay link's round-trip sample count last fed to the measurements.
    rtt_samples_seen: u64,
    /// The timing (interval, look-ahead, tick rate) last told to the engine.
    told_timing: Option<(u8, u8, u32)>,
    /// The last tick this client reported on.
    last_report_tick: Option<u32>,
}

impl RelayLockstep {
    pub(super) fn new(
        settings: &RelaySettings,
        local_seat: u8,
        human_seats: &[bool],
        checksum_interval: u32,
        now_us: u64,
    ) -> Result<RelayLockstep> {
        let ticket_seat = settings.credentials.fields()?.seat;
        if ticket_seat != local_seat {
            return Err(Error::InvalidArgument(
                "the relay ticket is for another seat than the session's local seat",
            ));
        }
        let config = ClientConfig {
            have_horizon: settings.have_horizon,
            ..ClientConfig::new(settings.credentials, settings.relay, settings.nonce_seed)
        };
        let human_mask = human_seats
            .iter()
            .enumerate()
            .filter(|(_, human)| **human)
            .fold(0u16, |mask, (s, _)| mask | 1 << s);
        Ok(RelayLockstep {
            client: RelayClient::new(config, now_us)?,
            local_seat,
            seat_count: human_seats.len() as u8,
            human_mask,
            checksum_interval,
            jitter_ticks: settings.jitter_ticks,
            frame: settings.have_horizon.checked_sub(1),
            executed: Vec::new(),
            events: VecDeque::new(),
            presence: [SeatPresence::Ai; MAX_SEATS],
            stalls: StallWatch::default(),
            left: false,
            leaving: false,
            welcomed: false,
            final_tick: None,
            fault: None,
            stats: LockstepStats::default(),
            ai_orders: BTreeMap::new(),
            ai_order_count: 0,
            rtt_samples_seen: 0,
            told_timing: None,
            last_report_tick: None,
        })
    }

    pub(super) fn submit_ai_order(&mut self, seat: u8, bytes: &[u8]) -> Result<u32> {
        let Some(welcome) = self.client.welcome() else {
            return Err(Error::State(
                "no AI orders before the relay's Welcome (it brings ai_order_delay)",
            ));
        };
        if seat >= welcome.seat_count || welcome.human_mask & (1 << seat) != 0 {
            return Err(
                Error::InvalidArgument("not an AI seat of the match").detailed(format!(
                    "seat is {seat}; expected an AI seat of the match (below {} and not human: human mask {:#06x})",
                    welcome.seat_count, welcome.human_mask
                )),
            );
        }
        if bytes.len() > MAX_ORDER_BYTES {
            return Err(
                Error::InvalidArgument("AI order too long").detailed(format!(
                "the AI order is {} bytes; expected at most {MAX_ORDER_BYTES}, as a human order",
                bytes.len()
            )),
            );
        }
        if self.ai_order_count >= MAX_PENDING_AI_ORDERS {
            return Err(Error::Full("AI orders waiting for their tick"));
        }
        let decided_at = self.frame.map_or(0, |f| f.saturating_add(1));
        let tick = decided_at.saturating_add(u32::from(welcome.ai_order_delay));
        self.ai_orders
            .entry(tick)
            .or_default()
            .push((seat, bytes.to_vec()));
        self.ai_order_count += 1;
        Ok(tick)
    }

    /// The client (read-only): connection, horizon, counters.
    pub(super) fn client(&self) -> &RelayClient {
        &self.client
    }

    pub(super) fn submit_command(&mut self, bytes: &[u8]) -> Result<u32> {
        if self.left || self.leaving {
            return Err(Error::State(
                "this player has left (or is leaving) the game",
            ));
        }
        self.client.submit_order(bytes)?;
        // The relay sequences it on the earliest tick it has not broadcast.
        Ok(self.client.horizon().max(self.client.next_tick()))
    }

    pub(super) fn submit_checksum(&mut self, frame: u32, checksum: u64) -> Result<()> {
        if self.checksum_interval == 0 || frame % self.checksum_interval != 0 {
            return Err(Error::InvalidArgument("not a checksum frame"));
        }
        self.client.report_checksum(frame, checksum);
        Ok(())
    }

    pub(super) fn leave(&mut self) -> Result<()> {
        if self.left || self.leaving {
            return Err(Error::State("already left or leaving"));
        }
        self.client.quit()?;
        self.leaving = true;
        Ok(())
    }

    pub(super) fn handle_datagram(
        &mut self,
        now_us: u64,
        source: SocketAddr,
        datagram: &[u8],
        measurements: &mut Measurements,
    ) {
        self.client.handle_datagram(now_us, source, datagram);
        // Every round-trip sample goes into the report interval as it is
        // taken (S3: the interval's worst clean sample), as peer-to-peer.
        let link = self.client.link();
        let samples = link.rtt().samples();
        if samples != self.rtt_samples_seen {
            self.rtt_samples_seen = samples;
            let _ = measurements.sample_rtt(
                RELAY_LINK_SEAT,
                link.has_clean_measurement(),
                link.latest_rtt_ms(),
            );
        }
        self.collect_client_events();
    }

    pub(super) fn handle_timeout(&mut self, now_us: u64) {
        self.client.handle_timeout(now_us);
        self.collect_client_events();
    }

    pub(super) fn poll_transmit(&mut self, now_us: u64, buf: &mut [u8]) -> Option<Transmit> {
        let (destination, len) = self.client.poll_transmit(now_us, buf)?;
        Some(Transmit {
            seat: RELAY_LINK_SEAT,
            destination,
            len,
        })
    }

    pub(super) fn poll_event(&mut self) -> Option<SessionEvent> {
        self.events.pop_front()
    }

    fn collect_client_events(&mut self) {
        while let Some(event) = self.client.poll_event() {
            match event {
                ClientEvent::Welcomed {
                    welcome, reload, ..
                } => {
                    if welcome.seat_count != self.seat_count
                        || welcome.human_mask != self.human_mask
                    {
                        self.fault = Some(
                            "the relay's match has other seats than this session (seat count or human seats differ)",
                        );
                    }
                    if self.welcomed {
                        self.events.push_back(SessionEvent::LinkRecovered {
                            seat: RELAY_LINK_SEAT,
                        });
                    }
                    if reload {
                        self.frame = welcome.resume_from_tick.checked_sub(1);
                        // The engine reloads and recomputes its AI.
                        self.ai_orders.clear();
                        self.ai_order_count = 0;
                        self.events.push_back(SessionEvent::PeerRestarted {
                            seat: RELAY_LINK_SEAT,
                        });
                    }
                    self.welcomed = true;
                }
                ClientEvent::Rejected(reason) => self.fault = Some(rejection(reason)),
                ClientEvent::Retrying(_) => {}
                ClientEvent::ConnectionLost => self.events.push_back(SessionEvent::LinkLost {
                    seat: RELAY_LINK_SEAT,
                }),
                ClientEvent::Presence { states, .. } => self.presence = states,
                ClientEvent::Desync(notice) => {
                    self.stats.desyncs += 1;
                    self.events.push_back(SessionEvent::Desync {
                        frame: notice.tick,
                        seats: u32::from(notice.disagreeing_mask),
                    });
                }
                ClientEvent::MatchOver { final_tick, .. } => self.final_tick = Some(final_tick),
            }
        }
    }

    /// Relay match time (µs) at which `tick` is due, once welcomed.
    fn due_match_us(&self, tick: u32) -> Option<i64> {
        let jitter = self.jitter_ticks.clamp(1, 255) as u8;
        let ms = self.client.due_ms(tick, jitter)?;
        Some(i64::try_from(ms.saturating_mul(1000)).unwrap_or(i64::MAX))
    }

    /// Local time at which `tick` is due, once welcomed and pinged, by the
    /// offset applied now.
    fn due_local_us(&self, tick: u32) -> Option<u64> {
        let offset = self.client.clock_offset_us()?;
        let due = self.due_match_us(tick)?;
        Some(due.saturating_sub(offset).max(0) as u64)
    }

    /// Tell the engine when the timing in force at `tick` differs from what
    /// it was told (the relay's plan only: a match without a policy has no
    /// timing changes).
    fn announce_timing(&mut self, tick: u32) {
        let Some(c) = self.client.timing_plan().map(|p| *p.in_force(tick)) else {
            return;
        };
        let now = (c.bundle_interval, c.look_ahead, c.tick_rate_millihz);
        let before = self.told_timing.replace(now);
        if before.map(|b| (b.0, b.1)) != Some((now.0, now.1)) {
            if let Ok(timing) = Timing::new(c.bundle_interval, c.look_ahead) {
                self.events
                    .push_back(SessionEvent::Timing(Output::TimingChanged {
                        frame: tick,
                        timing,
                    }));
            }
        }
        if before.map(|b| b.2) != Some(now.2) {
            self.events
                .push_back(SessionEvent::Timing(Output::FrameRateChanged {
                    frame: tick,
                    fps: (now.2 / 1000).clamp(1, 255) as u8,
                }));
        }
    }

    fn next_is_held(&self) -> bool {
        self.client.next_tick() < self.client.horizon()
    }

    pub(super) fn advance(
        &mut self,
        now_us: u64,
        measurements: &mut Measurements,
    ) -> Result<Advance> {
        if self.left {
            return Ok(Advance::Left);
        }
        if let Some(fault) = self.fault {
            return Err(Error::State(fault));
        }
        let next = self.client.next_tick();
        if self.final_tick.is_some_and(|last| next >= last) {
            self.left = true;
            return Ok(Advance::Left);
        }
        let (Some(due), Some(relay_now)) =
            (self.due_match_us(next), self.client.relay_clock_us(now_us))
        else {
            return Ok(Advance::Waiting); // not welcomed, or no clock sample yet
        };
        if relay_now < due {
            let wait = u64::try_from(due - relay_now).unwrap_or(0);
            return Ok(Advance::NotDue {
                at_us: now_us.saturating_add(wait),
            });
        }
        if !self.next_is_held() {
            self.stalls.waiting(now_us, || None);
            return Ok(Advance::Waiting);
        }
        // The tick's length in match time: the rate in force.
        let tick_us = next
            .checked_sub(1)
            .and_then(|previous| self.due_match_us(previous))
            .map_or(0, |previous| due.saturating_sub(previous).max(0) as u64);
        self.stalls
            .frame_starts(now_us, tick_us, measurements, &mut self.stats);
        let Some(turn) = self.client.next_turn() else {
            return Ok(Advance::Waiting); // held was checked just above
        };
        self.executed.clear();
        for (seat, seat_turn) in turn.seats.into_iter().enumerate() {
            let seat = seat as u8;
            match seat_turn {
                SeatTurn::Order(bytes) => self.executed.push(ExecutedCommand {
                    seat,
                    tag: turn.tick,
                    bytes,
                }),
                SeatTurn::Quit | SeatTurn::Dropped => {
                    self.events.push_back(SessionEvent::PlayerRemoved {
                        frame: turn.tick,
                        seat,
                    });
                    self.left |= seat == self.local_seat;
                }
                SeatTurn::Ai | SeatTurn::Null | SeatTurn::Gone => {}
            }
        }
        // AI orders due now (and any a late submission aimed before now).
        while let Some(entry) = self.ai_orders.first_entry() {
            if *entry.key() > turn.tick {
                break;
            }
            for (seat, bytes) in entry.remove() {
                self.ai_order_count -= 1;
                self.executed.push(ExecutedCommand {
                    seat,
                    tag: turn.tick,
                    bytes,
                });
            }
        }
        // Seats in order; a seat's AI orders in submission order.
        self.executed.sort_by_key(|c| c.seat);
        self.announce_timing(turn.tick);
        self.frame = Some(turn.tick);
        let frequent = self.client.welcome().is_some_and(|w| w.frequent_reports);
        let report_now = report_due(
            frequent,
            turn.tick,
            measurements.unreported_stalls(),
            &mut self.last_report_tick,
        );
        if report_now && !self.left {
            self.client.report_timing(measurements.take_report());
        }
        Ok(if self.left {
            Advance::Left
        } else {
            Advance::Ran { frame: turn.tick }
        })
    }

    /// The earliest local time something is due: the client's timers, or
    /// the next frame when its tick is held.
    pub(super) fn poll_timeout(&self) -> Option<u64> {
        let client = self.client.poll_timeout();
        if self.left {
            return client;
        }
        let frame = if self.next_is_held() {
            self.due_local_us(self.client.next_tick())
        } else {
            None
        };
        match (client, frame) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The status behind a relay: the plan's timing in force at the next
    /// frame and its latest change as the target; `idle` (the session's
    /// unused timing machine) fills what the relay does not announce.
    pub(super) fn timing_status(&self, idle: Status) -> Status {
        let next = self.client.next_tick();
        let frame = self.frame.unwrap_or(0);
        let Some(plan) = self.client.timing_plan() else {
            return Status {
                frame,
                master: None,
                ..idle
            };
        };
        let timing = |c: &TimingChange| Timing::new(c.bundle_interval, c.look_ahead).ok();
        let fps = |c: &TimingChange| (c.tick_rate_millihz / 1000).clamp(1, 255) as u8;
        let now = plan.in_force(next);
        let target = plan.latest();
        let in_force = timing(now).unwrap_or(idle.timing);
        Status {
            frame,
            timing: in_force,
            fps: fps(now),
            target: timing(target).unwrap_or(in_force),
            target_fps: fps(target),
            staged_target: None,
            tier: in_force.tier(),
            master: None,
            calibrating: false,
            qualifying_in_a_row: 0,
            descent_running: false,
            last_verdict: Verdict::NoEvaluation,
        }
    }

    pub(super) fn executed(&self) -> &[ExecutedCommand] {
        &self.executed
    }

    pub(super) fn waiting_for(&self) -> u32 {
        if self.next_is_held() {
            return 0;
        }
        (0..self.seat_count)
            .filter(|s| {
                matches!(
                    self.presence[usize::from(*s)],
                    SeatPresence::Loading | SeatPresence::Reconnecting
                )
            })
            .fold(0, |mask, s| mask | 1 << s)
    }

    pub(super) fn frame(&self) -> Option<u32> {
        self.frame
    }

    pub(super) fn stats(&self) -> LockstepStats {
        LockstepStats {
            malformed_messages: self.client.counters().bad_messages,
            ..self.stats
        }
    }

    pub(super) fn has_left(&self) -> bool {
        self.left
    }

    pub(super) fn clock_offset_us(&self) -> i64 {
        self.client.clock_offset_us().unwrap_or(0)
    }

    pub(super) fn held_bytes(&self) -> usize {
        self.client.held_bytes()
            + self.executed.iter().map(|c| c.bytes.len()).sum::<usize>()
            + self
                .ai_orders
                .values()
                .flatten()
                .map(|(_, order)| order.len() + 1)
                .sum::<usize>()
    }
}

/// Why the relay refused this seat for good, for `advance`'s error.
fn rejection(reason: RejectReason) -> &'static str {
    match reason {
        RejectReason::BadTicket => "the relay refused the ticket (bad ticket)",
        RejectReason::Expired => "the relay refused the ticket (expired)",
        RejectReason::WrongVersion => "the relay speaks another protocol version",
        RejectReason::SeatLeft => "the relay says this seat has left the match",
        RejectReason::MatchOver => "the relay says the match is over",
        RejectReason::UnknownMatch => "the relay has no match with the ticket's id",
        RejectReason::Replayed | RejectReason::ConnectionIdTaken | RejectReason::RelayFull => {
            "the relay refused the connection"
        }
    }
}
