//! Playing a game: one real [`LockstepSession`] per player, each on its own
//! drifting clock and with its own frame work, stepped event by event over
//! [`NetSim`] on the global virtual clock. The host issues the players'
//! commands, runs frames when the sessions allow, applies the faults,
//! carries datagrams, and tells each machine's [`MachineRecord`] what
//! happened; judging it is [`super::outcome`]'s business.
//!
//! A machine's step touches only the machine and what [`Outside`] gives
//! it (the commands' randomness and the network): played in order, that is
//! the world itself; in a parallel window ([`super::parallel`]) it is what
//! the window drew beforehand and a list of datagrams to send afterwards.

use std::net::SocketAddr;

use super::engine::Engine;
use super::outcome::{
    judge, Credit, Finished, GameReport, IssueLog, MachineRecord, OwnIssues, Traffic,
};
use super::spec::{next_gap, GameSpec, CHECKSUM_INTERVAL, GAME_START_US};
use crate::classic::{ClassicConfig, ClassicEngine};
use crate::faults::{self, Attack, Fault, TimedFault, TimedKind};
use crate::lobby::LobbyPings;
use crate::{Conditions, HostId, MachineClock, NetSim, Outage, SplitMix64};
use rungs_core::error::{Error, Result};
use rungs_core::link::LinkConfig;
use rungs_core::report::MAX_SEATS;
use rungs_core::session::{Advance, LockstepConfig, LockstepSession, SessionEvent, Topology};
use rungs_core::timing::baselines::lobby::lobby_timing;
use rungs_core::timing::{MachineConfig, Output, PolicyKind};
use rungs_core::wire::SessionKey;

/// One player's machine as the host runs it.
pub(super) struct Machine {
    pub(super) seat: u8,
    session: Engine,
    pub(super) address: SocketAddr,
    clock: MachineClock,
    busy_until_us: u64,
    pub(super) wake_us: u64,
    /// When the session's next timer (transport, ping, frame) is due.
    timer_us: u64,
    /// Touched this iteration: its transmits and timers need a look.
    pub(super) dirty: bool,
    crashed: bool,
    pub(super) next_command_us: u64,
    /// Commands this player issued (the next command's id).
    commands: u32,
    /// Seats this machine's engine dropped (or is about to).
    dropped: [bool; MAX_SEATS],
    /// Seats its engine decided to drop this iteration, in decision order.
    pending_drops: Vec<u8>,
    /// A modified client: not judged, only defended against.
    modified: bool,
    /// Crashing in the middle of its current turn: the transmit phase sends
    /// part of it, then the machine is gone.
    crash_mid_turn: bool,
    /// Datagrams this machine sent first, for a replay attack.
    captured: Vec<(SocketAddr, Vec<u8>)>,
    /// Restarted mid-game: a fresh session that cannot rejoin; not judged.
    restarted: bool,
    /// The commands its player issued.
    issues: OwnIssues,
    /// Executions of commands to credit to their issuers.
    pub(super) credits: Vec<Credit>,
    /// What it sent, and its last frame.
    traffic: Traffic,
    /// The session's frame and whether its player left, as of the machine's
    /// last step (only a step changes them): the host asks every iteration.
    pub(super) frame: Option<u32>,
    pub(super) left: bool,
    /// What it executed and suffered.
    record: MachineRecord,
    /// Where its datagrams are written before they are sent.
    buf: Vec<u8>,
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
    pub(super) fn is_active(&self, frames: u32) -> bool {
        !self.crashed
            && !self.restarted
            && !self.left
            && self.frame.map_or(true, |f| f + 1 < frames)
    }
}

/// The player who hosts the game's lobby and sets `lobby`'s delay from the
/// pings it shows him (his own with each player).
const LOBBY_HOST: u8 = 0;

/// The game's secrets, drawn from the seed: session id, key, link keys;
/// and the policy its sessions run (`lobby` resolved into its fixed timing).
struct Secrets {
    key: SessionKey,
    session_id: u32,
    policy: PolicyKind,
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
                policy: self.policy,
            },
            session_id: self.session_id,
            key: self.key,
            link_keys: (0..spec.players)
                .filter(|p| *p != seat)
                .map(|p| (p, self.pair_key(seat, p)))
                .collect(),
            epoch,
            link: LinkConfig {
                liveness_timeout_us: spec.liveness_timeout_ms().map(|ms| ms * 1000),
                ..LinkConfig::default()
            },
            checksum_interval: CHECKSUM_INTERVAL,
            topology: Topology::PeerToPeer,
            manual_drops: spec.manual_drops,
        }
    }
}

