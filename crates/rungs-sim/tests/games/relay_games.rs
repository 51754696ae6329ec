//! Relayed matches over the simulated network (S10): a `Relay` and several
//! `RelayClient`s exchanging real datagrams through `sim::NetSim`, stepped a
//! millisecond at a time. Each test checks the invariants of relay mode:
//! every client executes the same turns, every order a live client process
//! submitted is executed exactly once, nothing is executed twice.
//!
//! The soak (`soak_many_seeded_games`) plays `RUNGS_RELAY_SOAK_GAMES` games
//! (default 6) with loss, reordering, duplication, outages, client crashes
//! and restarts, short queues that refuse bursts, and relays killed and
//! restarted from their journal; run it with `RUNGS_RELAY_SOAK_GAMES=500
//! cargo test --release --test relay_games soak -- --nocapture` for the full
//! soak.

use std::collections::HashMap;
use std::net::SocketAddr;

use rungs_core::relay::ticket::{issue, Credentials, LobbySecret, TicketFields};
use rungs_core::relay::MatchEvent;
use rungs_core::relay::{
    ClientConfig, ClientEvent, DurableRecord, MatchSetup, MatchState, Relay, RelayClient,
    RelayConfig, RelayEvent, SeatTurn, Turn,
};
use rungs_core::wire::relay::{EntryKind, MatchOverReason, RejectReason};
use rungs_sim::{Conditions, NetSim, Outage, SplitMix64};

use crate::hello;

const MS: u64 = 1000;
const MATCH: u64 = 0xAB_CDEF;
const UNIX: u64 = 1_800_000_000;

fn secret() -> LobbySecret {
    LobbySecret::new(*b"test-lobby-key-1").unwrap()
}

fn relay_addr() -> SocketAddr {
    "10.0.0.1:7000".parse().unwrap()
}

fn player_addr(seat: u8, generation: u32) -> SocketAddr {
    SocketAddr::from(([10, 0, 1, seat], 9000 + generation as u16))
}

fn credentials(seat: u8) -> Credentials {
    issue(
        &secret(),
        &TicketFields {
            match_id: MATCH,
            seat,
            expires_unix_s: UNIX + 3600,
            nonce: 1000 + u64::from(seat),
        },
    )
    .unwrap()
}

/// One player: a client process (absent while crashed) and what its engine did.
struct Player {
    seat: u8,
    client: Option<RelayClient>,
    generation: u32,
    address: SocketAddr,
    /// Turns executed by the current process, from its first tick.
    executed: Vec<Turn>,
    state: u64,
    corrupt_at: Option<u32>,
    events: Vec<ClientEvent>,
    /// Orders submitted by each process generation.
    submitted: Vec<Vec<u8>>,
    next_order: u32,
    /// While the process is frozen (not scheduled): the datagrams its
    /// socket buffered, handed over when it runs again.
    frozen: Option<Vec<(SocketAddr, Vec<u8>)>>,
    /// The current process's orders by the id its client gave them.
    ids: HashMap<u64, Vec<u8>>,
    /// Orders the relay refused (told to the client: they never run).
    refused: Vec<Vec<u8>>,
}

struct Game {
    net: NetSim,
    relay: Relay,
    players: Vec<Player>,
    now: u64,
    relay_events: Vec<RelayEvent>,
    /// Orders a crashed process submitted that the relay never accepted:
    /// they died with the process.
    lost_with_process: Vec<Vec<u8>>,
    setup: MatchSetup,
    /// With persistence on: the relay's durable records so far (written
    /// before anything it sends, as `rungs-relay --state` does).
    journal: Option<Vec<DurableRecord>>,
}

impl Game {
    fn new(seed: u64, conditions: Conditions, setup: MatchSetup) -> Game {
        let mut relay = Relay::new(RelayConfig::new(secret())).unwrap();
        relay.add_match(setup, 0).unwrap();
        let players = (0..setup.seat_count)
            .filter(|s| setup.human_mask & (1 << s) != 0)
            .map(|seat| Player {
                seat,
                client: None,
                generation: 0,
                address: player_addr(seat, 0),
                executed: Vec::new(),
                state: 0,
                corrupt_at: None,
                events: Vec::new(),
                submitted: Vec::new(),
                next_order: 0,
                frozen: None,
                ids: HashMap::new(),
                refused: Vec::new(),
            })
            .collect();
        Game {
            net: NetSim::new(seed, conditions),
            relay,
            players,
            now: 0,
            relay_events: Vec::new(),
            lost_with_process: Vec::new(),
            setup,
            journal: None,
        }
    }

    /// The same game with a relay that keeps its durable records.
    fn persistent(seed: u64, conditions: Conditions, setup: MatchSetup) -> Game {
        let mut config = RelayConfig::new(secret());
        config.persistent = true;
        let mut g = Game::new(seed, conditions, setup);
        g.relay = Relay::new(config).unwrap();
        g.relay.add_match(setup, 0).unwrap();
        g.journal = Some(Vec::new());
        g.take_records();
        g
    }

    fn take_records(&mut self) {
        if let Some(journal) = self.journal.as_mut() {
            while let Some((_, record)) = self.relay.poll_durable() {
                journal.push(record);
            }
        }
    }

    /// Kill the relay and start a new one from the first `keep` records of
    /// its journal (all of them: a crash; fewer: a power loss that took the
    /// unsynced tail).
    fn restart_relay(&mut self, keep: usize) {
        let journal = self.journal.as_mut().expect("a persistent game");
        journal.truncate(keep);
        let mut state = MatchState::from_created(&journal[0]).unwrap();
        for record in journal.iter() {
            state.apply(record);
        }
        let mut config = RelayConfig::new(secret());
        config.persistent = true;
        self.relay = Relay::new(config).unwrap();
        self.relay.restore_match(&state, self.now).unwrap();
        self.take_records();
    }

    fn player(&mut self, seat: u8) -> &mut Player {
        self.players.iter_mut().find(|p| p.seat == seat).unwrap()
    }

