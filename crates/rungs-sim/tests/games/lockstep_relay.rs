//! `LockstepSession` in the relay topology (S10) over the simulated network:
//! three sessions and a `Relay` exchanging real datagrams through
//! `sim::NetSim`, stepped a millisecond at a time, each session driven by
//! `LockstepSession::update` as an engine would. Every machine must execute
//! the same commands on the same frames (the relay's log, tick = frame),
//! each submitted command exactly once, in seat order within a frame.

use std::collections::HashMap;
use std::net::SocketAddr;

use rungs_core::relay::ticket::{issue, Credentials, LobbySecret, TicketFields};
use rungs_core::relay::{
    DurableRecord, MatchSetup, MatchState, Relay, RelayConfig, TurnLog, RELAY_LINK_SEAT,
};
use rungs_core::session::{
    Advance, LockstepConfig, LockstepSession, OrderKind, RelaySettings, SessionEvent,
};
use rungs_core::timing::MachineConfig;
use rungs_core::wire::relay::EntryKind;
use rungs_sim::{Conditions, NetSim, Outage};

const MS: u64 = 1000;
const MATCH: u64 = 0x5EED;
const UNIX: u64 = 1_800_000_000;
const CHECKSUM_INTERVAL: u32 = 10;

fn secret() -> LobbySecret {
    LobbySecret::new(*b"lockstep-relay-1").unwrap()
}

fn relay_addr() -> SocketAddr {
    "10.0.0.1:7000".parse().unwrap()
}

fn credentials(seat: u8) -> Credentials {
    issue(
        &secret(),
        &TicketFields {
            match_id: MATCH,
            seat,
            expires_unix_s: UNIX + 3600,
            nonce: 77 + u64::from(seat),
        },
    )
    .unwrap()
}

/// One machine: its session and what its engine saw.
struct Machine {
    seat: u8,
    address: SocketAddr,
    session: LockstepSession,
    /// Frames run, in order.
    frames: Vec<u32>,
    /// (frame, seat, bytes) of every command executed.
    commands: Vec<(u32, u8, Vec<u8>)>,
    events: Vec<SessionEvent>,
    /// The engine's state: a hash over every executed command.
    state: u64,
    /// Corrupt the state after this frame (a desync).
    corrupt_at: Option<u32>,
    submitted: Vec<Vec<u8>>,
    /// The engine's AI: after every this many frames it decides an order
    /// for the AI seat (S10 `ai_order_delay`); (decided after frame, tick
    /// the session gave it).
    ai: Option<(u8, u32)>,
    ai_orders: Vec<(u32, u32)>,
    /// An AI computed in the background: every `every` frames it begins a
    /// decision for `seat` on the next tick, which takes `takes_ms` to come
    /// in; (seat, every, takes_ms).
    background_ai: Option<(u8, u32, u64)>,
    /// Decisions computing: (decided tick, when it comes in).
    computing: Vec<(u32, u64)>,
    /// Frames that waited for this machine's own AI.
    waited_for_ai: u32,
    /// (frame, seat, bytes) of every ephemeral order run.
    ephemeral: Vec<(u32, u8, Vec<u8>)>,
}

impl Machine {
    /// (frame, bytes) of the commands `seat` ran here.
    fn commands_of(&self, seat: u8) -> Vec<(u32, Vec<u8>)> {
        self.commands
            .iter()
            .filter(|c| c.1 == seat)
            .map(|c| (c.0, c.2.clone()))
            .collect()
    }
}

struct Game {
    net: NetSim,
    relay: Relay,
    machines: Vec<Machine>,
    now: u64,
    /// The relay's durable records (the relay keeps them: persistent).
    records: Vec<DurableRecord>,
}

impl Game {
    fn new(seed: u64, conditions: Conditions, seats: u8) -> Game {
        Game::with_ai(seed, conditions, seats, (1 << seats) - 1, 8)
    }

    /// Seats outside `human_mask` are AI seats; AI orders run
    /// `ai_order_delay` ticks after they were decided.
    fn with_ai(
        seed: u64,
        conditions: Conditions,
        seats: u8,
        human_mask: u16,
        ai_order_delay: u8,
    ) -> Game {
        Game::with_setup(seed, conditions, seats, |setup| {
            setup.human_mask = human_mask;
            setup.ai_order_delay = ai_order_delay;
        })
    }

