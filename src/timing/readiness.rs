//! Frame readiness (S5): which packets an engine that keeps its own queue
//! must hold before a frame may execute.
//!
//! A command sent on send frame `s` is tagged `s + L(s)` and executes on the
//! first send frame at or after its tag. Tags never decrease from one send
//! frame to the next, but during a staged decrease they can repeat: the
//! look-ahead drops by one send period per send frame, so `s + L(s)` stays
//! put (e.g. `3/9` to `2/6`: send frame 4239 under `3/9` and 4242 under `2/6`
//! are both tagged 4248). "A packet tagged at or after F from every peer"
//! therefore does not mean every command due by F has arrived: the packet of
//! 4242 can still be on its way when the one of 4239 is in.
//!
//! **The rule.** Frame `F` may execute once the engine holds, from every
//! peer still in the game, the packet of the *last send frame whose tag is at
//! or before `F`* (and therefore, on an in-order link, every earlier one).
//! The send frames and their tags are the same on every machine (S5), so the
//! schedule answers for every peer at once; when no send frame has a tag at
//! or before `F` yet, nothing is needed.
//!
//! The history keeps the send frames of the last [`SendHistory::WINDOW`]
//! frames without allocating; questions about older frames are refused.

use std::collections::VecDeque;

use crate::error::{Error, Result};

/// Recent send frames and their tags, in frame order.
#[derive(Debug, Clone)]
pub struct SendHistory {
    /// `(send_frame, tag)`, oldest first; tags are non-decreasing (S5).
    sends: VecDeque<(u32, u32)>,
    /// Every send frame before this one is final (its frame has ended).
    final_through: Option<u32>,
}

/// Why [`SendHistory::required_send_frame`] refused a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotAnswerable {
    /// The frame before `frame` has not ended, so a send frame whose tag
    /// could be at or before `frame` may still come; frames up to
    /// `latest_answerable` can be asked about now.
    Future { latest_answerable: u32 },
    /// Older than the history keeps.
    TooOld { oldest_answerable: u32 },
}

impl SendHistory {
    /// How many frames back the history answers. A tag is at most 250
    /// frames after its send frame (S1), so 256 frames of questions need
    /// 512 frames of send frames.
    pub const WINDOW: u32 = 256;
    const KEPT_FRAMES: u32 = 2 * Self::WINDOW;

    /// An empty history on the eve of frame 0.
    pub fn new() -> SendHistory {
        SendHistory {
            sends: VecDeque::with_capacity(Self::KEPT_FRAMES as usize + 1),
            final_through: None,
        }
    }

    /// Frame `frame` ended; `send` is `Some(tag)` when it was a send frame.
    pub fn frame_ended(&mut self, frame: u32, send: Option<u32>) {
        if let Some(tag) = send {
            self.sends.push_back((frame, tag));
        }
        self.final_through = Some(frame);
        while self
            .sends
            .front()
            .is_some_and(|&(s, _)| s.saturating_add(Self::KEPT_FRAMES) <= frame)
        {
            self.sends.pop_front();
        }
    }

    /// The send frame whose packet, from every peer, frame `frame` needs
    /// before it executes: the last send frame tagged at or before `frame`;
    /// `None` when no send frame so far is (nothing to wait for).
    /// Answerable for frames up to one past the last ended frame, and back
    /// [`Self::WINDOW`] frames from there.
    pub fn required_send_frame(
        &self,
        frame: u32,
    ) -> std::result::Result<Option<u32>, NotAnswerable> {
        let latest_answerable = self.final_through.map_or(0, |f| f.saturating_add(1));
        if frame > latest_answerable {
            return Err(NotAnswerable::Future { latest_answerable });
        }
        let oldest_answerable = latest_answerable.saturating_sub(Self::WINDOW);
        if frame < oldest_answerable {
            return Err(NotAnswerable::TooOld { oldest_answerable });
        }
        let due = self.sends.partition_point(|&(_, tag)| tag <= frame);
        Ok(due.checked_sub(1).map(|index| self.sends[index].0))
    }

    /// Whether frame `frame` may execute, given the latest send frame held
    /// from each peer (`None`: nothing yet). Peers are the other players
    /// still in the game; the local machine holds its own packets.
    pub fn frame_ready(
        &self,
        frame: u32,
        held: impl IntoIterator<Item = Option<u32>>,
    ) -> std::result::Result<bool, NotAnswerable> {
        Ok(match self.required_send_frame(frame)? {
            None => true,
            Some(needed) => held.into_iter().all(|h| h.is_some_and(|h| h >= needed)),
        })
    }
}

impl Default for SendHistory {
    fn default() -> Self {
        SendHistory::new()
    }
}

