//! The short form of the model check, for `make test`: every variant at 3
//! seats and the plain game at 4 (`rungs-drop-model full` explores 5 seats,
//! see docs/turns.md). And the old rule must be caught, or the model proves
//! nothing.

use rungs_drop_model::{DropModel, Protocol};
use stateright::{Checker, Model};

fn holds(model: DropModel) -> usize {
    let checker = model.checker().spawn_bfs().join();
    let broken: Vec<&str> = checker.discoveries().keys().copied().collect();
    assert!(broken.is_empty(), "{model:?} breaks {broken:?}");
    checker.unique_state_count()
}

#[test]
fn every_survivor_decides_the_same_cut_at_three_seats_in_every_variant() {
    let base = DropModel::new(3);
    for model in [
        base,
        DropModel {
            late_turns: true,
            ..base
        },
        DropModel {
            quitters: 0b1,
            ..base
        },
        DropModel {
            quitters: 0b10,
            ..base
        },
        DropModel {
            lossy: true,
            ..base
        },
    ] {
        assert!(holds(model) > 100, "{model:?} explored next to nothing");
    }
}

#[test]
fn every_survivor_decides_the_same_cut_at_four_seats() {
    assert!(holds(DropModel::new(4)) > 10_000);
}

#[test]
fn the_rule_before_the_agreement_is_caught_splitting_the_survivors() {
    let model = DropModel {
        protocol: Protocol::VotesOnly,
        ..DropModel::new(4)
    };
    let checker = model.checker().spawn_bfs().join();
    assert!(
        checker.discovery("agreement").is_some(),
        "the vote-then-vanish split is found"
    );
}
