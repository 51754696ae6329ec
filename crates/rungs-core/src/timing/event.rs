//! The timing event the master sends (S4): target timing plus frame rate.

use super::Timing;

/// A TIMING event's content: the master's target and the frame rate every
/// machine paces at (S4.4, S5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimingEvent {
    /// The target timing.
    pub target: Timing,
    /// Frames per second, 1–255.
    pub fps: u8,
}
