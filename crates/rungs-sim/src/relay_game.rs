//! Relay games on the simulated network (`rungs-sim --topology relay`): the
//! same [`GameSpec`] played by [`LockstepSession`]s in the relay topology
//! (S10) through a [`Relay`], so peer-to-peer and relay can be compared on
//! the same network.
//!
//! The model, where it differs from [`super::game`]:
//! - **Placement.** Each player's path to the relay has a one-way delay
//!   ([`RelayPlacement`]); by default a quarter of the player's round trip
//!   (spikes included), so the way from one player through the relay to
//!   another is as long as the direct path of the peer-to-peer game: a relay
//!   "in the middle". `--relay-ms` places it elsewhere. Jitter, loss,
//!   duplication and reordering apply to every relay path as to every
//!   peer-to-peer path; outages to the named player's relay path.
//! - **Frames** are relay ticks: the match runs at `--fps` ticks per second,
//!   a bundle every tick. The relay is the master, per seat: the game's
//!   `--policy` is the match setup's timing policy, run on each client's
//!   reports alone; its look-ahead is how far behind the horizon that
//!   machine runs (its own jitter buffer), so a near player does not pay for
//!   a far one. A machine slower than the rate falls behind on its own (the
//!   setup does not pace the match to its slowest machine). The report's
//!   timeline is machine 0's view of it; [`RelayCheck::seats`] has each
//!   machine's own figures.
//! - **Machines.** As in the peer-to-peer game: each frame takes `--proc-ms`
//!   of the machine's CPU (the machine runs nothing else meanwhile and
//!   reports it), and each machine's clock has an offset and a drift
//!   ([`MachineClock`]), so its clock sync to the relay (S9) has work to do.
//! - **Faults**: crashes (the relay drops the seat after its reconnect
//!   grace, 10 s here), quits, command bursts and address moves (NAT
//!   rebinding) on their frames. Restarts and a modified client's attacks
//!   are not modelled here (the relay's own tests cover them): such a spec
//!   is refused.
//! - **Physical floor** of a command: the worst one-way delay from its
//!   issuer through the relay to any other player, plus mean jitter on both
//!   legs, plus one frame.
//!
//! Stepped a millisecond at a time on a virtual clock, deterministic from
//! the seed.

use std::net::SocketAddr;

use super::faults::Fault;
use super::game::spec::next_gap;
use super::game::{fnv, GameSpec};
use super::machine_clock::MachineClock;
use super::{Conditions, GameReport, NetSim, Outage, SplitMix64};
use rungs_core::error::{Error, Result};
use rungs_core::relay::ticket::{issue, LobbySecret, TicketFields};
use rungs_core::relay::{MatchSetup, Relay, RelayConfig};
use rungs_core::report::MAX_SEATS;
use rungs_core::session::{Advance, LockstepConfig, LockstepSession, RelaySettings, SessionEvent};
use rungs_core::timing::{MachineConfig, Output};

/// State checksums every this many frames, as in the peer-to-peer game.
const CHECKSUM_INTERVAL: u32 = 64;
const MATCH_ID: u64 = 1;
/// The Unix time the relay checks tickets against.
const UNIX_NOW_S: u64 = 1_800_000_000;
/// The relay drops a seat this long after its connection was lost.
const RECONNECT_GRACE_US: u64 = 10_000_000;
const STEP_US: u64 = 1000;
/// The relay's address on the simulated network.
const RELAY_ADDRESS: SocketAddr = SocketAddr::V4(std::net::SocketAddrV4::new(
    std::net::Ipv4Addr::new(10, 0, 0, 250),
    7000,
));

/// Where the relay sits: one-way delay from each player, ms (one value
/// applies to all); empty for the default (see the module docs).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RelayPlacement {
    pub one_way_ms: Vec<u32>,
}

impl RelayPlacement {
    /// One-way delay between `player` and the relay at game time `at_ms`, µs.
    pub fn one_way_us(&self, spec: &GameSpec, player: u8, at_ms: u64) -> u64 {
        let given = self
            .one_way_ms
            .get(usize::from(player))
            .or(self.one_way_ms.first());
        match given {
            Some(ms) => u64::from(*ms) * 1000,
            // Half of the path a player would have to itself: rtt / 4.
            None => spec.one_way_us(player, player, at_ms) / 2,
        }
    }
}

