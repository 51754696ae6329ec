//! Regression tests: lockstep games meeting the faults real
//! games meet — simultaneous and mid-turn crashes, command bursts — and a
//! modified client trying every attack (S4.7, S8). Each drives whole
//! simulated games of real sessions through the fault-injection layer.

use crate::sound::assert_sound;
use rungs_sim::{run_game, Attack, Fault, GameReport, GameSpec};

fn crash(seat: u8, frame: u32) -> Fault {
    Fault::Crash {
        seat,
        frame,
        mid_turn: false,
    }
}

#[test]
fn two_machines_vanishing_together_are_both_dropped() {
    // The fault: each drop waited for the other vanished machine's vote.
    let mut spec = GameSpec::new(4, 1500, 30, 40);
    spec.faults = vec![crash(2, 150), crash(3, 150)];
    let report = run_game(&spec).expect("the survivors finish the game");
    assert_sound(&report);
}

#[test]
fn the_master_and_another_vanishing_together_are_both_dropped() {
    let mut spec = GameSpec::new(5, 1500, 30, 40);
    spec.faults = vec![crash(0, 200), crash(3, 200)];
    let report = run_game(&spec).expect("the survivors finish the game");
    assert_sound(&report);
}

#[test]
fn a_crash_during_another_drop_is_dropped_too() {
    let mut spec = GameSpec::new(5, 1500, 30, 60);
    spec.loss_ppm = 50_000;
    // Seat 4 vanishes while the others are still dropping seat 1.
    spec.faults = vec![crash(1, 200), crash(4, 260)];
    let report = run_game(&spec).expect("the survivors finish the game");
    assert_sound(&report);
}

#[test]
fn a_crash_in_the_middle_of_a_split_turn_does_not_desync() {
    // The fault: a machine that held part 1 appended the relayed part 1 again.
    for players in [3u8, 4, 5] {
        let mut spec = GameSpec::new(players, 1200, 30, 20);
        let last = players - 1;
        spec.faults = vec![
            Fault::Burst {
                seat: last,
                frame: 300,
                commands: 4,
                bytes: 900,
            },
            Fault::Crash {
                seat: last,
                frame: 301,
                mid_turn: true,
            },
        ];
        let report = run_game(&spec).expect("the survivors finish the game");
        assert_sound(&report);
    }
}

#[test]
fn a_burst_of_commands_is_refused_before_any_state_changes_and_nothing_is_lost() {
    // The fault: 1,100 accepted commands of 1 KB executed nowhere and the
    // update returned an error mid-frame.
    let mut spec = GameSpec::new(3, 1200, 30, 40);
    spec.faults = vec![Fault::Burst {
        seat: 1,
        frame: 200,
        commands: 1100,
        bytes: 1000,
    }];
    let report = run_game(&spec).expect("the game goes on");
    assert_sound(&report);
    assert!(report.commands_refused > 0, "the outbox pushes back");
    assert_eq!(report.commands_executed, report.commands_issued);
}

fn attacked(attack: Attack, frames: &[u32]) -> GameReport {
    let mut spec = GameSpec::new(4, 1500, 30, 40);
    spec.faults = frames
        .iter()
        .map(|frame| Fault::Attack {
            seat: 2,
            frame: *frame,
            attack,
        })
        .collect();
    run_game(&spec).expect("the honest machines finish the game")
}

#[test]
fn a_modified_client_cannot_remove_another_player() {
    let report = attacked(Attack::RemoveOther, &[300]);
    assert_sound(&report);
    assert!(
        report.refused_items >= 1,
        "the removal is refused and counted"
    );
}

#[test]
fn a_modified_client_cannot_forge_a_relayed_turn() {
    let report = attacked(Attack::ForgeRelay, &[300, 400]);
    assert_sound(&report);
    // Seat 2 forges seat 3's turn to seats 0 and 1, twice: each of them
    // received both forgeries and refused them (nobody asked for a relay).
    assert!(
        report.refused_messages >= 2,
        "the forged relays were received and refused: {} refused",
        report.refused_messages
    );
    let honest = attacked(Attack::ForgeRelay, &[]);
    assert_eq!(honest.refused_messages, 0, "an honest game refuses nothing");
}