fn address(player: u8) -> SocketAddr {
    SocketAddr::from(([10, 0, 0, player + 1], 4000))
}

/// What every machine's step reads and nothing changes during the game.
pub(super) struct Rules<'s> {
    pub(super) spec: &'s GameSpec,
    secrets: Secrets,
    pub(super) faults: Vec<Fault>,
    /// The crashes and quits placed in time, in time order, with the global
    /// time each is due.
    timed: Vec<(u64, TimedFault)>,
    /// Commands stop some frames before the end so that all of them execute.
    pub(super) last_issue_frame: u32,
}

/// Where a machine's step reaches outside the machine.
pub(super) trait Outside {
    /// The wait before `seat`'s next command, µs (at least 1): the game's
    /// command randomness, one stream drawn in play order.
    fn command_gap(&mut self, seat: u8) -> u64;
    /// The machine at `addresses.0` sends `datagram` to `addresses.1` at
    /// `now`; `seats`:
    /// the sender's seat, and the addressee's when it is a player's (the
    /// address is then the one the lobby knows for it, or was).
    fn send(
        &mut self,
        now: u64,
        addresses: (SocketAddr, SocketAddr),
        seats: (u8, Option<u8>),
        datagram: &[u8],
    );
    /// Where every player is, as the lobby knows it.
    fn addresses(&self) -> &[SocketAddr];
    /// The network and the lobby's addresses, for a machine that moves:
    /// only in-order play has them (parallel windows play no faults).
    fn lobby(&mut self) -> Option<(&mut NetSim, &mut Vec<SocketAddr>)>;
}

/// The world outside the machines: the seeded command randomness, the
/// network and where everyone is. In-order play's [`Outside`].
pub(super) struct Lobby {
    rng: SplitMix64,
    pub(super) net: NetSim,
    /// Where every player is now, as the lobby knows it.
    pub(super) addresses: Vec<SocketAddr>,
    commands_per_minute: u32,
    /// Per seat, the address its datagrams last came from or went to and
    /// the network's id of it.
    hosts: Vec<Option<(SocketAddr, HostId)>>,
}

impl Lobby {
    /// The network's id of `address`, a seat's (as far as the caller
    /// knows): remembered per seat, so the network's search by address runs
    /// only when a seat's address is new.
    fn host_of(&mut self, seat: Option<u8>, address: SocketAddr) -> HostId {
        let Some(known) = seat.and_then(|s| self.hosts.get_mut(usize::from(s))) else {
            return self.net.host_id(address);
        };
        match *known {
            Some((at, host)) if at == address => host,
            _ => {
                let host = self.net.host_id(address);
                *known = Some((address, host));
                host
            }
        }
    }

    /// The wait before the next command of any player, µs (at least 1).
    pub(super) fn draw_command_gap(&mut self) -> u64 {
        next_gap(&mut self.rng, self.commands_per_minute).max(1)
    }
}

impl Outside for Lobby {
    fn command_gap(&mut self, _seat: u8) -> u64 {
        self.draw_command_gap()
    }

    fn send(
        &mut self,
        now: u64,
        (from, to): (SocketAddr, SocketAddr),
        (from_seat, to_seat): (u8, Option<u8>),
        datagram: &[u8],
    ) {
        let from = self.host_of(Some(from_seat), from);
        let to = self.host_of(to_seat, to);
        self.net.send_copy_between(now, from, to, datagram);
    }

    fn addresses(&self) -> &[SocketAddr] {
        &self.addresses
    }

    fn lobby(&mut self) -> Option<(&mut NetSim, &mut Vec<SocketAddr>)> {
        Some((&mut self.net, &mut self.addresses))
    }
}

/// The machines and the world they play in.
pub(super) struct Play {
    /// Boxed: a parallel window moves them to its jobs and back, a pointer
    /// each rather than a few kilobytes.
    #[allow(clippy::vec_box)]
    pub(super) machines: Vec<Box<Machine>>,
    pub(super) lobby: Lobby,
    datagram: Vec<u8>,
    pub(super) now: u64,
    /// The next of the rules' timed faults to apply.
    next_timed: usize,
}

