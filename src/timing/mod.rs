//! Adaptive timing: the ladder (S2), the master's policy (S4), the schedule in
//! force on every machine (S5), what the player sees (S6), and the timing
//! machine that composes them for one machine of a game.

pub mod event;
pub mod ladder;

pub use event::TimingEvent;

pub use ladder::{
    one_way_frames, one_way_frames_headroom, required, Tier, Timing, MAX_LOOK_AHEAD,
    MAX_SEND_PERIOD, RUNG_COUNT,
};
