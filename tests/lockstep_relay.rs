//! `LockstepSession` in the relay topology (S10) over the simulated network:
//! three sessions and a `Relay` exchanging real datagrams through
//! `sim::NetSim`, stepped a millisecond at a time, each session driven by
//! `LockstepSession::update` as an engine would. Every machine must execute
//! the same commands on the same frames (the relay's log, tick = frame),
//! each submitted command exactly once, in seat order within a frame.

use std::collections::HashMap;
use std::net::SocketAddr;

use rungs::relay::ticket::{issue, Credentials, LobbySecret, TicketFields};
use rungs::relay::{MatchSetup, Relay, RelayConfig, RELAY_LINK_SEAT};
use rungs::session::{Advance, LockstepConfig, LockstepSession, RelaySettings, SessionEvent};
use rungs::sim::{Conditions, NetSim, Outage};
use rungs::timing::MachineConfig;
use rungs::wire::relay::EntryKind;

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
}

struct Game {
    net: NetSim,
    relay: Relay,
    machines: Vec<Machine>,
    now: u64,
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
        let mut relay = Relay::new(RelayConfig::new(secret())).unwrap();
        relay
            .add_match(
                MatchSetup {
                    checksum_interval: CHECKSUM_INTERVAL as u16,
                    reconnect_grace_us: 20_000 * MS,
                    ai_order_delay,
                    ..MatchSetup::new(MATCH, seats, human_mask)
                },
                0,
            )
            .unwrap();
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
                }
            })
            .collect();
        Game {
            net: NetSim::new(seed, conditions),
            relay,
            machines,
            now: 0,
        }
    }

    fn submit(&mut self, seat: u8) {
        let m = &mut self.machines[usize::from(seat)];
        let order = [&[seat][..], &(m.submitted.len() as u32).to_le_bytes()[..]].concat();
        m.session.submit_command(&order).unwrap();
        m.submitted.push(order);
    }

    fn step(&mut self) {
        self.now += MS;
        let now = self.now;
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
        for m in &mut self.machines {
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
                    break;
                };
                m.frames.push(frame);
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
            SessionEvent::Timing(rungs::timing::Output::TimingChanged { timing, .. }) => {
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
                Err(rungs::Error::State(_))
            ),
            "before the Welcome no delay is known"
        );
        m.ai = Some((2, 7));
    }
    g.run_until(3_000 * MS);
    let ai = |m: &Machine| -> Vec<(u32, Vec<u8>)> {
        m.commands
            .iter()
            .filter(|c| c.1 == 2)
            .map(|c| (c.0, c.2.clone()))
            .collect()
    };
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
        assert!(matches!(human.kind(), rungs::Error::InvalidArgument(_)));
        assert!(human.to_string().contains("seat is 0"), "{human}");
        let long = m.session.submit_ai_order(2, &[0; 513]).unwrap_err();
        assert!(matches!(long.kind(), rungs::Error::InvalidArgument(_)));
    }
}
