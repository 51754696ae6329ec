//! Whole games on the simulated network: N machines, each running the real
//! [`LockstepSession`] (timing, record, schedule, transport, clock sync,
//! pacing) over [`NetSim`], deterministically from a seed, on a virtual
//! clock — much faster than real time. `rungs-sim`, the soak test and the
//! scenario suite are built on [`run_game`].
//!
//! The model, in the words `rungs-sim --help` uses:
//! - **Round trips.** Each player has a base round trip (`--rtt`); the path
//!   between players `i` and `j` has a one-way delay of `(rtt_i + rtt_j) / 4`
//!   (so when everyone has the same base, every pair sees that round trip).
//!   `--jitter J` adds a uniform `0..=J` ms to each datagram's one-way delay.
//!   `--loss P` loses each datagram with probability P.
//! - **Spikes.** `--spike MS@S+D` makes every path's round trip `MS` from
//!   second `S` for `D` seconds (`MS@S+D/P` only player P's paths).
//! - **Machines.** Each player's frame takes `--proc-ms` of its CPU; its
//!   clock runs with an offset and a drift drawn from the seed, so clock sync
//!   has work to do.
//! - **Commands.** Each player issues commands at random, two per second on
//!   average (about 120 actions a minute); a command's latency is from its
//!   issue to its execution on the last machine that runs it (the issuer
//!   may run it sooner when its peers' turns arrived early, but the game has
//!   not acted on it until every machine has).
//! - **Physical floor.** For each command, the larger of two waits no timing
//!   can avoid: the base one-way delay (jitter only adds to it) from the
//!   issuer to the farthest other player at issue time, since every machine
//!   must hold the command before the frame that executes it; and the wait
//!   from the issue to the issuer's first frame that starts at or after it,
//!   since commands execute only on frames. It is a lower bound of the
//!   measured latency on every run, whatever the timing
//!   (`tests/latency_floor.rs` checks it).
//! - **Stalls.** A frame stalls when it is due but a peer's turn has not
//!   arrived. Reported for the worst machine: stalled frames and total ms.
//! - **Desyncs.** Every machine hashes the commands it executed; the hash is
//!   exchanged as the state checksum every 64 frames and compared (S10's
//!   checksum idea, carried by the turns). `--diverge SEAT@FRAME` corrupts
//!   one machine's state on a frame, as an engine bug would.
//! - **Faults** ([`super::faults`]): crashes (several at once, mid-turn),
//!   quits, command bursts and a modified client's attacks on chosen
//!   frames; `--dup`, `--reorder` and `--outage` add duplication, reordering
//!   and outages to the network. A crashed player is dropped by every
//!   survivor once its link is lost. The report's soundness fields judge the
//!   honest machines only.

use std::collections::VecDeque;
use std::net::SocketAddr;

use super::faults::{self, Attack, Fault, FORGED_MARK};
use super::{Conditions, NetSim, Outage, SplitMix64};
use crate::error::{Error, Result};
use crate::link::LinkConfig;
use crate::report::record::MAX_SEATS;
use crate::session::{Advance, LockstepConfig, LockstepSession, SessionEvent};
use crate::timing::{MachineConfig, Output, PolicyKind, Timing};
use crate::wire::packet::SessionKey;

/// A change of round trip for a while.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Spike {
    /// The round trip during the spike, ms.
    pub rtt_ms: u32,
    /// When it starts, ms after the game starts.
    pub start_ms: u64,
    /// How long it lasts, ms.
    pub duration_ms: u64,
    /// Only this player's paths; `None` for every path.
    pub player: Option<u8>,
}

/// How a player leaves mid-game.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Departure {
    /// The player quits: its removal is a command (graceful).
    Quit,
    /// The machine vanishes; the others drop it after the link is lost.
    Crash,
}

/// One game to simulate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GameSpec {
    pub players: u8,
    pub frames: u32,
    pub fps: u8,
    /// Base round trip per player, ms (one value applies to all).
    pub rtt_ms: Vec<u32>,
    pub jitter_ms: u32,
    /// Loss probability, parts per million.
    pub loss_ppm: u32,
    pub spikes: Vec<Spike>,
    /// Processing time per frame per player, µs (one value applies to all).
    pub proc_us: Vec<u32>,
    pub policy: PolicyKind,
    pub seed: u64,
    /// A player leaving on a frame.
    pub departure: Option<(u8, u32, Departure)>,
    /// Commands per player per minute, on average.
    pub commands_per_minute: u32,
    /// A seat whose simulated state goes wrong from a frame on (its engine
    /// has a bug): the checksums must catch it as a desync.
    pub diverge: Option<(u8, u32)>,
    /// Injected faults (see [`super::faults`]).
    pub faults: Vec<Fault>,
    /// Duplication and reordering probabilities, parts per million.
    pub duplicate_ppm: u32,
    pub reorder_ppm: u32,
    /// Windows in which a player's paths (or every path) carry nothing.
    pub outages: Vec<OutageSpec>,
}

