//! The relay's timing plan (S10 with S4, S9): which [`TimingChange`] is in
//! force at each tick — the relay clock's rate and anchor, the bundle
//! interval, the clients' look-ahead — shared by the relay (which decides
//! the changes) and its clients (which pace their ticks by them).
//!
//! A plan is a short list of changes sorted by `from_tick`: the one in force
//! at the oldest tick anyone still needs, and those announced for later
//! ticks. Everything is integer arithmetic on ticks and milliseconds, so the
//! relay and every client compute the same tick starts and boundaries.
//!
//! * **Clock.** Tick `t` of a change `c` (`t >= c.from_tick`) starts
//!   `c.anchor_ms + (t - c.anchor_tick) * 1_000_000 / c.tick_rate_millihz`
//!   ms after the match start. The anchor is where the rate last changed:
//!   a change of the rate anchors at its own tick, where the previous
//!   change's clock puts it (so the clock never jumps); a change of the
//!   bundle interval or look-ahead alone keeps the anchor (so it never
//!   rounds the clock: one seat's look-ahead may change every few seconds,
//!   and re-anchoring on a whole millisecond each time would drift).
//! * **Boundaries.** The horizon moves to `c.from_tick + k * c.bundle_interval`;
//!   a change's `from_tick` is itself a boundary (the relay only announces
//!   changes at a boundary of the timing in force).
//! * **Pacing.** A client runs tick `t` when the relay clock reaches tick
//!   `t + bundle_interval + look_ahead` of the change in force at `t`: the
//!   bundle holding `t` leaves the relay at most `bundle_interval` ticks
//!   after `t` starts, and then has `look_ahead` ticks to arrive.

use std::collections::VecDeque;

use crate::wire::relay::TimingChange;

/// When tick `t` starts, in whole milliseconds after the match start.
pub(crate) fn tick_start_ms(tick: u32, tick_rate_millihz: u32) -> u64 {
    u64::from(tick) * 1_000_000 / u64::from(tick_rate_millihz.max(1))
}

/// The tick running `elapsed_us` after the match start: the largest `t` with
/// `tick_start_ms(t) * 1000 <= elapsed_us` (saturating at `u32::MAX`).
pub(crate) fn tick_at(elapsed_us: u64, tick_rate_millihz: u32) -> u32 {
    let ms = u128::from(elapsed_us / 1000);
    let rate = u128::from(tick_rate_millihz.max(1));
    // t * 1e6 / rate <= ms  <=>  t * 1e6 < (ms + 1) * rate
    let t = ((ms + 1) * rate - 1) / 1_000_000;
    u32::try_from(t).unwrap_or(u32::MAX)
}

/// Most changes a plan holds; an announcement beyond it replaces the last
/// pending one (a relay announces one change per bundle at most, so a
/// client that applies them never gets near this).
pub(crate) const MAX_PLANNED_CHANGES: usize = 16;

/// The changes in force and announced. See the module docs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimingPlan {
    changes: VecDeque<TimingChange>,
}

impl TimingPlan {
    /// A plan with one change in force from tick 0 (its clock anchored at
    /// tick 0, 0 ms).
    pub fn new(initial: TimingChange) -> TimingPlan {
        let mut changes = VecDeque::with_capacity(4);
        changes.push_back(TimingChange {
            from_tick: 0,
            anchor_tick: 0,
            anchor_ms: 0,
            ..initial
        });
        TimingPlan { changes }
    }

    /// The change in force at `tick` (the first one for ticks before it).
    pub fn in_force(&self, tick: u32) -> &TimingChange {
        let at = self.changes.partition_point(|c| c.from_tick <= tick);
        &self.changes[at.saturating_sub(1)]
    }

    /// The latest change announced.
    pub fn latest(&self) -> &TimingChange {
        &self.changes[self.changes.len() - 1]
    }