#[test]
fn a_modified_client_that_is_not_the_master_cannot_set_the_timing() {
    let report = attacked(Attack::Timing, &[300]);
    assert_sound(&report);
    assert!(
        report.refused_items >= 1,
        "the timing event is refused and counted"
    );
    assert!(
        report
            .timeline
            .iter()
            .all(|(_, sp, _, fps)| *sp < 10 && *fps == 30),
        "{:?}",
        report.timeline
    );
}

#[test]
fn a_modified_client_cannot_grow_memory_with_parts_or_future_turns() {
    let frames: Vec<u32> = (300..1100).step_by(40).collect();
    for attack in [Attack::FloodParts, Attack::FarFutureTag] {
        let report = attacked(attack, &frames);
        assert_sound(&report);
        assert!(
            report.max_held_bytes < 1_500_000,
            "{attack:?}: {} bytes held",
            report.max_held_bytes
        );
    }
}

#[test]
fn a_replayed_datagram_is_not_acted_on() {
    let report = attacked(Attack::Replay, &[300, 600]);
    assert_sound(&report);
}

#[test]
fn a_restarted_machine_is_seen_as_a_restart_and_dropped() {
    let mut spec = GameSpec::new(4, 1500, 30, 40);
    spec.faults = vec![Fault::Restart {
        seat: 2,
        frame: 300,
    }];
    let report = run_game(&spec).expect("the others drop it and finish");
    assert_sound(&report);
}

#[test]
fn a_machine_whose_address_changes_keeps_playing() {
    let mut spec = GameSpec::new(4, 1500, 30, 40);
    spec.faults = vec![
        Fault::Move {
            seat: 1,
            frame: 300,
        },
        Fault::Move {
            seat: 3,
            frame: 700,
        },
    ];
    let report = run_game(&spec).expect("the game goes on");
    assert_sound(&report);
    assert_eq!(
        report.commands_executed, report.commands_issued,
        "nobody dropped"
    );
}

#[test]
fn a_session_that_left_never_asks_to_be_woken_in_the_past() {
    // The fault: after leaving, the next wake-up stayed in the past forever,
    // so callers spun.
    use rungs_core::link::LinkConfig;
    use rungs_core::session::{Advance, LockstepConfig, LockstepSession};
    use rungs_core::timing::{MachineConfig, PolicyKind};
    use rungs_core::wire::SessionKey;
    use std::net::SocketAddr;

    let addr = |seat: u8| SocketAddr::from(([10, 0, 0, seat + 1], 5000));
    let mut sessions: Vec<LockstepSession> = (0..2u8)
        .map(|seat| {
            let config = LockstepConfig {
                machine: MachineConfig {
                    speed_fps: 30,
                    human_seats: vec![true; 2],
                    local_seat: Some(seat),
                    policy: PolicyKind::Adaptive,
                },
                session_id: 9,
                key: SessionKey([9; 16]),
                link_keys: Vec::new(),
                epoch: 1,
                link: LinkConfig::default(),
                checksum_interval: 0,
                topology: rungs_core::session::Topology::PeerToPeer,
                manual_drops: false,
            };
            let mut s = LockstepSession::new(&config, 0).unwrap();
            s.add_peer(1 - seat, addr(1 - seat), 0).unwrap();
            s
        })
        .collect();
    let mut buf = [0u8; 1500];
    let mut now = 0u64;
    let mut left_at = None;
    let mut wakes_after_leaving = 0;
    while now < 20_000_000 {
        now += 1_000;
        for i in 0..2 {
            let wake = sessions[i].update(now, |_, _| {}).unwrap();
            if i == 1 && wake.frame == Some(100) && left_at.is_none() {
                sessions[1].leave().unwrap();
                left_at = Some(now);
            }
            if wake.advance == Advance::Left {
                assert!(wake.next_us > now, "woken at {} at {now}", wake.next_us);
                wakes_after_leaving += 1;
            }
            while let Some(t) = sessions[i].poll_transmit(now, &mut buf) {
                let datagram = buf[..t.len].to_vec();
                sessions[1 - i].handle_datagram(now, addr(i as u8), &datagram);
            }
        }
    }
    assert!(sessions[1].has_left(), "the leaver left");
    assert!(wakes_after_leaving > 0);
    let timeout = sessions[1].poll_timeout();
    assert!(
        timeout.map_or(true, |t| t > now - 1_000_000),
        "{timeout:?} at {now}"
    );
}