/// A window in which nothing gets through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutageSpec {
    /// When it starts, ms after the game starts.
    pub start_ms: u64,
    /// How long it lasts, ms.
    pub duration_ms: u64,
    /// Only this player's paths (both directions); `None` for every path.
    pub player: Option<u8>,
}

impl GameSpec {
    /// A game of `players` at `fps` for `frames`, everyone at `rtt_ms`.
    pub fn new(players: u8, frames: u32, fps: u8, rtt_ms: u32) -> GameSpec {
        GameSpec {
            players,
            frames,
            fps,
            rtt_ms: vec![rtt_ms],
            jitter_ms: 0,
            loss_ppm: 0,
            spikes: Vec::new(),
            proc_us: vec![5000],
            policy: PolicyKind::Adaptive,
            seed: 1,
            departure: None,
            commands_per_minute: 120,
            diverge: None,
            faults: Vec::new(),
            duplicate_ppm: 0,
            reorder_ppm: 0,
            outages: Vec::new(),
        }
    }

    /// The departure and the faults, as one list.
    fn all_faults(&self) -> Vec<Fault> {
        let mut all = self.faults.clone();
        if let Some((seat, frame, how)) = self.departure {
            all.push(match how {
                Departure::Quit => Fault::Quit { seat, frame },
                Departure::Crash => Fault::Crash {
                    seat,
                    frame,
                    mid_turn: false,
                },
            });
        }
        all
    }

    fn per_player<T: Copy>(values: &[T], player: u8) -> Option<T> {
        values.get(usize::from(player)).or(values.last()).copied()
    }

    fn rtt_of(&self, player: u8) -> u32 {
        Self::per_player(&self.rtt_ms, player).unwrap_or(0)
    }

    fn proc_of(&self, player: u8) -> u32 {
        Self::per_player(&self.proc_us, player).unwrap_or(0)
    }

    /// The least time a datagram from `a` can take to reach `b` when it may
    /// leave at game time `at_us` or later, µs: the base delay then, or the
    /// wait for a spike's end plus the delay after it, whichever is less.
    /// (Jitter only adds.)
    pub fn earliest_delivery_us(&self, a: u8, b: u8, at_us: u64) -> u64 {
        let mut best = self.one_way_us(a, b, at_us / 1000);
        for spike in &self.spikes {
            let end_us = (spike.start_ms + spike.duration_ms) * 1000;
            if end_us > at_us {
                let later = end_us - at_us + self.one_way_us(a, b, end_us / 1000);
                best = best.min(later);
            }
        }
        best
    }

    /// One-way base delay between two players at game time `at_ms`, µs.
    pub fn one_way_us(&self, a: u8, b: u8, at_ms: u64) -> u64 {
        let rtt = |p: u8| u64::from(self.rtt_of(p));
        let mut base = (rtt(a) + rtt(b)) * 1000 / 4;
        for spike in &self.spikes {
            let active = (spike.start_ms..spike.start_ms + spike.duration_ms).contains(&at_ms);
            let applies = spike.player.map_or(true, |p| p == a || p == b);
            if active && applies {
                base = base.max(u64::from(spike.rtt_ms) * 1000 / 2);
            }
        }
        base
    }

    fn validate(&self) -> Result<()> {
        if self.players == 0 || usize::from(self.players) > MAX_SEATS {
            return Err(Error::InvalidArgument("players must be 1 to 16"));
        }
        if self.fps == 0 {
            return Err(Error::InvalidArgument("fps must be 1 to 255"));
        }
        if self.rtt_ms.is_empty() || self.proc_us.is_empty() {
            return Err(Error::InvalidArgument(
                "rtt and proc need at least one value",
            ));
        }
        if self.loss_ppm > 1_000_000 {
            return Err(Error::InvalidArgument("loss must be 0 to 1"));
        }
        if let Some((p, _, _)) = self.departure {
            if p >= self.players || self.players < 2 {
                return Err(Error::InvalidArgument(
                    "the departing player must be one of the players",
                ));
            }
        }
        for fault in &self.faults {
            if fault.seat() >= self.players || self.players < 2 {
                return Err(Error::InvalidArgument(
                    "a fault's player must be one of the players (and there must be two)",
                ));
            }
        }
        if self.duplicate_ppm > 1_000_000 || self.reorder_ppm > 1_000_000 {
            return Err(Error::InvalidArgument("dup and reorder must be 0 to 1"));
        }
        Ok(())
    }
}

