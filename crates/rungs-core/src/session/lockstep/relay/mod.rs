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
//!   [`SessionEvent::PlayerRemoved`] on its tick — a quit's own game order,
//!   if it carried one, runs as that seat's command on the same tick; this
//!   machine's own removal ends the session ([`Advance::Left`]), as does the
//!   end of the match once its last tick ran.
//! * **Orders the relay refused** (the seat's queue full, the match's tick
//!   limit, after its quit) surface as [`SessionEvent::CommandRefused`]
//!   with the id [`LockstepSession::submit_order`](super::LockstepSession::submit_order) returned; they never run,
//!   and the orders after them go on.
//! * **Ephemeral orders** ([`OrderKind::Ephemeral`]: voice, a ping on the
//!   map) run with the tick the relay gave them on the machines that are
//!   live then, never on one catching up: they are not game state
//!   ([`LockstepSession::ephemeral`](super::LockstepSession::ephemeral)).
//! * **Checksums** go to the relay, which compares them per tick; its desync
//!   notices surface as [`SessionEvent::Desync`] (frame = the tick whose
//!   preceding state differs, seats = the seats outside the largest
//!   agreeing group). The relay compares the state *before* every
//!   `checksum_interval`-th tick: [`LockstepSession::submit_checksum`](super::LockstepSession::submit_checksum)
//!   takes the state after frame `F` when `F + 1` is such a tick
//!   ([`LockstepSession::is_checksum_frame`](super::LockstepSession::is_checksum_frame)), and
//!   [`LockstepSession::submit_initial_checksum`](super::LockstepSession::submit_initial_checksum) the state before tick 0.
//! * **Pacing (S9).** Frame `F` is due when the relay's clock reaches tick
//!   `F + bundle_interval + look_ahead`: the bundle holding tick `F` left
//!   the relay at most `bundle_interval` ticks after `F` started, so a
//!   one-way delay or jitter up to `look_ahead` ticks costs no stall. The
//!   relay's clock is followed with [`crate::clock::ClockSync`] (the
//!   filtered ping offset steering a slewed clock: it never jumps, and it
//!   follows a drifting local clock). Bundle interval and tick rate are the
//!   match's; the look-ahead is this machine's own, from the relay's policy
//!   run on this machine's reports alone (S4 per seat, from a tick on); in
//!   a match without a timing policy, `look_ahead = jitter_ticks`. A machine
//!   behind (after a reconnect, a slow frame) finds its frames already due
//!   and catches up as fast as the engine runs them. Frame 0 waits for the
//!   first clock sample. A timing change surfaces as
//!   [`SessionEvent::Timing`] on the tick it applies from.
//! * **Reports (S3).** The session's [`Measurements`] measure the round
//!   trip to the relay (seat [`RELAY_LINK_SEAT`]), the engine's frame work,
//!   the waits for bundles and the look-ahead each tick needed (when its
//!   bundle came against when it was due: the needs `tracking` sheds its
//!   margin by); on every report tick (32, 64, then every 128; every 16
//!   when the Welcome says the match runs `tracking`) the report goes to
//!   the relay as a TimingReport.
//! * **AI orders** ([`ai`]): [`LockstepSession::submit_ai_order`](super::LockstepSession::submit_ai_order) for a
//!   decision made with the state after the last frame run, or
//!   [`LockstepSession::begin_ai_decision`](super::LockstepSession::begin_ai_decision) /
//!   [`LockstepSession::submit_ai_order_at`](super::LockstepSession::submit_ai_order_at) /
//!   [`LockstepSession::end_ai_decision`](super::LockstepSession::end_ai_decision) for an AI computed in the
//!   background: the order runs on its decision tick plus `ai_order_delay`
//!   on every machine, and that tick waits for decisions still computing.
//! * **The relay link** appears as seat [`RELAY_LINK_SEAT`] (`0xFF`) in
//!   link events: [`SessionEvent::LinkLost`] when it is lost (the client
//!   reconnects by itself, resending the orders the relay has not judged),
//!   [`SessionEvent::LinkRecovered`] on the next Welcome, and
//!   [`SessionEvent::PeerRestarted`] when the relay lost the tail of its
//!   log beyond where this machine is (a restart after a power loss): drop
//!   the game state, reload, and execute again from the frame after
//!   [`LockstepSession::frame`](super::LockstepSession::frame) (0; the
//!   relay resends every tick).
//! * **Waiting.** The relay never waits for players (a slow player delays
//!   only itself), so `waiting_for` names the seats the relay itself waits
//!   for: before the start, the seats still loading; later, seats
//!   reconnecting, when this machine has no tick to run; and AI seats whose
//!   decisions due now are still computing.
//! * **Replays** ([`replay`]): a session fed a match's turn log instead of a
//!   relay runs the same frames with the same commands, as fast as the
//!   engine runs them, and compares the engine's checksums with each seat's.