struct Player {
    seat: u8,
    address: SocketAddr,
    clock: MachineClock,
    /// True time until which the machine's CPU is busy with a frame.
    busy_until_us: u64,
    crashed: bool,
    /// Its player quit, and the quit executed.
    left: bool,
    /// Seats whose removal this machine executed.
    removed: u16,
    session: LockstepSession,
    frames_run: u32,
    next_command_us: u64,
    /// Issue time of each of its commands, by id.
    issued_at: Vec<u64>,
    /// Its own commands' latency on its own machine, ms.
    latencies_ms: Vec<f64>,
    log_hash: u64,
    state_hash: u64,
    executed: u64,
    next_expected: [u32; MAX_SEATS],
    out_of_order: bool,
    links_lost: u64,
    max_held_bytes: usize,
    last_frame_us: u64,
}

/// Play `spec` through a relay placed by `placement`.
pub fn run_relay_game(spec: &GameSpec, placement: &RelayPlacement) -> Result<GameReport> {
    play(spec, placement, &[]).map(|(report, _)| report)
}

/// What the machines saw of the relay's clock (S9) and timing (S4).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RelayCheck {
    /// The largest difference between a machine's applied offset to the
    /// relay clock and the true one, µs, over the second half of the game.
    pub worst_clock_error_us: i64,
    /// Every machine that played on saw the same clock (frame rate)
    /// changes on the same ticks; look-aheads are each machine's own.
    pub clocks_agree: bool,
    /// Machine 0's timing changes: (tick, send period, look-ahead, fps).
    pub timeline: Vec<(u32, u8, u8, u8)>,
    /// Each machine's own figures, by seat.
    pub seats: Vec<SeatFigures>,
}

/// One machine's figures in a relay game.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SeatFigures {
    /// Its seat.
    pub seat: u8,
    /// Its own commands, issue to execution on its own machine: mean and
    /// p95, ms.
    pub latency_mean_ms: f64,
    pub latency_p95_ms: f64,
    /// Frames it stalled, and for how long in all, ms.
    pub stall_frames: u64,
    pub stall_ms: f64,
    /// Its look-ahead (jitter buffer) at the end, ticks.
    pub look_ahead: u8,
    /// The widest it had, ticks.
    pub widest_look_ahead: u8,
}

