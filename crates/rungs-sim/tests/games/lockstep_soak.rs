//! A short soak (`docs/rungs-sim.md`, "The soak"): seeded games under every fault at once, each
//! judged on desyncs, lost and doubled commands, hangs, forgeries obeyed
//! and memory held. `rungs-sim soak --games 1000` runs the long one.

use rungs_sim::soak::{soak_game, SoakSummary};

#[test]
fn a_short_soak_is_sound() {
    let mut summary = SoakSummary::default();
    for index in 0..32 {
        let game = soak_game(0x50A4, index);
        let failures = game.failures();
        assert!(
            failures.is_empty(),
            "soak game {index} (seed {:#x}, {} players): {failures:?}",
            game.seed,
            game.players
        );
        summary.add(game);
    }
    eprintln!("{}", summary.table());
    assert!(summary.sound());
    let modified = summary.games.iter().filter(|g| g.modified).count();
    let crashes = summary.games.iter().filter(|g| g.crashes > 0).count();
    assert!(modified > 0 && crashes > 0, "the faults are exercised");
}