mod ai;
mod replay;

use std::collections::VecDeque;
use std::net::SocketAddr;

use super::stalls::StallWatch;
use super::{
    check_link_keys, Advance, ExecutedCommand, LockstepConfig, LockstepStats, SessionEvent,
};
use crate::error::{Error, Result};
use crate::link::{Endpoint, EndpointConfig, Transmit};
use crate::relay::ticket::Credentials;
use crate::relay::{ClientConfig, ClientEvent, RelayClient, SeatTurn, RELAY_LINK_SEAT};
use crate::report::Measurements;
use crate::timing::tracking::report_due;
use crate::timing::{Output, Status, Timing, TimingMachine, Verdict};
use crate::wire::packet::SessionKey;
use crate::wire::relay::TimingChange;
use crate::wire::relay::{RejectReason, SeatPresence, MAX_ORDER_BYTES, MAX_SEATS};

use ai::AiOrders;
use replay::Replay;

/// Ticks of jitter buffer by default (67 ms at 30 ticks/s), in matches
/// without a timing policy (otherwise the relay's look-ahead rules).
pub const DEFAULT_JITTER_TICKS: u32 = 2;
/// Bundle arrival times kept for the needs of ticks not yet run.
const KEPT_ARRIVALS: usize = 1024;

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

/// What [`LockstepSession::submit_order`](super::LockstepSession::submit_order) submits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OrderKind {
    /// A command, as [`LockstepSession::submit_command`](super::LockstepSession::submit_command).
    Command,
    /// This player's quit as a game order: it runs on every machine on the
    /// frame this seat is removed (peer-to-peer: a command and the removal,
    /// issued together).
    Quit,
    /// An ephemeral order (relay only): not game state, never resent, run
    /// only on the machines live at its tick.
    Ephemeral,
}

/// What [`LockstepSession::submit_order`](super::LockstepSession::submit_order) says about an order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OrderReceipt {
    /// Its id, for [`SessionEvent::CommandRefused`] (0 when it cannot be
    /// refused later: peer-to-peer, ephemeral).
    pub id: u64,
    /// The earliest frame it can run on.
    pub frame: u32,
}

