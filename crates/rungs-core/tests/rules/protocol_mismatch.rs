//! Players whose builds speak other protocol versions: the session says so,
//! naming both versions, once per seat and version, and never hangs
//! silently; a forger of the (unauthenticated) version byte changes
//! nothing but counters and that one report; a relay of another version is
//! named with its version.
//!
//! The "other build" is a test double on the wire: it rewrites byte 1 of
//! every transport packet (or relay datagram) in transit, which is all a
//! build of another version looks like to this one: the tag is never
//! reached, since the version is judged first.

use std::net::SocketAddr;

use rungs_core::link::{DropReason, LinkConfig, Protocol, ProtocolMismatch};
use rungs_core::relay::ticket::{issue, LobbySecret, TicketFields};
use rungs_core::relay::{MatchSetup, Relay, RelayConfig};
use rungs_core::session::{
    Advance, LockstepConfig, LockstepSession, RelaySettings, SessionEvent, Topology,
};
use rungs_core::timing::MachineConfig;
use rungs_core::wire::packet::VERSION;
use rungs_core::wire::relay::{read_reject_of_any_version, RejectReason, REJECT_BYTES};
use rungs_core::wire::{SessionKey, MAX_PACKET_BYTES};

const MS: u64 = 1_000;
const S: u64 = 1_000_000;
/// The liveness timeout of these games: a silent seat is lost after it.
const LIVENESS_US: u64 = 2 * S;

fn address(seat: u8) -> SocketAddr {
    SocketAddr::from(([10, 0, 0, seat + 1], 4000))
}

fn session(seat: u8) -> LockstepSession {
    let config = LockstepConfig {
        machine: MachineConfig::adaptive(30, vec![true, true], Some(seat)),
        session_id: 0x5EED,
        key: SessionKey([7; 16]),
        link_keys: Vec::new(),
        epoch: 1,
        link: LinkConfig {
            liveness_timeout_us: Some(LIVENESS_US),
            ..LinkConfig::default()
        },
        checksum_interval: 0,
        topology: Topology::PeerToPeer,
        manual_drops: false,
    };
    let mut session = LockstepSession::new(&config, 0).unwrap();
    session.add_peer(1 - seat, address(1 - seat), 0).unwrap();
    session
}

/// Two machines, their datagrams carried by hand; `rewrite` may change
/// each datagram (from seat, bytes) in transit.
struct Game {
    machines: [LockstepSession; 2],
    events: [Vec<SessionEvent>; 2],
    frames_run: [u32; 2],
    now_us: u64,
}

impl Game {
    fn new() -> Game {
        Game {
            machines: [session(0), session(1)],
            events: Default::default(),
            frames_run: [0; 2],
            now_us: 0,
        }
    }

    /// Play `duration_us` in 1 ms steps; `inject` adds datagrams (source,
    /// bytes) for seat 0 each step.
    fn play(
        &mut self,
        duration_us: u64,
        mut rewrite: impl FnMut(u8, &mut Vec<u8>),
        mut inject: impl FnMut(u64) -> Vec<(SocketAddr, Vec<u8>)>,
    ) {
        let end = self.now_us + duration_us;
        let mut buf = [0u8; MAX_PACKET_BYTES];
        while self.now_us < end {
            self.now_us += MS;
            let now = self.now_us;
            for (source, bytes) in inject(now) {
                self.machines[0].handle_datagram(now, source, &bytes);
            }
            for seat in 0..2u8 {
                let s = usize::from(seat);
                let ran = &mut self.frames_run[s];
                self.machines[s]
                    .update(now, |_, _| {})
                    .map(|wake| {
                        if let Advance::Ran { .. } = wake.advance {
                            *ran += 1;
                        }
                    })
                    .unwrap();
                while let Some(t) = self.machines[s].poll_transmit(now, &mut buf) {
                    let mut datagram = buf[..t.len].to_vec();
                    rewrite(seat, &mut datagram);
                    self.machines[1 - s].handle_datagram(now, address(seat), &datagram);
                }
                while let Some(event) = self.machines[s].poll_event() {
                    self.events[s].push(event);
                }
            }
        }
    }

    fn mismatches(&self, seat: usize) -> Vec<(ProtocolMismatch, bool)> {
        self.events[seat]
            .iter()
            .filter_map(|e| match *e {
                SessionEvent::ProtocolMismatch {
                    mismatch,
                    link_lost,
                } => Some((mismatch, link_lost)),
                _ => None,
            })
            .collect()
    }
}

fn no_injection(_: u64) -> Vec<(SocketAddr, Vec<u8>)> {
    Vec::new()
}