    /// The match's setup as `change` leaves it.
    fn with_setup(
        seed: u64,
        conditions: Conditions,
        seats: u8,
        change: impl FnOnce(&mut MatchSetup),
    ) -> Game {
        let mut setup = MatchSetup {
            checksum_interval: CHECKSUM_INTERVAL as u16,
            reconnect_grace_us: 20_000 * MS,
            ai_order_delay: 8,
            ..MatchSetup::new(MATCH, seats, (1 << seats) - 1)
        };
        change(&mut setup);
        let human_mask = setup.human_mask;
        let mut config = RelayConfig::new(secret());
        config.persistent = true;
        let mut relay = Relay::new(config).unwrap();
        relay.add_match(setup, 0).unwrap();
        let humans: Vec<bool> = (0..seats).map(|s| human_mask & (1 << s) != 0).collect();
        let machines = (0..seats)
            .filter(|seat| human_mask & (1 << seat) != 0)
            .map(|seat| {
                let config = LockstepConfig::relay(
                    MachineConfig::adaptive(30, humans.clone(), Some(seat)),
                    CHECKSUM_INTERVAL,
                    RelaySettings::new(
                        relay_addr(),
                        credentials(seat),
                        seed ^ u64::from(seat) << 40,
                    ),
                );
                let mut session = LockstepSession::new(&config, 0).unwrap();
                session.submit_initial_checksum(0).unwrap();
                Machine {
                    seat,
                    address: SocketAddr::from(([10, 0, 1, seat], 9000)),
                    session,
                    frames: Vec::new(),
                    commands: Vec::new(),
                    events: Vec::new(),
                    state: 0,
                    corrupt_at: None,
                    submitted: Vec::new(),
                    ai: None,
                    ai_orders: Vec::new(),
                    background_ai: None,
                    computing: Vec::new(),
                    waited_for_ai: 0,
                    ephemeral: Vec::new(),
                }
            })
            .collect();
        Game {
            net: NetSim::new(seed, conditions),
            relay,
            machines,
            now: 0,
            records: Vec::new(),
        }
    }

    fn submit(&mut self, seat: u8) {
        let m = &mut self.machines[usize::from(seat)];
        let order = [&[seat][..], &(m.submitted.len() as u32).to_le_bytes()[..]].concat();
        m.session.submit_command(&order).unwrap();
        m.submitted.push(order);
    }

    /// Hand every datagram due at `now` to the relay or its machine, and
    /// fire the relay's timers.
    fn deliver(&mut self, now: u64) {
        let mut bytes = Vec::new();
        while let Some((_, from, to)) = self.net.poll_delivery_into(now, &mut bytes) {
            if to == relay_addr() {
                self.relay.handle_datagram(now, UNIX, from, &bytes);
            } else if let Some(m) = self.machines.iter_mut().find(|m| m.address == to) {
                m.session.handle_datagram(now, from, &bytes);
            }
        }
        if self.relay.poll_timeout().is_some_and(|t| t <= now) {
            self.relay.handle_timeout(now);
        }
        while self.relay.poll_event().is_some() {}
    }

    /// Send what the relay (its records kept first) and every machine have.
    fn transmit(&mut self, now: u64) {
        while let Some((_, record)) = self.relay.poll_durable() {
            self.records.push(record);
        }
        let mut buf = [0u8; 1500];
        while let Some((to, len)) = self.relay.poll_transmit(now, &mut buf) {
            self.net.send(now, relay_addr(), to, &buf[..len]);
        }
        for m in &mut self.machines {
            while let Some(t) = m.session.poll_transmit(now, &mut buf) {
                assert_eq!((t.seat, t.destination), (RELAY_LINK_SEAT, relay_addr()));
                self.net.send(now, m.address, t.destination, &buf[..t.len]);
            }
        }
    }