/// One machine's session behind a relay: the relay client, and the frames,
/// events, reports and AI orders it makes of the relay's ticks. Every call
/// of the lockstep API for this topology lands here (see
/// [`LockstepSession`](super::LockstepSession) for the protocol).
#[derive(Debug)]
pub(super) struct RelaySession {
    client: RelayClient,
    /// This machine's measurements: the round trip to the relay, the
    /// engine's frame work, the waits for bundles (S3).
    measurements: Measurements,
    /// The game's timing machine, idle: what `machine()` shows (seats,
    /// speed) and what `timing_status` fills in where the relay's plan is
    /// silent. The relay runs the timing.
    idle_machine: TimingMachine,
    /// An endpoint without links: what `endpoint()` shows behind a relay.
    idle_endpoint: Endpoint,
    local_seat: u8,
    seat_count: u8,
    human_mask: u16,
    checksum_interval: u32,
    jitter_ticks: u32,
    frame: Option<u32>,
    executed: Vec<ExecutedCommand>,
    /// The ephemeral orders of the last frame run.
    ephemeral: Vec<ExecutedCommand>,
    events: VecDeque<SessionEvent>,
    presence: [SeatPresence; MAX_SEATS],
    /// The open wait for a bundle, and what counts as a stall.
    stalls: StallWatch,
    left: bool,
    /// The id of this player's quit, sent and not yet executed.
    leaving: Option<u64>,
    welcomed: bool,
    /// The match ended: no tick at or after it.
    final_tick: Option<u32>,
    /// Why the session cannot go on (refused ticket, setup mismatch).
    fault: Option<String>,
    stats: LockstepStats,
    ai: AiOrders,
    /// The relay link's round-trip sample count last fed to the measurements.
    rtt_samples_seen: u64,
    /// The timing (interval, look-ahead, tick rate) last told to the engine.
    told_timing: Option<(u8, u8, u32)>,
    /// The last tick this client reported on.
    last_report_tick: Option<u32>,
    /// When the horizon passed each tick not yet run: (horizon reached,
    /// local µs), oldest first — a tick's bundle came at the first entry
    /// whose horizon is above it.
    arrivals: VecDeque<(u32, u64)>,
    /// Fed a turn log instead of a relay.
    replay: Option<Replay>,
}

impl RelaySession {
    /// A session on the eve of frame 0 at local time `now_us`, for the
    /// local seat `local_seat` of `config` (checked by the caller), reaching
    /// the relay with `settings`.
    pub(super) fn new(
        config: &LockstepConfig,
        settings: &RelaySettings,
        local_seat: u8,
        now_us: u64,
    ) -> Result<RelaySession> {
        let idle_machine = TimingMachine::new(&config.machine)?;
        let human_seats = &config.machine.human_seats;
        let checksum_interval = config.checksum_interval;
        let ticket_seat = settings.credentials.fields()?.seat;
        if ticket_seat != local_seat {
            return Err(Error::invalid_value(
                "the relay ticket's seat",
                ticket_seat,
                format!("the session's local seat, {local_seat}"),
            ));
        }
        let client_config = ClientConfig {
            have_horizon: settings.have_horizon,
            ..ClientConfig::new(settings.credentials, settings.relay, settings.nonce_seed)
        };
        let human_mask = human_seats
            .iter()
            .enumerate()
            .filter(|(_, human)| **human)
            .fold(0u16, |mask, (s, _)| mask | 1 << s);
        let client = RelayClient::new(client_config, now_us)?;
        // The idle endpoint needs some key.
        let key = match config.key.is_zero() {
            true => SessionKey(settings.credentials.link_secret.0),
            false => config.key,
        };
        let mut idle_endpoint = Endpoint::new(EndpointConfig {
            session_id: config.session_id,
            key,
            local_seat,
            link: config.link,
        })?;
        idle_endpoint.set_epoch(config.epoch)?;
        check_link_keys(config, &idle_machine, local_seat)?;
        let mut measurements = Measurements::new();
        // Behind a relay the one round trip that matters is to the relay.
        measurements.add_peer(RELAY_LINK_SEAT)?;
        Ok(RelaySession {
            client,
            measurements,
            idle_machine,
            idle_endpoint,
            local_seat,
            seat_count: human_seats.len() as u8,
            human_mask,
            checksum_interval,
            jitter_ticks: settings.jitter_ticks,
            frame: settings.have_horizon.checked_sub(1),
            executed: Vec::new(),
            ephemeral: Vec::new(),
            events: VecDeque::new(),
            presence: [SeatPresence::Ai; MAX_SEATS],
            stalls: StallWatch::default(),
            left: false,
            leaving: None,
            welcomed: false,
            final_tick: None,
            fault: None,
            stats: LockstepStats::default(),
            ai: AiOrders::default(),
            rtt_samples_seen: 0,
            told_timing: None,
            last_report_tick: None,
            arrivals: VecDeque::new(),
            replay: None,
        })
    }

