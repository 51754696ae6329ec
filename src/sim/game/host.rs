//! Playing a game: one real [`LockstepSession`] per player, each on its own
//! drifting clock and with its own frame work, stepped event by event over
//! [`NetSim`] on the global virtual clock. The host issues the players'
//! commands, runs frames when the sessions allow, applies the faults,
//! carries datagrams, and tells each machine's [`MachineRecord`] what
//! happened; judging it is [`super::outcome`]'s business.

use std::collections::VecDeque;
use std::net::SocketAddr;

use super::outcome::{judge, Finished, GameReport, IssueLog, MachineRecord, Traffic};
use super::spec::GameSpec;
use super::{next_gap, CHECKSUM_INTERVAL, GAME_START_US};
use crate::error::{Error, Result};
use crate::link::LinkConfig;
use crate::report::record::MAX_SEATS;
use crate::session::{Advance, LockstepConfig, LockstepSession, SessionEvent, Topology};
use crate::sim::faults::{self, Attack, Fault};
use crate::sim::{Conditions, MachineClock, NetSim, Outage, SplitMix64};
use crate::timing::{MachineConfig, Output};
use crate::wire::packet::SessionKey;

/// One player's machine as the host runs it.
struct Machine {
    seat: u8,
    session: LockstepSession,
    address: SocketAddr,
    clock: MachineClock,
    busy_until_us: u64,
    wake_us: u64,
    /// When the session's next timer (transport, ping, frame) is due.
    timer_us: u64,
    /// Touched this iteration: its transmits and timers need a look.
    dirty: bool,
    crashed: bool,
    next_command_us: u64,
    /// Commands this player issued (the next command's id).
    commands: u32,
    /// Seats this machine's engine dropped (or is about to).
    dropped: [bool; MAX_SEATS],
    /// A modified client: not judged, only defended against.
    modified: bool,
    /// Crashing in the middle of its current turn: the transmit phase sends
    /// part of it, then the machine is gone.
    crash_mid_turn: bool,
    /// Datagrams this machine sent first, for a replay attack.
    captured: Vec<(SocketAddr, Vec<u8>)>,
    /// Restarted mid-game: a fresh session that cannot rejoin; not judged.
    restarted: bool,
    /// The session's frame and whether its player left, as of the machine's
    /// last step (only a step changes them): the host asks every iteration.
    frame: Option<u32>,
    left: bool,
    /// What it executed and suffered.
    record: MachineRecord,
}

impl Machine {
    /// Local clock at global time `t`.
    fn local(&self, t: u64) -> u64 {
        self.clock.local(t)
    }

    /// Global time at which the local clock reads `local` (rounded up).
    fn global(&self, local: u64) -> u64 {
        self.clock.global(local)
    }

    /// Still playing its part: not gone, not left, frames to go.
    fn is_active(&self, frames: u32) -> bool {
        !self.crashed
            && !self.restarted
            && !self.left
            && self.frame.map_or(true, |f| f + 1 < frames)
    }
}

/// The game's secrets, drawn from the seed: session id, key, link keys.
struct Secrets {
    key: SessionKey,
    session_id: u32,
}

impl Secrets {
    /// Game setup gives every pair of players its own link key (S8).
    fn pair_key(&self, a: u8, b: u8) -> SessionKey {
        let (lo, hi) = (a.min(b), a.max(b));
        let mut bytes = self.key.0;
        for (i, byte) in bytes.iter_mut().enumerate() {
            *byte ^= lo.wrapping_mul(17) ^ hi.wrapping_mul(29) ^ i as u8;
        }
        SessionKey(bytes)
    }

    /// The configuration of `seat`'s session in connection `epoch`.
    fn config(&self, spec: &GameSpec, seat: u8, epoch: u32) -> LockstepConfig {
        LockstepConfig {
            machine: MachineConfig {
                speed_fps: spec.fps,
                human_seats: vec![true; usize::from(spec.players)],
                local_seat: Some(seat),
                policy: spec.policy,
            },
            session_id: self.session_id,
            key: self.key,
            link_keys: (0..spec.players)
                .filter(|p| *p != seat)
                .map(|p| (p, self.pair_key(seat, p)))
                .collect(),
            epoch,
            link: LinkConfig::default(),
            checksum_interval: CHECKSUM_INTERVAL,
            topology: Topology::PeerToPeer,
        }
    }
}