    /// Every change held, oldest first.
    pub fn changes(&self) -> impl Iterator<Item = &TimingChange> + '_ {
        self.changes.iter()
    }

    /// When `tick` starts, ms after the match start.
    pub fn tick_start_ms(&self, tick: u32) -> u64 {
        self.in_force(tick).tick_start_ms(tick)
    }

    /// The tick running `elapsed_us` after the match start.
    pub fn tick_at(&self, elapsed_us: u64) -> u32 {
        let at = self
            .changes
            .partition_point(|c| c.tick_start_ms(c.from_tick).saturating_mul(1000) <= elapsed_us);
        self.changes[at.saturating_sub(1)].tick_at(elapsed_us)
    }

    /// The first horizon boundary after `horizon`.
    pub fn next_boundary(&self, horizon: u32) -> u32 {
        let c = self.in_force(horizon);
        let interval = u32::from(c.bundle_interval.max(1));
        let since = horizon.saturating_sub(c.from_tick);
        let next = c
            .from_tick
            .saturating_add((since / interval + 1).saturating_mul(interval));
        // A later change starts on its own boundary.
        match self.changes.iter().find(|n| n.from_tick > horizon) {
            Some(n) => next.min(n.from_tick),
            None => next,
        }
    }

    /// The last boundary at or before `tick`, at or after `horizon`.
    pub fn boundary_at_or_before(&self, horizon: u32, tick: u32) -> u32 {
        let mut at = horizon;
        loop {
            let next = self.next_boundary(at);
            if next > tick || next == at {
                return at;
            }
            at = next;
        }
    }

    /// The relay tick at which a client runs `tick`: `tick + bundle_interval
    /// + look_ahead` of the change in force at `tick`.
    pub fn due_tick(&self, tick: u32) -> u32 {
        self.in_force(tick).due_tick(tick)
    }

    /// A change for ticks from `from_tick` on with the given rate, interval
    /// and look-ahead: on this plan's clock when the rate is the one in
    /// force (the same anchor), else anchored where this plan's clock puts
    /// `from_tick`.
    pub fn change_at(
        &self,
        from_tick: u32,
        tick_rate_millihz: u32,
        bundle_interval: u8,
        look_ahead: u8,
    ) -> TimingChange {
        let in_force = self.in_force(from_tick);
        let (anchor_tick, anchor_ms) = if in_force.tick_rate_millihz == tick_rate_millihz {
            (in_force.anchor_tick, in_force.anchor_ms)
        } else {
            (from_tick, self.tick_start_ms(from_tick))
        };
        TimingChange {
            from_tick,
            anchor_tick,
            anchor_ms,
            tick_rate_millihz,
            bundle_interval,
            look_ahead,
        }
    }

    /// Take in an announced change: it replaces every change from its tick
    /// on (the relay's latest word). `false`, and nothing changes, when it is
    /// not valid, or its clock disagrees with this plan's (a jump at its
    /// tick, or a new anchor without a new rate: a relay never sends one,
    /// so such a message is refused, not acted on).
    pub fn announce(&mut self, change: TimingChange) -> bool {
        if !change.is_valid() {
            return false;
        }
        if self.changes.iter().any(|c| *c == change) {
            return true; // sent again after a reconnect
        }
        let keep = self
            .changes
            .partition_point(|c| c.from_tick < change.from_tick);
        let anchored = match keep.checked_sub(1) {
            // Where the change before it puts its tick.
            Some(before) => {
                let before = &self.changes[before];
                let at = change.from_tick;
                before.tick_start_ms(at) == change.tick_start_ms(at)
                    && (before.tick_rate_millihz != change.tick_rate_millihz
                        || (before.anchor_tick, before.anchor_ms)
                            == (change.anchor_tick, change.anchor_ms))
            }
            // No change before it: it must replace the first one, same clock.
            None => {
                let first = &self.changes[0];
                (change.from_tick, change.anchor_tick, change.anchor_ms)
                    == (first.from_tick, first.anchor_tick, first.anchor_ms)
            }
        };
        if !anchored {
            return false;
        }
        self.changes.truncate(keep);
        if self.changes.len() >= MAX_PLANNED_CHANGES {
            self.changes.pop_back();
        }
        self.changes.push_back(change);
        true
    }

    /// Replace the whole plan by one change that stands for every tick (a
    /// client starting over after a Welcome).
    pub fn reset(&mut self, change: TimingChange) {
        self.changes.clear();
        self.changes.push_back(change);
    }

    /// Forget the changes superseded at `tick`: nothing at or after it
    /// needs them.
    pub fn forget_before(&mut self, tick: u32) {
        while self.changes.len() > 1 && self.changes[1].from_tick <= tick {
            self.changes.pop_front();
        }
    }
}

/// One change's clock and pacing, for the ticks it is in force.
impl TimingChange {
    /// When `tick` (at or after `from_tick`) starts, ms after the match start.
    pub fn tick_start_ms(&self, tick: u32) -> u64 {
        self.anchor_ms.saturating_add(tick_start_ms(
            tick.saturating_sub(self.anchor_tick),
            self.tick_rate_millihz,
        ))
    }

    /// The tick running `elapsed_us` after the match start (for times at
    /// or after this change's first tick starts).
    pub fn tick_at(&self, elapsed_us: u64) -> u32 {
        let since = elapsed_us.saturating_sub(self.anchor_ms.saturating_mul(1000));
        self.anchor_tick
            .saturating_add(tick_at(since, self.tick_rate_millihz))
            .max(self.from_tick)
    }