/// [`run_relay_game`] with the given clocks for the first machines (the
/// others draw theirs), and what the machines saw of the relay's clock and
/// timing.
pub fn play(
    spec: &GameSpec,
    placement: &RelayPlacement,
    clocks: &[MachineClock],
) -> Result<(GameReport, RelayCheck)> {
    if spec.players == 0 || usize::from(spec.players) > MAX_SEATS || spec.frames == 0 {
        return Err(Error::invalid(
            "a relay game's players and frames",
            "1 to 16 players and at least one frame",
        ));
    }
    if spec.policy.original_game().is_some() {
        return Err(Error::invalid(
            "a relay game's policy",
            "none of ra, protocol0 and protocol0-ts: they are the original games' peer-to-peer engines, which a relay game cannot play",
        ));
    }
    let faults = relay_faults(spec)?;
    let players = spec.players;
    let mut rng = SplitMix64::new(spec.seed);
    let mut net = NetSim::new(rng.next_u64(), Conditions::PERFECT);
    let relay_address = RELAY_ADDRESS;
    let address = |p: u8| SocketAddr::from(([10, 0, 0, p + 1], 4000));
    // Where a player's machine moves to (NAT rebinding).
    let moved = |p: u8| SocketAddr::from(([10, 0, 1, p + 1], 4001));
    let mut change_points: Vec<u64> = vec![0];
    for spike in &spec.spikes {
        change_points.extend([spike.start_ms, spike.start_ms + spike.duration_ms]);
    }
    change_points.sort_unstable();
    change_points.dedup();
    for p in 0..players {
        for at_ms in &change_points {
            let conditions = Conditions {
                delay_us: placement.one_way_us(spec, p, *at_ms),
                jitter_us: u64::from(spec.jitter_ms) * 1000,
                loss_ppm: spec.loss_ppm,
                duplicate_ppm: spec.duplicate_ppm,
                reorder_ppm: spec.reorder_ppm,
                reorder_extra_us: if spec.reorder_ppm > 0 { 50_000 } else { 0 },
            };
            let at_us = at_ms * 1000;
            for a in [address(p), moved(p)] {
                net.set_conditions(a, relay_address, at_us, conditions);
                net.set_conditions(relay_address, a, at_us, conditions);
            }
        }
    }
    for outage in &spec.outages {
        let start_us = outage.start_ms * 1000;
        let end_us = start_us + outage.duration_ms * 1000;
        let paths = match outage.player {
            Some(p) => vec![Some(address(p)), Some(moved(p))],
            None => vec![None],
        };
        for a in paths {
            net.add_outage(Outage {
                from: a,
                to: None,
                start_us,
                end_us,
            });
            net.add_outage(Outage {
                from: None,
                to: a,
                start_us,
                end_us,
            });
        }
    }
    let secret = LobbySecret::new([(rng.next_u64() as u8) | 1; 16])?;
    let mut relay = Relay::new(RelayConfig::new(secret))?;
    relay.add_match(
        MatchSetup {
            tick_rate_millihz: u32::from(spec.fps) * 1000,
            timing_policy: Some(spec.policy),
            checksum_interval: CHECKSUM_INTERVAL as u16,
            reconnect_grace_us: RECONNECT_GRACE_US,
            max_ticks: spec.frames.saturating_add(u32::from(spec.fps) * 60),
            ..MatchSetup::new(MATCH_ID, players, ((1u32 << players) - 1) as u16)
        },
        0,
    )?;
    let mut machines = Vec::with_capacity(usize::from(players));
    for seat in 0..players {
        let credentials = issue(
            &secret,
            &TicketFields {
                match_id: MATCH_ID,
                seat,
                expires_unix_s: UNIX_NOW_S + 86_400,
                nonce: u64::from(seat),
            },
        )?;
        let config = LockstepConfig::relay(
            MachineConfig::adaptive(spec.fps, vec![true; usize::from(players)], Some(seat)),
            CHECKSUM_INTERVAL,
            RelaySettings::new(relay_address, credentials, rng.next_u64()),
        );
        let clock = match clocks.get(usize::from(seat)) {
            Some(clock) => *clock,
            None => MachineClock::draw(&mut rng),
        };
        let mut session = LockstepSession::new(&config, clock.local(0))?;
        // The initial state (every machine's hash starts at the same value).
        session.submit_initial_checksum(0xCBF2_9CE4_8422_2325)?;
        machines.push(Player {
            seat,
            address: address(seat),
            clock,
            busy_until_us: 0,
            crashed: false,
            left: false,
            removed: 0,
            session,
            frames_run: 0,
            next_command_us: next_gap(&mut rng, spec.commands_per_minute),
            issued_at: Vec::new(),
            latencies_ms: Vec::new(),
            log_hash: 0xCBF2_9CE4_8422_2325,
            state_hash: 0,
            executed: 0,
            next_expected: [0; MAX_SEATS],
            out_of_order: false,
            links_lost: 0,
            max_held_bytes: 0,
            last_frame_us: 0,
        });
    }
    let frame_us = 1_000_000 / u64::from(spec.fps);
    let mean_jitter_us = u64::from(spec.jitter_ms) * 1000 / 2;
    // (latency ms, floor ms, game ms at issue) of every executed command.
    let mut latencies: Vec<(f64, f64, f64)> = Vec::new();
    let mut stall_events: Vec<Vec<(f64, f64)>> = vec![Vec::new(); usize::from(players)];
    let mut timelines: Vec<Timeline> = (0..players).map(|_| Timeline::default()).collect();
    let mut worst_clock_error_us = 0i64;
    let (mut packets, mut bytes) = (0u64, 0u64);
    let mut buf = vec![0u8; 1500];
    let mut datagram = Vec::new();
    let deadline_us = (u64::from(spec.frames) * frame_us).saturating_mul(4) + 120_000_000;
    let settled_us = u64::from(spec.frames) * frame_us / 2;
    let mut now = 0u64;
    while machines.iter().any(|m| m.playing(spec.frames)) {
        now += STEP_US;
        if now > deadline_us {
            return Err(Error::State("the relay game did not finish in time"));
        }
        deliver(&mut net, &mut relay, &mut machines, now, &mut datagram);
        while relay.poll_event().is_some() {}
        for m in machines.iter_mut().filter(|m| m.playing(spec.frames)) {
            let local = m.clock.local(now);
            if now >= m.next_command_us && m.frames_run + u32::from(spec.fps) < spec.frames {
                m.issue(now, 0);
                m.next_command_us = now + next_gap(&mut rng, spec.commands_per_minute);
            }
            if now < m.busy_until_us {
                m.session.handle_timeout(local);
                continue; // the CPU is still on the last frame
            }
            let stall_before = m.session.stats().stall_us;
            let mut ran = Vec::new();
            let wake = m
                .session
                .update(local, |frame, c| ran.push((frame, c.seat, c.bytes.clone())))?;
            for (frame, seat, bytes) in ran {
                m.log_hash = fnv(fnv(m.log_hash, &frame.to_le_bytes()), &bytes);
                m.executed += 1;
                let Some(id) = bytes
                    .get(1..5)
                    .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                else {
                    continue;
                };
                let expected = &mut m.next_expected[usize::from(seat)];
                m.out_of_order |= id != *expected;
                *expected = id + 1;
                if seat == m.seat {
                    let issued = m.issued_at.get(id as usize).copied().unwrap_or(now);
                    let floor_us = (0..players)
                        .filter(|p| *p != seat)
                        .map(|p| {
                            let at_ms = issued / 1000;
                            placement.one_way_us(spec, seat, at_ms)
                                + placement.one_way_us(spec, p, at_ms)
                                + 2 * mean_jitter_us
                        })
                        .max()
                        .unwrap_or(0)
                        + frame_us;
                    let latency_ms = now.saturating_sub(issued) as f64 / 1000.0;
                    m.latencies_ms.push(latency_ms);
                    latencies.push((latency_ms, floor_us as f64 / 1000.0, issued as f64 / 1000.0));
                }
            }
            while let Some(event) = m.session.poll_event() {
                match event {
                    SessionEvent::LinkLost { .. } => m.links_lost += 1,
                    SessionEvent::PlayerRemoved { seat, .. } => m.removed |= 1 << seat,
                    SessionEvent::Timing(output) => {
                        timelines[usize::from(m.seat)].note(output, now)
                    }
                    _ => {}
                }
            }
            let frame = match wake.advance {
                Advance::Ran { frame } => frame,
                Advance::Left => {
                    m.left = true;
                    continue;
                }
                Advance::NotDue { .. } | Advance::Waiting => continue,
            };
            let work = u64::from(per_player(&spec.proc_us, m.seat));
            m.session.measurements().add_frame_work_us(work);
            m.busy_until_us = now + work;
            let stalled = m.session.stats().stall_us - stall_before;
            if stalled > 0 {
                stall_events[usize::from(m.seat)]
                    .push((now as f64 / 1000.0, stalled as f64 / 1000.0));
            }
            m.frames_run = frame + 1;
            m.last_frame_us = now;
            m.state_hash = match spec.diverge {
                Some((seat, from)) if seat == m.seat && frame >= from => m.log_hash ^ 1,
                _ => m.log_hash,
            };
            if m.session.is_checksum_frame(frame) {
                m.session.submit_checksum(frame, m.state_hash)?;
            }
            m.max_held_bytes = m.max_held_bytes.max(m.session.held_bytes());
            if now >= settled_us {
                if let Some(true_offset) = relay
                    .sequencer(MATCH_ID)
                    .map(|s| s.match_clock_us(now) - m.clock.local(now) as i64)
                {
                    let error = (m.session.clock_offset_us() - true_offset).abs();
                    worst_clock_error_us = worst_clock_error_us.max(error);
                }
            }
            let seat = m.seat;
            for fault in faults.iter().filter(|f| fault_at(f) == Some((seat, frame))) {
                match *fault {
                    Fault::Crash { .. } => m.crashed = true,
                    Fault::Quit { .. } => {
                        let _ = m.session.leave();
                    }
                    Fault::Burst {
                        commands, bytes, ..
                    } => {
                        for _ in 0..commands {
                            m.issue(now, usize::from(bytes));
                        }
                    }
                    Fault::Move { .. } => m.address = moved(m.seat),
                    _ => {}
                }
            }
        }
        while let Some((to, len)) = relay.poll_transmit(now, &mut buf) {
            net.send(now, relay_address, to, &buf[..len]);
            packets += 1;
            bytes += len as u64;
        }
        for m in machines.iter_mut().filter(|m| !m.crashed) {
            let local = m.clock.local(now);
            while let Some(t) = m.session.poll_transmit(local, &mut buf) {
                net.send(now, m.address, t.destination, &buf[..t.len]);
                packets += 1;
                bytes += t.len as u64;
            }
        }
    }
    // Let desync notices for the last checksums arrive.
    for _ in 0..2000 {
        now += STEP_US;
        deliver(&mut net, &mut relay, &mut machines, now, &mut datagram);
        while let Some((to, len)) = relay.poll_transmit(now, &mut buf) {
            net.send(now, relay_address, to, &buf[..len]);
        }
        for m in machines.iter_mut().filter(|m| !m.crashed) {
            let local = m.clock.local(now);
            m.session.handle_timeout(local);
            while m.session.poll_transmit(local, &mut buf).is_some() {}
        }
    }
    let mut report = report(spec, &machines, stall_events, latencies, packets, bytes);
    let played_on = |m: &&Player| !m.crashed && !m.left;
    let rates = |seat: u8| -> Vec<(u32, u8)> {
        let t = &timelines[usize::from(seat)];
        let mut rates: Vec<(u32, u8)> = t.entries.iter().map(|e| (e.0, e.3)).collect();
        rates.dedup_by_key(|r| r.1);
        rates
    };
    let check = RelayCheck {
        worst_clock_error_us,
        clocks_agree: {
            let reference = machines.iter().find(played_on).map_or(0, |m| m.seat);
            machines
                .iter()
                .filter(played_on)
                .all(|m| rates(m.seat) == rates(reference))
        },
        timeline: timelines[0].entries.clone(),
        seats: machines
            .iter()
            .map(|m| {
                let mut sorted = m.latencies_ms.clone();
                sorted.sort_by(f64::total_cmp);
                let stats = m.session.stats();
                SeatFigures {
                    seat: m.seat,
                    latency_mean_ms: sorted.iter().sum::<f64>() / sorted.len().max(1) as f64,
                    latency_p95_ms: sorted
                        .get((sorted.len() * 95 / 100).min(sorted.len().saturating_sub(1)))
                        .copied()
                        .unwrap_or(0.0),
                    stall_frames: stats.stalled_frames,
                    stall_ms: stats.stall_us as f64 / 1000.0,
                    look_ahead: m.session.timing_status().0.timing.look_ahead(),
                    widest_look_ahead: timelines[usize::from(m.seat)]
                        .entries
                        .iter()
                        .map(|e| e.2)
                        .max()
                        .unwrap_or(0),
                }
            })
            .collect(),
    };
    let first = std::mem::take(&mut timelines[0]);
    report.timeline = first.entries;
    report.timeline_at_ms = first.at_ms;
    Ok((report, check))
}