fn address(player: u8) -> SocketAddr {
    SocketAddr::from(([10, 0, 0, player + 1], 4000))
}

/// Everything but the machines: the network, the seeded randomness, the
/// faults, the issued commands and the counters.
struct World<'s> {
    spec: &'s GameSpec,
    rng: SplitMix64,
    net: NetSim,
    secrets: Secrets,
    faults: Vec<Fault>,
    issued: IssueLog,
    /// Where every player is now, as the lobby knows it.
    addresses: Vec<SocketAddr>,
    /// Drops an engine decided on: (when, by whom, whom).
    pending_drops: VecDeque<(u64, u8, u8)>,
    traffic: Traffic,
    /// Commands stop some frames before the end so that all of them execute.
    last_issue_frame: u32,
    buf: Vec<u8>,
    datagram: Vec<u8>,
    now: u64,
}

/// One game being played.
pub(super) struct Host<'s> {
    machines: Vec<Machine>,
    world: World<'s>,
}

impl<'s> Host<'s> {
    /// Set up the network, the secrets and every machine of `spec` (valid).
    pub(super) fn new(spec: &'s GameSpec) -> Result<Host<'s>> {
        let mut rng = SplitMix64::new(spec.seed);
        let mut net = NetSim::new(rng.next_u64(), Conditions::PERFECT);
        configure_network(spec, &mut net);
        let faults = spec.all_faults();
        let secrets = Secrets {
            key: SessionKey([rng.next_u64() as u8 | 1; 16]),
            session_id: rng.next_u64() as u32,
        };
        let mut machines = Vec::with_capacity(usize::from(spec.players));
        for seat in 0..spec.players {
            let config = secrets.config(spec, seat, 1);
            // Clocks: up to 2000 s apart, drifting up to ±100 ppm.
            let clock = MachineClock::draw(&mut rng);
            let local_now = clock.local(0);
            let mut machine = Machine {
                seat,
                session: LockstepSession::new(&config, local_now)?,
                address: address(seat),
                clock,
                busy_until_us: 0,
                wake_us: GAME_START_US,
                timer_us: 0,
                dirty: true,
                crashed: false,
                next_command_us: 0,
                commands: 0,
                dropped: [false; MAX_SEATS],
                modified: faults
                    .iter()
                    .any(|f| f.seat() == seat && matches!(f, Fault::Attack { .. })),
                crash_mid_turn: false,
                captured: Vec::new(),
                restarted: false,
                frame: None,
                left: false,
                record: MachineRecord::new(seat, spec.fps),
            };
            for peer in (0..spec.players).filter(|p| *p != seat) {
                machine.session.add_peer(peer, address(peer), local_now)?;
            }
            machine.next_command_us = GAME_START_US + next_gap(&mut rng, spec.commands_per_minute);
            machines.push(machine);
        }
        Ok(Host {
            machines,
            world: World {
                spec,
                rng,
                net,
                secrets,
                faults,
                issued: IssueLog::new(spec.players),
                addresses: (0..spec.players).map(address).collect(),
                pending_drops: VecDeque::new(),
                traffic: Traffic {
                    packets: 0,
                    bytes: 0,
                    duration_ms: 0.0,
                },
                last_issue_frame: spec.frames.saturating_sub(300),
                buf: vec![0u8; 1500],
                datagram: Vec::with_capacity(1500),
                now: 0,
            },
        })
    }

    /// Play until no machine has frames left to play; an error when the
    /// game stops making progress (or a session refuses what it must take).
    pub(super) fn run(&mut self) -> Result<()> {
        let spec = self.world.spec;
        let frame_us = 1_000_000 / u64::from(spec.fps);
        let horizon_us = GAME_START_US + (u64::from(spec.frames) * frame_us) * 40 + 600_000_000;
        while self.machines.iter().any(|m| m.is_active(spec.frames)) {
            if self.world.now > horizon_us {
                self.explain_stall();
                return Err(Error::State(
                    "the game stalled: no progress within the simulation horizon",
                ));
            }
            self.deliver();
            // Machines that are gone: crashed, or restarted (their old session is).
            let mut gone = [false; MAX_SEATS];
            for (seat, m) in gone.iter_mut().zip(&self.machines) {
                *seat = m.crashed || m.restarted;
            }
            for m in self.machines.iter_mut().filter(|m| !m.crashed) {
                self.world.issue_commands(m);
                if self.world.now < m.wake_us {
                    continue;
                }
                self.world.step(m, &gone)?;
            }
            self.apply_drops();
            // Only machines touched this iteration can have something to send
            // or a new timer.
            for m in self.machines.iter_mut().filter(|m| !m.crashed && m.dirty) {
                self.world.transmit(m);
            }
            // The next moment anything happens.
            let mut next = self.world.net.next_delivery_us().unwrap_or(u64::MAX);
            for m in self.machines.iter().filter(|m| !m.crashed) {
                next = next.min(m.wake_us).min(m.next_command_us);
            }
            self.world.now = next.max(self.world.now + 1);
        }
        Ok(())
    }

    /// Deliver every datagram due now.
    fn deliver(&mut self) {
        let world = &mut self.world;
        let now = world.now;
        while let Some((_, from, to)) = world.net.poll_delivery_into(now, &mut world.datagram) {
            if let Some(m) = self.machines.iter_mut().find(|m| m.address == to) {
                if !m.crashed {
                    let local = m.local(now);
                    m.session.handle_datagram(local, from, &world.datagram);
                    m.wake_us = m.wake_us.min(now);
                    m.dirty = true;
                }
            }
        }
    }

    /// The engines drop the players they decided to drop.
    fn apply_drops(&mut self) {
        while let Some((_, by, seat)) = self.world.pending_drops.pop_front() {
            if let Some(m) = self
                .machines
                .iter_mut()
                .find(|m| m.seat == by && !m.crashed && !m.restarted)
            {
                let _ = m.session.drop_player(seat);
                m.dirty = true;
            }
        }
    }

    fn explain_stall(&self) {
        for m in &self.machines {
            let state = if m.crashed {
                "crashed"
            } else if m.session.has_left() {
                "left"
            } else {
                "running"
            };
            eprintln!(
                "rungs-sim: seat {} {state} at frame {:?}, waiting for seats {:#b}",
                m.seat,
                m.session.frame(),
                m.session.waiting_for()
            );
        }
    }

    /// Judge the game played.
    pub(super) fn judge(&self) -> GameReport {
        let finished: Vec<Finished<'_>> = self
            .machines
            .iter()
            .map(|m| {
                let stats = m.session.stats();
                Finished {
                    record: &m.record,
                    stayed: !m.crashed && !m.restarted && !m.session.has_left() && !m.modified,
                    honest: !m.modified && !m.restarted,
                    vanished: m.crashed || m.restarted,
                    desyncs: stats.desyncs,
                    refused_items: stats.refused_items,
                }
            })
            .collect();
        judge(
            self.world.spec,
            &finished,
            &self.world.issued,
            &self.world.traffic,
        )
    }
}

/// Every path's conditions, with every change at the spikes' edges, and the
/// outages.
fn configure_network(spec: &GameSpec, net: &mut NetSim) {
    let change_points = spec.condition_changes_ms();
    for a in 0..spec.players {
        for b in (0..spec.players).filter(|b| *b != a) {
            for at_ms in &change_points {
                net.set_conditions(
                    address(a),
                    address(b),
                    GAME_START_US + at_ms * 1000,
                    spec.path_conditions(a, b, *at_ms),
                );
            }
        }
    }
    for outage in &spec.outages {
        let start_us = GAME_START_US + outage.start_ms * 1000;
        let end_us = start_us + outage.duration_ms * 1000;
        match outage.player {
            None => net.add_outage(Outage {
                from: None,
                to: None,
                start_us,
                end_us,
            }),
            Some(p) => {
                for (from, to) in [(Some(address(p)), None), (None, Some(address(p)))] {
                    net.add_outage(Outage {
                        from,
                        to,
                        start_us,
                        end_us,
                    });
                }
            }
        }
    }
}

impl World<'_> {
    /// The commands the player issues by now.
    fn issue_commands(&mut self, m: &mut Machine) {
        let now = self.now;
        let issuing = m.frame.map_or(true, |f| f < self.last_issue_frame);
        while m.next_command_us <= now && !m.left && issuing {
            if self.submit(m, &[0u8; 5]) {
                m.dirty = true;
            }
            m.next_command_us += next_gap(&mut self.rng, self.spec.commands_per_minute).max(1);
        }
        if !issuing {
            m.next_command_us = u64::MAX;
        }
    }

