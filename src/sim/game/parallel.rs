//! Playing a game on two threads, with the very result of in-order play.
//!
//! A conservative parallel discrete-event scheme. A datagram sent at `t`
//! arrives at `t + d` at the earliest, where `d` is the shortest base delay
//! of any path from `t` on ([`NetSim::min_delay_from`]; jitter, reordering
//! and outages only add or drop). So in a window `[start, start + d)` no
//! datagram sent inside the window arrives inside it: every machine's
//! inputs for the window (the datagrams due in it) are in flight when it
//! opens, and the machines can be stepped each on its own, on any thread,
//! through the window. The host's [`Play::iteration`] steps a machine only
//! at its own moments (a delivery, its wake-up, its player's command), so
//! each machine goes through exactly the steps it goes through in order.
//!
//! What the machines share is handled so that nothing depends on which
//! thread ran what, or when:
//! - **Arrivals**: taken out of [`NetSim`] before the window opens, in the
//!   network's order, into each machine's inbox.
//! - **Commands**: the players' command gaps come from one random stream
//!   drawn in play order (time, then seat). Before the window opens the
//!   draws of every command due in it are made in that order and handed to
//!   each machine; it is exact because whether a player issues does not
//!   change inside a window (checked: no player can reach the last issuing
//!   frame within it, see [`window`]).
//! - **Sends**: each machine's datagrams are collected with their send time
//!   and fed to [`NetSim`] after the window in exactly the order in-order
//!   play sends them (time, then seat, then the machine's own order), so
//!   the network's random draws and its tie-breaking are the same.
//! - **Everything else** a step changes belongs to its machine (its issued
//!   commands, its counters, the executions it credits, which are settled
//!   after the window: crediting commutes).
//!
//! What cannot be split this way is played in order: a game with faults
//! (crashes, quits, restarts, moves and attacks act across machines), a
//! frame with no work (a machine could run any number of frames in a
//! window), a window shorter than [`MIN_WINDOW_US`] (a LAN: the
//! hand-over would cost more than it saves), the start before the paths are
//! set, and the last frames (where players stop issuing and the game ends).
//! `tests/sim_parallel.rs` plays games both ways and compares the reports.
//!
//! Threads: the calling thread and one helper. At each window the machines
//! are jobs on a board; the caller takes them from the first up, the helper
//! from the last down, until none is left (a machine mostly stays on one
//! core, its state in that core's cache). Between windows the caller feeds
//! the network while the helper waits awake, yielding, so that it starts
//! the next window at once yet leaves the core to the caller when both
//! share one. A helper that kept the caller waiting (its thread was not
//! running: the cores are busy with other work) is left alone for a while:
//! the caller plays the next windows by itself. Which thread plays a job
//! never changes what the job does.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::host::{deliver, transmit, Host, Machine, Outside, Play, Rules};
use crate::error::{Error, Result};
use crate::report::record::MAX_SEATS;
use crate::sim::{HostId, NetSim};

/// Shortest window worth handing to two threads, µs.
pub(super) const MIN_WINDOW_US: u64 = 5_000;
/// How long the caller spins for the helper's last job before it yields.
const SPIN_ROUNDS: u32 = 64;
/// How long the helper waits awake for the next window before it sleeps.
const HELPER_SPIN: Duration = Duration::from_micros(500);
/// A window whose helper kept the caller waiting longer than this (its
/// thread was not running: the cores are busy with other work) ...
const SLOW_HELPER: Duration = Duration::from_micros(300);
/// ... makes the caller play this many windows alone before it asks the
/// helper again. Who plays a job never changes the result.
const ALONE_WINDOWS: u32 = 64;