/// What a game did.
#[derive(Debug, Clone, PartialEq)]
pub struct GameReport {
    pub frames: u32,
    /// Command latency, ms: mean, 95th percentile, max.
    pub latency_mean_ms: f64,
    pub latency_p95_ms: f64,
    pub latency_max_ms: f64,
    /// Mean physical floor, ms.
    pub floor_mean_ms: f64,
    /// Commands whose latency was below their floor: 0 unless the floor is
    /// wrong (`tests/latency_floor.rs`).
    pub commands_below_floor: u64,
    /// The worst machine's stalled frames and total stall time.
    pub stall_frames: u64,
    pub stall_ms: f64,
    pub desyncs: u64,
    pub commands_issued: u64,
    /// Commands executed, the same on every machine that stayed.
    pub commands_executed: u64,
    /// Datagrams and bytes sent by all machines.
    pub packets: u64,
    pub bytes: u64,
    /// Timing changes as seen by the first remaining machine: (frame, send period, look-ahead, fps).
    pub timeline: Vec<(u32, u8, u8, u8)>,
    /// Game time of each timeline entry on that machine, ms.
    pub timeline_at_ms: Vec<f64>,
    /// Stalls over time for plots: (game ms, stall ms) of each stalled frame (worst machine).
    pub stall_events: Vec<(f64, f64)>,
    /// Physical floor samples over time: (game ms, floor ms).
    pub floor_samples: Vec<(f64, f64)>,
    /// Game time the last frame ran, ms.
    pub duration_ms: f64,
    /// Every machine that stayed executed the same commands on the same frames.
    pub logs_identical: bool,
    /// Every command executed exactly once and in issue order on every
    /// machine (none lost, none twice); a crashed player's commands after
    /// its cut are void everywhere alike.
    pub commands_in_order: bool,
    /// Link losses the engines saw.
    pub links_lost: u64,
    /// Items the honest machines refused (S4.7), the most on any one.
    pub refused_items: u64,
    /// Commands forged in another's name that an honest machine executed.
    pub forged_executed: u64,
    /// Removals an honest machine executed of a player who neither quit
    /// nor vanished.
    pub unexpected_removals: u64,
    /// The most bytes any honest session held at once (sampled every frame).
    pub max_held_bytes: usize,
    /// Commands the sessions refused on submission (backpressure).
    pub commands_refused: u64,
    /// Every crashed player was dropped by every survivor.
    pub vanished_dropped: bool,
    /// Commands accepted from players whose machines did not vanish that
    /// the surviving machines never executed.
    pub commands_lost: u64,
}

struct Machine {
    seat: u8,
    session: LockstepSession,
    address: SocketAddr,
    clock_offset_us: i64,
    clock_drift_ppm: i64,
    busy_until_us: u64,
    wake_us: u64,
    /// When the session's next timer (transport, ping, frame) is due.
    timer_us: u64,
    /// Touched this iteration: its transmits and timers need a look.
    dirty: bool,
    crashed: bool,
    next_command_us: u64,
    commands: u32,

    /// Running hash of executed (frame, bytes): the command log.
    log_hash: u64,
    /// The simulated game state's checksum: the log hash, unless this
    /// machine's simulation went wrong (`GameSpec::diverge`).
    state_hash: u64,
    executed: u64,
    stalled_frames: u64,
    stall_us: u64,
    stalls: Vec<(f64, f64)>,
    timeline: Vec<(u32, u8, u8, u8)>,
    timeline_at_ms: Vec<f64>,
    fps: u8,
    timing: Option<Timing>,
    links_lost: u64,
    dropped: [bool; MAX_SEATS],
    /// Per seat: the next command id expected to execute (issue order).
    next_expected: [u32; MAX_SEATS],
    out_of_order: bool,
    /// A modified client: not judged, only defended against.
    modified: bool,
    /// Crashing in the middle of its current turn: the transmit phase sends
    /// part of it, then the machine is gone.
    crash_mid_turn: bool,
    /// Datagrams this machine sent first, for a replay attack.
    captured: Vec<(SocketAddr, Vec<u8>)>,
    forged_executed: u64,
    /// Restarted mid-game: a fresh session that cannot rejoin; not judged.
    restarted: bool,
    removed_seen: [bool; MAX_SEATS],
    max_held_bytes: usize,
    commands_refused: u64,
    /// Own commands before this index have seen a frame start since their issue.
    unframed: usize,
}

/// One issued command, for the latency and the floor.
#[derive(Debug, Clone, Copy)]
struct Issued {
    /// Issue time, global µs.
    at_us: u64,
    /// The first frame start at or after the issue on the issuer, global µs.
    first_frame_us: Option<u64>,
    /// When the last machine executed it so far, global µs.
    last_execution_us: u64,
    /// Bit per seat that executed it.
    executed_by: u32,
}