    /// The tick an AI decision of `seat` made at tick `decided` is due on,
    /// or why it cannot be taken: no Welcome yet, not an AI seat, or late
    /// (its due tick already ran here).
    fn ai_due(&self, seat: u8, decided: u32) -> Result<u32> {
        let Some(welcome) = self.client.welcome() else {
            return Err(Error::State(
                "no AI orders before the relay's Welcome (it brings ai_order_delay)",
            ));
        };
        if seat >= welcome.seat_count || welcome.human_mask & (1 << seat) != 0 {
            return Err(Error::invalid_value(
                "seat",
                seat,
                format!(
                    "an AI seat of the match (below {} and not human: human mask {:#06x})",
                    welcome.seat_count, welcome.human_mask
                ),
            ));
        }
        let due = decided.saturating_add(u32::from(welcome.ai_order_delay));
        if let Some(frame) = self.frame.filter(|f| due <= *f) {
            return Err(Error::State("late: the AI order's tick already ran").detailed(format!(
                "the decision of tick {decided} is due on tick {due}, and frame {frame} already ran; begin a decision on its tick (begin_ai_decision) and its tick waits for it"
            )));
        }
        Ok(due)
    }

    pub(super) fn submit_ai_order(&mut self, seat: u8, bytes: &[u8]) -> Result<u32> {
        // Decided with the state after the last frame run: its tick is the next.
        let decided = self.frame.map_or(0, |f| f.saturating_add(1));
        self.submit_ai_order_at(seat, decided, bytes)
    }

    pub(super) fn submit_ai_order_at(
        &mut self,
        seat: u8,
        decided: u32,
        bytes: &[u8],
    ) -> Result<u32> {
        if bytes.len() > MAX_ORDER_BYTES {
            return Err(Error::invalid_value(
                "the AI order's length",
                bytes.len(),
                format!("at most {MAX_ORDER_BYTES} bytes, as a human order"),
            ));
        }
        let due = self.ai_due(seat, decided)?;
        self.ai.add(seat, due, bytes)?;
        Ok(due)
    }

    pub(super) fn begin_ai_decision(&mut self, seat: u8, decided: u32) -> Result<u32> {
        let due = self.ai_due(seat, decided)?;
        self.ai.begin(seat, decided, due)?;
        Ok(due)
    }

    pub(super) fn end_ai_decision(&mut self, seat: u8, decided: u32) -> Result<()> {
        let Some(welcome) = self.client.welcome() else {
            return Err(Error::State("no AI decision before the relay's Welcome"));
        };
        let due = decided.saturating_add(u32::from(welcome.ai_order_delay));
        self.ai.end(seat, decided, due)
    }

    /// The client (read-only): connection, horizon, counters.
    pub(super) fn client(&self) -> &RelayClient {
        &self.client
    }

    fn check_can_order(&self) -> Result<()> {
        if self.replay.is_some() {
            return Err(Error::State("a replay takes no orders: it runs a turn log"));
        }
        if self.left || self.leaving.is_some() {
            return Err(Error::State(
                "this player has left (or is leaving) the game",
            ));
        }
        Ok(())
    }

    /// The earliest tick an order sent now can run on: the relay sequences
    /// it on the earliest tick it has not broadcast.
    fn earliest_tick(&self) -> u32 {
        self.client.horizon().max(self.client.next_tick())
    }

    pub(super) fn submit_command(&mut self, bytes: &[u8]) -> Result<u32> {
        self.submit_order(OrderKind::Command, bytes)
            .map(|r| r.frame)
    }