impl NotAnswerable {
    /// The error the sessions return for a question about `frame`: what was
    /// asked and which frames can be answered.
    pub fn into_error(self, frame: u32) -> Error {
        let (kind, latest) = match self {
            NotAnswerable::Future { latest_answerable } => (
                Error::State(
                    "frame readiness: the frame before it has not ended, so its send frames \
                     are not final",
                ),
                latest_answerable,
            ),
            NotAnswerable::TooOld { oldest_answerable } => (
                Error::State(
                    "frame readiness: the frame is more than 256 frames back; the history no \
                     longer holds it",
                ),
                oldest_answerable.saturating_add(SendHistory::WINDOW),
            ),
        };
        let oldest = latest.saturating_sub(SendHistory::WINDOW);
        kind.detailed(format!(
            "got frame {frame}; expected {oldest} to {latest} (a frame whose previous frame \
             has ended, at most {} frames back)",
            SendHistory::WINDOW
        ))
    }
}

/// Shorthand for the sessions: the answer for `frame`, or the error.
pub(crate) fn answer<T>(r: std::result::Result<T, NotAnswerable>, frame: u32) -> Result<T> {
    r.map_err(|e| e.into_error(frame))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timing::{MachineConfig, TimingMachine};
    use crate::timing::{Timing, TimingEvent};

    #[test]
    fn the_last_send_frame_tagged_at_or_before_the_frame_is_required() {
        let mut h = SendHistory::new();
        assert_eq!(h.required_send_frame(0), Ok(None));
        assert_eq!(
            h.required_send_frame(1),
            Err(NotAnswerable::Future {
                latest_answerable: 0
            })
        );
        // 3/9 send frames 4236, 4239; then 2/6 from 4242 (a staged decrease).
        for (frame, send) in [(4236, Some(4245)), (4239, Some(4248)), (4242, Some(4248))] {
            h.frame_ended(frame, send);
        }
        h.frame_ended(4243, None);
        h.frame_ended(4244, Some(4250));
        assert_eq!(h.required_send_frame(4245), Ok(Some(4236)));
        assert_eq!(
            h.required_send_frame(4246),
            Err(NotAnswerable::Future {
                latest_answerable: 4245
            })
        );
        for (frame, send) in [(4245, None), (4246, Some(4252)), (4247, None)] {
            h.frame_ended(frame, send);
        }
        assert_eq!(h.required_send_frame(4247), Ok(Some(4236)));
        // Two packets carry tag 4248: frame 4248 needs the later one.
        assert_eq!(h.required_send_frame(4248), Ok(Some(4242)));
        assert_eq!(h.frame_ready(4248, [Some(4239), Some(4242)]), Ok(false));
        assert_eq!(h.frame_ready(4248, [Some(4242), Some(4244)]), Ok(true));
        assert_eq!(h.frame_ready(4244, [None]), Ok(true));
        assert_eq!(h.frame_ready(4245, [None]), Ok(false));
    }

    #[test]
    fn old_frames_are_refused_and_the_history_stays_bounded() {
        let mut h = SendHistory::new();
        for frame in 0..10_000 {
            h.frame_ended(frame, Some(frame + 6));
        }
        assert!(h.sends.len() <= SendHistory::KEPT_FRAMES as usize);
        assert_eq!(h.required_send_frame(10_000), Ok(Some(9_994)));
        assert_eq!(h.required_send_frame(10_000 - 256), Ok(Some(9_738)));
        assert!(matches!(
            h.required_send_frame(10_000 - 257),
            Err(NotAnswerable::TooOld { .. })
        ));
    }

    /// The machine records its own send frames: during the worked example
    /// `10/250` to `9/27` every send frame of the step-down carries one tag.
    #[test]
    fn a_machine_answers_from_its_schedule_during_a_step_down() {
        let mut m = TimingMachine::new(&MachineConfig::adaptive(30, vec![true], Some(0))).unwrap();
        let mut tags = Vec::new();
        for frame in 0..=1300 {
            m.begin_frame(frame).unwrap();
            let event = match frame {
                990 => Some(Timing::new(10, 250).unwrap()),
                1000 => Some(Timing::new(9, 27).unwrap()),
                _ => None,
            };
            if let Some(target) = event {
                m.execute_timing_event(0, TimingEvent { target, fps: 30 })
                    .unwrap();
            }
            m.end_frame().unwrap();
            if m.is_send_frame() {
                tags.push((frame, m.command_tag()));
            }
        }
        // 1260: 9/243 -> 1503; 1269: 9/234 -> 1503; 1278 -> 1503 ...
        assert!(tags.contains(&(1260, 1503)) && tags.contains(&(1269, 1503)));
        // Frame 1300's question: the last send frame tagged <= 1300.
        let expected = tags.iter().rev().find(|(_, t)| *t <= 1300).unwrap().0;
        assert_eq!(m.required_send_frame(1300), Ok(Some(expected)));
        assert_eq!(m.required_send_frame(1301), Ok(Some(expected)));
    }
}