/// One game being played.
pub(super) struct Host<'s> {
    pub(super) rules: Rules<'s>,
    pub(super) play: Play,
}

impl<'s> Host<'s> {
    /// Set up the network, the secrets and every machine of `spec` (valid).
    pub(super) fn new(spec: &'s GameSpec) -> Result<Host<'s>> {
        let mut rng = SplitMix64::new(spec.seed);
        let mut net = NetSim::new(rng.next_u64(), Conditions::PERFECT);
        configure_network(spec, &mut net);
        let faults = spec.all_faults();
        let mut timed: Vec<(u64, TimedFault)> = spec
            .timed_faults
            .iter()
            .map(|f| (GAME_START_US + f.at_ms * 1000, *f))
            .collect();
        timed.sort_by_key(|(at, f)| (*at, f.seat));
        let lobby = LobbyPings::measure(spec);
        let secrets = Secrets {
            key: SessionKey([rng.next_u64() as u8 | 1; 16]),
            session_id: rng.next_u64() as u32,
            policy: match spec.policy {
                PolicyKind::Lobby => {
                    PolicyKind::Fixed(lobby_timing(lobby.pairs_of(LOBBY_HOST), spec.fps))
                }
                policy => policy,
            },
        };
        let mut machines = Vec::with_capacity(usize::from(spec.players));
        for seat in 0..spec.players {
            let config = secrets.config(spec, seat, 1);
            // Clocks: up to 2000 s apart, drifting up to ±100 ppm.
            let clock = MachineClock::draw(&mut rng);
            let local_now = clock.local(0);
            let session = match spec.policy.original_game() {
                Some(game) => Engine::Classic(Box::new(ClassicEngine::new(&ClassicConfig {
                    game,
                    seat,
                    players: spec.players,
                    speed_fps: spec.fps,
                    peers: (0..spec.players)
                        .filter(|p| *p != seat)
                        .map(|p| (p, address(p)))
                        .collect(),
                    lobby_response_ticks: lobby.response_ticks_of(seat),
                })?)),
                None => {
                    let mut session = LockstepSession::new(&config, local_now)?;
                    for peer in (0..spec.players).filter(|p| *p != seat) {
                        session.add_peer(peer, address(peer), local_now)?;
                    }
                    Engine::Rungs(session)
                }
            };
            let mut machine = Box::new(Machine {
                seat,
                session,
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
                pending_drops: Vec::new(),
                modified: faults
                    .iter()
                    .any(|f| f.seat() == seat && matches!(f, Fault::Attack { .. })),
                crash_mid_turn: false,
                captured: Vec::new(),
                restarted: false,
                issues: OwnIssues::default(),
                credits: Vec::new(),
                traffic: Traffic::default(),
                frame: None,
                left: false,
                record: MachineRecord::new(seat, spec.fps),
                buf: vec![0u8; 1500],
            });
            machine.next_command_us = GAME_START_US + next_gap(&mut rng, spec.commands_per_minute);
            machines.push(machine);
        }
        Ok(Host {
            rules: Rules {
                spec,
                secrets,
                faults,
                timed,
                last_issue_frame: spec.frames.saturating_sub(300),
            },
            play: Play {
                machines,
                lobby: Lobby {
                    rng,
                    net,
                    addresses: (0..spec.players).map(address).collect(),
                    commands_per_minute: spec.commands_per_minute,
                    hosts: vec![None; usize::from(spec.players)],
                },
                datagram: Vec::with_capacity(1500),
                now: 0,
                next_timed: 0,
            },
        })
    }

    /// Play until no machine has frames left to play; an error when the
    /// game stops making progress (or a session refuses what it must take).
    pub(super) fn run(&mut self) -> Result<()> {
        while self.play.playing(&self.rules) {
            self.play.check_progress(&self.rules)?;
            self.play.iteration(&self.rules)?;
        }
        Ok(())
    }

    /// Judge the game played.
    pub(super) fn judge(&self) -> GameReport {
        self.play.judge(&self.rules)
    }
}

impl Play {
    /// Whether any machine still has frames to play.
    pub(super) fn playing(&self, rules: &Rules<'_>) -> bool {
        self.machines.iter().any(|m| m.is_active(rules.spec.frames))
    }

