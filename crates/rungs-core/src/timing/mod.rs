//! Adaptive timing: the ladder (S2), the master's policy (S4), the schedule in
//! force on every machine (S5) with the frame readiness rule it implies, what
//! the player sees (S6), and the timing machine that composes them for one
//! machine of a game.

pub mod baselines;
mod event;
pub(crate) mod ladder;
pub(crate) mod machine;
mod policy;
mod queue;
pub(crate) mod readiness;
pub mod replay;
mod schedule;
mod seats;
mod tick_timer;
pub(crate) mod tracking;

pub use baselines::PolicyKind;
pub use event::TimingEvent;
pub use machine::{
    player_message_c_text, player_message_text, FrameStart, MachineConfig, Output, Status,
    TimingMachine,
};
pub use policy::{is_evaluation_frame, MasterPolicy, Verdict};
pub use queue::Queued;
pub use readiness::{NotAnswerable, SendAt, SendHistory};
pub use schedule::{Applied, Changed, Schedule};
pub use seats::Seats;
pub use tick_timer::TickTimer;

pub use ladder::{
    one_way_frames, one_way_frames_headroom, required, Label, Tier, Timing, MAX_LOOK_AHEAD,
    MAX_SEND_PERIOD, RUNG_COUNT,
};