#[test]
fn a_player_of_another_wire_version_is_named_once_and_dropped_not_waited_for() {
    let mut game = Game::new();
    // Every datagram either way carries version 5: two builds of versions
    // 4 and 5, each seeing the other's.
    game.play(
        LIVENESS_US + 2 * S,
        |_, d: &mut Vec<u8>| d[1] = VERSION + 1,
        no_injection,
    );
    for seat in 0..2u8 {
        let other = 1 - seat;
        let s = usize::from(seat);
        let mismatches = game.mismatches(s);
        let expected = ProtocolMismatch {
            seat: other,
            protocol: Protocol::Wire,
            theirs: VERSION + 1,
            ours: VERSION,
        };
        // Once on the first datagram, once more with the loss, however many
        // datagrams came (counted below).
        assert_eq!(mismatches, vec![(expected, false), (expected, true)]);
        assert_eq!(
            expected.to_string(),
            format!("seat {other} speaks wire protocol 5; this build speaks 4")
        );
        let dropped = game.machines[s]
            .endpoint()
            .link(other)
            .map_or(0, |l| l.dropped().get(DropReason::BadVersion));
        let events = &game.events[s];
        // The loss is explained right before it is reported, and the
        // player is dropped: the game goes on without it.
        let lost_at = events
            .iter()
            .position(|e| *e == SessionEvent::LinkLost { seat: other })
            .expect("the silent player's link is lost");
        assert_eq!(
            events[lost_at - 1],
            SessionEvent::ProtocolMismatch {
                mismatch: expected,
                link_lost: true
            }
        );
        // The master (seat 0) drops the other player. Seat 1 never had the
        // master's first clock sample, so it cannot start frame 0 without
        // it, as with any master gone before the start: its engine has the
        // two events to end the game with.
        if seat == 0 {
            assert!(
                events.iter().any(
                    |e| matches!(e, SessionEvent::PlayerRemoved { seat, .. } if *seat == other)
                ),
                "seat {seat} dropped seat {other}: {events:?}"
            );
        }
        // Every datagram of the other version was dropped and counted on
        // the link, until the link went with the player.
        let gone = game.machines[s].endpoint().link(other).is_none();
        assert!(gone || dropped > 2, "{dropped}");
    }
    // Not hung: the first master drops the other player and plays on.
    let before = game.frames_run;
    game.play(S, |_, d: &mut Vec<u8>| d[1] = VERSION + 1, no_injection);
    assert!(game.frames_run[0] > before[0] + 20, "{:?}", game.frames_run);
}

#[test]
fn a_forged_version_flood_from_a_third_address_changes_nothing_but_the_counter() {
    let mut plain = Game::new();
    plain.play(3 * S, |_, _| {}, no_injection);
    let mut flooded = Game::new();
    // 20 forged datagrams a millisecond: rungs' magic, another version,
    // seat 1's seat byte, from an address no peer is bound to.
    let forger = SocketAddr::from(([10, 0, 0, 99], 4000));
    let mut forged = 0u64;
    flooded.play(
        3 * S,
        |_, _| {},
        |now| {
            (0..20u8)
                .map(|i| {
                    forged += 1;
                    let mut d = vec![0u8; 64];
                    d[..4].copy_from_slice(&[0xB7, i.wrapping_mul(13) | 0x80, 0, 1]);
                    d[4..8].copy_from_slice(&0x5EEDu32.to_le_bytes());
                    d[8..16].copy_from_slice(&now.to_le_bytes());
                    (forger, d)
                })
                .collect()
        },
    );
    // The same game, frame for frame and event for event.
    assert_eq!(flooded.frames_run, plain.frames_run);
    assert_eq!(flooded.events, plain.events);
    assert!(flooded.mismatches(0).is_empty());
    let endpoint = flooded.machines[0].endpoint();
    assert_eq!(
        endpoint.unattributed_drops().get(DropReason::BadVersion),
        forged
    );
    assert_eq!(endpoint.link(1).unwrap().dropped().total(), 0);
    assert_eq!(
        flooded.machines[0].held_bytes(),
        plain.machines[0].held_bytes()
    );
}