    pub(super) fn submit_order(&mut self, kind: OrderKind, bytes: &[u8]) -> Result<OrderReceipt> {
        self.check_can_order()?;
        let id = match kind {
            OrderKind::Command => self.client.submit_order(bytes)?,
            OrderKind::Quit => {
                let id = self.client.quit_with_order(bytes)?;
                self.leaving = Some(id);
                id
            }
            OrderKind::Ephemeral => {
                self.client.submit_ephemeral(bytes)?;
                0
            }
        };
        Ok(OrderReceipt {
            id,
            frame: self.earliest_tick(),
        })
    }

    /// The state after `frame` is the state before tick `frame + 1`: the
    /// relay compares it when that tick is a multiple of the interval.
    pub(super) fn is_checksum_frame(&self, frame: u32) -> bool {
        self.checksum_interval > 0
            && frame
                .checked_add(1)
                .is_some_and(|tick| tick % self.checksum_interval == 0)
    }

    pub(super) fn submit_checksum(&mut self, frame: u32, checksum: u64) -> Result<()> {
        if !self.is_checksum_frame(frame) {
            return Err(Error::invalid_value(
                "frame",
                frame,
                format!(
                    "a frame F where F + 1 is a multiple of checksum_interval {}: behind a relay \
                     the state before every interval-th tick is compared (is_checksum_frame)",
                    self.checksum_interval
                ),
            ));
        }
        self.report_checksum(frame + 1, checksum);
        Ok(())
    }

    pub(super) fn submit_initial_checksum(&mut self, checksum: u64) -> Result<()> {
        if self.checksum_interval == 0 {
            return Err(Error::invalid_value(
                "checksum_interval",
                0u32,
                "positive for an initial checksum (0 turns checksums off)",
            ));
        }
        self.report_checksum(0, checksum);
        Ok(())
    }

    /// The state checksum before `tick`: to the relay, or against the turn
    /// log's record in a replay.
    fn report_checksum(&mut self, tick: u32, checksum: u64) {
        match self.replay.as_ref() {
            Some(replay) => {
                if let Some(seats) = replay.differing(tick, checksum) {
                    self.stats.desyncs += 1;
                    self.events
                        .push_back(SessionEvent::Desync { frame: tick, seats });
                }
            }
            None => self.client.report_checksum(tick, checksum),
        }
    }

    pub(super) fn leave(&mut self) -> Result<()> {
        if self.left || self.leaving.is_some() {
            return Err(Error::State("already left or leaving"));
        }
        self.submit_order(OrderKind::Quit, &[]).map(|_| ())
    }

