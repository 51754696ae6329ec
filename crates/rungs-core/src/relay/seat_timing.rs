//! One seat's timing behind the relay (S10 with S4): every client keeps its
//! own jitter buffer, from its own link to the relay.
//!
//! In relay mode every client executes the same (tick, seat, order) triples
//! whatever its timing, so determinism does not depend on when a client
//! runs a tick — and a client far from the relay must not make a near one
//! wait. So the relay runs the match's timing policy once **per seat**, on
//! that seat's reports alone (its round trip to the relay, its waits for
//! bundles, its frames' needs): the policy's look-ahead becomes that
//! seat's jitter buffer (tick `t` runs when the relay clock reaches
//! `t + bundle_interval + look_ahead`), announced to that seat only.
//!
//! The clock (tick rate and anchor) and the bundle interval are the
//! match's, shared by every seat's plan: the bundle interval is the setup's
//! (1 by default), and the tick rate is the setup's too unless the setup
//! asks to pace the match to its slowest machine (`pace_to_slowest`): then
//! it follows the lowest frame rate the seats' policies chose (S4.2), and a
//! slow machine slows everyone, as peer-to-peer. Otherwise a machine that
//! cannot keep the rate falls behind on its own.

use super::timing::TimingPlan;
use crate::report::{Record, Report};
use crate::timing::machine::Policy;
use crate::timing::PolicyKind;
use crate::wire::relay::TimingChange;
use crate::Result;

/// A seat's policy, record and plan.
#[derive(Debug)]
pub(crate) struct SeatTiming {
    policy: Policy,
    /// The seat's reports (S3, the relay's ticks as frames); created with
    /// its first report.
    record: Option<Record>,
    /// The match clock with this seat's look-ahead.
    plan: TimingPlan,
    /// Changes announced into `plan` so far (the first one counts).
    announced: u64,
    /// Serial of the next change to send the seat's connection.
    sent: u64,
    /// The frame rate this seat's policy last chose (its machine's speed).
    fps: u8,
}

impl SeatTiming {
    /// A seat's timing under `kind` on the match clock `clock` (whose
    /// look-ahead is ignored); refused for a policy a relay cannot run
    /// (`lobby` is a fixed timing chosen before the game).
    pub(crate) fn new(kind: PolicyKind, speed_fps: u8, clock: &TimingPlan) -> Result<SeatTiming> {
        let policy = Policy::new(kind, speed_fps)?;
        let look_ahead = policy.initial_timing().look_ahead();
        let first = clock.changes().next().copied().unwrap_or(TimingChange {
            from_tick: 0,
            anchor_tick: 0,
            anchor_ms: 0,
            tick_rate_millihz: u32::from(speed_fps) * 1000,
            bundle_interval: 1,
            look_ahead,
        });
        let mut plan = TimingPlan::new(TimingChange {
            look_ahead,
            ..first
        });
        for change in clock.changes().skip(1) {
            plan.announce(TimingChange {
                look_ahead,
                ..*change
            });
        }
        Ok(SeatTiming {
            policy,
            record: None,
            plan,
            announced: 1,
            sent: 0,
            fps: speed_fps.max(1),
        })
    }

    /// The seat's plan.
    pub(crate) fn plan(&self) -> &TimingPlan {
        &self.plan
    }

    /// Whether the policy reads reports every 16 ticks (`tracking`).
    pub(crate) fn frequent_reports(&self) -> bool {
        self.policy.frequent_reports()
    }

    /// The frame rate this seat's machine keeps up with, by its policy.
    pub(crate) fn fps(&self) -> u8 {
        self.fps
    }

    /// Whether the seat has reported at all.
    pub(crate) fn has_reported(&self) -> bool {
        self.record.is_some()
    }

    /// A report from the seat, taken in at `horizon` (its "executed" tick).
    pub(crate) fn report(&mut self, seat: u8, horizon: u32, report: Report) {
        let record = self
            .record
            .get_or_insert_with(|| Record::new(horizon, [seat]));
        let _ = record.apply_report(seat, horizon, report);
    }