#[test]
fn a_forger_at_a_players_address_raises_one_report_per_version_and_nothing_else() {
    let mut game = Game::new();
    // Every version but ours, ten times over, spoofing seat 1's address,
    // while the real seat 1 plays on.
    let mut round = 0u32;
    let mut other_versions = 0u64;
    game.play(
        3 * S,
        |_, _| {},
        |_| {
            round += 1;
            if round > 2_550 {
                return Vec::new();
            }
            let version = (round % 256) as u8;
            other_versions += u64::from(version != VERSION);
            let mut d = vec![0u8; 40];
            d[..2].copy_from_slice(&[0xB7, version]);
            vec![(address(1), d)]
        },
    );
    let mismatches = game.mismatches(0);
    assert_eq!(mismatches.len(), 255, "one per version, however many came");
    assert!(mismatches
        .iter()
        .all(|(m, lost)| m.seat == 1 && m.theirs != VERSION && !lost));
    // Nobody dropped, nothing lost: the game ran as if nothing was sent.
    assert!(!game.events[0].iter().any(|e| matches!(
        e,
        SessionEvent::LinkLost { .. } | SessionEvent::PlayerRemoved { .. }
    )));
    assert!(game.frames_run[0] > 60, "{:?}", game.frames_run);
    assert_eq!(
        game.machines[0]
            .endpoint()
            .link(1)
            .unwrap()
            .dropped()
            .get(DropReason::BadVersion),
        other_versions
    );
}

const UNIX: u64 = 1_800_000_000;

fn lobby() -> LobbySecret {
    LobbySecret::new(*b"proto-lobby-key1").unwrap()
}

/// A relayed session whose connection nonces come from `nonce_seed`.
fn relayed_session(relay: SocketAddr, nonce_seed: u64) -> LockstepSession {
    let credentials = issue(
        &lobby(),
        &TicketFields {
            match_id: 9,
            seat: 0,
            expires_unix_s: UNIX + 3600,
            nonce: 1,
        },
    )
    .unwrap();
    let config = LockstepConfig::relay(
        MachineConfig::adaptive(30, vec![true, true], Some(0)),
        0,
        RelaySettings::new(relay, credentials, nonce_seed),
    );
    LockstepSession::new(&config, 0).unwrap()
}

/// The session's first Hello.
fn hello(session: &mut LockstepSession, now_us: u64) -> Vec<u8> {
    let mut buf = [0u8; MAX_PACKET_BYTES];
    session.handle_timeout(now_us);
    let t = session.poll_transmit(now_us, &mut buf).expect("a Hello");
    buf[..t.len].to_vec()
}

#[test]
fn a_relay_of_another_version_refuses_in_its_own_version_and_the_client_names_both() {
    let relay_address = SocketAddr::from(([10, 0, 0, 200], 5000));
    let mut relay = Relay::new(RelayConfig::new(lobby())).unwrap();
    relay.add_match(MatchSetup::new(9, 2, 0b11), 0).unwrap();
    let client_address = address(0);

    // A client of relay protocol 2 (this build's Hello, its byte 1
    // rewritten) is refused with WrongVersion, in the relay's version 3,
    // with its nonce echoed: what any client reads.
    let mut old_client = relayed_session(relay_address, 7);
    let mut old_hello = hello(&mut old_client, 10 * MS);
    old_hello[1] = rungs_core::wire::relay::VERSION - 1;
    relay.handle_datagram(10 * MS, UNIX, client_address, &old_hello);
    let mut buf = [0u8; MAX_PACKET_BYTES];
    let (to, len) = relay.poll_transmit(10 * MS, &mut buf).expect("a Reject");
    assert_eq!((to, len), (client_address, REJECT_BYTES));
    let reject = read_reject_of_any_version(&buf[..len]).unwrap();
    assert_eq!(reject.version, rungs_core::wire::relay::VERSION);
    assert_eq!(reject.reason, RejectReason::WrongVersion as u8);
    assert_eq!(reject.nonce.to_le_bytes(), old_hello[4..12]);

    // This build's client, refused by a relay of protocol 4 (the relay's
    // Reject with its byte 1 rewritten): the session stops with a message
    // naming both versions.
    let mut client = relayed_session(relay_address, 8);
    let client_hello = hello(&mut client, 10 * MS);
    let mut later_reject = buf[..len].to_vec();
    later_reject[1] = rungs_core::wire::relay::VERSION + 1;
    later_reject[4..12].copy_from_slice(&client_hello[4..12]);
    client.handle_datagram(20 * MS, relay_address, &later_reject);
    let error = client.advance(30 * MS).unwrap_err().to_string();
    assert!(
        error.contains("the relay speaks relay protocol 4; this build speaks 3"),
        "{error}"
    );
    assert_eq!(
        client.relay_client().unwrap().relay_version(),
        Some(rungs_core::wire::relay::VERSION + 1)
    );

    // A Reject of another version for another nonce (a stale or forged
    // one) is dropped: the client keeps trying.
    let mut other = relayed_session(relay_address, 9);
    let _ = hello(&mut other, 10 * MS);
    client.handle_datagram(20 * MS, relay_address, &later_reject);
    other.handle_datagram(20 * MS, relay_address, &later_reject);
    let advanced = other.advance(30 * MS);
    assert!(advanced.is_ok(), "{advanced:?}");
    assert_eq!(other.relay_client().unwrap().relay_version(), None);
}
