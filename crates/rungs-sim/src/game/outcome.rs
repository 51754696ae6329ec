//! What a game did, judged: each machine's record of what it executed and
//! suffered (its command log, stalls, timing changes), the issued commands'
//! latencies and floors, and the report that weighs them all.

use super::spec::{GameSpec, GAME_START_US};
use crate::faults::{Fault, FORGED_MARK};
use rungs_core::report::MAX_SEATS;
use rungs_core::session::ExecutedCommand;
use rungs_core::timing::Timing;

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
    /// Messages the honest machines refused on receipt (a turn outside the
    /// schedule, a relayed turn nobody asked for), the most on any one.
    pub refused_messages: u64,
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

impl GameReport {
    /// The invariants every game must keep whatever its faults, broken, in
    /// words; empty when the game is sound: no desync, identical logs,
    /// every command once and in order, nothing lost, no forgery obeyed,
    /// nobody removed by another, every vanished player dropped. (The soak
    /// and the fault tests judge games by it.)
    pub fn broken_invariants(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.desyncs > 0 {
            out.push(format!("{} desyncs", self.desyncs));
        }
        if !self.logs_identical {
            out.push("logs differ".into());
        }
        if !self.commands_in_order {
            out.push("a command doubled or out of order".into());
        }
        if self.commands_lost > 0 {
            out.push(format!("{} commands lost", self.commands_lost));
        }
        if self.forged_executed > 0 {
            out.push(format!("{} forged commands obeyed", self.forged_executed));
        }
        if self.unexpected_removals > 0 {
            out.push(format!(
                "{} players removed by another",
                self.unexpected_removals
            ));
        }
        if !self.vanished_dropped {
            out.push("a vanished player was not dropped".into());
        }
        out
    }

    /// Datagrams one machine sent per 1000 frames, on average over the
    /// `players` machines and the frames of the game: what a game costs
    /// each machine's network.
    pub fn packets_per_machine_per_1000_frames(&self, players: u8) -> f64 {
        self.packets as f64 * 1000.0 / (f64::from(players.max(1)) * f64::from(self.frames.max(1)))
    }
}

/// One issued command, for the latency and the floor.
#[derive(Debug, Clone, Copy)]
pub(super) struct Issued {
    /// Issue time, global µs.
    at_us: u64,
    /// The first frame start at or after the issue on the issuer, global µs:
    /// the frame whose turn carries the command.
    first_frame_us: Option<u64>,
    /// The start of the issuer's frame after that one, global µs: the
    /// earliest frame the command can execute on (S1: look-ahead >= 1).
    next_frame_us: Option<u64>,
    /// When the last machine executed it so far, global µs.
    last_execution_us: u64,
    /// Bit per seat that executed it.
    executed_by: u32,
}

/// One player's issued commands, by command id (issue order): kept by its
/// machine, so that stepping a machine touches no other machine's state.
#[derive(Debug, Default)]
pub(super) struct OwnIssues {
    commands: Vec<Issued>,
    /// Commands before this index have seen a frame start since their issue.
    unframed: usize,
    /// Commands before this index have seen the frame after that one too.
    once_framed: usize,
}

impl OwnIssues {
    /// The player issued its next command at `now` (global µs).
    pub(super) fn issue(&mut self, now: u64) {
        self.commands.push(Issued {
            at_us: now,
            first_frame_us: None,
            next_frame_us: None,
            last_execution_us: 0,
            executed_by: 0,
        });
    }

    /// A frame of the player's machine started at `now`. Its commands that
    /// already had a first frame have their next one now; those issued since
    /// the last frame (by `now`) have their first.
    pub(super) fn frame_started(&mut self, now: u64) {
        for pending in &mut self.commands[self.once_framed..self.unframed] {
            pending.next_frame_us = Some(now);
        }
        self.once_framed = self.unframed;
        while let Some(pending) = self.commands.get_mut(self.unframed) {
            if pending.at_us > now {
                break;
            }
            pending.first_frame_us = Some(now);
            self.unframed += 1;
        }
    }

