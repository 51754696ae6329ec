//! The one judgement every seeded game of this binary passes: whatever the
//! network and the faults did, every machine executed the same commands on
//! the same frames, every command once and in issue order, nothing lost,
//! nothing forged obeyed, no player removed by another, every vanished
//! player dropped ([`GameReport::broken_invariants`] lists the rules).

use rungs_sim::GameReport;

/// Panics with every broken invariant of `report`'s game.
pub fn assert_sound(report: &GameReport) {
    let broken = report.broken_invariants();
    assert!(broken.is_empty(), "the game broke: {broken:?}");
}