    fn step(&mut self) {
        self.now += MS;
        let now = self.now;
        self.deliver(now);
        for m in &mut self.machines {
            // The background AI's decisions that are in: orders, then end.
            if let Some((ai_seat, _, _)) = m.background_ai {
                for (decided, _) in m.computing.iter().filter(|c| c.1 <= now) {
                    m.session
                        .submit_ai_order_at(ai_seat, *decided, &decided.to_le_bytes())
                        .unwrap();
                    m.session.end_ai_decision(ai_seat, *decided).unwrap();
                }
                m.computing.retain(|c| c.1 > now);
            }
            // The engine's loop: run every frame that is due.
            loop {
                let mut ran = Vec::new();
                let wake = m
                    .session
                    .update(now, |frame, c| ran.push((frame, c.seat, c.bytes.clone())))
                    .unwrap();
                for (frame, seat, bytes) in ran {
                    m.state = m
                        .state
                        .wrapping_mul(0x100_0000_01B3)
                        .wrapping_add(u64::from(frame) << 8 | u64::from(seat));
                    for b in &bytes {
                        m.state = m.state.wrapping_mul(31) ^ u64::from(*b);
                    }
                    m.commands.push((frame, seat, bytes));
                }
                let Advance::Ran { frame } = wake.advance else {
                    if wake.waiting_for
                        & !m.session
                            .relay_client()
                            .map_or(0, |c| u32::from(c.welcome().map_or(0, |w| w.human_mask)))
                        != 0
                    {
                        m.waited_for_ai += 1;
                    }
                    break;
                };
                m.frames.push(frame);
                for e in m.session.ephemeral() {
                    m.ephemeral.push((e.tag, e.seat, e.bytes.clone()));
                }
                if let Some((ai_seat, every, takes_ms)) = m.background_ai {
                    if frame % every == 0 {
                        let decided = frame + 1;
                        m.session.begin_ai_decision(ai_seat, decided).unwrap();
                        m.computing.push((decided, now + takes_ms * MS));
                    }
                }
                if let Some((ai_seat, _)) = m.ai.filter(|(_, every)| frame % every == 0) {
                    let tick = m
                        .session
                        .submit_ai_order(ai_seat, &frame.to_le_bytes())
                        .unwrap();
                    m.ai_orders.push((frame, tick));
                }
                if m.corrupt_at == Some(frame) {
                    m.state ^= 1;
                }
                if m.session.is_checksum_frame(frame) {
                    m.session.submit_checksum(frame, m.state).unwrap();
                }
            }
            while let Some(e) = m.session.poll_event() {
                m.events.push(e);
            }
        }
        self.transmit(now);
    }

    fn run_until(&mut self, until_us: u64) {
        while self.now < until_us {
            self.step();
        }
    }

    /// Every machine ran consecutive frames from 0 and executed, frame by
    /// frame, exactly the relay's log (tick = frame), seats in order; every
    /// submitted command is in it once.
    fn check(&self) {
        let log: Vec<(u32, u8, Vec<u8>)> = self
            .relay
            .sequencer(MATCH)
            .unwrap()
            .log()
            .iter()
            .filter(|e| e.kind == EntryKind::Order)
            .map(|e| (e.tick, e.seat, e.payload.to_vec()))
            .collect();
        let mut counts: HashMap<&[u8], usize> = HashMap::new();
        for (_, _, payload) in &log {
            *counts.entry(payload).or_default() += 1;
        }
        for m in &self.machines {
            for order in &m.submitted {
                assert_eq!(
                    counts.get(order.as_slice()),
                    Some(&1),
                    "seat {} order {order:?}",
                    m.seat
                );
            }
            let expected: Vec<u32> = (0..m.frames.len() as u32).collect();
            assert_eq!(m.frames, expected, "seat {} frames", m.seat);
            let last = *m.frames.last().unwrap();
            let due: Vec<_> = log.iter().filter(|e| e.0 <= last).cloned().collect();
            assert_eq!(m.commands, due, "seat {} commands", m.seat);
        }
    }
}

fn lan() -> Conditions {
    Conditions {
        delay_us: 10 * MS,
        jitter_us: 3 * MS,
        ..Conditions::PERFECT
    }
}

#[test]
fn every_machine_executes_the_same_commands_on_the_same_frames() {
    let mut g = Game::new(1, lan(), 3);
    for t in 0..40u64 {
        g.run_until((500 + t * 50) * MS);
        for seat in 0..3 {
            // Several commands from one seat in a burst: consecutive ticks.
            if (t + u64::from(seat)) % 3 == 0 {
                g.submit(seat);
                g.submit(seat);
            }
        }
    }
    g.run_until(4_000 * MS);
    g.check();
    for m in &g.machines {
        // 30 ticks/s from the start on the last Hello: about 3.5 s of frames.
        assert!(
            m.frames.len() > 90,
            "seat {}: {} frames",
            m.seat,
            m.frames.len()
        );
        assert_eq!(m.commands.len(), 80, "seat {}", m.seat);
        assert_eq!(m.session.frame(), m.frames.last().copied());
        assert_eq!(m.session.stats().desyncs, 0);
        assert!(!m.session.has_left());
        // The relay's timing reached the engine as events, and the status
        // shows the last of them (the relay is the master, no seat is).
        let last = m.events.iter().rev().find_map(|e| match e {
            SessionEvent::Timing(rungs_core::timing::Output::TimingChanged { timing, .. }) => {
                Some(*timing)
            }
            _ => None,
        });
        let (status, is_master) = m.session.timing_status();
        assert_eq!(Some(status.timing), last, "seat {}", m.seat);
        assert!(!is_master && status.master.is_none());
    }
    // Two commands submitted together run on consecutive frames, not one.
    let first = &g.machines[0].commands;
    let seat0: Vec<u32> = first.iter().filter(|c| c.1 == 0).map(|c| c.0).collect();
    assert_eq!(seat0[1], seat0[0] + 1, "{seat0:?}");
}