    /// The relay tick at which a client runs `tick`.
    pub fn due_tick(&self, tick: u32) -> u32 {
        tick.saturating_add(u32::from(self.bundle_interval))
            .saturating_add(u32::from(self.look_ahead))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> TimingChange {
        TimingChange {
            from_tick: 0,
            anchor_tick: 0,
            anchor_ms: 0,
            tick_rate_millihz: 30_000,
            bundle_interval: 1,
            look_ahead: 2,
        }
    }

    #[test]
    fn one_change_is_the_fixed_clock() {
        let plan = TimingPlan::new(base());
        for t in [0, 1, 3, 30, 12_345] {
            assert_eq!(plan.tick_start_ms(t), tick_start_ms(t, 30_000));
        }
        for us in [0, 32_999, 33_000, 1_000_000, 77_777_777] {
            assert_eq!(plan.tick_at(us), tick_at(us, 30_000));
        }
        assert_eq!(plan.next_boundary(5), 6);
        assert_eq!(plan.due_tick(10), 13);
    }

    #[test]
    fn a_rate_and_interval_change_keeps_the_clock_continuous() {
        let mut plan = TimingPlan::new(base());
        // From tick 30 (1000 ms): 20 ticks/s, a bundle every 3 ticks, look-ahead 9.
        let change = plan.change_at(30, 20_000, 3, 9);
        assert_eq!((change.anchor_tick, change.anchor_ms), (30, 1000));
        assert!(plan.announce(change));
        assert_eq!(plan.tick_start_ms(29), 966);
        assert_eq!(plan.tick_start_ms(30), 1000);
        assert_eq!(plan.tick_start_ms(31), 1050);
        assert_eq!(plan.tick_at(999_999), 29);
        assert_eq!(plan.tick_at(1_000_000), 30);
        assert_eq!(plan.tick_at(1_049_999), 30);
        assert_eq!(plan.tick_at(1_050_000), 31);
        // Boundaries: every tick up to 30, then every 3 from 30.
        assert_eq!(plan.next_boundary(28), 29);
        assert_eq!(plan.next_boundary(29), 30);
        assert_eq!(plan.next_boundary(30), 33);
        assert_eq!(plan.boundary_at_or_before(20, 35), 33);
        assert_eq!(plan.due_tick(29), 32);
        assert_eq!(plan.due_tick(30), 42);
        // An anchor that disagrees with the clock is refused: a jump, or a
        // new anchor at the same rate.
        let wrong = TimingChange {
            anchor_ms: 1001,
            ..plan.change_at(60, 20_000, 3, 9)
        };
        assert!(!plan.announce(wrong));
        let reanchored = TimingChange {
            anchor_tick: 60,
            anchor_ms: 2500,
            ..plan.change_at(60, 20_000, 3, 9)
        };
        assert_eq!(plan.tick_start_ms(60), 2500);
        assert!(!plan.announce(reanchored));
        assert_eq!(plan.changes().count(), 2);
        // Nor one before the first change held, or re-anchoring it.
        let mut late = TimingPlan::new(base());
        late.reset(plan.change_at(30, 20_000, 3, 9));
        assert!(!late.announce(TimingChange {
            from_tick: 10,
            ..base()
        }));
        assert!(!late.announce(TimingChange {
            anchor_ms: 999,
            ..plan.change_at(30, 20_000, 1, 4)
        }));
        assert!(late.announce(plan.change_at(30, 20_000, 1, 4)));
        // A later word replaces what was announced from its tick on.
        assert!(plan.announce(plan.change_at(60, 20_000, 2, 4)));
        assert!(plan.announce(plan.change_at(45, 20_000, 1, 4)));
        assert_eq!(plan.changes().count(), 3);
        assert_eq!(plan.latest().from_tick, 45);
        plan.forget_before(40);
        assert_eq!(plan.changes().next().map(|c| c.from_tick), Some(30));
        assert_eq!(plan.tick_start_ms(45), 1750);
    }

    #[test]
    fn look_ahead_changes_keep_the_clock_exact() {
        // Thirty look-ahead changes at odd ticks: the clock is the one
        // anchored at 0, to the millisecond, at every tick.
        let mut plan = TimingPlan::new(base());
        let exact = TimingPlan::new(base());
        for k in 0..30u32 {
            let from = 7 + 13 * k;
            let change = plan.change_at(from, 30_000, 1, (k % 5 + 1) as u8);
            assert_eq!((change.anchor_tick, change.anchor_ms), (0, 0));
            assert!(plan.announce(change));
            plan.forget_before(from);
        }
        for t in 390..2000 {
            assert_eq!(plan.tick_start_ms(t), exact.tick_start_ms(t), "tick {t}");
        }
        // A client that starts from the change in force has the same clock.
        let mut client = TimingPlan::new(base());
        client.reset(*plan.latest());
        assert_eq!(client.tick_start_ms(1999), exact.tick_start_ms(1999));
        assert!(client.announce(plan.change_at(2000, 30_000, 1, 9)));
    }
}
