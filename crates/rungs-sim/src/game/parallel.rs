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
//! Windows are half that long where half is long enough, so that the
//! network's serial work leaves the critical path: what window `W` sends
//! arrives after `W + 1` ends (the two together last at most `d`, see
//! [`next_window`]), so while the machines play `W + 1` the caller feeds
//! `W`'s datagrams to the network and then takes out the arrivals of
//! `W + 2`, which is then ready to open the moment `W + 1` ends. Whether
//! every machine stays in play through `W + 2` is checked when `W + 1`
//! opens, over both windows. A window that prepares no next one (the last
//! before in-order play, or a window of the whole `d`, where half is too
//! short) feeds its datagrams at its end.
//!
//! What the machines share is handled so that nothing depends on which
//! thread ran what, or when:
//! - **Arrivals**: taken out of [`NetSim`] before the window opens (while
//!   the one before plays, when it was prepared), in the network's order,
//!   into each machine's inbox. Every datagram that can arrive by then was
//!   fed to the network before.
//! - **Commands**: the players' command gaps come from one random stream
//!   drawn in play order (time, then seat). Before the window opens the
//!   draws of every command due in it are made in that order and handed to
//!   each machine; it is exact because whether a player issues does not
//!   change inside a window (checked: no player can reach the last issuing
//!   frame within it, see [`window`]).
//! - **Sends**: each machine's datagrams are collected with their send time
//!   and fed to [`NetSim`] after the window (during the next one, when that
//!   was prepared) in exactly the order in-order play sends them (time,
//!   then seat, then the machine's own order), so the network's random
//!   draws and its tie-breaking are the same; no datagram that could
//!   arrive earlier than they do is taken out of the network in between.
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
//! The unit tests below play games both ways (in order, in windows whole
//! and prepared ahead) and compare the reports byte for byte, and
//! `tests/rungs_sim_cli.rs` compares `--threads 1` with `--threads 2`.
//!
//! Threads: the calling thread and one helper. At each window the machines
//! are jobs on a board; the caller takes them from the first up, the helper
//! from the last down, until none is left (a machine mostly stays on one
//! core, its state in that core's cache). The caller first does the
//! network's part (feeding the last window's datagrams, taking out the
//! next window's arrivals), the helper meanwhile already plays machines.
//! Between windows the helper waits awake, yielding, so that it starts
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
use crate::{HostId, NetSim};
use rungs_core::error::{Error, Result};
use rungs_core::report::MAX_SEATS;

/// Windows of half the least delay, the next prepared while one plays
/// (the network's serial work off the critical path, twice the windows),
/// rather than whole ones with the network fed between them. Both give the
/// same result byte for byte; which is faster depends on how much the
/// windows' hand-over costs against the network's part (see
/// docs/rungs-sim.md, "Two threads").
const PREPARE_AHEAD: bool = true;
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

/// How many windows a game was played in, and how many of them were
/// prepared while the one before played.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Windows {
    pub(super) played: u64,
    pub(super) prepared: u64,
}

/// Play the game of `host` to its end, on two threads where the game
/// allows (see the module docs), in order elsewhere.
pub(super) fn run(host: &mut Host<'_>) -> Result<Windows> {
    run_windows(host, PREPARE_AHEAD)
}