/// Play the game of `host` to its end, on two threads where the game
/// allows (see the module docs), in order elsewhere. Returns how many
/// windows were played on two threads.
pub(super) fn run(host: &mut Host<'_>) -> Result<u64> {
    if !splittable(&host.rules) {
        return host.run().map(|()| 0);
    }
    let Host { rules, play } = host;
    let rules: &Rules<'_> = rules;
    let board = Board {
        jobs: (0..play.machines.len())
            .map(|_| Mutex::new(Job::default()))
            .collect(),
        round: AtomicU64::new(0),
        stop: AtomicBool::new(false),
        taken: (0..play.machines.len())
            .map(|_| AtomicBool::new(true))
            .collect(),
        done: AtomicUsize::new(0),
    };
    std::thread::scope(|scope| {
        let helper = scope.spawn(|| board.help(rules));
        let played = (|| {
            let mut routes = Routes::default();
            let mut windows = 0;
            let mut alone = 0u32;
            while play.playing(rules) {
                play.check_progress(rules)?;
                match window(play, rules) {
                    Some(end) => {
                        let helped = alone == 0;
                        alone = alone.saturating_sub(1);
                        let wake = || helper.thread().unpark();
                        routes.update(play);
                        let waited = play_window(play, rules, &board, &routes, end, helped, wake)?;
                        if waited > SLOW_HELPER {
                            alone = ALONE_WINDOWS;
                        }
                        windows += 1;
                    }
                    None => play.iteration(rules)?,
                }
            }
            Ok(windows)
        })();
        board.stop.store(true, Ordering::Release);
        helper.thread().unpark();
        played
    })
}

/// Whether any part of this game can be played in windows.
fn splittable(rules: &Rules<'_>) -> bool {
    let spec = rules.spec;
    rules.faults.is_empty() && (0..spec.players).all(|seat| spec.proc_of(seat) > 0)
}

/// The end of a window opening at `play.now`, if one can open: long enough,
/// every machine in play, and no player able to reach the last issuing
/// frame (or the end) inside it.
fn window(play: &Play, rules: &Rules<'_>) -> Option<u64> {
    let length = play.lobby.net.min_delay_from(play.now);
    if length < MIN_WINDOW_US {
        return None;
    }
    for m in &play.machines {
        // A frame's work keeps the machine busy: at most this many frames
        // start inside the window.
        let frames = length / u64::from(rules.spec.proc_of(m.seat)) + 1;
        let reach = u64::from(m.frame.map_or(0, |f| f + 1)) + frames;
        if !m.is_active(rules.spec.frames)
            || !rules.issuing(m)
            || reach >= u64::from(rules.last_issue_frame)
            || usize::from(m.seat) >= MAX_SEATS
        {
            return None;
        }
    }
    Some(play.now + length)
}

/// A datagram due in the window.
struct Arrival {
    at_us: u64,
    from: SocketAddr,
    bytes: Vec<u8>,
}

/// A datagram a machine sent in the window.
struct Sent {
    at_us: u64,
    to: SocketAddr,
    /// The network's id of `to` when it is a player's (always, in a game
    /// without faults): the network skips the address lookup.
    to_host: Option<HostId>,
    bytes: Vec<u8>,
}

/// Where the lobby's addresses are in the network, both ways: the caller
/// routes arrivals by host id, the machines name their datagrams' hosts.
#[derive(Default)]
struct Routes {
    /// The lobby's addresses these were worked out for.
    addresses: Vec<SocketAddr>,
    /// The network's id of each player's address, by seat.
    hosts: Vec<HostId>,
    /// The seat at each host id, if a player's.
    seats: Vec<Option<usize>>,
}

impl Routes {
    /// Work the routes out again if the lobby's addresses changed (they do
    /// not in a game played in windows: this happens once).
    fn update(&mut self, play: &mut Play) {
        if self.addresses == play.lobby.addresses {
            return;
        }
        let net = &mut play.lobby.net;
        self.addresses.clone_from(&play.lobby.addresses);
        self.hosts = self.addresses.iter().map(|a| net.host_id(*a)).collect();
        self.seats.clear();
        for (seat, host) in self.hosts.iter().enumerate() {
            let at = net.host_index(*host);
            if self.seats.len() <= at {
                self.seats.resize(at + 1, None);
            }
            self.seats[at] = Some(seat);
        }
    }

    /// The seat whose machine is at `host`, if a player's.
    fn seat_at(&self, host: HostId, net: &NetSim) -> Option<usize> {
        self.seats.get(net.host_index(host)).copied().flatten()
    }
}

/// Datagram buffers a job keeps for reuse, at most: a machine receives
/// about as many datagrams as it sends, so its pool neither runs dry nor
/// grows for long.
const SPARE_BUFFERS: usize = 256;