/// The faults of `spec` a relay game models (see the module docs).
fn relay_faults(spec: &GameSpec) -> Result<Vec<Fault>> {
    if !spec.timed_faults.is_empty() {
        return Err(Error::invalid(
            "a relay game's crashes and quits",
            "on frames only (--crash SEAT@FRAME)",
        ));
    }
    let mut all = spec.faults.clone();
    if let Some((seat, frame, how)) = spec.departure {
        all.push(match how {
            super::Departure::Quit => Fault::Quit { seat, frame },
            super::Departure::Crash => Fault::Crash {
                seat,
                frame,
                mid_turn: false,
            },
        });
    }
    for fault in &all {
        match fault {
            Fault::Restart { .. } | Fault::Attack { .. } => {
                return Err(Error::invalid(
                    "a relay game's faults",
                    "no restarts or attacks (the relay's own tests model them)",
                ))
            }
            Fault::Crash { mid_turn: true, .. } => {
                return Err(Error::invalid(
                    "a relay game's crashes",
                    "not in the middle of a turn (relay games have no turns to crash in)",
                ))
            }
            _ => {}
        }
    }
    Ok(all)
}

/// The seat and frame a fault strikes on.
fn fault_at(fault: &Fault) -> Option<(u8, u32)> {
    match *fault {
        Fault::Crash { seat, frame, .. }
        | Fault::Quit { seat, frame }
        | Fault::Burst { seat, frame, .. }
        | Fault::Move { seat, frame }
        | Fault::Restart { seat, frame } => Some((seat, frame)),
        Fault::Attack { .. } => None,
    }
}