    pub(super) fn handle_datagram(&mut self, now_us: u64, source: SocketAddr, datagram: &[u8]) {
        let measurements = &mut self.measurements;
        let horizon = self.client.horizon();
        self.client.handle_datagram(now_us, source, datagram);
        if self.client.horizon() > horizon {
            if self.arrivals.len() >= KEPT_ARRIVALS {
                self.arrivals.pop_front();
            }
            self.arrivals.push_back((self.client.horizon(), now_us));
        }
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
                            "the relay's match has other seats than this session (seat count or human seats differ)".into(),
                        );
                    } else if u32::from(welcome.checksum_interval) != self.checksum_interval {
                        self.fault = Some(format!(
                            "the relay's match compares checksums every {} ticks and this session's checksum_interval is {}: set it to the match's",
                            welcome.checksum_interval, self.checksum_interval
                        ));
                    }
                    if self.welcomed {
                        self.events.push_back(SessionEvent::LinkRecovered {
                            seat: RELAY_LINK_SEAT,
                        });
                    }
                    if reload {
                        self.frame = welcome.resume_from_tick.checked_sub(1);
                        // The engine reloads and recomputes its AI.
                        self.ai.clear();
                        self.arrivals.clear();
                        self.events.push_back(SessionEvent::PeerRestarted {
                            seat: RELAY_LINK_SEAT,
                        });
                    }
                    self.welcomed = true;
                }
                ClientEvent::Rejected(reason) => {
                    self.fault = Some(rejection(reason, self.client.relay_version()))
                }
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
                ClientEvent::OrderRefused { id, reason, quit } => {
                    if quit && self.leaving == Some(id) {
                        self.leaving = None; // the seat stays
                    }
                    self.events
                        .push_back(SessionEvent::CommandRefused { id, reason });
                }
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

    /// This machine's look-ahead at `tick`: the relay's plan for it, or its
    /// own jitter buffer in a match without a policy.
    fn look_ahead_at(&self, tick: u32) -> u8 {
        match self.client.timing_plan() {
            Some(plan) => plan.in_force(tick).look_ahead,
            None => self.jitter_ticks.clamp(1, 255) as u8,
        }
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

    /// The look-ahead tick `tick` needed (report::needs): its bundle came
    /// at `ready`, and it could have started up to `deadline` without a
    /// stall.
    fn measure_need(&mut self, tick: u32, now_us: u64, deadline_us: u64, tick_us: u64) {
        while self.arrivals.front().is_some_and(|a| a.0 <= tick) {
            self.arrivals.pop_front();
        }
        let Some(&(_, ready)) = self.arrivals.front() else {
            return; // came before this process held it (a resume)
        };
        let look_ahead = self.look_ahead_at(tick);
        let ready = ready.min(now_us);
        if let Ok(need) =
            crate::report::needed_look_ahead(look_ahead, deadline_us, ready, tick_us.max(1))
        {
            // Both within 1–250 by construction.
            let _ = self.measurements.add_frame_need(look_ahead, need);
        }
    }

    pub(super) fn advance(&mut self, now_us: u64) -> Result<Advance> {
        if self.left {
            return Ok(Advance::Left);
        }
        if let Some(fault) = &self.fault {
            return Err(Error::State("the relay session cannot go on").detailed(fault.clone()));
        }
        let next = self.client.next_tick();
        if self.final_tick.is_some_and(|last| next >= last) {
            self.left = true;
            return Ok(Advance::Left);
        }
        if self.ai.computing_by(next) != 0 {
            return Ok(Advance::Waiting); // the engine's own AI, not the network
        }
        let mut tick_us = 0;
        if self.replay.is_none() {
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
            tick_us = next
                .checked_sub(1)
                .and_then(|previous| self.due_match_us(previous))
                .map_or(0, |previous| due.saturating_sub(previous).max(0) as u64);
            let due_local = now_us.saturating_sub(u64::try_from(relay_now - due).unwrap_or(0));
            let deadline = self.stalls.stall_deadline(due_local, tick_us);
            self.measure_need(next, now_us, deadline, tick_us);
        }
        self.stalls
            .frame_starts(now_us, tick_us, &mut self.measurements, &mut self.stats);
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
                SeatTurn::Quit(bytes) => {
                    // The seat's quit order runs with its removal.
                    if !bytes.is_empty() {
                        self.executed.push(ExecutedCommand {
                            seat,
                            tag: turn.tick,
                            bytes,
                        });
                    }
                    self.remove(turn.tick, seat);
                }
                SeatTurn::Dropped => self.remove(turn.tick, seat),
                SeatTurn::Ai | SeatTurn::Null | SeatTurn::Gone => {}
            }
        }
        self.ephemeral.clear();
        self.ephemeral.extend(
            turn.ephemeral
                .into_iter()
                .map(|(seat, bytes)| ExecutedCommand {
                    seat,
                    tag: turn.tick,
                    bytes,
                }),
        );
        // AI orders due now (and any a late submission aimed before now).
        self.ai.take_due(turn.tick, &mut self.executed);
        // Seats in order; a seat's AI orders in submission order.
        self.executed.sort_by_key(|c| c.seat);
        self.announce_timing(turn.tick);
        self.frame = Some(turn.tick);
        let frequent = self.client.welcome().is_some_and(|w| w.frequent_reports);
        let report_now = report_due(
            frequent,
            turn.tick,
            self.measurements.unreported_stalls(),
            &mut self.last_report_tick,
        );
        if report_now && !self.left && self.replay.is_none() {
            self.client.report_timing(self.measurements.take_report());
        }
        Ok(if self.left {
            Advance::Left
        } else {
            Advance::Ran { frame: turn.tick }
        })
    }

    fn remove(&mut self, tick: u32, seat: u8) {
        self.events
            .push_back(SessionEvent::PlayerRemoved { frame: tick, seat });
        self.left |= seat == self.local_seat;
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

    /// The status behind a relay: this machine's plan's timing in force at
    /// the next frame and its latest change as the target; `idle` (the
    /// session's unused timing machine) fills what the relay does not
    /// announce.
    pub(super) fn timing_status(&self) -> (Status, bool) {
        (self.relay_timing_status(self.idle_machine.status()), false)
    }

    fn relay_timing_status(&self, idle: Status) -> Status {
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

    pub(super) fn ephemeral(&self) -> &[ExecutedCommand] {
        &self.ephemeral
    }

    pub(super) fn waiting_for(&self) -> u32 {
        let computing = self.ai.computing_by(self.client.next_tick());
        if self.next_is_held() {
            return computing;
        }
        (0..self.seat_count)
            .filter(|s| {
                matches!(
                    self.presence[usize::from(*s)],
                    SeatPresence::Loading | SeatPresence::Reconnecting
                )
            })
            .fold(computing, |mask, s| mask | 1 << s)
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
            + self
                .executed
                .iter()
                .chain(&self.ephemeral)
                .map(|c| c.bytes.len())
                .sum::<usize>()
            + self.ai.held_bytes()
            + self.arrivals.len() * 12
    }

    pub(super) fn machine(&self) -> &TimingMachine {
        &self.idle_machine
    }

    pub(super) fn endpoint(&self) -> &Endpoint {
        &self.idle_endpoint
    }

    pub(super) fn measurements(&mut self) -> &mut Measurements {
        &mut self.measurements
    }

    pub(super) fn local_seat(&self) -> u8 {
        self.local_seat
    }

    pub(super) fn is_replay(&self) -> bool {
        self.replay.is_some()
    }
}

/// Why the relay refused this seat for good, for `advance`'s error;
/// `relay_version`: the relay's protocol version, when its Reject was of
/// another version than this build's.
fn rejection(reason: RejectReason, relay_version: Option<u8>) -> String {
    let ours = crate::wire::relay::VERSION;
    match (reason, relay_version) {
        (RejectReason::WrongVersion, Some(theirs)) => {
            format!("the relay speaks relay protocol {theirs}; this build speaks {ours}")
        }
        // A relay of this build's version refuses only other versions: the
        // Hello it read was not this build's (a proxy rewrote it).
        (RejectReason::WrongVersion, None) => {
            format!("the relay refused this build's relay protocol {ours} as another version")
        }
        (reason, _) => rejection_text(reason).into(),
    }
}

/// The words for a refusal that names no version.
fn rejection_text(reason: RejectReason) -> &'static str {
    match reason {
        RejectReason::BadTicket => "the relay refused the ticket (bad ticket)",
        RejectReason::Expired => "the relay refused the ticket (expired)",
        RejectReason::WrongVersion => "the relay speaks another protocol version",
        RejectReason::SeatLeft => "the relay says this seat has left the match",
        RejectReason::MatchOver => "the relay says the match is over",
        RejectReason::UnknownMatch => "the relay has no match with the ticket's id",
        RejectReason::LogLost => {
            "the relay lost this match's turn log (it restarted without its state): the match cannot go on from here; restart it (from a saved game)"
        }
        RejectReason::Replayed | RejectReason::ConnectionIdTaken | RejectReason::RelayFull => {
            "the relay refused the connection"
        }
    }
}