    /// Start (or restart) a client process for `seat` with `have_horizon`.
    fn join(&mut self, seat: u8, have_horizon: u32) {
        let now = self.now;
        let checksums = self.setup.checksum_interval > 0;
        let p = self.player(seat);
        p.generation += 1;
        p.address = player_addr(seat, p.generation);
        let config = ClientConfig {
            have_horizon,
            ..ClientConfig::new(
                credentials(seat),
                relay_addr(),
                u64::from(seat) << 32 | u64::from(p.generation),
            )
        };
        let mut client = RelayClient::new(config, now).unwrap();
        if have_horizon == 0 && checksums {
            client.report_checksum(0, 0); // the initial state
        }
        p.client = Some(client);
        p.ids.clear();
        p.executed.clear();
        p.state = 0;
    }

    /// Kill `seat`'s process: the orders it had not seen confirmed may die
    /// with it (those the relay did accept must still run exactly once).
    fn crash(&mut self, seat: u8) {
        let p = self.player(seat);
        let unconfirmed = p.client.as_ref().map_or(0, |c| c.unconfirmed());
        let generation = p.generation.to_le_bytes();
        let mine: Vec<Vec<u8>> = p
            .submitted
            .iter()
            .filter(|o| o[5..9] == generation)
            .cloned()
            .collect();
        let at_risk = mine[mine.len() - unconfirmed..].to_vec();
        p.client = None;
        self.lost_with_process.extend(at_risk);
    }

    /// Stop scheduling `seat`'s process (a debugger, a swapped-out machine,
    /// a long load): no calls at all; its socket keeps what arrives.
    fn freeze(&mut self, seat: u8) {
        self.player(seat).frozen = Some(Vec::new());
    }

    /// Schedule it again: it reads what its socket buffered, then runs on.
    fn thaw(&mut self, seat: u8) {
        let now = self.now;
        let p = self.player(seat);
        let buffered = p.frozen.take().unwrap_or_default();
        if let Some(c) = p.client.as_mut() {
            for (from, bytes) in buffered {
                c.handle_datagram(now, from, &bytes);
            }
        }
    }

    fn submit(&mut self, seat: u8, count: usize) {
        for _ in 0..count {
            let p = self.player(seat);
            let order = [
                &[p.seat][..],
                &p.next_order.to_le_bytes()[..],
                &p.generation.to_le_bytes()[..],
            ]
            .concat();
            p.next_order += 1;
            if let Some(c) = p.client.as_mut() {
                if let Ok(id) = c.submit_order(&order) {
                    p.ids.insert(id, order.clone());
                    p.submitted.push(order);
                }
            }
        }
    }

    fn step(&mut self) {
        self.now += MS;
        let now = self.now;
        let mut bytes = Vec::new();
        while let Some((_, from, to)) = self.net.poll_delivery_into(now, &mut bytes) {
            if to == relay_addr() {
                self.relay.handle_datagram(now, UNIX, from, &bytes);
            } else if let Some(p) = self.players.iter_mut().find(|p| p.address == to) {
                if let Some(buffered) = p.frozen.as_mut() {
                    buffered.push((from, bytes.clone()));
                } else if let Some(c) = p.client.as_mut() {
                    c.handle_datagram(now, from, &bytes);
                }
            }
        }
        if self.relay.poll_timeout().is_some_and(|t| t <= now) {
            self.relay.handle_timeout(now);
        }
        while let Some(e) = self.relay.poll_event() {
            self.relay_events.push(e);
        }
        let interval = u32::from(self.setup.checksum_interval);
        for p in &mut self.players {
            if p.frozen.is_some() {
                continue;
            }
            let Some(c) = p.client.as_mut() else { continue };
            if c.poll_timeout().is_some_and(|t| t <= now) {
                c.handle_timeout(now);
            }
            while let Some(e) = c.poll_event() {
                if let ClientEvent::Welcomed { reload: true, .. } = e {
                    p.executed.clear();
                    p.state = 0;
                }
                if let ClientEvent::OrderRefused { id, .. } = e {
                    // It never runs: not one of the orders that must.
                    if let Some(order) = p.ids.remove(&id) {
                        p.submitted.retain(|o| *o != order);
                        p.refused.push(order);
                    }
                }
                p.events.push(e);
            }
            while let Some(turn) = c.next_turn() {
                let mut h = p.state ^ u64::from(turn.tick);
                for s in &turn.seats {
                    h = h.wrapping_mul(0x100_0000_01B3) ^ seat_hash(s);
                }
                if p.corrupt_at == Some(turn.tick) {
                    h ^= 1;
                }
                p.state = h;
                // The state before the next tick (S10's checksum label).
                if interval > 0 && (turn.tick + 1) % interval == 0 {
                    c.report_checksum(turn.tick + 1, p.state);
                }
                // S3's report on its ticks: the relay's policy reads them.
                if rungs_core::report::is_report_frame(turn.tick) {
                    let rtt = c.link().report_rtt(now);
                    c.report_timing(rungs_core::report::Report {
                        process_us: 5_000,
                        max_wait_ms: 0,
                        worst_rtt_ms: rtt.latest_ms.filter(|_| rtt.clean_measurement),
                        // Sent as its worst round trip with nothing counted.
                        detail: None,
                    });
                }
                p.executed.push(turn);
            }
        }
        self.take_records();
        let mut buf = [0u8; 1500];
        while let Some((to, len)) = self.relay.poll_transmit(now, &mut buf) {
            self.net.send(now, relay_addr(), to, &buf[..len]);
        }
        for p in &mut self.players {
            if p.frozen.is_some() {
                continue;
            }
            let Some(c) = p.client.as_mut() else { continue };
            while let Some((to, len)) = c.poll_transmit(now, &mut buf) {
                self.net.send(now, p.address, to, &buf[..len]);
            }
        }
    }

    fn run_until(&mut self, until_us: u64) {
        while self.now < until_us {
            self.step();
        }
    }

