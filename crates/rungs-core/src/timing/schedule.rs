//! The schedule in force on every machine (S5): which frames are send
//! frames, the look-ahead commands are tagged with, and how an executed
//! timing event changes them — at once, or as a staged decrease that waits
//! until every command scheduled under the old look-ahead has come due.

use super::ladder::{Timing, MAX_LOOK_AHEAD};
use super::TimingEvent;

/// How an executed timing event was applied (S5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    /// Took effect on the event's own frame.
    Immediate,
    /// A staged decrease that activates on `activation`.
    Staged { activation: u32 },
}

/// What changed on a frame, for callbacks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Changed {
    pub timing: bool,
    pub fps: bool,
}

impl Changed {
    pub fn any(self) -> bool {
        self.timing || self.fps
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct StagedDecrease {
    target: Timing,
    fps: u8,
    /// The send period in force when the event executed (`S_old` in S5).
    old_send_period: u8,
    activation: u32,
    activated: bool,
}

/// The timing and frame rate in force, with any staged decrease (S5).
#[derive(Debug, Clone)]
pub struct Schedule {
    in_force: Timing,
    fps: u8,
    staged: Option<StagedDecrease>,
}

impl Schedule {
    /// The schedule on frame 0: `2/6` at the game speed's rate (S4.3).
    pub fn new(fps: u8) -> Schedule {
        Schedule::starting_at(Timing::START, fps)
    }

    /// A schedule starting at `timing` (a baseline policy's own start).
    pub fn starting_at(timing: Timing, fps: u8) -> Schedule {
        Schedule {
            in_force: timing,
            fps: fps.max(1),
            staged: None,
        }
    }

    /// The timing in force.
    pub fn timing(&self) -> Timing {
        self.in_force
    }

    /// The frame rate in force.
    pub fn fps(&self) -> u8 {
        self.fps
    }

    /// The staged decrease's target, while one has not finished.
    pub fn staged_target(&self) -> Option<Timing> {
        self.staged.map(|s| s.target)
    }

    /// The staged decrease's activation frame, while it has not activated.
    pub fn staged_activation(&self) -> Option<u32> {
        self.staged.filter(|s| !s.activated).map(|s| s.activation)
    }

    /// Frame `frame` is a send frame under the send period in force (S5).
    pub fn is_send_frame(&self, frame: u32) -> bool {
        frame % u32::from(self.in_force.send_period()) == 0
    }

    /// Step 1 of `frame` as an engine announces it: frame 0 announces the
    /// starting timing and rate, every later frame what
    /// [`Schedule::begin_frame`] changed.
    pub fn begin_announced(&mut self, frame: u32) -> Changed {
        if frame == 0 {
            return Changed {
                timing: true,
                fps: true,
            };
        }
        self.begin_frame(frame)
    }

    /// Step 1 of a frame: a staged decrease activates on its frame, then
    /// steps the look-ahead down by one send period on each following send
    /// frame until it reaches the target (S5).
    pub fn begin_frame(&mut self, frame: u32) -> Changed {
        let Some(mut staged) = self.staged else {
            return Changed::default();
        };
        let before = (self.in_force, self.fps);
        let target = staged.target;
        if !staged.activated {
            if frame < staged.activation {
                return Changed::default();
            }
            // On activation: roundup(max(T.look_ahead, L - S_old), T.send_period).
            let stepped = self
                .in_force
                .look_ahead()
                .saturating_sub(staged.old_send_period);
            let look_ahead = fit(stepped.max(target.look_ahead()), target.send_period());
            self.in_force = timing(target.send_period(), look_ahead);
            self.fps = staged.fps;
            staged.activated = true;
        } else if self.is_send_frame(frame) {
            let stepped = self
                .in_force
                .look_ahead()
                .saturating_sub(target.send_period());
            self.in_force = timing(target.send_period(), stepped.max(target.look_ahead()));
        }
        self.staged = if self.in_force.look_ahead() <= target.look_ahead() {
            None
        } else {
            Some(staged)
        };
        Changed {
            timing: self.in_force != before.0,
            fps: self.fps != before.1,
        }
    }

    /// Apply a timing event executing on `frame` (S5). A newer event replaces
    /// a staged decrease that has not finished: it is applied or staged from
    /// the timing in force now.
    pub fn apply(&mut self, frame: u32, event: TimingEvent) -> (Applied, Changed) {
        let before = (self.in_force, self.fps);
        let (old_send_period, old_look_ahead) =
            (self.in_force.send_period(), self.in_force.look_ahead());
        let target = event.target;
        self.staged = None;
        if target.send_period() >= old_send_period && target.look_ahead() >= old_look_ahead {
            self.in_force = target;
            self.fps = event.fps.max(1);
            let changed = Changed {
                timing: self.in_force != before.0,
                fps: self.fps != before.1,
            };
            return (Applied::Immediate, changed);
        }
        // Every command scheduled under the old look-ahead is due by W.
        let all_due = frame.saturating_add(u32::from(old_look_ahead));
        let activation = if target.send_period() > old_send_period {
            // Longer send period, shorter look-ahead: the send period switches now.
            self.in_force = timing(
                target.send_period(),
                fit(old_look_ahead, target.send_period()),
            );
            round_up(all_due, u32::from(target.send_period()))
        } else {
            let both = lcm(u32::from(old_send_period), u32::from(target.send_period()));
            round_up(all_due, both)
        };
        self.staged = Some(StagedDecrease {
            target,
            fps: event.fps.max(1),
            old_send_period,
            activation,
            activated: false,
        });
        let changed = Changed {
            timing: self.in_force != before.0,
            fps: false,
        };
        (Applied::Staged { activation }, changed)
    }
}

/// `look_ahead` rounded up to a multiple of `send_period`, kept within S1's
/// 250. (Past 250 is unreachable from the ladder; clamping keeps the
/// invariant rather than trusting that.)
fn fit(look_ahead: u8, send_period: u8) -> u8 {
    let rounded = round_up(u32::from(look_ahead), u32::from(send_period));
    let ceiling = u32::from(MAX_LOOK_AHEAD) - u32::from(MAX_LOOK_AHEAD) % u32::from(send_period);
    rounded.min(ceiling) as u8
}

fn timing(send_period: u8, look_ahead: u8) -> Timing {
    // Callers keep S1 by construction (multiples via `fit`, bounds from targets).
    Timing::new(send_period, look_ahead).unwrap_or(Timing::WIDEST)
}

fn round_up(value: u32, multiple: u32) -> u32 {
    value.div_ceil(multiple).saturating_mul(multiple)
}

fn gcd(a: u32, b: u32) -> u32 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

fn lcm(a: u32, b: u32) -> u32 {
    a / gcd(a, b) * b
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: u8, l: u8) -> Timing {
        Timing::new(s, l).unwrap()
    }

    fn event(s: u8, l: u8) -> TimingEvent {
        TimingEvent {
            target: t(s, l),
            fps: 30,
        }
    }

    /// Run frames `from..=to`, returning each frame whose timing changed.
    fn run(schedule: &mut Schedule, from: u32, to: u32) -> Vec<(u32, String)> {
        let mut changes = Vec::new();
        for frame in from..=to {
            if schedule.begin_frame(frame).timing {
                changes.push((frame, schedule.timing().to_string()));
            }
        }
        changes
    }

    #[test]
    fn spec_s5_worked_example_3_9_to_2_6() {
        // In force 3/9, event 2/6 on frame 100: W = 109, A = 114.
        let mut schedule = Schedule::new(30);
        schedule.apply(99, event(3, 9));
        let (applied, _) = schedule.apply(100, event(2, 6));
        assert_eq!(applied, Applied::Staged { activation: 114 });
        assert_eq!(run(&mut schedule, 101, 200), vec![(114, "2/6".to_string())]);
    }

    #[test]
    fn spec_s5_worked_example_10_250_to_9_27() {
        // In force 10/250, event 9/27 on 1000: W = 1250, A = 1260; 243, then
        // 234 on 1269, 225 on 1278, ... down to 27.
        let mut schedule = Schedule::new(30);
        schedule.apply(990, event(10, 250));
        assert_eq!(
            schedule.apply(1000, event(9, 27)).0,
            Applied::Staged { activation: 1260 }
        );
        let changes = run(&mut schedule, 1001, 1600);
        assert_eq!(changes[0], (1260, "9/243".to_string()));
        assert_eq!(changes[1], (1269, "9/234".to_string()));
        assert_eq!(changes[2], (1278, "9/225".to_string()));
        assert_eq!(changes.last().unwrap().1, "9/27");
        assert_eq!(changes.len(), 1 + (243 - 27) / 9);
        assert_eq!(schedule.staged_target(), None);
    }

    #[test]
    fn increases_apply_on_the_event_frame_and_drop_a_staged_decrease() {
        let mut schedule = Schedule::new(30);
        schedule.apply(10, event(5, 15));
        schedule.apply(20, event(4, 12));
        assert!(schedule.staged_target().is_some());
        let (applied, changed) = schedule.apply(30, event(6, 18));
        assert_eq!(applied, Applied::Immediate);
        assert!(changed.timing);
        assert_eq!(schedule.timing(), t(6, 18));
        assert_eq!(schedule.staged_target(), None);
    }

    #[test]
    fn longer_send_period_with_shorter_look_ahead_switches_at_once() {
        // 9/36 mid-descent, then 10/30: the send period becomes 10 on X with
        // the look-ahead rounded up to 40; activation on the first multiple of
        // 10 at or after W = X + 36.
        let mut schedule = Schedule::new(30);
        schedule.apply(0, event(10, 40));
        schedule.apply(10, event(9, 27));
        run(&mut schedule, 11, 90); // activates on 90 with 9/36
        assert_eq!(schedule.timing(), t(9, 36));
        let (applied, changed) = schedule.apply(99, event(10, 30));
        assert_eq!(applied, Applied::Staged { activation: 140 });
        assert!(changed.timing);
        assert_eq!(schedule.timing(), t(10, 40));
        // On 140: roundup(max(30, 40 - 9), 10) = 40, then 30 on 150.
        assert_eq!(
            run(&mut schedule, 100, 200),
            vec![(150, "10/30".to_string())]
        );
    }

    #[test]
    fn the_rate_of_a_decrease_applies_on_activation() {
        let mut schedule = Schedule::new(30);
        schedule.apply(0, event(3, 9));
        schedule.apply(
            3,
            TimingEvent {
                target: t(2, 6),
                fps: 20,
            },
        );
        assert_eq!(schedule.fps(), 30);
        for f in 4..12 {
            assert!(!schedule.begin_frame(f).fps);
        }
        let changed = schedule.begin_frame(12);
        assert!(changed.fps && changed.timing);
        assert_eq!(schedule.fps(), 20);
    }
}