    /// Credit an execution of one of these commands (unknown ids ignored).
    pub(super) fn credit(&mut self, credit: &Credit) {
        if let Some(issue) = self.commands.get_mut(credit.id as usize) {
            issue.last_execution_us = issue.last_execution_us.max(credit.at_us);
            issue.executed_by |= 1 << credit.by;
        }
    }
}

/// Seat `by` executed command `id` of seat `from` at `at_us`: credited to
/// the issuer's [`OwnIssues`] by the host when it next settles (crediting
/// commutes, so when does not matter).
#[derive(Debug, Clone, Copy)]
pub(super) struct Credit {
    pub(super) from: u8,
    id: u32,
    by: u8,
    at_us: u64,
}

/// Per seat, per command id (issue order): when it was issued and what the
/// latency and the floor need.
#[derive(Debug)]
pub(super) struct IssueLog<'a> {
    per_seat: Vec<&'a [Issued]>,
}

impl<'a> IssueLog<'a> {
    /// The log of the players' issues, in seat order.
    pub(super) fn new(seats: impl Iterator<Item = &'a OwnIssues>) -> IssueLog<'a> {
        IssueLog {
            per_seat: seats.map(|own| own.commands.as_slice()).collect(),
        }
    }

    fn issued_by(&self, seat: u8) -> u64 {
        self.per_seat[usize::from(seat)].len() as u64
    }

    fn total(&self) -> u64 {
        self.per_seat.iter().map(|v| v.len() as u64).sum()
    }

    /// Per command the issuer executed: (latency, floor, issue time), ms.
    /// The latency runs from the issue to its execution on the last machine
    /// that executed it: a lockstep command has taken effect in the game
    /// once every machine has run it. The floor is the larger of the wait
    /// for the issuer's frame after the one that carried the command (S1:
    /// no timing executes a command on the frame that sends it) and the
    /// earliest the command could reach each machine that executed it.
    fn latencies(&self, spec: &GameSpec) -> Vec<(f64, f64, f64)> {
        let mut latencies = Vec::new();
        for (seat, commands) in self.per_seat.iter().enumerate() {
            let seat = seat as u8;
            for command in commands.iter() {
                if command.executed_by & (1 << seat) == 0 {
                    continue;
                }
                let at_us = command.at_us - GAME_START_US;
                let network_us = (0..spec.players)
                    .filter(|p| *p != seat && command.executed_by & (1 << p) != 0)
                    .map(|p| spec.earliest_delivery_us(seat, p, at_us))
                    .max()
                    .unwrap_or(0);
                let frame_wait_us = command
                    .next_frame_us
                    .or(command.first_frame_us)
                    .map_or(0, |f| f - command.at_us);
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
}

/// What one machine executed and suffered, as the report needs it.
#[derive(Debug)]
pub(super) struct MachineRecord {
    seat: u8,
    /// Running hash of executed (frame, bytes): the command log.
    log_hash: u64,
    /// The simulated game state's checksum: the log hash, unless this
    /// machine's simulation went wrong (`GameSpec::diverge`).
    pub(super) state_hash: u64,
    executed: u64,
    stalled_frames: u64,
    stall_us: u64,
    stalls: Vec<(f64, f64)>,
    timeline: Vec<(u32, u8, u8, u8)>,
    timeline_at_ms: Vec<f64>,
    fps: u8,
    timing: Option<Timing>,
    pub(super) links_lost: u64,
    /// Per seat: the next command id expected to execute (issue order).
    next_expected: [u32; MAX_SEATS],
    out_of_order: bool,
    forged_executed: u64,
    pub(super) removed_seen: [bool; MAX_SEATS],
    pub(super) max_held_bytes: usize,
    pub(super) commands_refused: u64,
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

impl MachineRecord {
    pub(super) fn new(seat: u8, fps: u8) -> MachineRecord {
        MachineRecord {
            seat,
            log_hash: FNV_OFFSET,
            state_hash: FNV_OFFSET,
            executed: 0,
            stalled_frames: 0,
            stall_us: 0,
            stalls: Vec::new(),
            timeline: Vec::new(),
            timeline_at_ms: Vec::new(),
            fps,
            timing: None,
            links_lost: 0,
            next_expected: [0; MAX_SEATS],
            out_of_order: false,
            forged_executed: 0,
            removed_seen: [false; MAX_SEATS],
            max_held_bytes: 0,
            commands_refused: 0,
        }
    }

    /// A command executed on `frame` at `now`: into the log and the state,
    /// checked for issue order, and credited to its issue when this machine
    /// is `judged` (honest and not restarted).
    pub(super) fn executed(
        &mut self,
        frame: u32,
        command: &ExecutedCommand,
        judged: bool,
        credits: &mut Vec<Credit>,
        now: u64,
    ) {
        self.log_hash = fnv(self.log_hash, &frame.to_le_bytes());
        self.log_hash = fnv(self.log_hash, &command.bytes);
        self.state_hash = fnv(self.state_hash, &frame.to_le_bytes());
        self.state_hash = fnv(self.state_hash, &command.bytes);
        self.executed += 1;
        if command.bytes.first() == Some(&FORGED_MARK) || command.bytes.len() < 5 {
            self.forged_executed += 1;
            return;
        }
        let id = u32::from_le_bytes([
            command.bytes[1],
            command.bytes[2],
            command.bytes[3],
            command.bytes[4],
        ]);
        let from = usize::from(command.seat);
        if command.bytes[0] != command.seat || id != self.next_expected[from] {
            self.out_of_order = true;
        }
        self.next_expected[from] = id.wrapping_add(1);
        if judged {
            credits.push(Credit {
                from: command.seat,
                id,
                by: self.seat,
                at_us: now,
            });
        }
    }

    /// The timing changed from `frame` on.
    pub(super) fn timing_changed(&mut self, frame: u32, timing: Timing, now: u64) {
        self.timing = Some(timing);
        let fps = self.fps;
        self.record_timing(frame, timing, fps, now);
    }

    /// The frame rate changed from `frame` on.
    pub(super) fn frame_rate_changed(&mut self, frame: u32, fps: u8, now: u64) {
        self.fps = fps;
        if let Some(timing) = self.timing {
            self.record_timing(frame, timing, fps, now);
        }
    }

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

    /// The session's stall counters at `now`: a new stall goes on the plot.
    pub(super) fn note_stalls(&mut self, stalled_frames: u64, stall_us: u64, now: u64) {
        if stalled_frames > self.stalled_frames {
            let stalled_us = stall_us - self.stall_us;
            self.stalls.push((
                (now - GAME_START_US) as f64 / 1000.0,
                stalled_us as f64 / 1000.0,
            ));
            self.stalled_frames = stalled_frames;
            self.stall_us = stall_us;
        }
    }
}

pub(crate) fn fnv(hash: u64, bytes: &[u8]) -> u64 {
    let mut h = hash;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// How a machine ended, for the judgement.
pub(super) struct Finished<'a> {
    pub(super) record: &'a MachineRecord,
    /// Played to the end and honest: its log is what every such one must share.
    pub(super) stayed: bool,
    /// Neither a modified client nor restarted: judged for soundness.
    pub(super) honest: bool,
    /// Crashed or restarted: gone from the game.
    pub(super) vanished: bool,
    pub(super) desyncs: u64,
    pub(super) refused_items: u64,
    pub(super) refused_messages: u64,
}

/// Counters of one machine (summed over the game by [`judge`]).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Traffic {
    pub(super) packets: u64,
    pub(super) bytes: u64,
    /// When its last frame ran, global µs.
    pub(super) last_frame_us: u64,
}

/// Weigh everything the machines did into the report.
pub(super) fn judge(
    spec: &GameSpec,
    machines: &[Finished<'_>],
    issued: &IssueLog<'_>,
    traffic: &[Traffic],
) -> GameReport {
    let stayed: Vec<&MachineRecord> = machines
        .iter()
        .filter(|m| m.stayed)
        .map(|m| m.record)
        .collect();
    let mut latencies = issued.latencies(spec);
    let honest: Vec<&Finished<'_>> = machines.iter().filter(|m| m.honest).collect();
    let faults = spec.all_faults();
    let vanished: Vec<u8> = machines
        .iter()
        .filter(|m| m.vanished)
        .map(|m| m.record.seat)
        .collect();
    let departed = |seat: u8| {
        let placed_in_time = spec.timed_faults.iter().any(|f| f.seat == seat);
        placed_in_time
            || faults.iter().any(|f| {
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
    let reference = stayed.first().copied().unwrap_or(machines[0].record);
    let worst = machines
        .iter()
        .map(|m| m.record)
        .max_by_key(|m| m.stall_us)
        .unwrap_or(machines[0].record);
    GameReport {
        frames: spec.frames,
        latency_mean_ms,
        latency_p95_ms: percentile(95),
        latency_max_ms: latencies.last().map_or(0.0, |l| l.0),
        floor_mean_ms,
        commands_below_floor: latencies.iter().filter(|l| l.0 < l.1).count() as u64,
        stall_frames: machines
            .iter()
            .map(|m| m.record.stalled_frames)
            .max()
            .unwrap_or(0),
        stall_ms: worst.stall_us as f64 / 1000.0,
        desyncs: machines.iter().map(|m| m.desyncs).max().unwrap_or(0),
        commands_issued: issued.total(),
        commands_executed: reference.executed,
        packets: traffic.iter().map(|t| t.packets).sum(),
        bytes: traffic.iter().map(|t| t.bytes).sum(),
        timeline: reference.timeline.clone(),
        timeline_at_ms: reference.timeline_at_ms.clone(),
        stall_events: worst.stalls.clone(),
        floor_samples,
        duration_ms: traffic
            .iter()
            .map(|t| t.last_frame_us.saturating_sub(GAME_START_US))
            .max()
            .unwrap_or(0) as f64
            / 1000.0,
        logs_identical: stayed
            .iter()
            .all(|m| m.log_hash == reference.log_hash && m.executed == reference.executed),
        links_lost: machines.iter().map(|m| m.record.links_lost).sum(),
        commands_in_order: honest.iter().all(|m| !m.record.out_of_order),
        refused_items: honest.iter().map(|m| m.refused_items).max().unwrap_or(0),
        refused_messages: honest.iter().map(|m| m.refused_messages).max().unwrap_or(0),
        forged_executed: honest.iter().map(|m| m.record.forged_executed).sum(),
        unexpected_removals: honest
            .iter()
            .map(|m| {
                (0..spec.players)
                    .filter(|s| m.record.removed_seen[usize::from(*s)] && !departed(*s))
                    .count() as u64
            })
            .sum(),
        max_held_bytes: honest
            .iter()
            .map(|m| m.record.max_held_bytes)
            .max()
            .unwrap_or(0),
        commands_refused: machines.iter().map(|m| m.record.commands_refused).sum(),
        vanished_dropped: stayed
            .iter()
            .all(|m| vanished.iter().all(|v| m.removed_seen[usize::from(*v)])),
        commands_lost: match stayed.first() {
            Some(reference) => (0..spec.players)
                .filter(|s| !vanished.contains(s))
                .map(|s| {
                    let executed = u64::from(reference.next_expected[usize::from(s)]);
                    issued.issued_by(s).saturating_sub(executed)
                })
                .sum(),
            None => 0,
        },
    }
}