#[test]
fn a_machine_reconnects_mid_match_and_nothing_is_lost_or_doubled() {
    let mut g = Game::new(2, lan(), 3);
    g.run_until(1_000 * MS);
    let p1 = g.machines[1].address;
    // Player 1's path fails both ways for 7 s: its relay link is lost (5 s
    // liveness), it reconnects, resumes at its horizon and catches up.
    for (from, to) in [(Some(p1), None), (None, Some(p1))] {
        g.net.add_outage(Outage {
            from,
            to,
            start_us: 1_500 * MS,
            end_us: 8_500 * MS,
        });
    }
    for t in 0..80u64 {
        g.run_until((1_000 + t * 100) * MS);
        g.submit(0);
        g.submit(1);
    }
    g.run_until(13_000 * MS);
    g.check();
    let m1 = &g.machines[1];
    assert!(m1.events.contains(&SessionEvent::LinkLost {
        seat: RELAY_LINK_SEAT
    }));
    assert!(m1.events.contains(&SessionEvent::LinkRecovered {
        seat: RELAY_LINK_SEAT
    }));
    assert!(
        !m1.events.contains(&SessionEvent::PeerRestarted {
            seat: RELAY_LINK_SEAT
        }),
        "resumed, not reloaded"
    );
    assert!(m1.session.stats().stalled_frames > 0);
    // Caught up: within a few ticks of the others.
    let f0 = *g.machines[0].frames.last().unwrap();
    let f1 = *m1.frames.last().unwrap();
    assert!(f0.abs_diff(f1) <= 3, "frames {f0} and {f1}");
    for m in &g.machines {
        assert_eq!(m.commands.len(), 160, "seat {}", m.seat);
    }
}

#[test]
fn a_desync_is_reported_with_the_seat_and_the_tick() {
    let mut g = Game::new(3, lan(), 3);
    g.machines[2].corrupt_at = Some(25);
    for t in 0..20u64 {
        g.run_until((300 + t * 100) * MS);
        g.submit(0);
    }
    g.run_until(3_000 * MS);
    g.check();
    for m in &g.machines {
        let desyncs: Vec<(u32, u32)> = m
            .events
            .iter()
            .filter_map(|e| match e {
                SessionEvent::Desync { frame, seats } => Some((*frame, *seats)),
                _ => None,
            })
            .collect();
        // The state differs from frame 25 on; the first compared frame is 30.
        assert_eq!(desyncs.first(), Some(&(30, 0b100)), "seat {}", m.seat);
        assert_eq!(m.session.stats().desyncs, desyncs.len() as u64);
    }
}

#[test]
fn quitting_removes_the_player_everywhere_on_the_same_frame() {
    let mut g = Game::new(4, lan(), 3);
    g.run_until(1_000 * MS);
    g.submit(1);
    g.machines[1].session.leave().unwrap();
    assert!(g.machines[1].session.submit_command(b"late").is_err());
    g.run_until(2_000 * MS);
    g.check();
    let removed: Vec<Option<u32>> = g
        .machines
        .iter()
        .map(|m| {
            m.events.iter().find_map(|e| match e {
                SessionEvent::PlayerRemoved { frame, seat: 1 } => Some(*frame),
                _ => None,
            })
        })
        .collect();
    assert!(removed[0].is_some(), "{removed:?}");
    assert!(removed.iter().all(|r| *r == removed[0]), "{removed:?}");
    let now = g.now;
    let others = g.machines[0].frames.len();
    let left = &mut g.machines[1];
    assert!(left.session.has_left());
    // Its own removal's frame runs and returns `Left`, as peer-to-peer.
    assert_eq!(left.session.frame(), removed[0]);
    assert_eq!(left.frames.last().copied(), removed[0].map(|f| f - 1));
    assert_eq!(left.session.advance(now).unwrap(), Advance::Left);
    assert!(others > left.frames.len());
}