/// One machine's part of a window.
#[derive(Default)]
struct Job {
    machine: Option<Box<Machine>>,
    end_us: u64,
    /// Its arrivals in the window, in the network's order; those before
    /// `delivered` are done.
    inbox: Vec<Arrival>,
    delivered: usize,
    /// Its player's command gaps, drawn in play order before the window.
    gaps: VecDeque<u64>,
    sent: Vec<Sent>,
    /// Buffers for the datagrams it sends: those of the datagrams it
    /// received, and those the network lost. The bytes are written and
    /// read by the threads that play the machines; the caller's thread
    /// only passes the buffers on.
    spare: Vec<Vec<u8>>,
    /// The lobby's addresses (fixed: games with moves are played in order)
    /// and their hosts in the network, by seat.
    addresses: Vec<SocketAddr>,
    hosts: Vec<HostId>,
    failed: Option<Error>,
}

/// What a machine's step reaches in a window: the gaps drawn for it, and
/// its outbox.
struct Window<'a> {
    gaps: &'a mut VecDeque<u64>,
    sent: &'a mut Vec<Sent>,
    spare: &'a mut Vec<Vec<u8>>,
    addresses: &'a [SocketAddr],
    hosts: &'a [HostId],
}

impl Outside for Window<'_> {
    fn command_gap(&mut self, _seat: u8) -> u64 {
        // Drawn for exactly the commands the player issues in the window.
        debug_assert!(!self.gaps.is_empty(), "a command gap was not drawn");
        self.gaps.pop_front().unwrap_or(u64::MAX / 4)
    }

    fn send(&mut self, now: u64, _from: SocketAddr, to: SocketAddr, datagram: &[u8]) {
        let mut bytes = self.spare.pop().unwrap_or_default();
        bytes.clear();
        bytes.extend_from_slice(datagram);
        let seat = self.addresses.iter().position(|a| *a == to);
        self.sent.push(Sent {
            at_us: now,
            to,
            to_host: seat.and_then(|seat| self.hosts.get(seat).copied()),
            bytes,
        });
    }

    fn addresses(&self) -> &[SocketAddr] {
        self.addresses
    }

    fn lobby(&mut self) -> Option<(&mut NetSim, &mut Vec<SocketAddr>)> {
        None
    }
}

impl Job {
    /// Step the machine through its moments before the window's end, as
    /// [`Play::iteration`] would.
    fn play(&mut self, rules: &Rules<'_>) -> Result<()> {
        let Job {
            machine,
            end_us,
            inbox,
            delivered,
            gaps,
            sent,
            spare,
            addresses,
            hosts,
            ..
        } = self;
        let Some(m) = machine.as_deref_mut() else {
            return Ok(());
        };
        let mut out = Window {
            gaps,
            sent,
            spare,
            addresses,
            hosts,
        };
        let gone = [false; MAX_SEATS];
        loop {
            let arrival = inbox.get(*delivered).map_or(u64::MAX, |a| a.at_us);
            let now = arrival.min(m.wake_us).min(m.next_command_us);
            if now >= *end_us {
                return Ok(());
            }
            while let Some(a) = inbox.get(*delivered).filter(|a| a.at_us <= now) {
                deliver(m, now, a.from, &a.bytes);
                *delivered += 1;
            }
            rules.issue_commands(m, now, &mut out);
            if now >= m.wake_us {
                rules.step(m, now, &gone, &mut out)?;
            }
            if m.dirty {
                transmit(m, now, &mut out);
            }
        }
    }
}

/// The jobs of the current window and the threads' meeting point.
struct Board {
    jobs: Vec<Mutex<Job>>,
    /// Bumped when a window's jobs are ready.
    round: AtomicU64,
    stop: AtomicBool,
    /// Per job: taken this window (all set between windows).
    taken: Vec<AtomicBool>,
    done: AtomicUsize,
}

impl Board {
    /// Take the jobs nobody took yet, the caller's from the first up, the
    /// helper's from the last down: each machine mostly stays on one
    /// thread, its state in that core's cache, and the two meet wherever
    /// their speeds make them.
    fn work(&self, rules: &Rules<'_>, from_the_last: bool) {
        let count = self.jobs.len();
        for step in 0..count {
            let at = if from_the_last {
                count - 1 - step
            } else {
                step
            };
            if self.taken[at].swap(true, Ordering::AcqRel) {
                continue;
            }
            let mut job = self.jobs[at].lock();
            if let Err(e) = job.play(rules) {
                job.failed = Some(e);
            }
            drop(job);
            self.done.fetch_add(1, Ordering::AcqRel);
        }
    }