    /// Submit the player's next command: `template` with the seat in byte 0
    /// and the command id in bytes 1–4 (so execution order can be checked).
    /// Whether the session took it; a refusal is counted.
    fn submit(&mut self, m: &mut Machine, template: &[u8]) -> bool {
        let mut command = [0u8; 5];
        let mut long = Vec::new();
        let bytes: &mut [u8] = if template.len() <= command.len() {
            &mut command
        } else {
            long.extend_from_slice(template);
            &mut long
        };
        bytes[0] = m.seat;
        bytes[1..5].copy_from_slice(&m.commands.to_le_bytes());
        if m.session.submit_command(bytes).is_err() {
            m.record.commands_refused += 1;
            return false;
        }
        self.issued.issue(m.seat, self.now);
        m.commands += 1;
        true
    }

    /// A machine whose wake time has come: timers, the next frame when due,
    /// the session's events.
    fn step(&mut self, m: &mut Machine, gone: &[bool]) -> Result<()> {
        let now = self.now;
        m.dirty = true;
        let local = m.local(now);
        if now >= m.timer_us {
            m.session.handle_timeout(local);
        }
        // Recomputed below: when this machine next needs attention.
        m.wake_us = if now < GAME_START_US {
            GAME_START_US
        } else {
            m.busy_until_us.max(now + 1)
        };
        if now >= m.busy_until_us && now >= GAME_START_US {
            match m.session.advance(local)? {
                Advance::Ran { frame } => {
                    self.frame_ran(m, frame)?;
                    m.wake_us = m.busy_until_us;
                }
                Advance::NotDue { at_us } => m.wake_us = m.global(at_us).max(now + 1),
                // A datagram (or a transport timer) is what releases a waiting frame.
                Advance::Waiting | Advance::Left => m.wake_us = u64::MAX,
            }
        }
        self.handle_events(m, gone);
        let stats = m.session.stats();
        m.record
            .note_stalls(stats.stalled_frames, stats.stall_us, now);
        m.frame = m.session.frame();
        m.left = m.session.has_left();
        Ok(())
    }