#[test]
fn a_relay_session_has_no_peers_and_checks_its_ticket() {
    let config = |seat: u8, ticket_seat: u8| {
        LockstepConfig::relay(
            MachineConfig::adaptive(30, vec![true; 3], Some(seat)),
            CHECKSUM_INTERVAL,
            RelaySettings::new(relay_addr(), credentials(ticket_seat), 9),
        )
    };
    assert!(LockstepSession::new(&config(0, 1), 0).is_err());
    let mut s = LockstepSession::new(&config(1, 1), 0).unwrap();
    assert_eq!(s.peers_without_address(), 0);
    assert!(s.add_peer(0, "10.0.0.9:1".parse().unwrap(), 0).is_err());
    assert!(s.drop_player(0).is_err());
    assert!(s.submit_checksum(3, 1).is_err());
    // Before the Welcome: says Hello to the relay, runs no frame.
    assert_eq!(s.advance(0).unwrap(), Advance::Waiting);
    let mut buf = [0u8; 1500];
    let hello = s.poll_transmit(0, &mut buf).unwrap();
    assert_eq!(hello.destination, relay_addr());
    assert!(s.relay_client().is_some());
}

#[test]
fn ai_orders_run_ai_order_delay_ticks_after_the_decision_on_every_machine() {
    // Seats 0 and 1 are human, seat 2 is an AI every machine computes; its
    // orders travel in no message, only through each session's own queue.
    let mut g = Game::with_ai(9, lan(), 3, 0b011, 5);
    for m in &mut g.machines {
        assert!(
            matches!(
                m.session.submit_ai_order(2, b"x"),
                Err(rungs_core::Error::State(_))
            ),
            "before the Welcome no delay is known"
        );
        m.ai = Some((2, 7));
    }
    g.run_until(3_000 * MS);
    let ai = |m: &Machine| m.commands_of(2);
    let first = ai(&g.machines[0]);
    assert!(first.len() > 5, "{first:?}");
    for m in &mut g.machines {
        // Decided after frame F (with the state at F + 1): runs on F + 1 + 5.
        for (decided_after, tick) in &m.ai_orders {
            assert_eq!(*tick, decided_after + 1 + 5);
        }
        let seen = ai(m);
        for (tick, bytes) in seen.clone() {
            let decided_after = u32::from_le_bytes(bytes[..4].try_into().unwrap());
            assert_eq!(tick, decided_after + 6, "seat {}", m.seat);
        }
        let last = *m.frames.last().unwrap();
        let expected: Vec<_> = first.iter().filter(|c| c.0 <= last).cloned().collect();
        assert_eq!(
            seen, expected,
            "seat {}: the same AI orders on the same ticks",
            m.seat
        );
        let human = m.session.submit_ai_order(0, b"x").unwrap_err();
        assert!(matches!(human.kind(), rungs_core::Error::Invalid(_)));
        assert!(human.to_string().contains("seat is 0"), "{human}");
        let long = m.session.submit_ai_order(2, &[0; 513]).unwrap_err();
        assert!(matches!(long.kind(), rungs_core::Error::Invalid(_)));
    }
}

