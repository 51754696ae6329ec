//! Adaptive timing: the ladder (S2), the master's policy (S4), the schedule in
//! force on every machine (S5) with the frame readiness rule it implies, what
//! the player sees (S6), and the timing machine that composes them for one
//! machine of a game.

pub mod baselines;
pub mod event;
pub mod ladder;
pub mod machine;
pub mod policy;
pub mod queue;
pub mod readiness;
pub mod replay;
pub mod schedule;
pub mod seats;
pub mod tick_timer;
pub mod tracking;

pub use baselines::PolicyKind;
pub use event::TimingEvent;
pub use machine::{player_message_text, FrameStart, MachineConfig, Output, Status, TimingMachine};
pub use policy::{is_evaluation_frame, MasterPolicy, Verdict};
pub use queue::{CommandQueue, Queued};
pub use readiness::{NotAnswerable, SendHistory};
pub use schedule::{Applied, Changed, Schedule};
pub use seats::Seats;
pub use tick_timer::TickTimer;

pub use ladder::{
    one_way_frames, one_way_frames_headroom, required, Tier, Timing, MAX_LOOK_AHEAD,
    MAX_SEND_PERIOD, RUNG_COUNT,
};