fn per_player(values: &[u32], player: u8) -> u32 {
    values
        .get(usize::from(player))
        .or(values.last())
        .copied()
        .unwrap_or(0)
}

/// Machine 0's timing changes, as the report's timeline.
#[derive(Default)]
struct Timeline {
    entries: Vec<(u32, u8, u8, u8)>,
    at_ms: Vec<f64>,
    current: (u8, u8, u8),
}

impl Timeline {
    fn note(&mut self, output: Output, now_us: u64) {
        let frame = match output {
            Output::TimingChanged { frame, timing } => {
                self.current.0 = timing.send_period();
                self.current.1 = timing.look_ahead();
                frame
            }
            Output::FrameRateChanged { frame, fps } => {
                self.current.2 = fps;
                frame
            }
            _ => return,
        };
        let (sp, la, fps) = self.current;
        if self.entries.last().is_some_and(|e| e.0 == frame) {
            self.entries.pop();
            self.at_ms.pop();
        }
        self.entries.push((frame, sp, la, fps));
        self.at_ms.push(now_us as f64 / 1000.0);
    }
}

impl Player {
    /// Still running frames: not crashed, not left, not done.
    fn playing(&self, frames: u32) -> bool {
        !self.crashed && !self.left && self.frames_run < frames
    }

    /// Submit the next command (padded to `size` bytes) at true time `now`.
    fn issue(&mut self, now: u64, size: usize) {
        let id = self.issued_at.len() as u32;
        let mut command = [&[self.seat][..], &id.to_le_bytes()[..]].concat();
        command.resize(size.max(command.len()), 0);
        if self.session.submit_command(&command).is_ok() {
            self.issued_at.push(now);
        }
    }
}