#[test]
fn ai_decisions_computed_in_the_background_run_on_their_tick_on_every_machine() {
    // Seat 2 is an AI every machine computes on a background thread; the
    // machines take 60 and 160 ms for a decision, then one takes 400 ms —
    // longer than the delay of 8 ticks (267 ms). Every decision still runs
    // on its tick + 8 on every machine: the slow machine waits for its own
    // AI, nobody else.
    let mut g = Game::with_ai(11, lan(), 3, 0b011, 8);
    for (m, takes_ms) in g.machines.iter_mut().zip([60u64, 160]) {
        m.background_ai = Some((2, 9, takes_ms));
    }
    g.run_until(3_000 * MS);
    let ai = |m: &Machine| m.commands_of(2);
    let first = ai(&g.machines[0]);
    assert!(first.len() > 5, "{first:?}");
    for (tick, bytes) in &first {
        let decided = u32::from_le_bytes(bytes[..4].try_into().unwrap());
        assert_eq!(*tick, decided + 8, "due on its decision tick + 8");
    }
    let last = *g.machines[1].frames.last().unwrap();
    let expected: Vec<_> = first.iter().filter(|c| c.0 <= last).cloned().collect();
    assert_eq!(ai(&g.machines[1]), expected);
    assert_eq!(g.machines[0].waited_for_ai, 0);
    assert_eq!(g.machines[1].waited_for_ai, 0);

    // Machine 1 now takes 400 ms a decision: its due ticks wait for it.
    g.machines[1].background_ai = Some((2, 9, 400));
    g.run_until(5_000 * MS);
    assert!(g.machines[1].waited_for_ai > 0, "it waited for its own AI");
    assert_eq!(g.machines[0].waited_for_ai, 0, "nobody else did");
    let first = ai(&g.machines[0]);
    let last = *g.machines[1].frames.last().unwrap();
    let ahead = *g.machines[0].frames.last().unwrap();
    assert!(
        last + 30 > ahead,
        "it keeps up between decisions: {last} vs {ahead}"
    );
    let expected: Vec<_> = first.iter().filter(|c| c.0 <= last).cloned().collect();
    assert_eq!(ai(&g.machines[1]), expected, "the same ticks regardless");

    // An order for a decision whose tick already ran here is late.
    let m = &mut g.machines[0];
    let frame = m.session.frame().unwrap();
    let late = m
        .session
        .submit_ai_order_at(2, frame - 8, b"x")
        .unwrap_err();
    assert!(matches!(late.kind(), rungs_core::Error::State(_)), "{late}");
    assert!(late.to_string().contains("already ran"), "{late}");
    assert!(
        m.session.end_ai_decision(2, frame + 50).is_err(),
        "never begun"
    );
}

#[test]
fn a_quit_order_runs_with_the_removal_on_every_machine() {
    let mut g = Game::new(12, lan(), 3);
    g.run_until(1_000 * MS);
    let receipt = g.machines[2]
        .session
        .submit_order(OrderKind::Quit, b"surrender")
        .unwrap();
    assert!(receipt.id > 0);
    assert!(g.machines[2].session.submit_command(b"late").is_err());
    g.run_until(2_000 * MS);
    // (The player who quit does not run its removal's frame: its game ends.)
    for m in &g.machines[..2] {
        let removed = m.events.iter().find_map(|e| match e {
            SessionEvent::PlayerRemoved { frame, seat: 2 } => Some(*frame),
            _ => None,
        });
        let quit_order = m
            .commands
            .iter()
            .find(|c| c.1 == 2 && c.2 == b"surrender")
            .map(|c| c.0);
        assert!(removed.is_some(), "seat {}", m.seat);
        assert_eq!(quit_order, removed, "seat {}: on the same frame", m.seat);
    }
}

#[test]
fn refused_commands_surface_with_their_id_and_the_rest_run() {
    let mut g = Game::with_setup(13, lan(), 2, |s| s.max_queued_ticks = 8);
    g.run_until(1_000 * MS);
    let ids: Vec<u64> = (0..20u8)
        .map(|n| {
            g.machines[0]
                .session
                .submit_order(OrderKind::Command, &[0, n])
                .unwrap()
                .id
        })
        .collect();
    g.run_until(2_000 * MS);
    g.machines[0].session.submit_command(&[0, 99]).unwrap();
    g.run_until(3_000 * MS);
    let refused: Vec<u64> = g.machines[0]
        .events
        .iter()
        .filter_map(|e| match e {
            SessionEvent::CommandRefused { id, reason } => {
                assert_eq!(*reason, rungs_core::wire::relay::RefusalReason::QueueFull);
                Some(*id)
            }
            _ => None,
        })
        .collect();
    assert_eq!(refused, ids[8..].to_vec());
    for m in &g.machines {
        let ran: Vec<u8> = m
            .commands
            .iter()
            .filter(|c| c.1 == 0)
            .map(|c| c.2[1])
            .collect();
        assert_eq!(ran, vec![0, 1, 2, 3, 4, 5, 6, 7, 99], "seat {}", m.seat);
    }
}