/// Per command the issuer executed: (latency, floor, issue time), ms. The
/// latency runs from the issue to its execution on the last machine that
/// executed it: a lockstep command has taken effect in the game once every
/// machine has run it. The floor is the larger of the wait for the issuer's
/// next frame and the earliest the command could reach each machine that
/// executed it.
fn command_latencies(spec: &GameSpec, issued: &[Vec<Issued>]) -> Vec<(f64, f64, f64)> {
    let mut latencies = Vec::new();
    for (seat, commands) in issued.iter().enumerate() {
        let seat = seat as u8;
        for command in commands {
            if command.executed_by & (1 << seat) == 0 {
                continue;
            }
            let at_us = command.at_us - GAME_START_US;
            let network_us = (0..spec.players)
                .filter(|p| *p != seat && command.executed_by & (1 << p) != 0)
                .map(|p| spec.earliest_delivery_us(seat, p, at_us))
                .max()
                .unwrap_or(0);
            let frame_wait_us = command.first_frame_us.map_or(0, |f| f - command.at_us);
            let floor_us = network_us.max(frame_wait_us);
            latencies.push((
                (command.last_execution_us - command.at_us) as f64 / 1000.0,
                floor_us as f64 / 1000.0,
                at_us as f64 / 1000.0,
            ));
        }
    }
    latencies.sort_by(|a, b| a.2.total_cmp(&b.2));
    latencies
}

impl Machine {
    /// Note the timing and rate in force from `frame` (one entry per frame).
    fn record_timing(&mut self, frame: u32, timing: Timing, fps: u8, now: u64) {
        if self.timeline.last().map(|t| t.0) == Some(frame) {
            self.timeline.pop();
            self.timeline_at_ms.pop();
        }
        self.timeline
            .push((frame, timing.send_period(), timing.look_ahead(), fps));
        self.timeline_at_ms
            .push(now.saturating_sub(GAME_START_US) as f64 / 1000.0);
    }

    /// Local clock at global time `t`.
    fn local(&self, t: u64) -> u64 {
        // Game times stay below 2^40 µs and drift below 10^3 ppm: i64 is ample.
        let t = t as i64;
        let drift = t * self.clock_drift_ppm / 1_000_000;
        (t + self.clock_offset_us + drift).max(0) as u64
    }

    /// Global time at which the local clock reads `local` (rounded up).
    fn global(&self, local: u64) -> u64 {
        let since = local as i64 - self.clock_offset_us;
        let rate = 1_000_000 + self.clock_drift_ppm;
        let t = (since * 1_000_000 + rate - 1).div_euclid(rate);
        t.max(0) as u64
    }
}

