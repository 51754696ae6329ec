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
//! * **Pacing (S9).** Frame `F` is due when the relay's clock (estimated
//!   from pings) reaches tick `F + bundle_interval + jitter_ticks`: the
//!   bundle holding tick `F` left the relay `jitter_ticks` ticks earlier, so
//!   a one-way delay or jitter up to that much costs no stall. A machine
//!   behind (after a reconnect, a slow frame) finds its frames already due
//!   and catches up as fast as the engine runs them. Frame 0 waits for the
//!   first clock sample.
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

use std::collections::VecDeque;
use std::net::SocketAddr;

use super::{Advance, ExecutedCommand, LockstepStats, SessionEvent};
use crate::error::{Error, Result};
use crate::link::Transmit;
use crate::relay::sequencer::tick_start_ms;
use crate::relay::ticket::Credentials;
use crate::relay::{ClientConfig, ClientEvent, RelayClient, SeatTurn, RELAY_LINK_SEAT};
use crate::wire::relay::{RejectReason, SeatPresence, MAX_SEATS};

/// Ticks of jitter buffer by default (67 ms at 30 ticks/s).
pub const DEFAULT_JITTER_TICKS: u32 = 2;

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
    /// How far behind the relay's horizon frames run, in ticks (see the
    /// module docs).
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
    waiting_since: Option<u64>,
    left: bool,
    leaving: bool,
    welcomed: bool,
    /// The match ended: no tick at or after it.
    final_tick: Option<u32>,
    /// Why the session cannot go on (refused ticket, setup mismatch).
    fault: Option<&'static str>,
    stats: LockstepStats,
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
            waiting_since: None,
            left: false,
            leaving: false,
            welcomed: false,
            final_tick: None,
            fault: None,
            stats: LockstepStats::default(),
        })
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

    pub(super) fn handle_datagram(&mut self, now_us: u64, source: SocketAddr, datagram: &[u8]) {
        self.client.handle_datagram(now_us, source, datagram);
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

    /// Local time at which `tick` is due, once welcomed and pinged.
    fn due_local_us(&self, tick: u32) -> Option<u64> {
        let welcome = self.client.welcome()?;
        let offset = self.client.clock_offset_us()?;
        let delay = u32::from(welcome.bundle_interval).saturating_add(self.jitter_ticks);
        let match_us = tick_start_ms(tick.saturating_add(delay), welcome.tick_rate_millihz)
            .saturating_mul(1000);
        Some(
            i64::try_from(match_us)
                .unwrap_or(i64::MAX)
                .saturating_sub(offset)
                .max(0) as u64,
        )
    }

    fn next_is_held(&self) -> bool {
        self.client.next_tick() < self.client.horizon()
    }

    pub(super) fn advance(&mut self, now_us: u64) -> Result<Advance> {
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
        let Some(due) = self.due_local_us(next) else {
            return Ok(Advance::Waiting); // not welcomed, or no clock sample yet
        };
        if now_us < due {
            return Ok(Advance::NotDue { at_us: due });
        }
        if !self.next_is_held() {
            self.waiting_since.get_or_insert(now_us);
            return Ok(Advance::Waiting);
        }
        if let Some(since) = self.waiting_since.take() {
            self.stats.stalled_frames += 1;
            self.stats.stall_us += now_us.saturating_sub(since);
        }
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
        self.frame = Some(turn.tick);
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
        self.client.held_bytes() + self.executed.iter().map(|c| c.bytes.len()).sum::<usize>()
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