#[test]
fn ephemeral_orders_reach_the_engines_of_live_machines_and_are_no_commands() {
    let mut g = Game::new(14, lan(), 3);
    g.run_until(1_000 * MS);
    for _ in 0..3 {
        g.machines[1]
            .session
            .submit_order(OrderKind::Ephemeral, b"ping at 10,20")
            .unwrap();
        g.run_until(g.now + 200 * MS);
    }
    g.run_until(2_500 * MS);
    g.check(); // the commands are the turn log's: no ephemeral among them
    let heard: Vec<Vec<u32>> = g
        .machines
        .iter()
        .map(|m| m.ephemeral.iter().map(|e| e.0).collect())
        .collect();
    assert_eq!(heard[0].len(), 3, "{heard:?}");
    assert!(
        heard.iter().all(|h| *h == heard[0]),
        "the same frames: {heard:?}"
    );
}

#[test]
fn a_replay_of_the_turn_log_runs_the_same_commands_and_names_the_diverged_seat() {
    let mut g = Game::new(15, lan(), 3);
    g.machines[2].corrupt_at = Some(25);
    for t in 0..20u64 {
        g.run_until((300 + t * 100) * MS);
        g.submit(t as u8 % 3);
    }
    g.run_until(3_000 * MS);
    g.relay.end_match(MATCH, g.now).unwrap();
    g.run_until(3_500 * MS);
    let mut state = MatchState::from_created(&g.records[0]).unwrap();
    for r in &g.records {
        state.apply(r);
    }
    let log = TurnLog::decode(&TurnLog::from_state(&state).encode()).unwrap();
    assert!(log.over.is_some());
    // Seat 0's view, replayed by an engine that computes as seat 0 did.
    let config = LockstepConfig::relay(
        MachineConfig::adaptive(30, vec![true; 3], Some(0)),
        CHECKSUM_INTERVAL,
        RelaySettings::new(relay_addr(), credentials(0), 1),
    );
    let mut replay = LockstepSession::replay(&config, &log, 0).unwrap();
    assert!(replay.is_replay());
    replay.submit_initial_checksum(0).unwrap();
    let mut state = 0u64;
    let mut commands = Vec::new();
    let mut desyncs = Vec::new();
    for _ in 0..10_000 {
        let mut ran = Vec::new();
        let wake = replay
            .update(0, |frame, c| ran.push((frame, c.seat, c.bytes.clone())))
            .unwrap();
        for (frame, seat, bytes) in ran {
            state = state
                .wrapping_mul(0x100_0000_01B3)
                .wrapping_add(u64::from(frame) << 8 | u64::from(seat));
            for b in &bytes {
                state = state.wrapping_mul(31) ^ u64::from(*b);
            }
            commands.push((frame, seat, bytes));
        }
        while let Some(e) = replay.poll_event() {
            if let SessionEvent::Desync { frame, seats } = e {
                desyncs.push((frame, seats));
            }
        }
        match wake.advance {
            Advance::Ran { frame } => {
                if replay.is_checksum_frame(frame) {
                    replay.submit_checksum(frame, state).unwrap();
                }
            }
            Advance::Left => break,
            other => panic!("a replay never waits: {other:?}"),
        }
    }
    let last = log.end_tick - 1;
    let played: Vec<_> = g.machines[0]
        .commands
        .iter()
        .filter(|c| c.0 <= last)
        .cloned()
        .collect();
    assert_eq!(commands, played, "the same commands on the same frames");
    assert_eq!(
        desyncs.first(),
        Some(&(30, 0b100)),
        "seat 2 differs from this engine from the state before tick 30 on"
    );
    assert!(
        replay.submit_command(b"x").is_err(),
        "a replay takes no orders"
    );
    // A session whose seats differ from the log's is refused.
    let other = LockstepConfig::relay(
        MachineConfig::adaptive(30, vec![true; 4], Some(0)),
        CHECKSUM_INTERVAL,
        RelaySettings::new(relay_addr(), credentials(0), 1),
    );
    assert!(LockstepSession::replay(&other, &log, 0).is_err());
}

#[test]
fn a_session_whose_checksum_interval_differs_from_the_match_is_told_so() {
    let mut g = Game::with_setup(16, lan(), 2, |s| s.checksum_interval = 30);
    let mut error = None;
    for _ in 0..1_000 {
        g.now += MS;
        let now = g.now;
        g.deliver(now);
        if let Err(e) = g.machines[0].session.advance(now) {
            error = Some(e);
            break;
        }
        g.transmit(now);
    }
    let error = error.expect("the mismatch is an error").to_string();
    assert!(
        error.contains("every 30 ticks") && error.contains("is 10"),
        "{error}"
    );
}