/// Hand every datagram due at `now` to the relay or its player, and fire
/// the relay's timers.
fn deliver(
    net: &mut NetSim,
    relay: &mut Relay,
    machines: &mut [Player],
    now: u64,
    datagram: &mut Vec<u8>,
) {
    while let Some((_, from, to)) = net.poll_delivery_into(now, datagram) {
        if to == RELAY_ADDRESS {
            relay.handle_datagram(now, UNIX_NOW_S, from, datagram);
        } else if let Some(m) = machines.iter_mut().find(|m| m.address == to && !m.crashed) {
            m.session
                .handle_datagram(m.clock.local(now), from, datagram);
        }
    }
    if relay.poll_timeout().is_some_and(|t| t <= now) {
        relay.handle_timeout(now);
    }
}

fn report(
    spec: &GameSpec,
    machines: &[Player],
    stall_events: Vec<Vec<(f64, f64)>>,
    mut latencies: Vec<(f64, f64, f64)>,
    packets: u64,
    bytes: u64,
) -> GameReport {
    let count = latencies.len().max(1) as f64;
    let latency_mean_ms = latencies.iter().map(|l| l.0).sum::<f64>() / count;
    let floor_mean_ms = latencies.iter().map(|l| l.1).sum::<f64>() / count;
    let floor_samples = latencies.iter().map(|l| (l.2, l.1)).collect();
    latencies.sort_by(|a, b| a.0.total_cmp(&b.0));
    let p95 = latencies
        .get((latencies.len() * 95 / 100).min(latencies.len().saturating_sub(1)))
        .map_or(0.0, |l| l.0);
    // Survivors: machines that neither crashed nor left; the reference is
    // the first of them.
    let survivors = || machines.iter().filter(|m| !m.crashed && !m.left);
    let reference = survivors().next().unwrap_or(&machines[0]);
    let worst = survivors()
        .max_by_key(|m| m.session.stats().stall_us)
        .unwrap_or(reference);
    let crashed = machines
        .iter()
        .filter(|m| m.crashed)
        .fold(0u16, |mask, m| mask | 1 << m.seat);
    let issued: u64 = machines.iter().map(|m| m.issued_at.len() as u64).sum();
    let executed_per_seat = |seat: u8| u64::from(reference.next_expected[usize::from(seat)]);
    GameReport {
        frames: spec.frames,
        latency_mean_ms,
        latency_p95_ms: p95,
        latency_max_ms: latencies.last().map_or(0.0, |l| l.0),
        floor_mean_ms,
        commands_below_floor: latencies.iter().filter(|l| l.0 < l.1).count() as u64,
        stall_frames: worst.session.stats().stalled_frames,
        stall_ms: worst.session.stats().stall_us as f64 / 1000.0,
        desyncs: machines
            .iter()
            .map(|m| m.session.stats().desyncs)
            .max()
            .unwrap_or(0),
        commands_issued: issued,
        commands_executed: reference.executed,
        packets,
        bytes,
        timeline: Vec::new(),
        timeline_at_ms: Vec::new(),
        stall_events: stall_events[usize::from(worst.seat)].clone(),
        floor_samples,
        duration_ms: machines.iter().map(|m| m.last_frame_us).max().unwrap_or(0) as f64 / 1000.0,
        logs_identical: survivors()
            .all(|m| m.log_hash == reference.log_hash && m.executed == reference.executed),
        commands_in_order: machines.iter().all(|m| !m.out_of_order),
        links_lost: machines.iter().map(|m| m.links_lost).sum(),
        refused_items: 0,
        refused_messages: 0,
        forged_executed: 0,
        unexpected_removals: 0,
        max_held_bytes: machines.iter().map(|m| m.max_held_bytes).max().unwrap_or(0),
        commands_refused: 0,
        vanished_dropped: survivors().all(|m| m.removed & crashed == crashed),
        // A crashed machine's orders the relay never accepted die with it.
        commands_lost: machines
            .iter()
            .filter(|m| !m.crashed)
            .map(|m| (m.issued_at.len() as u64).saturating_sub(executed_per_seat(m.seat)))
            .sum(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_relay_game_executes_every_command_once_everywhere() {
        let mut spec = GameSpec::new(4, 300, 30, 60);
        spec.jitter_ms = 10;
        spec.commands_per_minute = 240;
        let report = run_relay_game(&spec, &RelayPlacement::default()).unwrap();
        assert!(report.logs_identical);
        assert!(report.commands_in_order);
        assert_eq!(report.commands_lost, 0);
        assert!(report.commands_issued > 20, "{}", report.commands_issued);
        assert_eq!(report.commands_executed, report.commands_issued);
        assert_eq!(report.desyncs, 0);
        // Through the relay: at least the floor, never faster than physics.
        assert!(report.latency_mean_ms >= report.floor_mean_ms - 1.0);
    }

    #[test]
    fn a_spike_on_one_players_path_widens_only_that_players_buffer() {
        // A spike on player 2's path makes the relay's policy widen player
        // 2's jitter buffer and narrow it again afterwards; the others'
        // buffers follow their own calm paths, and every machine keeps the
        // same clock.
        let mut spec = GameSpec::new(4, 1800, 30, 80);
        spec.spikes.push(super::super::Spike {
            rtt_ms: 600,
            start_ms: 15_000,
            duration_ms: 10_000,
            player: Some(2),
        });
        let (report, check) = play(&spec, &RelayPlacement::default(), &[]).unwrap();
        assert!(check.clocks_agree, "{:?}", check.timeline);
        assert!(report.logs_identical && report.commands_in_order);
        assert_eq!(report.commands_lost, 0);
        let calm = check.seats[0].latency_p95_ms;
        let spiked = check.seats[2].latency_p95_ms;
        assert!(
            spiked > calm + 100.0,
            "the spiked player's buffer widened ({spiked} ms p95), the calm one's not ({calm} ms)"
        );
        let far = &check.seats[2];
        assert!(
            far.look_ahead < far.widest_look_ahead,
            "and narrowed again: {far:?}"
        );
        for near in [0, 1, 3] {
            assert!(
                check.seats[near].widest_look_ahead < far.widest_look_ahead,
                "{:?}",
                check.seats
            );
        }
    }

    #[test]
    fn tracking_behind_a_relay_sheds_its_margin_on_the_ticks_needs() {
        // The clients report the look-ahead each tick needed (the needs
        // layout), so the relay's `tracking` sheds the starting frame of
        // margin as soon as the needs vouch for it — as peer-to-peer — not
        // only after 1024 calm ticks (what a report without needs allows).
        let mut spec = GameSpec::new(4, 1800, 30, 60);
        spec.policy = rungs_core::timing::PolicyKind::Tracking;
        let (report, check) = play(&spec, &RelayPlacement::default(), &[]).unwrap();
        assert_eq!(report.stall_frames, 0);
        let shed = check
            .timeline
            .iter()
            .find(|e| e.2 == 1)
            .map(|e| e.0)
            .expect("down to one tick of look-ahead");
        assert!(shed < 1024, "shed at tick {shed}: {:?}", check.timeline);
    }

    #[test]
    fn a_slow_machine_slows_only_itself() {
        // Machine 3 needs 45 ms a frame at 30 frames a second: it falls
        // behind on its own; the others keep the rate without a stall.
        let mut spec = GameSpec::new(4, 900, 30, 60);
        spec.proc_us = vec![1_000, 1_000, 1_000, 45_000];
        let (report, check) = play(&spec, &RelayPlacement::default(), &[]).unwrap();
        assert!(report.logs_identical && report.commands_in_order);
        assert!(
            check.timeline.iter().all(|e| e.3 == 30),
            "{:?}",
            check.timeline
        );
        for fast in &check.seats[..3] {
            assert_eq!(fast.stall_frames, 0, "{fast:?}");
            assert!(fast.latency_mean_ms < 200.0, "{fast:?}");
        }
        assert!(
            check.seats[3].latency_mean_ms > 2.0 * check.seats[0].latency_mean_ms,
            "{:?}",
            check.seats
        );
    }

    #[test]
    fn clock_sync_follows_drifting_clocks_to_the_relay() {
        // Clocks 1500 s apart drifting ±100 ppm (6 ms a minute apart): each
        // machine's slewed offset to the relay clock stays within a few ms of
        // the truth once it settled (S9).
        let clocks = [
            MachineClock {
                offset_us: 1_500_000_000,
                drift_ppm: 100,
            },
            MachineClock {
                offset_us: 3,
                drift_ppm: -100,
            },
            MachineClock {
                offset_us: 777_000_000,
                drift_ppm: 0,
            },
        ];
        let mut spec = GameSpec::new(3, 3600, 30, 80);
        spec.jitter_ms = 10;
        let (report, check) = play(&spec, &RelayPlacement::default(), &clocks).unwrap();
        assert!(
            check.worst_clock_error_us < 5_000,
            "worst error {} µs",
            check.worst_clock_error_us
        );
        assert_eq!(report.stall_frames, 0, "paced on the relay clock: no stall");
    }

    #[test]
    fn crashes_quits_bursts_and_moves_lose_nothing() {
        let mut spec = GameSpec::new(4, 900, 30, 60);
        spec.faults = vec![
            Fault::Burst {
                seat: 0,
                frame: 100,
                commands: 40,
                bytes: 200,
            },
            Fault::Move {
                seat: 1,
                frame: 200,
            },
            Fault::Crash {
                seat: 3,
                frame: 150,
                mid_turn: false,
            },
        ];
        spec.departure = Some((2, 400, super::super::Departure::Quit));
        let report = run_relay_game(&spec, &RelayPlacement::default()).unwrap();
        assert!(report.logs_identical && report.commands_in_order);
        assert_eq!(report.commands_lost, 0);
        assert!(report.vanished_dropped, "the crashed seat was dropped");
        spec.faults = vec![Fault::Restart { seat: 0, frame: 10 }];
        assert!(run_relay_game(&spec, &RelayPlacement::default()).is_err());
    }

    #[test]
    fn a_diverging_machine_is_caught() {
        let mut spec = GameSpec::new(3, 200, 30, 40);
        spec.diverge = Some((1, 100));
        let report = run_relay_game(&spec, &RelayPlacement::default()).unwrap();
        assert!(report.desyncs > 0);
    }
}