    /// The machine ran `frame`: its work, its executed commands, its
    /// checksum, and the faults due on it.
    fn frame_ran(&mut self, m: &mut Machine, frame: u32) -> Result<()> {
        let now = self.now;
        let work = u64::from(self.spec.proc_of(m.seat));
        m.session.measurements().add_frame_work_us(work);
        m.busy_until_us = now + work;
        self.issued.frame_started(m.seat, now);
        let judged = !m.modified && !m.restarted;
        for command in m.session.executed() {
            m.record
                .executed(frame, command, judged, &mut self.issued, now);
        }
        if self
            .spec
            .diverge
            .is_some_and(|(seat, at)| seat == m.seat && frame == at)
        {
            m.record.state_hash ^= 0x5eed; // this machine's simulation goes wrong here
        }
        if frame % CHECKSUM_INTERVAL == 0 {
            let _ = m.session.submit_checksum(frame, m.record.state_hash);
        }
        self.traffic.duration_ms = self
            .traffic
            .duration_ms
            .max((now - GAME_START_US) as f64 / 1000.0);
        m.record.max_held_bytes = m.record.max_held_bytes.max(m.session.held_bytes());
        for index in 0..self.faults.len() {
            let fault = self.faults[index];
            if fault.seat() == m.seat && fault.frame() == frame {
                self.apply_fault(m, fault)?;
            }
        }
        Ok(())
    }