    fn log(&self) -> Vec<(u32, u8, EntryKind, Vec<u8>)> {
        self.relay
            .sequencer(MATCH)
            .map(|s| {
                s.log()
                    .iter()
                    .map(|e| (e.tick, e.seat, e.kind, e.payload.to_vec()))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Every client executed the same turns; every order of a live process
    /// is in the log once; no order is in the log twice; every order in
    /// the log was submitted.
    fn check_invariants(&self) {
        let log = self.log();
        let mut counts: HashMap<Vec<u8>, usize> = HashMap::new();
        for (_, _, kind, payload) in &log {
            if *kind == EntryKind::Order {
                *counts.entry(payload.clone()).or_default() += 1;
            }
        }
        for (order, n) in &counts {
            assert_eq!(*n, 1, "order {order:?} sequenced {n} times");
        }
        for p in &self.players {
            for order in &p.refused {
                assert!(!counts.contains_key(order), "refused order {order:?} ran");
            }
        }
        for p in &self.players {
            for order in &p.submitted {
                let in_log = counts.contains_key(order);
                if !in_log {
                    assert!(
                        self.lost_with_process.contains(order),
                        "seat {} order {order:?} lost",
                        p.seat
                    );
                }
            }
            for order in counts.keys() {
                assert!(
                    self.players.iter().any(|q| q.submitted.contains(order)),
                    "order {order:?} never submitted"
                );
            }
        }
        // All turn histories agree with the log, tick by tick.
        let by_tick: HashMap<(u32, u8), (EntryKind, Vec<u8>)> = log
            .iter()
            .map(|(t, s, k, p)| ((*t, *s), (*k, p.clone())))
            .collect();
        for p in &self.players {
            for (i, turn) in p.executed.iter().enumerate() {
                let first = p.executed[0].tick;
                assert_eq!(
                    turn.tick,
                    first + i as u32,
                    "seat {} skipped a tick",
                    p.seat
                );
                for (seat, s) in turn.seats.iter().enumerate() {
                    let expected = by_tick.get(&(turn.tick, seat as u8));
                    match (s, expected) {
                        (SeatTurn::Order(o), Some((EntryKind::Order, e))) => assert_eq!(o, e),
                        (SeatTurn::Quit(o), Some((EntryKind::Quit, e))) => assert_eq!(o, e),
                        (SeatTurn::Dropped, Some((EntryKind::Dropped, _))) => {}
                        (SeatTurn::Null | SeatTurn::Ai | SeatTurn::Gone, None) => {}
                        other => {
                            panic!("seat {} tick {} seat {seat}: {other:?}", p.seat, turn.tick)
                        }
                    }
                }
            }
        }
    }

    fn started_at(&self) -> Option<(u64, bool)> {
        self.relay_events.iter().find_map(|e| match e {
            RelayEvent::Match {
                event: MatchEvent::Started { all_present },
                ..
            } => Some((0, *all_present)),
            _ => None,
        })
    }
}

fn seat_hash(s: &SeatTurn) -> u64 {
    match s {
        SeatTurn::Ai => 1,
        SeatTurn::Null => 2,
        SeatTurn::Quit(o) => o
            .iter()
            .fold(3u64, |h, b| h.wrapping_mul(31) ^ u64::from(*b)),
        SeatTurn::Dropped => 4,
        SeatTurn::Gone => 5,
        SeatTurn::Order(o) => o
            .iter()
            .fold(6u64, |h, b| h.wrapping_mul(31) ^ u64::from(*b)),
    }
}

fn setup(seats: u8, humans: u16) -> MatchSetup {
    MatchSetup {
        start_barrier_us: 2_000 * MS,
        reconnect_grace_us: 15_000 * MS,
        checksum_interval: 10,
        ..MatchSetup::new(MATCH, seats, humans)
    }
}

fn lan() -> Conditions {
    Conditions {
        delay_us: 10 * MS,
        jitter_us: 2 * MS,
        ..Conditions::PERFECT
    }
}

#[test]
fn starts_on_the_last_hello_and_executes_orders_on_consecutive_ticks() {
    let mut g = Game::new(1, lan(), setup(4, 0b0111));
    g.join(0, 0);
    g.run_until(200 * MS);
    g.join(1, 0);
    g.run_until(500 * MS);
    assert!(!g.relay.sequencer(MATCH).unwrap().has_started());
    g.join(2, 0);
    g.run_until(600 * MS);
    assert_eq!(g.started_at(), Some((0, true)), "started on the last Hello");
    // Five orders at once from seat 0: five consecutive ticks.
    g.submit(0, 5);
    g.submit(1, 1);
    g.run_until(2_000 * MS);
    let log = g.log();
    let ticks: Vec<u32> = log.iter().filter(|e| e.1 == 0).map(|e| e.0).collect();
    assert_eq!(ticks.len(), 5);
    assert!(ticks.windows(2).all(|w| w[1] == w[0] + 1), "{ticks:?}");
    // Empty bundles kept everyone executing: far more turns than orders,
    // with seat 3 (AI) always computed locally.
    for p in &g.players {
        assert!(
            p.executed.len() > 40,
            "seat {} ran {}",
            p.seat,
            p.executed.len()
        );
        assert!(p.executed.iter().all(|t| t.seats[3] == SeatTurn::Ai));
        assert!(p
            .executed
            .iter()
            .any(|t| t.seats[..3].iter().all(|s| *s == SeatTurn::Null)));
    }
    g.check_invariants();
    // Clock offset to the relay is known and the estimated relay tick is
    // close to the relay's (10 ms one way).
    let relay_tick = g.relay.sequencer(MATCH).unwrap().tick(g.now);
    let estimated = g.players[0]
        .client
        .as_ref()
        .unwrap()
        .estimated_relay_tick(g.now)
        .unwrap();
    assert!(
        relay_tick.abs_diff(estimated) <= 1,
        "{relay_tick} vs {estimated}"
    );
}

#[test]
fn starts_on_the_barrier_and_a_late_joiner_fast_forwards() {
    let mut g = Game::new(2, lan(), setup(3, 0b111));
    g.join(0, 0);
    g.join(1, 0);
    g.run_until(1_000 * MS);
    g.submit(0, 3);
    g.run_until(2_500 * MS);
    assert_eq!(g.started_at(), Some((0, false)), "started on the barrier");
    g.submit(1, 2);
    g.run_until(4_000 * MS);
    g.join(2, 0);
    g.run_until(5_000 * MS);
    let welcome = g.player(2).events.iter().find_map(|e| match e {
        ClientEvent::Welcomed {
            welcome,
            fast_forward_until,
            ..
        } => Some((welcome.resume_from_tick, *fast_forward_until)),
        _ => None,
    });
    let (resume, until) = welcome.expect("late joiner welcomed");
    assert_eq!(resume, 0);
    assert!(until > 50, "fast-forward to {until}");
    let late = &g.players[2];
    assert_eq!(late.executed[0].tick, 0);
    assert!(late.executed.len() as u32 > until);
    g.check_invariants();
}

#[test]
fn reconnect_mid_match_resumes_without_loss_or_duplicates() {
    let mut g = Game::new(3, lan(), setup(2, 0b11));
    g.join(0, 0);
    g.join(1, 0);
    g.run_until(1_000 * MS);
    let p1 = g.player(1).address;
    // Player 1's path to the relay fails both ways for 7 s: its link is
    // lost (5 s), it reconnects with its horizon.
    g.net.add_outage(Outage {
        from: Some(p1),
        to: None,
        start_us: 1_500 * MS,
        end_us: 8_500 * MS,
    });
    g.net.add_outage(Outage {
        from: None,
        to: Some(p1),
        start_us: 1_500 * MS,
        end_us: 8_500 * MS,
    });
    for t in 0..80 {
        g.run_until((1_000 + t * 100) * MS);
        g.submit(1, 1);
        g.submit(0, 1);
    }
    g.run_until(14_000 * MS);
    let p = g.player(1);
    assert!(p.events.contains(&ClientEvent::ConnectionLost));
    let resumes: Vec<(u32, bool)> = p
        .events
        .iter()
        .filter_map(|e| match e {
            ClientEvent::Welcomed {
                welcome, reload, ..
            } => Some((welcome.resume_from_tick, *reload)),
            _ => None,
        })
        .collect();
    assert_eq!(resumes.len(), 2, "{resumes:?}");
    assert!(
        resumes[1].0 > 0 && !resumes[1].1,
        "resumed at its horizon: {resumes:?}"
    );
    assert_eq!(g.players[1].client.as_ref().unwrap().unconfirmed(), 0);
    assert_eq!(g.log().iter().filter(|e| e.1 == 1).count(), 80);
    g.check_invariants();
}

#[test]
fn confirmations_lost_in_an_outage_cause_no_resend_or_double() {
    let mut g = Game::new(4, lan(), setup(2, 0b11));
    g.join(0, 0);
    g.join(1, 0);
    g.run_until(1_000 * MS);
    let p1 = g.player(1).address;
    // Only the relay → player direction fails: the relay accepts the orders
    // but the client never hears so; its link is lost, it reconnects, and
    // the Welcome's highest accepted sequence confirms them.
    g.net.add_outage(Outage {
        from: Some(relay_addr()),
        to: Some(p1),
        start_us: 1_100 * MS,
        end_us: 8_000 * MS,
    });
    g.run_until(1_200 * MS);
    g.submit(1, 6);
    g.run_until(14_000 * MS);
    assert!(g.player(1).events.contains(&ClientEvent::ConnectionLost));
    assert_eq!(g.log().iter().filter(|e| e.1 == 1).count(), 6);
    g.check_invariants();
}

/// A scripted client speaking the protocol by hand, to send what a correct
/// client never would: the same sequences twice, a gap in the sequence.
/// Resends are ignored and counted; a sequence above the highest judged is
/// judged on its own (S10), and the one it skipped is then a resend.
#[test]
fn resends_are_ignored_and_a_skipped_sequence_blocks_nothing() {
    use rungs_core::link::{Link, LinkConfig, LinkIdentity};
    use rungs_core::relay::RELAY_LINK_SEAT;
    use rungs_core::wire::relay::ClientMessage;
    use rungs_core::wire::SessionKey;

    let mut relay = Relay::new(RelayConfig::new(secret())).unwrap();
    relay.add_match(setup(2, 0b01), 0).unwrap();
    let creds = credentials(0);
    let nonce = 0xFEED_0001u64;
    let key = SessionKey(creds.link_secret.connection_key(nonce));
    let mut link = Link::new(
        LinkConfig::default(),
        LinkIdentity {
            session_id: nonce as u32,
            key,
            local_seat: 0,
            peer_seat: RELAY_LINK_SEAT,
        },
        0,
    )
    .unwrap();
    let me = player_addr(0, 1);
    let mut buf = [0u8; 1500];
    hello::hello_with_cookie(&mut relay, 0, UNIX, me, &creds, nonce);
    assert_eq!(relay.connection_count(), 1);
    for seq in [1u32, 2, 3, 2, 3, 1, 5, 4] {
        link.send(
            &ClientMessage::OrderSubmit {
                sequence: seq,
                payload: &[seq as u8],
            }
            .to_vec(),
        )
        .unwrap();
    }
    for step in 1..200u64 {
        let now = step * 10 * MS;
        while let Some(len) = link.poll_transmit(now, &mut buf) {
            relay.handle_datagram(now, UNIX, me, &buf[..len]);
        }
        relay.handle_timeout(now);
        while let Some((_, len)) = relay.poll_transmit(now, &mut buf) {
            let bytes = buf[..len].to_vec();
            if let Ok(packet) = rungs_core::wire::packet::decode(&bytes) {
                let _ = link.handle_packet(now, &packet, bytes.len());
            }
        }
        while link.recv().is_some() {}
    }
    let s = relay.sequencer(MATCH).unwrap();
    assert_eq!(s.counters().orders_accepted, 4, "1, 2, 3 and 5");
    assert_eq!(
        s.counters().duplicate_submissions,
        4,
        "2, 3, 1, and 4 once 5 was judged"
    );
    let payloads: Vec<u8> = s.log().iter().map(|e| e.payload[0]).collect();
    assert_eq!(payloads, vec![1, 2, 3, 5]);
}

#[test]
fn a_restarted_client_starts_from_zero_and_one_beyond_the_log_hears_log_lost() {
    let mut g = Game::new(5, lan(), setup(2, 0b11));
    g.join(0, 0);
    g.join(1, 0);
    g.run_until(1_000 * MS);
    g.submit(1, 4);
    g.run_until(2_000 * MS);
    g.crash(1);
    g.run_until(3_000 * MS);
    g.join(1, 0);
    g.submit(1, 3); // before the Welcome: numbered after what the relay has
    g.run_until(5_000 * MS);
    let p = g.player(1);
    assert_eq!(p.executed[0].tick, 0, "executed again from tick 0");
    assert!(matches!(
        p.events.iter().rfind(|e| matches!(e, ClientEvent::Welcomed { .. })),
        Some(ClientEvent::Welcomed { welcome, .. }) if welcome.resume_from_tick == 0
            && welcome.highest_accepted_sequence == 4
    ));
    // A process that holds more than the relay ever had (the relay lost
    // its log, or this is another match's state) is refused for good, with
    // its own reason: nothing to resume from.
    g.crash(1);
    g.join(1, 1_000_000);
    g.run_until(6_000 * MS);
    assert!(g
        .player(1)
        .events
        .contains(&ClientEvent::Rejected(RejectReason::LogLost)));
    assert!(g.player(1).client.as_ref().unwrap().is_closed());
    assert_eq!(g.log().iter().filter(|e| e.1 == 1).count(), 7);
    g.check_invariants();
}

/// Freeze seat 1 for `freeze_ms` at 3 s (its socket keeps what the relay
/// sent), then run it again; returns the game, how long after the thaw the
/// client was welcomed again (`None`: it was not), and how long until it
/// executed up to the relay's horizon at the thaw.
fn freeze_game(freeze_ms: u64) -> (Game, Option<u64>, u64) {
    let mut g = Game::new(21, lan(), setup(3, 0b111));
    for s in 0..3 {
        g.join(s, 0);
    }
    g.run_until(3_000 * MS);
    g.submit(1, 3);
    g.freeze(1);
    g.run_until((3_000 + freeze_ms) * MS);
    let welcomes_before = g.player(1).client.as_ref().unwrap().counters().welcomes;
    let thawed_at = g.now;
    let horizon_at_thaw = g.relay.sequencer(MATCH).unwrap().horizon();
    g.thaw(1);
    let mut welcomed = None;
    let mut caught_up = None;
    while g.now < thawed_at + 15_000 * MS && caught_up.is_none() {
        g.step();
        g.submit(0, 1);
        let now = g.now;
        let p = g.player(1);
        let c = p.client.as_ref().unwrap();
        if welcomed.is_none() && c.counters().welcomes > welcomes_before {
            welcomed = Some(now - thawed_at);
        }
        if p.executed
            .last()
            .is_some_and(|t| t.tick + 1 >= horizon_at_thaw)
        {
            caught_up = Some(now - thawed_at);
        }
    }
    // Seat 0 submitted an order a millisecond: they run one a tick, so
    // the queue needs as many ticks to drain.
    g.run_until(g.now + 2_000 * MS);
    (g, welcomed, caught_up.expect("caught up"))
}

#[test]
fn a_frozen_client_reconnects_as_soon_as_it_runs_again() {
    // 7 s frozen: the relay's 5 s liveness closed the connection meanwhile,
    // but the client's socket held bundles the relay sent before that, so
    // its own link looks alive. It notices the gap in its own calls and
    // says Hello at once instead of waiting out its 5 s liveness timeout.
    let (mut g, welcomed, caught_up) = freeze_game(7_000);
    let welcomed = welcomed.expect("welcomed again");
    eprintln!("7 s freeze: welcomed {welcomed} us, caught up {caught_up} us after the thaw");
    assert!(
        welcomed < 1_000 * MS,
        "welcomed {welcomed} us after the thaw"
    );
    assert!(
        caught_up < 1_000 * MS,
        "caught up {caught_up} us after the thaw"
    );
    assert!(g.player(1).events.contains(&ClientEvent::ConnectionLost));
    assert!(
        !g.log().iter().any(|e| e.2 == EntryKind::Dropped),
        "inside the grace: nobody dropped"
    );
    g.check_invariants();
}

#[test]
fn a_short_freeze_keeps_the_connection() {
    // 2 s: the relay still holds the connection; nothing to reconnect.
    let (mut g, welcomed, caught_up) = freeze_game(2_000);
    eprintln!("2 s freeze: caught up {caught_up} us after the thaw");
    assert_eq!(welcomed, None, "no new Welcome");
    assert!(!g.player(1).events.contains(&ClientEvent::ConnectionLost));
    assert!(caught_up < 1_000 * MS);
    g.check_invariants();
}

#[test]
fn a_bundle_gap_is_noticed_and_resynced() {
    let mut g = Game::new(6, lan(), setup(2, 0b11));
    g.join(0, 0);
    g.join(1, 0);
    g.run_until(1_000 * MS);
    g.submit(0, 2);
    g.submit(1, 2);
    g.relay.inject_bundle_gap(MATCH, 1, 5);
    g.run_until(2_000 * MS);
    let c = g.players[1].client.as_ref().unwrap();
    assert!(c.counters().gaps >= 1);
    assert!(c.counters().resync_requests >= 1);
    assert!(g.relay.sequencer(MATCH).unwrap().counters().resyncs >= 1);
    g.check_invariants();
}

#[test]
fn quit_is_sequenced_then_the_match_is_over() {
    let mut g = Game::new(7, lan(), setup(3, 0b111));
    for s in 0..3 {
        g.join(s, 0);
    }
    g.run_until(1_000 * MS);
    g.submit(2, 2);
    g.players[2].client.as_mut().unwrap().quit().unwrap();
    g.run_until(2_000 * MS);
    let quit_tick = g
        .log()
        .iter()
        .find(|e| e.2 == EntryKind::Quit)
        .map(|e| e.0)
        .expect("quit sequenced");
    for p in &g.players {
        let at = p
            .executed
            .iter()
            .position(|t| matches!(t.seats[2], SeatTurn::Quit(_)))
            .expect("quit executed");
        assert_eq!(p.executed[at].tick, quit_tick);
        assert!(p.executed[at + 1..]
            .iter()
            .all(|t| t.seats[2] == SeatTurn::Gone));
    }
    // The seat that left cannot come back.
    g.crash(2);
    g.join(2, 0);
    g.run_until(2_500 * MS);
    assert!(g
        .player(2)
        .events
        .contains(&ClientEvent::Rejected(RejectReason::SeatLeft)));
    g.players[0].client.as_mut().unwrap().quit().unwrap();
    g.players[1].client.as_mut().unwrap().quit().unwrap();
    g.run_until(3_500 * MS);
    assert!(g.relay.sequencer(MATCH).unwrap().is_over());
    for seat in [0, 1] {
        assert!(g.player(seat).events.iter().any(|e| matches!(
            e,
            ClientEvent::MatchOver {
                reason: MatchOverReason::AllLeft,
                ..
            }
        )));
    }
    g.check_invariants();
    g.run_until(40_000 * MS);
    assert_eq!(g.relay.match_count(), 0, "finished match removed");
    assert_eq!(g.relay.connection_count(), 0);
}

#[test]
fn a_desync_names_the_seat_and_the_tick() {
    let mut g = Game::new(8, lan(), setup(3, 0b111));
    for s in 0..3 {
        g.join(s, 0);
    }
    g.player(1).corrupt_at = Some(25);
    g.run_until(3_000 * MS);
    for p in &g.players {
        let first = p.events.iter().find_map(|e| match e {
            ClientEvent::Desync(d) => Some((d.tick, d.disagreeing_mask)),
            _ => None,
        });
        assert_eq!(first, Some((30, 0b010)), "seat {}", p.seat);
    }
    g.check_invariants();
}

#[test]
fn bad_input_costs_a_validation_and_is_counted() {
    let mut g = Game::new(9, lan(), setup(2, 0b11));
    g.join(0, 0);
    g.run_until(500 * MS);
    let before = g.relay.connection_count();
    let mut rng = SplitMix64::new(99);
    let genuine = credentials(1);
    let mut buf = [0u8; 100];
    for i in 0..2000u32 {
        let from = SocketAddr::from(([192, 0, 2, (i % 250) as u8], 1000 + (i % 999) as u16));
        // Forged tickets, garbage, and a ticket with a wrong link secret.
        let mut ticket = genuine.ticket;
        ticket[rng.below_or_equal(41) as usize] ^= 1 << rng.below_or_equal(7);
        let hello = rungs_core::wire::relay::Hello {
            nonce: rng.next_u64() | 1,
            have_horizon: 0,
            ticket: if i % 3 == 0 { genuine.ticket } else { ticket },
            cookie: rungs_core::wire::relay::NO_COOKIE,
        };
        let len =
            rungs_core::wire::relay::write_hello(&hello, b"not-the-secret!!", &mut buf).unwrap();
        g.relay.handle_datagram(g.now, UNIX, from, &buf[..len]);
        g.relay.handle_datagram(g.now, UNIX, from, &[0xB7; 40]);
        g.relay.handle_datagram(g.now, UNIX, from, &[0x00; 3]);
    }
    assert_eq!(
        g.relay.connection_count(),
        before,
        "no state for a forged Hello"
    );
    let c = *g.relay.counters();
    assert_eq!(c.rejected[RejectReason::BadTicket as usize - 1], 2000);
    assert_eq!(c.unknown_connection + c.not_relay, 4000);
    // Expired ticket.
    let expired = issue(
        &secret(),
        &TicketFields {
            match_id: MATCH,
            seat: 1,
            expires_unix_s: UNIX,
            nonce: 5,
        },
    )
    .unwrap();
    let hello = rungs_core::wire::relay::Hello {
        nonce: 77,
        have_horizon: 0,
        ticket: expired.ticket,
        cookie: rungs_core::wire::relay::NO_COOKIE,
    };
    let len =
        rungs_core::wire::relay::write_hello(&hello, &expired.link_secret.0, &mut buf).unwrap();
    g.relay
        .handle_datagram(g.now, UNIX, player_addr(1, 9), &buf[..len]);
    assert_eq!(
        g.relay.counters().rejected[RejectReason::Expired as usize - 1],
        1
    );
    // A genuine Hello captured and replayed from another address: the
    // replayer gets a Cookie for its own address, which it cannot put into
    // the Hello without the link secret.
    let (captured, _) = hello::hello_with_cookie(
        &mut g.relay,
        g.now,
        UNIX,
        player_addr(1, 1),
        &genuine,
        0x1234_5678_9ABC,
    );
    assert_eq!(g.relay.connection_count(), before + 1);
    g.relay
        .handle_datagram(g.now, UNIX, player_addr(1, 1), &captured);
    assert_eq!(g.relay.counters().duplicate_hellos, 1);
    let cookies = g.relay.counters().cookies_sent;
    g.relay
        .handle_datagram(g.now, UNIX, player_addr(1, 7), &captured);
    assert_eq!(g.relay.counters().cookies_sent, cookies + 1);
    assert_eq!(g.relay.connection_count(), before + 1);
    let c = *g.relay.counters();
    assert!(c.unverified_bytes_out <= c.unverified_bytes_in, "{c:?}");
}

/// One seeded game with loss, reordering, duplication, an outage, a crash
/// and restart: returns (orders sequenced, desyncs seen).
fn soak_game(seed: u64) -> (usize, usize, u64, usize, u64) {
    let mut rng = SplitMix64::new(seed);
    let conditions = Conditions {
        delay_us: (5 + rng.below_or_equal(60)) * MS,
        jitter_us: rng.below_or_equal(20) * MS,
        loss_ppm: rng.below_or_equal(100_000) as u32,
        duplicate_ppm: rng.below_or_equal(20_000) as u32,
        reorder_ppm: rng.below_or_equal(50_000) as u32,
        reorder_extra_us: 30 * MS,
    };
    let seats = 2 + rng.below_or_equal(4) as u8;
    let humans = (1u16 << seats) - 1 - if seats > 3 { 1 << (seats - 1) } else { 0 };
    let mut setup = setup(seats, humans);
    setup.bundle_interval = 1 + rng.below_or_equal(2) as u8;
    // Sometimes a short queue, so bursts are refused (and must block nothing).
    if rng.chance_ppm(300_000) {
        setup.max_queued_ticks = 2 + rng.below_or_equal(6) as u32;
    }
    // The fixed interval, or a policy changing it as the reports come.
    setup.timing_policy = match rng.below_or_equal(2) {
        0 => None,
        1 => Some(rungs_core::timing::PolicyKind::Adaptive),
        _ => Some(rungs_core::timing::PolicyKind::Tracking),
    };
    let mut g = Game::persistent(seed, conditions, setup);
    // Sometimes the relay dies and a new one starts from its journal.
    let restart_at = rng
        .chance_ppm(400_000)
        .then(|| 1_000 + rng.below_or_equal(5_000));
    let mut restarted = false;
    let human_seats: Vec<u8> = g.players.iter().map(|p| p.seat).collect();
    for &s in &human_seats {
        g.join(s, 0);
    }
    let desync_seat = if rng.chance_ppm(300_000) {
        let s = human_seats[rng.below_or_equal(human_seats.len() as u64 - 1) as usize];
        g.player(s).corrupt_at = Some(40 + rng.below_or_equal(60) as u32);
        Some(s)
    } else {
        None
    };
    let crash_seat = human_seats[rng.below_or_equal(human_seats.len() as u64 - 1) as usize];
    let crash_at = 1_500 + rng.below_or_equal(2_000);
    let outage_seat = human_seats[rng.below_or_equal(human_seats.len() as u64 - 1) as usize];
    let outage_at = 1_000 + rng.below_or_equal(3_000);
    let a = g.player(outage_seat).address;
    g.net.add_outage(Outage {
        from: Some(a),
        to: None,
        start_us: outage_at * MS,
        end_us: (outage_at + 1_000 + rng.below_or_equal(5_000)) * MS,
    });
    let mut crashed = false;
    let mut rejoined = false;
    for t in (0..9_000u64).step_by(50) {
        g.run_until(t * MS);
        for &s in &human_seats {
            if rng.chance_ppm(150_000) {
                g.submit(s, 1 + rng.below_or_equal(2) as usize);
            }
        }
        if t >= crash_at && !crashed {
            crashed = true;
            g.crash(crash_seat);
        }
        if crashed && !rejoined && t >= crash_at + 500 {
            rejoined = true;
            g.join(crash_seat, 0);
        }
        if restart_at.is_some_and(|at| t >= at) && !restarted {
            restarted = true;
            let keep = g.journal.as_ref().map_or(0, Vec::len);
            g.restart_relay(keep);
        }
    }
    // Stop submitting; let everything settle.
    g.run_until(16_000 * MS);
    g.check_invariants();
    let desyncs = g.relay.sequencer(MATCH).unwrap().desyncs().to_vec();
    if let Some(s) = desync_seat {
        // Detected: some notice names the corrupted seat (with 2 players a
        // tie names both).
        assert!(
            desyncs.iter().any(|d| d.disagreeing_mask & (1 << s) != 0),
            "seed {seed}: desync of seat {s} undetected; crash {crash_seat} outage {outage_seat} seats {human_seats:?} corrupt {:?} desyncs {desyncs:?} events {:?}",
            g.players.iter().find(|p| p.seat == s).unwrap().corrupt_at, g.players.iter().find(|p| p.seat == s).unwrap().events
        );
    } else {
        assert!(desyncs.is_empty(), "seed {seed}: false desync {desyncs:?}");
    }
    let changes = g.relay.sequencer(MATCH).unwrap().counters().timing_changes;
    let refused: usize = g.players.iter().map(|p| p.refused.len()).sum();
    (
        g.log().len(),
        desyncs.len(),
        changes,
        refused,
        u64::from(restarted),
    )
}

#[test]
fn soak_many_seeded_games() {
    let games: u64 = std::env::var("RUNGS_RELAY_SOAK_GAMES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(6);
    let (mut orders, mut desyncs, mut changes, mut refused, mut restarts) = (0, 0, 0, 0, 0);
    for seed in 0..games {
        let (o, d, c, r, x) = soak_game(0x50A4_0000 + seed);
        orders += o;
        desyncs += d;
        changes += c;
        refused += r;
        restarts += x;
    }
    eprintln!("soak: {games} games, {orders} log entries, {desyncs} desync notices (all injected), {changes} timing changes announced, {refused} orders refused (none ran, none blocked the next), {restarts} relay restarts from the journal, 0 lost, 0 doubled");
}

#[test]
fn ticks_larger_than_a_message_are_chunked_and_reassembled() {
    let conditions = Conditions {
        loss_ppm: 50_000,
        ..lan()
    };
    let mut g = Game::new(10, conditions, setup(16, 0xFFFF));
    for s in 0..16 {
        g.join(s, 0);
    }
    g.run_until(1_000 * MS);
    // Sixteen 500-byte orders on one tick: eight messages' worth, sent as a
    // series of MORE chunks.
    for s in 0..16u8 {
        let p = g.player(s);
        let order = [
            &[s][..],
            &[0, 0, 0, 0],
            &p.generation.to_le_bytes()[..],
            &[0xAB; 491],
        ]
        .concat();
        p.client.as_mut().unwrap().submit_order(&order).unwrap();
        p.submitted.push(order);
    }
    g.run_until(3_000 * MS);
    let log = g.log();
    assert_eq!(log.len(), 16);
    let tick = log[0].0;
    assert!(log.iter().all(|e| e.0 == tick), "same tick for all");
    for p in &g.players {
        let turn = p.executed.iter().find(|t| t.tick == tick).unwrap();
        assert!(turn
            .seats
            .iter()
            .all(|s| matches!(s, SeatTurn::Order(o) if o.len() == 500)));
    }
    // A late joiner gets the big tick in its catch-up.
    g.crash(3);
    g.join(3, 0);
    g.run_until(4_000 * MS);
    assert_eq!(g.player(3).executed[0].tick, 0);
    g.check_invariants();
}

#[test]
fn a_client_behind_a_new_nat_mapping_keeps_its_connection() {
    let mut g = Game::new(11, lan(), setup(2, 0b11));
    g.join(0, 0);
    g.join(1, 0);
    g.run_until(1_000 * MS);
    // The NAT gives player 1 a new public port: same client, new address.
    g.player(1).address = player_addr(1, 77);
    g.submit(1, 3);
    g.run_until(2_000 * MS);
    assert!(g.relay.counters().rebinds >= 1);
    assert!(g
        .relay_events
        .iter()
        .any(|e| matches!(e, RelayEvent::Rebound { seat: 1, .. })));
    let p = g.player(1);
    assert!(!p.events.contains(&ClientEvent::ConnectionLost));
    assert_eq!(g.log().iter().filter(|e| e.1 == 1).count(), 3);
    g.check_invariants();
}

#[test]
fn a_relay_restored_from_its_records_resumes_every_client_without_loss() {
    // Three players on a lossy path; the relay dies at 4 s (everything it
    // recorded kept, as with SIGKILL and a write before every send) and a
    // new one starts from the records at 4.5 s. Orders keep coming the
    // whole time: those sent to the dead relay are resent after the new
    // Welcome.
    let conditions = Conditions {
        loss_ppm: 20_000,
        ..lan()
    };
    let mut g = Game::persistent(31, conditions, setup(3, 0b111));
    for s in 0..3 {
        g.join(s, 0);
    }
    for at in (1..12).map(|s| s * 500) {
        g.run_until(at * MS);
        for s in 0..3 {
            g.submit(s, 2);
        }
        if at == 4_000 {
            let old = g.relay.sequencer(MATCH).unwrap();
            let (broadcast, clock) = (old.horizon(), old.match_clock_us(g.now));
            let keep = g.journal.as_ref().unwrap().len();
            g.restart_relay(keep);
            let restored = g.relay.sequencer(MATCH).unwrap();
            assert!(restored.horizon() >= broadcast, "no broadcast tick reused");
            assert_eq!(restored.match_clock_us(g.now), clock, "the same clock");
            g.run_until(4_500 * MS);
        }
    }
    g.run_until(20_000 * MS);
    g.check_invariants();
    for p in &g.players {
        assert!(p.executed.len() > 400, "seat {} kept playing", p.seat);
        let welcomes: Vec<bool> = p
            .events
            .iter()
            .filter_map(|e| match e {
                ClientEvent::Welcomed { reload, .. } => Some(*reload),
                _ => None,
            })
            .collect();
        assert!(welcomes.len() >= 2, "seat {}: {welcomes:?}", p.seat);
        assert!(!welcomes.contains(&true), "resumed, not reloaded");
        assert!(p.submitted.len() >= 22);
    }
}

#[test]
fn a_relay_that_lost_its_journal_s_tail_makes_clients_beyond_it_reload() {
    // A power loss took the records after the first second: the clients
    // ran ticks the new relay never had. They reload from tick 0 and run
    // the relay's log again; everyone agrees with it afterwards.
    let mut g = Game::persistent(32, lan(), setup(2, 0b11));
    g.join(0, 0);
    g.join(1, 0);
    g.run_until(1_000 * MS);
    g.submit(0, 3);
    let keep = g.journal.as_ref().unwrap().len();
    g.run_until(3_000 * MS);
    g.submit(1, 3);
    g.run_until(3_500 * MS);
    g.restart_relay(keep);
    g.run_until(12_000 * MS);
    for p in &g.players {
        assert!(
            p.events
                .iter()
                .any(|e| matches!(e, ClientEvent::Welcomed { reload: true, .. })),
            "seat {} reloaded",
            p.seat
        );
    }
    // The orders the relay confirmed before the lost tail may be gone with
    // it; the turns everyone ran since the reload are the relay's log.
    for p in &mut g.players {
        p.submitted.clear();
    }
    g.check_invariants();
    assert_eq!(g.players[0].executed, g.players[1].executed);
}

#[test]
fn refusals_reach_the_client_which_drops_the_order_and_goes_on() {
    // A queue of 8 ticks: a burst of 20 orders gets 8 accepted and 12
    // refused; the client hears each refusal by its id, and the orders it
    // sends afterwards run.
    let mut g = Game::new(
        33,
        lan(),
        MatchSetup {
            max_queued_ticks: 8,
            ..setup(2, 0b11)
        },
    );
    g.join(0, 0);
    g.join(1, 0);
    g.run_until(1_000 * MS);
    let mut ids = Vec::new();
    for n in 0..20u8 {
        let p = g.player(0);
        let order = vec![0, 0xEE, n];
        ids.push(p.client.as_mut().unwrap().submit_order(&order).unwrap());
        if n < 8 {
            p.submitted.push(order); // the refused ones never run
        }
    }
    g.run_until(2_000 * MS);
    let refused: Vec<u64> = g
        .player(0)
        .events
        .iter()
        .filter_map(|e| match e {
            ClientEvent::OrderRefused { id, reason, .. } => {
                assert_eq!(*reason, rungs_core::wire::relay::RefusalReason::QueueFull);
                Some(*id)
            }
            _ => None,
        })
        .collect();
    assert_eq!(refused.len(), 12, "{refused:?}");
    assert_eq!(refused, ids[8..].to_vec(), "the last twelve");
    assert_eq!(g.player(0).client.as_ref().unwrap().unconfirmed(), 0);
    g.submit(0, 3);
    g.run_until(3_000 * MS);
    g.check_invariants();
    let burst = g.log().iter().filter(|e| e.3.get(1) == Some(&0xEE)).count();
    assert_eq!(burst, 8);
}

#[test]
fn ephemeral_orders_reach_live_clients_with_their_tick_and_never_a_catching_up_one() {
    let mut g = Game::new(34, lan(), setup(3, 0b111));
    for s in 0..3 {
        g.join(s, 0);
    }
    g.run_until(1_000 * MS);
    // Seat 2's process dies before the ephemeral orders and a new one
    // catches up from tick 0 after them: a catch-up carries none.
    g.crash(2);
    for _ in 0..5 {
        g.player(0)
            .client
            .as_mut()
            .unwrap()
            .submit_ephemeral(b"voice")
            .unwrap();
        g.run_until(g.now + 100 * MS);
    }
    g.run_until(2_000 * MS);
    g.join(2, 0);
    g.run_until(4_000 * MS);
    let heard = |seat: u8, g: &mut Game| -> Vec<u32> {
        g.player(seat)
            .executed
            .iter()
            .filter(|t| t.ephemeral.iter().any(|(s, o)| *s == 0 && o == b"voice"))
            .map(|t| t.tick)
            .collect()
    };
    let sender = heard(0, &mut g);
    assert_eq!(sender.len(), 5, "{sender:?}");
    assert_eq!(heard(1, &mut g), sender, "same ticks on every live client");
    assert!(heard(2, &mut g).is_empty(), "caught up: none");
    assert!(g.log().is_empty(), "not in the turn log");
    g.check_invariants();
}