    /// An error once the game is past the simulation horizon: it stopped
    /// making progress.
    pub(super) fn check_progress(&self, rules: &Rules<'_>) -> Result<()> {
        let spec = rules.spec;
        let frame_us = 1_000_000 / u64::from(spec.fps);
        let horizon_us = GAME_START_US + (u64::from(spec.frames) * frame_us) * 40 + 600_000_000;
        if self.now > horizon_us {
            self.explain_stall();
            return Err(Error::State(
                "the game stalled: no progress within the simulation horizon",
            ));
        }
        Ok(())
    }

    /// Play the moment `now`: deliver, issue, step, drop, transmit; then
    /// move `now` on to the next moment anything happens.
    pub(super) fn iteration(&mut self, rules: &Rules<'_>) -> Result<()> {
        let now = self.now;
        self.apply_timed_faults(rules);
        self.deliver();
        // Machines that are gone: crashed, or restarted (their old session is).
        let mut gone = [false; MAX_SEATS];
        for (seat, m) in gone.iter_mut().zip(&self.machines) {
            *seat = m.crashed || m.restarted;
        }
        for m in self.machines.iter_mut().filter(|m| !m.crashed) {
            rules.issue_commands(m, now, &mut self.lobby);
            if now < m.wake_us {
                continue;
            }
            rules.step(m, now, &gone, &mut self.lobby)?;
        }
        self.apply_drops();
        // Only machines touched this iteration can have something to send
        // or a new timer.
        for m in self.machines.iter_mut().filter(|m| !m.crashed && m.dirty) {
            transmit(m, now, &mut self.lobby);
        }
        self.settle_credits();
        let next_timed = rules
            .timed
            .get(self.next_timed)
            .map_or(u64::MAX, |(at, _)| *at);
        self.now = self.next_moment().min(next_timed).max(now + 1);
        Ok(())
    }

    /// The crashes and quits due by now, whatever the machines are doing.
    fn apply_timed_faults(&mut self, rules: &Rules<'_>) {
        while let Some((at, fault)) = rules.timed.get(self.next_timed) {
            if *at > self.now {
                break;
            }
            self.next_timed += 1;
            let m = &mut self.machines[usize::from(fault.seat)];
            if m.crashed || m.restarted || m.left {
                continue;
            }
            match fault.kind {
                TimedKind::Crash => m.crashed = true,
                TimedKind::Quit => {
                    // Refused only when it already left or is leaving (the
                    // spec gives the original games' engines no faults).
                    if let Ok(session) = m.session.rungs_mut() {
                        let _ = session.leave();
                    }
                    m.dirty = true;
                }
            }
        }
    }

    /// The next moment anything happens: a delivery, a machine's wake-up or
    /// a player's command.
    pub(super) fn next_moment(&self) -> u64 {
        let mut next = self.lobby.net.next_delivery_us().unwrap_or(u64::MAX);
        for m in self.machines.iter().filter(|m| !m.crashed) {
            next = next.min(m.wake_us).min(m.next_command_us);
        }
        next
    }

    /// Deliver every datagram due now.
    fn deliver(&mut self) {
        let now = self.now;
        while let Some((_, from, to)) = self.lobby.net.poll_delivery_into(now, &mut self.datagram) {
            if let Some(m) = self.machines.iter_mut().find(|m| m.address == to) {
                if !m.crashed {
                    deliver(m, now, from, &self.datagram);
                }
            }
        }
    }

    /// The engines drop the players they decided to drop.
    fn apply_drops(&mut self) {
        for m in self.machines.iter_mut() {
            if m.pending_drops.is_empty() {
                continue;
            }
            let drops = std::mem::take(&mut m.pending_drops);
            if !m.crashed && !m.restarted {
                for seat in &drops {
                    if let Ok(session) = m.session.rungs_mut() {
                        let _ = session.drop_player(*seat);
                    }
                    m.dirty = true;
                }
            }
            m.pending_drops = drops;
            m.pending_drops.clear();
        }
    }