    /// Evaluate the policy on the ticks from `from` to `to` (the horizon
    /// passed them); a new look-ahead is announced from `from_tick` (the
    /// next boundary) on, on the match clock `clock`. Whether the
    /// look-ahead changed.
    pub(crate) fn evaluate(
        &mut self,
        from: u32,
        to: u32,
        from_tick: u32,
        clock: &TimingPlan,
    ) -> bool {
        let Some(record) = self.record.as_ref() else {
            return false;
        };
        let mut chosen = None;
        for frame in from..=to {
            if let (_, Some(event)) = self.policy.evaluate(record, frame, None) {
                chosen = Some(event);
            }
        }
        let Some(event) = chosen else {
            return false;
        };
        self.fps = event.fps.max(1);
        let look_ahead = event.target.look_ahead();
        if self.plan.in_force(from_tick).look_ahead == look_ahead {
            return false;
        }
        if let Some(adaptive) = self.policy.adaptive_mut() {
            adaptive.note_change_executed(from_tick);
        }
        self.set_look_ahead(from_tick, look_ahead, clock);
        true
    }

    /// From `from_tick` on, this seat's look-ahead is `look_ahead`, on the
    /// match clock `clock` (changes of the clock after it keep the new
    /// look-ahead).
    fn set_look_ahead(&mut self, from_tick: u32, look_ahead: u8, clock: &TimingPlan) {
        let at = clock.in_force(from_tick);
        let change = self.plan.change_at(
            from_tick,
            at.tick_rate_millihz,
            at.bundle_interval,
            look_ahead,
        );
        if self.plan.announce(change) {
            self.announced += 1;
        }
        for later in clock.changes().filter(|c| c.from_tick > from_tick) {
            if self.plan.announce(TimingChange {
                look_ahead,
                ..*later
            }) {
                self.announced += 1;
            }
        }
    }

    /// The match clock changed from `change.from_tick` on (its rate): the
    /// seat's plan follows with its look-ahead.
    pub(crate) fn clock_changed(&mut self, change: TimingChange) {
        let look_ahead = self.plan.latest().look_ahead;
        if self.plan.announce(TimingChange {
            look_ahead,
            ..change
        }) {
            self.announced += 1;
        }
    }

    /// Forget the changes superseded at `tick`.
    pub(crate) fn forget_before(&mut self, tick: u32) {
        self.plan.forget_before(tick);
    }

    /// A new connection: it gets the plan anew (the change in force at the
    /// horizon first).
    pub(crate) fn connected(&mut self) {
        self.sent = 0;
    }

    /// The next change to send the connection, if any.
    pub(crate) fn next_to_send(&mut self) -> Option<TimingChange> {
        if self.sent >= self.announced {
            return None;
        }
        let held = self.plan.changes().count() as u64;
        let first_held = self.announced.saturating_sub(held);
        let serial = self.sent.max(first_held);
        self.sent = serial + 1;
        self.plan
            .changes()
            .nth((serial - first_held) as usize)
            .copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn clock() -> TimingPlan {
        TimingPlan::new(TimingChange {
            from_tick: 0,
            anchor_tick: 0,
            anchor_ms: 0,
            tick_rate_millihz: 30_000,
            bundle_interval: 1,
            look_ahead: 1,
        })
    }

    #[test]
    fn a_seat_starts_at_its_policys_look_ahead_on_the_match_clock() {
        let clock = clock();
        let mut seat = SeatTiming::new(PolicyKind::Adaptive, 30, &clock).unwrap();
        let first = seat.next_to_send().unwrap();
        assert_eq!(
            (first.from_tick, first.bundle_interval, first.look_ahead),
            (0, 1, 6)
        );
        assert_eq!(seat.next_to_send(), None);
        seat.connected();
        assert_eq!(
            seat.next_to_send(),
            Some(first),
            "a new connection gets it anew"
        );
    }

    #[test]
    fn a_look_ahead_change_keeps_the_clock_and_later_clock_changes() {
        let mut clock = clock();
        let mut seat = SeatTiming::new(PolicyKind::Tracking, 30, &clock).unwrap();
        let slower = clock.change_at(60, 20_000, 1, 1);
        assert!(clock.announce(slower));
        seat.clock_changed(slower);
        seat.set_look_ahead(40, 3, &clock);
        assert_eq!(seat.plan().in_force(50).look_ahead, 3);
        let after = seat.plan().in_force(70);
        assert_eq!((after.tick_rate_millihz, after.look_ahead), (20_000, 3));
        assert_eq!(seat.plan().tick_start_ms(61), clock.tick_start_ms(61));
    }
}