    fn apply_fault(&mut self, m: &mut Machine, fault: Fault) -> Result<()> {
        let now = self.now;
        match fault {
            Fault::Quit { .. } => m.session.leave()?,
            Fault::Crash {
                mid_turn: false, ..
            } => m.crashed = true,
            Fault::Crash { mid_turn: true, .. } => m.crash_mid_turn = true,
            Fault::Burst {
                commands, bytes, ..
            } => {
                let template = vec![0u8; usize::from(bytes).max(5)];
                for _ in 0..commands {
                    self.submit(m, &template);
                }
            }
            Fault::Restart { .. } => {
                let local = m.local(now);
                let mut session =
                    LockstepSession::new(&self.secrets.config(self.spec, m.seat, 2), local)?;
                for peer in (0..self.spec.players).filter(|p| *p != m.seat) {
                    session.add_peer(peer, self.addresses[usize::from(peer)], local)?;
                }
                m.session = session;
                m.restarted = true;
                m.next_command_us = u64::MAX;
            }
            Fault::Move { .. } => {
                let moved = SocketAddr::from(([10, 0, 1, m.seat + 1], 4000));
                for other in self.addresses.iter().filter(|a| **a != m.address) {
                    for (from, to) in [(moved, *other), (*other, moved)] {
                        let conditions = self.net.conditions(
                            if from == moved { m.address } else { from },
                            if to == moved { m.address } else { to },
                            now,
                        );
                        self.net.set_conditions(from, to, now, conditions);
                    }
                }
                m.address = moved;
                // The lobby knows where everyone is now.
                self.addresses[usize::from(m.seat)] = moved;
            }
            Fault::Attack {
                attack: Attack::Replay,
                ..
            } => {
                for (to, datagram) in &m.captured {
                    self.net.send(now, m.address, *to, datagram);
                }
            }
            Fault::Attack { attack, .. } => {
                faults::attack(&mut m.session, m.seat, self.spec.players, attack)?;
            }
        }
        Ok(())
    }

    /// What the session told its engine: timing changes for the record,
    /// lost links and restarts the engine answers by dropping the player.
    fn handle_events(&mut self, m: &mut Machine, gone: &[bool]) {
        let now = self.now;
        while let Some(event) = m.session.poll_event() {
            match event {
                SessionEvent::Timing(Output::TimingChanged { frame, timing }) => {
                    m.record.timing_changed(frame, timing, now);
                }
                SessionEvent::Timing(Output::FrameRateChanged { frame, fps }) => {
                    m.record.frame_rate_changed(frame, fps, now);
                }
                SessionEvent::LinkLost { seat } => {
                    m.record.links_lost += 1;
                    // The engine drops a player whose machine is gone.
                    let ends_machine = self
                        .faults
                        .iter()
                        .any(|f| f.seat() == seat && f.ends_machine());
                    if ends_machine && gone[usize::from(seat)] && !m.dropped[usize::from(seat)] {
                        m.dropped[usize::from(seat)] = true;
                        self.pending_drops.push_back((now, m.seat, seat));
                    }
                }
                // A restarted machine cannot rejoin: the engine drops it.
                SessionEvent::PeerRestarted { seat } if !m.dropped[usize::from(seat)] => {
                    m.dropped[usize::from(seat)] = true;
                    self.pending_drops.push_back((now, m.seat, seat));
                }
                SessionEvent::PlayerRemoved { seat, .. } => {
                    m.record.removed_seen[usize::from(seat)] = true;
                }
                _ => {}
            }
        }
    }

    /// Send what the machine has to send, and note its next timer.
    fn transmit(&mut self, m: &mut Machine) {
        let now = self.now;
        m.dirty = false;
        let local = m.local(now);
        // Mid-turn crash: the k-th peer in seat order gets only the
        // first k datagrams.
        let mut sent_to: Vec<(SocketAddr, usize)> = Vec::new();
        while let Some(transmit) = m.session.poll_transmit(local, &mut self.buf) {
            if m.crash_mid_turn {
                let rank = self
                    .addresses
                    .iter()
                    .filter(|a| **a != m.address && **a <= transmit.destination)
                    .count();
                let entry = match sent_to.iter_mut().find(|(a, _)| *a == transmit.destination) {
                    Some(e) => e,
                    None => {
                        sent_to.push((transmit.destination, 0));
                        sent_to.last_mut().expect("just pushed")
                    }
                };
                if entry.1 >= rank {
                    continue;
                }
                entry.1 += 1;
            }
            self.traffic.packets += 1;
            self.traffic.bytes += transmit.len as u64;
            if m.captured.len() < 8 {
                m.captured
                    .push((transmit.destination, self.buf[..transmit.len].to_vec()));
            }
            self.net.send(
                now,
                m.address,
                transmit.destination,
                &self.buf[..transmit.len],
            );
        }
        if m.crash_mid_turn {
            m.crashed = true;
            return;
        }
        m.timer_us = m
            .session
            .poll_timeout()
            .map_or(u64::MAX, |due| m.global(due).max(now + 1));
        // A machine busy with a frame's work does nothing else until it is
        // done (datagrams still arrive and are handled as they come).
        m.wake_us = m.wake_us.min(m.timer_us).max(m.busy_until_us);
    }
}