    /// The helper thread: work whenever a window opens, until stopped.
    fn help(&self, rules: &Rules<'_>) {
        let mut seen = 0;
        loop {
            let idle_since = Instant::now();
            let mut spins = 0u32;
            loop {
                if self.stop.load(Ordering::Acquire) {
                    return;
                }
                let round = self.round.load(Ordering::Acquire);
                if round != seen {
                    seen = round;
                    break;
                }
                spins = spins.wrapping_add(1);
                // Between two windows the caller feeds the network for some
                // tens of microseconds: waiting awake through that, the
                // helper starts the next window at once (waking a parked
                // thread takes about as long). It yields rather than spins,
                // so that when both threads share one core the caller runs;
                // it sleeps once the caller plays alone.
                if spins % 16 != 0 {
                    std::hint::spin_loop();
                } else if idle_since.elapsed() < HELPER_SPIN {
                    std::thread::yield_now();
                } else {
                    std::thread::park_timeout(Duration::from_millis(10));
                }
            }
            self.work(rules, true);
        }
    }
}

/// Play the window `[play.now, end_us)` on the board (see the module docs),
/// `helped` by the other thread or alone. Returns how long the caller
/// waited for the helper to finish its jobs (wall clock, for scheduling
/// only: who plays a job never changes what it does).
fn play_window(
    play: &mut Play,
    rules: &Rules<'_>,
    board: &Board,
    routes: &Routes,
    end_us: u64,
    helped: bool,
    wake_helper: impl Fn(),
) -> Result<Duration> {
    let count = play.machines.len();
    // Hand every machine its arrivals and its command gaps.
    let mut jobs: Vec<_> = board.jobs.iter().map(|job| job.lock()).collect();
    for job in jobs.iter_mut() {
        let job = &mut **job;
        job.end_us = end_us;
        job.gaps.clear();
        job.failed = None;
        let room = SPARE_BUFFERS.saturating_sub(job.spare.len());
        job.spare
            .extend(job.inbox.drain(..).map(|used| used.bytes).take(room));
        job.inbox.clear();
        job.delivered = 0;
        if job.addresses != routes.addresses {
            job.addresses.clone_from(&routes.addresses);
            job.hosts.clone_from(&routes.hosts);
        }
    }
    let net = &mut play.lobby.net;
    while let Some(arrival) = net.poll_arrival(end_us - 1) {
        // The lobby's addresses are the machines' (games with moves are
        // played in order).
        if let Some(at) = routes.seat_at(arrival.to, net) {
            jobs[at].inbox.push(Arrival {
                at_us: arrival.at_us,
                from: net.address_of(arrival.from),
                bytes: arrival.bytes,
            });
        }
    }
    draw_commands(play, &mut jobs, end_us);
    for (job, m) in jobs.iter_mut().zip(play.machines.drain(..)) {
        job.machine = Some(m);
    }
    drop(jobs);

    // Both threads take jobs.
    board.done.store(0, Ordering::Release);
    for taken in &board.taken {
        taken.store(false, Ordering::Release);
    }
    if helped {
        board.round.fetch_add(1, Ordering::AcqRel);
        wake_helper();
    }
    board.work(rules, false);
    let waiting = Instant::now();
    let mut spins = 0u32;
    while board.done.load(Ordering::Acquire) < count {
        if spins < SPIN_ROUNDS {
            spins += 1;
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
    }
    let waited = waiting.elapsed();

    // Take the machines back, and send what they sent in play order.
    let mut jobs: Vec<_> = board.jobs.iter().map(|job| job.lock()).collect();
    let mut failed = None;
    for job in jobs.iter_mut() {
        if let Some(m) = job.machine.take() {
            play.machines.push(m);
        }
        if failed.is_none() {
            failed = job.failed.take();
        }
    }
    if play.machines.len() != count {
        return Err(Error::State("a machine went missing in a parallel window"));
    }
    send_in_play_order(play, routes, &mut jobs);
    drop(jobs);
    if let Some(e) = failed {
        return Err(e);
    }
    play.settle_credits();
    play.now = play.next_moment().max(end_us);
    Ok(waited)
}

/// Draw the command gaps of every command due before `end_us`, in play
/// order: by time, then by seat (the order [`Play::iteration`] draws them).
fn draw_commands(play: &mut Play, jobs: &mut [parking_lot::MutexGuard<'_, Job>], end_us: u64) {
    let mut next: Vec<u64> = play.machines.iter().map(|m| m.next_command_us).collect();
    loop {
        let mut first: Option<usize> = None;
        for (at, t) in next.iter().enumerate() {
            if *t < end_us && first.map_or(true, |f| *t < next[f]) {
                first = Some(at);
            }
        }
        let Some(at) = first else {
            return;
        };
        let gap = play.lobby.draw_command_gap();
        jobs[at].gaps.push_back(gap);
        next[at] += gap;
    }
}

/// Feed the window's datagrams to the network by send time, then seat,
/// then each machine's own order.
fn send_in_play_order(
    play: &mut Play,
    routes: &Routes,
    jobs: &mut [parking_lot::MutexGuard<'_, Job>],
) {
    let net = &mut play.lobby.net;
    let mut heads = [0usize; MAX_SEATS];
    loop {
        let mut first: Option<(usize, u64)> = None;
        for (at, job) in jobs.iter().enumerate() {
            if let Some(sent) = job.sent.get(heads[at]) {
                if first.map_or(true, |(_, t)| sent.at_us < t) {
                    first = Some((at, sent.at_us));
                }
            }
        }
        let Some((at, _)) = first else {
            break;
        };
        let job = &mut **jobs.get_mut(at).expect("a job per machine");
        let sent = &mut job.sent[heads[at]];
        heads[at] += 1;
        let from = routes.hosts[at];
        let to = sent.to_host.unwrap_or_else(|| net.host_id(sent.to));
        let bytes = std::mem::take(&mut sent.bytes);
        if let Some(lost) = net.send_between(sent.at_us, from, to, bytes) {
            if job.spare.len() < SPARE_BUFFERS {
                job.spare.push(lost);
            }
        }
    }
    for job in jobs.iter_mut() {
        job.sent.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::game::{GameSpec, OutageSpec, Spike};
    use crate::timing::PolicyKind;

    /// The report of `spec` played in order, and played in windows with how
    /// many windows there were.
    fn both_ways(spec: &GameSpec) -> (String, String, u64) {
        let mut in_order = Host::new(spec).unwrap();
        in_order.run().unwrap();
        let mut split = Host::new(spec).unwrap();
        let windows = run(&mut split).unwrap();
        (
            format!("{:?}", in_order.judge()),
            format!("{:?}", split.judge()),
            windows,
        )
    }

    #[test]
    fn windows_give_the_in_order_report_byte_for_byte() {
        let plain = GameSpec::new(6, 1200, 30, 150);
        let mut rough = GameSpec::new(5, 1200, 30, 120);
        rough.jitter_ms = 30;
        rough.loss_ppm = 20_000;
        rough.duplicate_ppm = 20_000;
        rough.reorder_ppm = 20_000;
        rough.seed = 7;
        let mut spiky = GameSpec::new(4, 1500, 30, 80);
        spiky.rtt_ms = vec![40, 90, 300];
        spiky.spikes = vec![Spike {
            rtt_ms: 900,
            start_ms: 10_000,
            duration_ms: 5_000,
            player: Some(2),
        }];
        spiky.outages = vec![OutageSpec {
            start_ms: 20_000,
            duration_ms: 2_000,
            player: Some(1),
        }];
        spiky.proc_us = vec![5_000, 5_000, 30_000];
        spiky.diverge = Some((1, 700));
        let mut tracking = GameSpec::new(8, 900, 30, 100);
        tracking.policy = PolicyKind::Tracking;
        tracking.commands_per_minute = 600;
        for spec in [plain, rough, spiky, tracking] {
            let (in_order, split, windows) = both_ways(&spec);
            assert!(windows > 10, "{windows} windows: the game was not split");
            assert_eq!(in_order, split, "{spec:?}");
        }
    }

    #[test]
    fn games_that_cannot_be_split_are_played_in_order() {
        let mut crash = GameSpec::new(4, 900, 30, 100);
        crash.departure = Some((2, 300, crate::sim::game::Departure::Crash));
        let lan = GameSpec::new(4, 900, 30, 4);
        let mut idle = GameSpec::new(3, 900, 30, 100);
        idle.proc_us = vec![0];
        for spec in [crash, lan, idle] {
            let (in_order, split, windows) = both_ways(&spec);
            assert_eq!(windows, 0, "{spec:?}");
            assert_eq!(in_order, split);
        }
    }
}