    /// Credit the commands the machines executed to their issuers.
    pub(super) fn settle_credits(&mut self) {
        for at in 0..self.machines.len() {
            if self.machines[at].credits.is_empty() {
                continue;
            }
            let credits = std::mem::take(&mut self.machines[at].credits);
            for credit in &credits {
                if let Some(issuer) = self.machines.get_mut(usize::from(credit.from)) {
                    issuer.issues.credit(credit);
                }
            }
            self.machines[at].credits = credits;
            self.machines[at].credits.clear();
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
    fn judge(&self, rules: &Rules<'_>) -> GameReport {
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
                    refused_messages: stats.refused_messages,
                }
            })
            .collect();
        let traffic: Vec<Traffic> = self.machines.iter().map(|m| m.traffic).collect();
        judge(
            rules.spec,
            &finished,
            &IssueLog::new(self.machines.iter().map(|m| &m.issues)),
            &traffic,
        )
    }
}

/// A datagram from `from` reaches machine `m` at `now`.
pub(super) fn deliver(m: &mut Machine, now: u64, from: SocketAddr, datagram: &[u8]) {
    let local = m.local(now);
    m.session.handle_datagram(local, from, datagram);
    m.wake_us = m.wake_us.min(now);
    m.dirty = true;
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

impl Rules<'_> {
    /// Whether the player of `m` still issues commands (it stops some frames
    /// before the end, so that all of them execute).
    pub(super) fn issuing(&self, m: &Machine) -> bool {
        m.frame.map_or(true, |f| f < self.last_issue_frame)
    }

    /// The commands the player issues by now.
    pub(super) fn issue_commands(&self, m: &mut Machine, now: u64, out: &mut impl Outside) {
        let issuing = self.issuing(m);
        while m.next_command_us <= now && !m.left && issuing {
            if self.submit(m, &[0u8; 5], now) {
                m.dirty = true;
            }
            m.next_command_us += out.command_gap(m.seat);
        }
        if !issuing {
            m.next_command_us = u64::MAX;
        }
    }

    /// Submit the player's next command: `template` with the seat in byte 0
    /// and the command id in bytes 1–4 (so execution order can be checked).
    /// Whether the session took it; a refusal is counted.
    fn submit(&self, m: &mut Machine, template: &[u8], now: u64) -> bool {
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
        m.issues.issue(now);
        m.commands += 1;
        true
    }

    /// A machine whose wake time has come: timers, the next frame when due,
    /// the session's events.
    pub(super) fn step(
        &self,
        m: &mut Machine,
        now: u64,
        gone: &[bool],
        out: &mut impl Outside,
    ) -> Result<()> {
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
                    self.frame_ran(m, frame, now, out)?;
                    m.wake_us = m.busy_until_us;
                }
                Advance::NotDue { at_us } => m.wake_us = m.global(at_us).max(now + 1),
                // A datagram (or a transport timer) is what releases a waiting frame.
                Advance::Waiting | Advance::Left => m.wake_us = u64::MAX,
            }
        }
        self.handle_events(m, gone, now);
        let stats = m.session.stats();
        m.record
            .note_stalls(stats.stalled_frames, stats.stall_us, now);
        m.frame = m.session.frame();
        m.left = m.session.has_left();
        Ok(())
    }

    /// The machine ran `frame`: its work, its executed commands, its
    /// checksum, and the faults due on it.
    fn frame_ran(
        &self,
        m: &mut Machine,
        frame: u32,
        now: u64,
        out: &mut impl Outside,
    ) -> Result<()> {
        let work = u64::from(self.spec.proc_of(m.seat));
        m.session.add_frame_work_us(work);
        m.busy_until_us = now + work;
        m.issues.frame_started(now);
        let judged = !m.modified && !m.restarted;
        for command in m.session.executed() {
            m.record
                .executed(frame, command, judged, &mut m.credits, now);
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
        m.traffic.last_frame_us = m.traffic.last_frame_us.max(now);
        m.record.max_held_bytes = m.record.max_held_bytes.max(m.session.held_bytes());
        for index in 0..self.faults.len() {
            let fault = self.faults[index];
            if fault.seat() == m.seat && fault.frame() == frame {
                self.apply_fault(m, fault, now, out)?;
            }
        }
        Ok(())
    }

    fn apply_fault(
        &self,
        m: &mut Machine,
        fault: Fault,
        now: u64,
        out: &mut impl Outside,
    ) -> Result<()> {
        match fault {
            Fault::Quit { .. } => m.session.rungs_mut()?.leave()?,
            Fault::Crash {
                mid_turn: false, ..
            } => m.crashed = true,
            Fault::Crash { mid_turn: true, .. } => m.crash_mid_turn = true,
            Fault::Burst {
                commands, bytes, ..
            } => {
                let template = vec![0u8; usize::from(bytes).max(5)];
                for _ in 0..commands {
                    self.submit(m, &template, now);
                }
            }
            Fault::Restart { .. } => {
                let local = m.local(now);
                // The same epoch as before, as an engine passing a constant
                // one would: the new run's nonce tells it apart (S8).
                let mut session =
                    LockstepSession::new(&self.secrets.config(self.spec, m.seat, 1), local)?;
                for peer in (0..self.spec.players).filter(|p| *p != m.seat) {
                    session.add_peer(peer, out.addresses()[usize::from(peer)], local)?;
                }
                m.session = Engine::Rungs(session);
                m.restarted = true;
                m.next_command_us = u64::MAX;
            }
            Fault::Move { .. } => {
                let Some((net, addresses)) = out.lobby() else {
                    return Err(Error::State("a machine moves only in in-order play"));
                };
                let moved = SocketAddr::from(([10, 0, 1, m.seat + 1], 4000));
                for other in addresses.iter().filter(|a| **a != m.address) {
                    for (from, to) in [(moved, *other), (*other, moved)] {
                        let conditions = net.conditions(
                            if from == moved { m.address } else { from },
                            if to == moved { m.address } else { to },
                            now,
                        );
                        net.set_conditions(from, to, now, conditions);
                    }
                }
                m.address = moved;
                // The lobby knows where everyone is now.
                addresses[usize::from(m.seat)] = moved;
            }
            Fault::Attack {
                attack: Attack::Replay,
                ..
            } => {
                for (to, datagram) in &m.captured {
                    out.send(now, (m.address, *to), (m.seat, None), datagram);
                }
            }
            Fault::Attack { attack, .. } => {
                faults::attack(m.session.rungs_mut()?, m.seat, self.spec.players, attack)?;
            }
        }
        Ok(())
    }

    /// What the session told its engine: timing changes for the record,
    /// lost links and restarts the engine answers by dropping the player.
    fn handle_events(&self, m: &mut Machine, gone: &[bool], now: u64) {
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
                    // An engine that drops players itself drops one whose
                    // machine is gone (the session does it by default).
                    let manual = self.spec.manual_drops;
                    if manual && gone[usize::from(seat)] && !m.dropped[usize::from(seat)] {
                        m.dropped[usize::from(seat)] = true;
                        m.pending_drops.push(seat);
                    }
                }
                // A restarted machine cannot rejoin: the engine drops it.
                SessionEvent::PeerRestarted { seat }
                    if self.spec.manual_drops && !m.dropped[usize::from(seat)] =>
                {
                    m.dropped[usize::from(seat)] = true;
                    m.pending_drops.push(seat);
                }
                SessionEvent::PlayerRemoved { seat, .. } => {
                    m.record.removed_seen[usize::from(seat)] = true;
                }
                _ => {}
            }
        }
    }
}

/// Send what the machine has to send, and note its next timer.
pub(super) fn transmit(m: &mut Machine, now: u64, out: &mut impl Outside) {
    m.dirty = false;
    let local = m.local(now);
    // Mid-turn crash: the k-th peer in seat order gets only the
    // first k datagrams.
    let mut sent_to: Vec<(SocketAddr, usize)> = Vec::new();
    while let Some(transmit) = m.session.poll_transmit(local, &mut m.buf) {
        if m.crash_mid_turn {
            let rank = out
                .addresses()
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
        m.traffic.packets += 1;
        m.traffic.bytes += transmit.len as u64;
        if m.captured.len() < 8 {
            m.captured
                .push((transmit.destination, m.buf[..transmit.len].to_vec()));
        }
        out.send(
            now,
            (m.address, transmit.destination),
            (m.seat, Some(transmit.seat)),
            &m.buf[..transmit.len],
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