/// [`run`], with windows of half the least delay prepared ahead, or whole
/// ones (the same result either way).
fn run_windows(host: &mut Host<'_>, prepare_ahead: bool) -> Result<Windows> {
    if !splittable(&host.rules) {
        return host.run().map(|()| Windows::default());
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
            let mut carried = Carried::new(play.machines.len());
            let mut windows = Windows::default();
            let mut alone = 0u32;
            while play.playing(rules) {
                play.check_progress(rules)?;
                // The window prepared by the last one, or a new one.
                windows.prepared += u64::from(carried.prepared_end.is_some());
                let ahead = prepare_ahead;
                let Some(end) = carried.prepared_end.or_else(|| window(play, rules, ahead)) else {
                    play.iteration(rules)?;
                    continue;
                };
                let next_end = next_window(play, rules, end);
                let helped = alone == 0;
                alone = alone.saturating_sub(1);
                let wake = || helper.thread().unpark();
                routes.update(play);
                let waited = play_window(
                    play,
                    rules,
                    &board,
                    &routes,
                    &mut carried,
                    (end, next_end),
                    helped,
                    wake,
                )?;
                if waited > SLOW_HELPER {
                    alone = ALONE_WINDOWS;
                }
                windows.played += 1;
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
    rules.faults.is_empty()
        && spec.timed_faults.is_empty()
        && (0..spec.players).all(|seat| spec.proc_of(seat) > 0)
}

/// The end of a window opening at `play.now`, if one can open: long enough,
/// every machine in play, and no player able to reach the last issuing
/// frame (or the end) inside it. Half the least delay when that is long
/// enough, so that the next window can be prepared while this one plays
/// (see [`next_window`]); the whole least delay otherwise.
fn window(play: &Play, rules: &Rules<'_>, prepare_ahead: bool) -> Option<u64> {
    let delay = play.lobby.net.min_delay_from(play.now);
    if delay < MIN_WINDOW_US || !machines_stay_in_play(play, rules, delay) {
        return None;
    }
    let length = if prepare_ahead && delay / 2 >= MIN_WINDOW_US {
        delay / 2
    } else {
        delay
    };
    Some(play.now + length)
}

/// The end of the window that follows `[play.now, end_us)`, if it can be
/// prepared while this one plays: what this window sends must not arrive
/// before it ends (the two together last at most the least delay from
/// `play.now`), it must be long enough, and no player may reach the last
/// issuing frame (or the end) within both. This window's sends are then
/// fed to the network while the next one plays, and its arrivals taken out
/// of the network while this one plays.
fn next_window(play: &Play, rules: &Rules<'_>, end_us: u64) -> Option<u64> {
    let net = &play.lobby.net;
    let length = end_us - play.now;
    let delay = net.min_delay_from(play.now);
    // What this window sends arrives at `play.now + delay` at the earliest.
    let next_length = (net.min_delay_from(end_us) / 2).min(delay.checked_sub(length)?);
    if next_length < MIN_WINDOW_US || !machines_stay_in_play(play, rules, length + next_length) {
        return None;
    }
    Some(end_us + next_length)
}

/// Whether every machine stays in play, issuing, through the next
/// `length` µs from `play.now`: active, and unable to reach the last
/// issuing frame (or the end) so soon.
fn machines_stay_in_play(play: &Play, rules: &Rules<'_>, length: u64) -> bool {
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
            return false;
        }
    }
    true
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

/// What the caller carries from one window to the next, per seat: the
/// datagrams a window sent that are not fed to the network yet, the
/// buffers of those the network lost (back to their sender's job), and
/// the arrivals of the window prepared next.
struct Carried {
    unsent: Vec<Vec<Sent>>,
    lost: Vec<Vec<Vec<u8>>>,
    inboxes: Vec<Vec<Arrival>>,
    /// The end of the next window (it opens where the last one ended),
    /// when its arrivals are in `inboxes`.
    prepared_end: Option<u64>,
}

impl Carried {
    fn new(seats: usize) -> Carried {
        Carried {
            unsent: (0..seats).map(|_| Vec::new()).collect(),
            lost: (0..seats).map(|_| Vec::new()).collect(),
            inboxes: (0..seats).map(|_| Vec::new()).collect(),
            prepared_end: None,
        }
    }
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

    fn send(
        &mut self,
        now: u64,
        (_, to): (SocketAddr, SocketAddr),
        (_, to_seat): (u8, Option<u8>),
        datagram: &[u8],
    ) {
        let mut bytes = self.spare.pop().unwrap_or_default();
        bytes.clear();
        bytes.extend_from_slice(datagram);
        // The addressee's seat when its address is the lobby's for it (the
        // addresses are distinct), else the seat at that address, if any.
        let seat = to_seat
            .map(usize::from)
            .filter(|s| self.addresses.get(*s) == Some(&to))
            .or_else(|| self.addresses.iter().position(|a| *a == to));
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
/// `helped` by the other thread or alone; with `next_end`, prepare the
/// window `[end_us, next_end)` meanwhile. Returns how long the caller
/// waited for the helper to finish its jobs (wall clock, for scheduling
/// only: who plays a job never changes what it does).
#[allow(clippy::too_many_arguments)]
fn play_window(
    play: &mut Play,
    rules: &Rules<'_>,
    board: &Board,
    routes: &Routes,
    carried: &mut Carried,
    (end_us, next_end): (u64, Option<u64>),
    helped: bool,
    wake_helper: impl Fn(),
) -> Result<Duration> {
    let count = play.machines.len();
    let prepared = carried.prepared_end.take() == Some(end_us);
    // Hand every machine its arrivals and its command gaps; take what the
    // last window sent, if it is not fed to the network yet.
    let mut jobs: Vec<_> = board.jobs.iter().map(|job| job.lock()).collect();
    for (seat, job) in jobs.iter_mut().enumerate() {
        let job = &mut **job;
        job.end_us = end_us;
        job.gaps.clear();
        job.failed = None;
        let room = SPARE_BUFFERS.saturating_sub(job.spare.len());
        job.spare
            .extend(job.inbox.drain(..).map(|used| used.bytes).take(room));
        let room = SPARE_BUFFERS.saturating_sub(job.spare.len());
        job.spare.extend(carried.lost[seat].drain(..).take(room));
        carried.lost[seat].clear();
        job.inbox.clear();
        job.delivered = 0;
        if prepared {
            std::mem::swap(&mut job.inbox, &mut carried.inboxes[seat]);
        }
        std::mem::swap(&mut job.sent, &mut carried.unsent[seat]);
        if job.addresses != routes.addresses {
            job.addresses.clone_from(&routes.addresses);
            job.hosts.clone_from(&routes.hosts);
        }
    }
    if !prepared {
        // Everything sent before is in the network (a window that prepares
        // none feeds its datagrams at its end).
        take_arrivals(
            &mut play.lobby.net,
            routes,
            (play.now, end_us),
            |seat, arrival| {
                jobs[seat].inbox.push(arrival);
            },
        );
    }
    draw_commands(play, &mut jobs, end_us);
    for (job, m) in jobs.iter_mut().zip(play.machines.drain(..)) {
        job.machine = Some(m);
    }
    drop(jobs);

    // Both threads take jobs; the caller first feeds the network what the
    // last window sent and prepares the next window, while the helper
    // already plays machines.
    board.done.store(0, Ordering::Release);
    for taken in &board.taken {
        taken.store(false, Ordering::Release);
    }
    if helped {
        board.round.fetch_add(1, Ordering::AcqRel);
        wake_helper();
    }
    send_in_play_order(&mut play.lobby.net, routes, carried);
    if let Some(next_end) = next_end {
        let inboxes = &mut carried.inboxes;
        take_arrivals(
            &mut play.lobby.net,
            routes,
            (end_us, next_end),
            |seat, arrival| {
                inboxes[seat].push(arrival);
            },
        );
        carried.prepared_end = Some(next_end);
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

    // Take the machines back; what they sent goes to the network now, or
    // while the next window plays.
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
    if next_end.is_none() {
        for (seat, job) in jobs.iter_mut().enumerate() {
            std::mem::swap(&mut job.sent, &mut carried.unsent[seat]);
        }
        send_in_play_order(&mut play.lobby.net, routes, carried);
    }
    drop(jobs);
    if let Some(e) = failed {
        return Err(e);
    }
    play.settle_credits();
    play.now = match next_end {
        // The prepared window opens where this one ends.
        Some(_) => end_us,
        None => play.next_moment().max(end_us),
    };
    Ok(waited)
}

/// Take every datagram arriving before `end_us` out of the network, in its
/// order, and hand each to `arrive` with the seat it arrives at. One due
/// before the window opens at `start_us` arrives as it opens: in-order play
/// delivers what is due at its next iteration, and a datagram sent in the
/// last in-order iteration before the window (at `start_us - 1`, over a
/// path without delay before the game's paths are set) is due in the past.
fn take_arrivals(
    net: &mut NetSim,
    routes: &Routes,
    (start_us, end_us): (u64, u64),
    mut arrive: impl FnMut(usize, Arrival),
) {
    while let Some(arrival) = net.poll_arrival(end_us - 1) {
        // The lobby's addresses are the machines' (games with moves are
        // played in order).
        if let Some(seat) = routes.seat_at(arrival.to, net) {
            arrive(
                seat,
                Arrival {
                    at_us: arrival.at_us.max(start_us),
                    from: net.address_of(arrival.from),
                    bytes: arrival.bytes,
                },
            );
        }
    }
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

/// Feed a window's datagrams (`carried.unsent`) to the network by send
/// time, then seat, then each machine's own order: the order in-order play
/// sends them in. The buffers of those lost go to `carried.lost`.
fn send_in_play_order(net: &mut NetSim, routes: &Routes, carried: &mut Carried) {
    let Carried { unsent, lost, .. } = carried;
    let mut heads = [0usize; MAX_SEATS];
    loop {
        // The first datagram in play order, and the first of any other
        // seat: the first seat's datagrams go out until that one's turn
        // (a machine sends a burst at once, so one look sends many).
        let mut first: Option<(u64, usize)> = None;
        let mut second: Option<(u64, usize)> = None;
        for (seat, sent) in unsent.iter().enumerate() {
            if let Some(sent) = sent.get(heads[seat]) {
                let key = (sent.at_us, seat);
                if first.map_or(true, |f| key < f) {
                    second = first;
                    first = Some(key);
                } else if second.map_or(true, |s| key < s) {
                    second = Some(key);
                }
            }
        }
        let Some((_, seat)) = first else {
            break;
        };
        let from = routes.hosts[seat];
        while let Some(sent) = unsent[seat].get_mut(heads[seat]) {
            if second.is_some_and(|s| (sent.at_us, seat) > s) {
                break;
            }
            heads[seat] += 1;
            let to = sent.to_host.unwrap_or_else(|| net.host_id(sent.to));
            let bytes = std::mem::take(&mut sent.bytes);
            if let Some(buffer) = net.send_between(sent.at_us, from, to, bytes) {
                if lost[seat].len() < SPARE_BUFFERS {
                    lost[seat].push(buffer);
                }
            }
        }
    }
    for sent in unsent.iter_mut() {
        sent.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::game::{GameSpec, OutageSpec, Spike};
    use rungs_core::timing::PolicyKind;

    /// The report of `spec` played in order, and played in windows with how
    /// many windows there were.
    fn both_ways(spec: &GameSpec) -> (String, String, Windows) {
        let mut in_order = Host::new(spec).unwrap();
        in_order.run().unwrap();
        let (split, windows) = in_windows(spec, true);
        (format!("{:?}", in_order.judge()), split, windows)
    }

    /// The report of `spec` played in windows prepared ahead or whole ones.
    fn in_windows(spec: &GameSpec, prepare_ahead: bool) -> (String, Windows) {
        let mut split = Host::new(spec).unwrap();
        let windows = run_windows(&mut split, prepare_ahead).unwrap();
        (format!("{:?}", split.judge()), windows)
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
            assert!(windows.played > 10, "{windows:?}: the game was not split");
            // Every path is 40 ms one way or more: half of that is a
            // window, and most are prepared while the one before plays.
            assert!(
                windows.prepared * 10 > windows.played * 9,
                "{windows:?}: the windows were not prepared ahead"
            );
            assert_eq!(in_order, split, "{spec:?}");
            // Whole windows, the network fed between them: the same again.
            let (whole, whole_windows) = in_windows(&spec, false);
            assert_eq!(whole_windows.prepared, 0, "{whole_windows:?}");
            assert!(whole_windows.played > 10, "{whole_windows:?}");
            assert_eq!(in_order, whole, "{spec:?}");
        }
        // Paths of 6 to 9 ms one way: whole windows, none prepared ahead.
        let short = GameSpec::new(4, 900, 30, 12);
        let (in_order, split, windows) = both_ways(&short);
        assert!(windows.played > 10, "{windows:?}: the game was not split");
        assert_eq!(windows.prepared, 0, "{windows:?}");
        assert_eq!(in_order, split);
    }

    #[test]
    fn a_datagram_sent_just_before_the_first_window_arrives_as_it_opens() {
        // Before the game's paths are set a datagram has no delay: sent in
        // the last in-order iteration, it is due before the first window
        // opens, and in-order play hands it over at the next iteration. It
        // was handed over a microsecond early, and the game went another way.
        let mut spec = GameSpec::new(7, 400, 30, 232);
        spec.rtt_ms = vec![232, 178, 272, 371, 357, 224, 389];
        spec.loss_ppm = 65_110;
        spec.policy = PolicyKind::Fixed(rungs_core::timing::Timing::new(1, 12).unwrap());
        spec.seed = 14_368_263_444_129_238_480;
        let (in_order, split, windows) = both_ways(&spec);
        assert!(windows.played > 10, "{windows:?}: the game was not split");
        assert_eq!(in_order, split);
    }

    #[test]
    fn games_that_cannot_be_split_are_played_in_order() {
        let mut crash = GameSpec::new(4, 900, 30, 100);
        crash.departure = Some((2, 300, crate::game::Departure::Crash));
        let lan = GameSpec::new(4, 900, 30, 4);
        let mut idle = GameSpec::new(3, 900, 30, 100);
        idle.proc_us = vec![0];
        for spec in [crash, lan, idle] {
            let (in_order, split, windows) = both_ways(&spec);
            assert_eq!(windows.played, 0, "{spec:?}");
            assert_eq!(in_order, split);
        }
    }
}