pub(super) fn fnv(hash: u64, bytes: &[u8]) -> u64 {
    let mut h = hash;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

const CHECKSUM_INTERVAL: u32 = 64;
const GAME_START_US: u64 = 1_000_000;

/// Simulate one game. Deterministic: the same spec gives the same report.
pub fn run_game(spec: &GameSpec) -> Result<GameReport> {
    spec.validate()?;
    let players = spec.players;
    let mut rng = SplitMix64::new(spec.seed);
    let mut net = NetSim::new(rng.next_u64(), Conditions::PERFECT);
    let address = |p: u8| SocketAddr::from(([10, 0, 0, p + 1], 4000));
    // Path conditions, with every change at the spikes' edges.
    let mut change_points: Vec<u64> = vec![0];
    for spike in &spec.spikes {
        change_points.push(spike.start_ms);
        change_points.push(spike.start_ms + spike.duration_ms);
    }
    change_points.sort_unstable();
    change_points.dedup();
    for a in 0..players {
        for b in 0..players {
            if a == b {
                continue;
            }
            for at_ms in &change_points {
                let conditions = Conditions {
                    delay_us: spec.one_way_us(a, b, *at_ms),
                    jitter_us: u64::from(spec.jitter_ms) * 1000,
                    loss_ppm: spec.loss_ppm,
                    duplicate_ppm: spec.duplicate_ppm,
                    reorder_ppm: spec.reorder_ppm,
                    reorder_extra_us: if spec.reorder_ppm > 0 { 50_000 } else { 0 },
                };
                net.set_conditions(
                    address(a),
                    address(b),
                    GAME_START_US + at_ms * 1000,
                    conditions,
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
    let all_faults = spec.all_faults();
    let key = SessionKey([rng.next_u64() as u8 | 1; 16]);
    let session_id = rng.next_u64() as u32;
    // Game setup gives every pair of players its own link key (S8).
    let pair_key = |a: u8, b: u8| {
        let (lo, hi) = (a.min(b), a.max(b));
        let mut bytes = key.0;
        for (i, byte) in bytes.iter_mut().enumerate() {
            *byte ^= lo.wrapping_mul(17) ^ hi.wrapping_mul(29) ^ i as u8;
        }
        SessionKey(bytes)
    };
    let config_for = |seat: u8, epoch: u32| LockstepConfig {
        machine: MachineConfig {
            speed_fps: spec.fps,
            human_seats: vec![true; usize::from(players)],
            local_seat: Some(seat),
            policy: spec.policy,
        },
        session_id,
        key,
        link_keys: (0..players)
            .filter(|p| *p != seat)
            .map(|p| (p, pair_key(seat, p)))
            .collect(),
        epoch,
        link: LinkConfig::default(),
        checksum_interval: CHECKSUM_INTERVAL,
        topology: crate::session::Topology::PeerToPeer,
    };
    let mut machines = Vec::with_capacity(usize::from(players));
    for seat in 0..players {
        let config = config_for(seat, 1);
        // Clocks: up to 2000 s apart, drifting up to ±100 ppm.
        let clock_offset_us = rng.below_or_equal(2_000_000_000) as i64;
        let clock_drift_ppm = rng.below_or_equal(200) as i64 - 100;
        let local_now = clock_offset_us as u64;
        let mut machine = Machine {
            seat,
            session: LockstepSession::new(&config, local_now)?,
            address: address(seat),
            clock_offset_us,
            clock_drift_ppm,
            busy_until_us: 0,
            wake_us: GAME_START_US,
            timer_us: 0,
            dirty: true,
            crashed: false,
            next_command_us: 0,
            commands: 0,
            log_hash: 0xcbf2_9ce4_8422_2325,
            state_hash: 0xcbf2_9ce4_8422_2325,
            executed: 0,
            stalled_frames: 0,
            stall_us: 0,
            stalls: Vec::new(),
            timeline: Vec::new(),
            timeline_at_ms: Vec::new(),
            fps: spec.fps,
            timing: None,
            links_lost: 0,
            dropped: [false; MAX_SEATS],
            next_expected: [0; MAX_SEATS],
            out_of_order: false,
            unframed: 0,
            modified: all_faults
                .iter()
                .any(|f| f.seat() == seat && matches!(f, Fault::Attack { .. })),
            crash_mid_turn: false,
            captured: Vec::new(),
            forged_executed: 0,
            restarted: false,
            removed_seen: [false; MAX_SEATS],
            max_held_bytes: 0,
            commands_refused: 0,
        };
        for peer in 0..players {
            if peer != seat {
                machine.session.add_peer(peer, address(peer), local_now)?;
            }
        }
        machine.next_command_us = GAME_START_US + next_gap(&mut rng, spec.commands_per_minute);
        machines.push(machine);
    }

    // Per seat, per command id: issue time and what the floor needs.
    let mut issued: Vec<Vec<Issued>> = vec![Vec::new(); usize::from(players)];
    // Commands stop some frames before the end so that all of them execute.
    let last_issue_frame = spec.frames.saturating_sub(300);
    let mut packets = 0u64;
    let mut bytes = 0u64;
    let mut buf = vec![0u8; 1500];
    let mut datagram: Vec<u8> = Vec::with_capacity(1500);
    let mut now = 0u64;
    let frame_us = 1_000_000 / u64::from(spec.fps);
    let horizon_us = GAME_START_US + (u64::from(spec.frames) * frame_us) * 40 + 600_000_000;
    let mut last_frame_time = 0f64;
    let mut pending_drops: VecDeque<(u64, u8, u8)> = VecDeque::new();
    let mut machines_addresses: Vec<SocketAddr> = (0..players).map(address).collect();

    loop {
        let active = machines.iter().any(|m| {
            !m.crashed
                && !m.restarted
                && !m.session.has_left()
                && m.session.frame().map_or(true, |f| f + 1 < spec.frames)
        });
        if !active {
            break;
        }
        if now > horizon_us {
            for m in &machines {
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
            return Err(Error::State(
                "the game stalled: no progress within the simulation horizon",
            ));
        }
        // Deliver everything due now.
        while let Some((_, from, to)) = net.poll_delivery_into(now, &mut datagram) {
            if let Some(m) = machines.iter_mut().find(|m| m.address == to) {
                if !m.crashed {
                    let local = m.local(now);
                    m.session.handle_datagram(local, from, &datagram);
                    m.wake_us = m.wake_us.min(now);
                    m.dirty = true;
                }
            }
        }
        // Machines that are gone: crashed, or restarted (their old session is).
        let crashed: Vec<bool> = machines.iter().map(|m| m.crashed || m.restarted).collect();
        for m in machines.iter_mut().filter(|m| !m.crashed) {
            // Commands issued by the player now.
            let issuing = m.session.frame().map_or(true, |f| f < last_issue_frame);
            while m.next_command_us <= now && !m.session.has_left() && issuing {
                let mut command = [0u8; 5];
                command[0] = m.seat;
                command[1..5].copy_from_slice(&m.commands.to_le_bytes());
                let submitted = m.session.submit_command(&command);
                if submitted.is_err() {
                    m.commands_refused += 1;
                }
                if submitted.is_ok() {
                    issued[usize::from(m.seat)].push(Issued {
                        at_us: now,
                        first_frame_us: None,
                        last_execution_us: 0,
                        executed_by: 0,
                    });
                    m.commands += 1;
                    m.dirty = true;
                }
                m.next_command_us += next_gap(&mut rng, spec.commands_per_minute).max(1);
            }
            if !issuing {
                m.next_command_us = u64::MAX;
            }
            if now < m.wake_us {
                continue;
            }
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
                        let work = u64::from(spec.proc_of(m.seat));
                        m.session.measurements().add_frame_work_us(work);
                        m.busy_until_us = now + work;
                        let own = &mut issued[usize::from(m.seat)];
                        while let Some(pending) = own.get_mut(m.unframed) {
                            if pending.at_us > now {
                                break;
                            }
                            pending.first_frame_us = Some(now);
                            m.unframed += 1;
                        }
                        for command in m.session.executed() {
                            m.log_hash = fnv(m.log_hash, &frame.to_le_bytes());
                            m.log_hash = fnv(m.log_hash, &command.bytes);
                            m.state_hash = fnv(m.state_hash, &frame.to_le_bytes());
                            m.state_hash = fnv(m.state_hash, &command.bytes);
                            m.executed += 1;
                            if command.bytes.first() == Some(&FORGED_MARK)
                                || command.bytes.len() < 5
                            {
                                m.forged_executed += 1;
                                continue;
                            }
                            let id = u32::from_le_bytes([
                                command.bytes[1],
                                command.bytes[2],
                                command.bytes[3],
                                command.bytes[4],
                            ]);
                            let from = usize::from(command.seat);
                            if command.bytes[0] != command.seat || id != m.next_expected[from] {
                                m.out_of_order = true;
                            }
                            m.next_expected[from] = id.wrapping_add(1);
                            let judged = !m.modified && !m.restarted;
                            if let Some(issue) =
                                issued[from].get_mut(id as usize).filter(|_| judged)
                            {
                                issue.last_execution_us = issue.last_execution_us.max(now);
                                issue.executed_by |= 1 << m.seat;
                            }
                        }
                        if spec
                            .diverge
                            .is_some_and(|(seat, at)| seat == m.seat && frame == at)
                        {
                            m.state_hash ^= 0x5eed; // this machine's simulation goes wrong here
                        }
                        if frame % CHECKSUM_INTERVAL == 0 {
                            let _ = m.session.submit_checksum(frame, m.state_hash);
                        }
                        last_frame_time =
                            last_frame_time.max((now - GAME_START_US) as f64 / 1000.0);
                        m.max_held_bytes = m.max_held_bytes.max(m.session.held_bytes());
                        for fault in all_faults
                            .iter()
                            .filter(|f| f.seat() == m.seat && f.frame() == frame)
                        {
                            match *fault {
                                Fault::Quit { .. } => m.session.leave()?,
                                Fault::Crash {
                                    mid_turn: false, ..
                                } => m.crashed = true,
                                Fault::Crash { mid_turn: true, .. } => m.crash_mid_turn = true,
                                Fault::Burst {
                                    commands, bytes, ..
                                } => {
                                    for _ in 0..commands {
                                        let mut command = vec![0u8; usize::from(bytes).max(5)];
                                        command[0] = m.seat;
                                        command[1..5].copy_from_slice(&m.commands.to_le_bytes());
                                        if m.session.submit_command(&command).is_ok() {
                                            issued[usize::from(m.seat)].push(Issued {
                                                at_us: now,
                                                first_frame_us: None,
                                                last_execution_us: 0,
                                                executed_by: 0,
                                            });
                                            m.commands += 1;
                                        } else {
                                            m.commands_refused += 1;
                                        }
                                    }
                                }
                                Fault::Restart { .. } => {
                                    let local = m.local(now);
                                    let mut session =
                                        LockstepSession::new(&config_for(m.seat, 2), local)?;
                                    for peer in (0..players).filter(|p| *p != m.seat) {
                                        session.add_peer(
                                            peer,
                                            machines_addresses[usize::from(peer)],
                                            local,
                                        )?;
                                    }
                                    m.session = session;
                                    m.restarted = true;
                                    m.next_command_us = u64::MAX;
                                }
                                Fault::Move { .. } => {
                                    let moved = SocketAddr::from(([10, 0, 1, m.seat + 1], 4000));
                                    for other in
                                        machines_addresses.iter().filter(|a| **a != m.address)
                                    {
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
                                    machines_addresses[usize::from(m.seat)] = moved;
                                }
                                Fault::Attack {
                                    attack: Attack::Replay,
                                    ..
                                } => {
                                    for (to, datagram) in &m.captured {
                                        net.send(now, m.address, *to, datagram);
                                    }
                                }
                                Fault::Attack { attack, .. } => {
                                    faults::attack(&mut m.session, m.seat, players, attack)?;
                                }
                            }
                        }
                        m.wake_us = m.busy_until_us;
                    }
                    Advance::NotDue { at_us } => m.wake_us = m.global(at_us).max(now + 1),
                    // A datagram (or a transport timer) is what releases a waiting frame.
                    Advance::Waiting | Advance::Left => m.wake_us = u64::MAX,
                }
            }
            while let Some(event) = m.session.poll_event() {
                match event {
                    SessionEvent::Timing(Output::TimingChanged { frame, timing }) => {
                        m.timing = Some(timing);
                        let fps = m.fps;
                        m.record_timing(frame, timing, fps, now);
                    }
                    SessionEvent::Timing(Output::FrameRateChanged { frame, fps }) => {
                        m.fps = fps;
                        if let Some(timing) = m.timing {
                            m.record_timing(frame, timing, fps, now);
                        }
                    }
                    SessionEvent::LinkLost { seat } => {
                        m.links_lost += 1;
                        // The engine drops a player whose machine is gone.
                        let gone = all_faults
                            .iter()
                            .any(|f| f.seat() == seat && f.ends_machine());
                        if gone && crashed[usize::from(seat)] && !m.dropped[usize::from(seat)] {
                            m.dropped[usize::from(seat)] = true;
                            pending_drops.push_back((now, m.seat, seat));
                        }
                    }
                    // A restarted machine cannot rejoin: the engine drops it.
                    SessionEvent::PeerRestarted { seat } if !m.dropped[usize::from(seat)] => {
                        m.dropped[usize::from(seat)] = true;
                        pending_drops.push_back((now, m.seat, seat));
                    }
                    SessionEvent::PlayerRemoved { seat, .. } => {
                        m.removed_seen[usize::from(seat)] = true;
                    }
                    _ => {}
                }
            }
            let stats = m.session.stats();
            if stats.stalled_frames > m.stalled_frames {
                let stalled_us = stats.stall_us - m.stall_us;
                m.stalls.push((
                    (now - GAME_START_US) as f64 / 1000.0,
                    stalled_us as f64 / 1000.0,
                ));
                m.stalled_frames = stats.stalled_frames;
                m.stall_us = stats.stall_us;
            }
        }
        while let Some((_, by, seat)) = pending_drops.pop_front() {
            if let Some(m) = machines
                .iter_mut()
                .find(|m| m.seat == by && !m.crashed && !m.restarted)
            {
                let _ = m.session.drop_player(seat);
                m.dirty = true;
            }
        }
        // Only machines touched this iteration can have something to send
        // or a new timer.
        for m in machines.iter_mut().filter(|m| !m.crashed && m.dirty) {
            m.dirty = false;
            let local = m.local(now);
            // Mid-turn crash: the k-th peer in seat order gets only the
            // first k datagrams.
            let mut sent_to: Vec<(SocketAddr, usize)> = Vec::new();
            while let Some(transmit) = m.session.poll_transmit(local, &mut buf) {
                if m.crash_mid_turn {
                    let rank = usize::from(
                        machines_addresses
                            .iter()
                            .filter(|a| **a != m.address && **a <= transmit.destination)
                            .count() as u8,
                    );
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
                packets += 1;
                bytes += transmit.len as u64;
                if m.captured.len() < 8 {
                    m.captured
                        .push((transmit.destination, buf[..transmit.len].to_vec()));
                }
                net.send(now, m.address, transmit.destination, &buf[..transmit.len]);
            }
            if m.crash_mid_turn {
                m.crashed = true;
                continue;
            }
            m.timer_us = m
                .session
                .poll_timeout()
                .map_or(u64::MAX, |due| m.global(due).max(now + 1));
            // A machine busy with a frame's work does nothing else until it is
            // done (datagrams still arrive and are handled as they come).
            m.wake_us = m.wake_us.min(m.timer_us).max(m.busy_until_us);
        }
        // The next moment anything happens.
        let mut next = net.next_delivery_us().unwrap_or(u64::MAX);
        for m in machines.iter().filter(|m| !m.crashed) {
            next = next.min(m.wake_us).min(m.next_command_us);
        }
        now = next.max(now + 1);
    }
    finish(spec, machines, &issued, packets, bytes, last_frame_time)
}

pub(super) fn next_gap(rng: &mut SplitMix64, per_minute: u32) -> u64 {
    if per_minute == 0 {
        return u64::MAX / 4;
    }
    // Uniform in [0, 2 * mean]: mean gap 60 s / rate.
    let mean_us = 60_000_000 / u64::from(per_minute);
    rng.below_or_equal(2 * mean_us)
}

fn finish(
    spec: &GameSpec,
    machines: Vec<Machine>,
    issued: &[Vec<Issued>],
    packets: u64,
    bytes: u64,
    duration_ms: f64,
) -> Result<GameReport> {
    let stayed: Vec<&Machine> = machines
        .iter()
        .filter(|m| !m.crashed && !m.restarted && !m.session.has_left() && !m.modified)
        .collect();
    let mut latencies = command_latencies(spec, issued);
    let honest: Vec<&Machine> = machines
        .iter()
        .filter(|m| !m.modified && !m.restarted)
        .collect();
    let faults = spec.all_faults();
    let vanished: Vec<u8> = machines
        .iter()
        .filter(|m| m.crashed || m.restarted)
        .map(|m| m.seat)
        .collect();
    let departed = |seat: u8| {
        faults.iter().any(|f| {
            f.seat() == seat
                && matches!(
                    f,
                    Fault::Quit { .. } | Fault::Crash { .. } | Fault::Restart { .. }
                )
        })
    };
    let count = latencies.len().max(1) as f64;
    let latency_mean_ms = latencies.iter().map(|l| l.0).sum::<f64>() / count;
    let floor_mean_ms = latencies.iter().map(|l| l.1).sum::<f64>() / count;
    let floor_samples = latencies.iter().map(|l| (l.2, l.1)).collect();
    latencies.sort_by(|a, b| a.0.total_cmp(&b.0));
    let percentile = |p: usize| {
        latencies
            .get((latencies.len() * p / 100).min(latencies.len().saturating_sub(1)))
            .map_or(0.0, |l| l.0)
    };
    let issued_count: u64 = issued.iter().map(|v| v.len() as u64).sum();
    let reference = stayed.first().copied().unwrap_or(&machines[0]);
    let worst = machines
        .iter()
        .max_by_key(|m| m.stall_us)
        .unwrap_or(&machines[0]);
    Ok(GameReport {
        frames: spec.frames,
        latency_mean_ms,
        latency_p95_ms: percentile(95),
        latency_max_ms: latencies.last().map_or(0.0, |l| l.0),
        floor_mean_ms,
        commands_below_floor: latencies.iter().filter(|l| l.0 < l.1).count() as u64,
        stall_frames: machines.iter().map(|m| m.stalled_frames).max().unwrap_or(0),
        stall_ms: worst.stall_us as f64 / 1000.0,
        desyncs: machines
            .iter()
            .map(|m| m.session.stats().desyncs)
            .max()
            .unwrap_or(0),
        commands_issued: issued_count,
        commands_executed: reference.executed,
        packets,
        bytes,
        timeline: reference.timeline.clone(),
        timeline_at_ms: reference.timeline_at_ms.clone(),
        stall_events: worst.stalls.clone(),
        floor_samples,
        duration_ms,
        logs_identical: stayed
            .iter()
            .all(|m| m.log_hash == reference.log_hash && m.executed == reference.executed),
        links_lost: machines.iter().map(|m| m.links_lost).sum(),
        commands_in_order: honest.iter().all(|m| !m.out_of_order),
        refused_items: honest
            .iter()
            .map(|m| m.session.stats().refused_items)
            .max()
            .unwrap_or(0),
        forged_executed: honest.iter().map(|m| m.forged_executed).sum(),
        unexpected_removals: honest
            .iter()
            .map(|m| {
                (0..spec.players)
                    .filter(|s| m.removed_seen[usize::from(*s)] && !departed(*s))
                    .count() as u64
            })
            .sum(),
        max_held_bytes: honest.iter().map(|m| m.max_held_bytes).max().unwrap_or(0),
        commands_refused: machines.iter().map(|m| m.commands_refused).sum(),
        vanished_dropped: stayed
            .iter()
            .all(|m| vanished.iter().all(|v| m.removed_seen[usize::from(*v)])),
        commands_lost: match stayed.first() {
            Some(reference) => (0..spec.players)
                .filter(|s| !vanished.contains(s))
                .map(|s| {
                    let executed = u64::from(reference.next_expected[usize::from(s)]);
                    (issued[usize::from(s)].len() as u64).saturating_sub(executed)
                })
                .sum(),
            None => 0,
        },
    })
}
