//! The look-ahead each frame needed (docs/tracking.md, rule 10): what a
//! report in the *needs* layout (NETWORK_REPORT version 3,
//! docs/payloads.md) adds to the detailed one.
//!
//! A frame's turns leave their senders as their send frame starts, and the
//! frame needs the last of them before it can start without a stall. Had
//! every turn been sent `k` frames later (a look-ahead `k` frames shorter)
//! it would have arrived `k` frame periods later, the network being the
//! same. So from when a frame's last turn came (`ready`) and when the frame
//! could have started at the latest without counting as a stall
//! (`deadline`), the look-ahead it *needed* follows:
//!
//! ```text
//! needed = look_ahead - floor((deadline - ready) / frame)   ready <= deadline
//! needed = look_ahead + ceil((ready - deadline) / frame)    ready >  deadline (it stalled)
//! ```
//!
//! clamped to S1's 1–250. `look_ahead` is how far ahead of the frame its
//! turns were sent (the frame less the send frame whose turns it needs).
//! Unlike a round trip this sees everything that delays a turn: loss (the
//! copy in the next packet), jitter, a sender running late, the machines'
//! phase. An interval's frames are summed up for the report as
//! [`LookAheadNeeds`]: how many frames needed more than each of the four
//! look-aheads from the one in force down, which is how many would have
//! stalled under each — the evidence the `tracking` policy sheds margin and
//! guards its decreases by.

use crate::error::{Error, Result};
use crate::timing::ladder::MAX_LOOK_AHEAD;

/// Look-aheads below the reference a report counts frames for: the one in
/// force and the three below it.
pub const NEED_LEVELS: usize = 4;

/// How much look-ahead one report interval's frames needed.
///
/// Invariants (the encoder refuses, the decoder calls malformed, the C API
/// refuses what breaks them): `reference` and `most` are 1–250; `above` never
/// decreases from one level to the next; and `above[k]` is 0 exactly when
/// `most <= reference - k` (no frame needed more). A report carries at most
/// one per interval, and none for an interval without a measured frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LookAheadNeeds {
    /// The look-ahead the counts are relative to: the one the interval's
    /// last measured frame ran under.
    pub reference: u8,
    /// The most look-ahead any frame of the interval needed.
    pub most: u8,
    /// `above[k]`: the frames that needed more than `reference - k` — that
    /// would have stalled under that look-ahead.
    pub above: [u16; NEED_LEVELS],
}

impl LookAheadNeeds {
    /// How many of the interval's `frames` would have stalled under
    /// `look_ahead`: none at or above `most`; from the counts within the
    /// four levels; otherwise an upper bound — `above[0]` above the
    /// reference, every frame below the lowest level (nothing is known
    /// there, so nothing is promised).
    pub fn stalled_under(&self, look_ahead: u32, frames: u32) -> u32 {
        if look_ahead >= u32::from(self.most) {
            return 0;
        }
        let reference = u32::from(self.reference);
        if look_ahead >= reference {
            return u32::from(self.above[0]);
        }
        let below = (reference - look_ahead) as usize;
        self.above
            .get(below)
            .map_or(frames, |&count| u32::from(count))
    }

    /// The rule these break first, or `Ok` (the struct's invariants).
    pub fn check(&self) -> std::result::Result<(), &'static str> {
        let in_range = |v: u8| (1..=MAX_LOOK_AHEAD).contains(&v);
        if !in_range(self.reference) || !in_range(self.most) {
            return Err("look-ahead needs: reference and most must be 1 to 250");
        }
        if self.above.windows(2).any(|pair| pair[0] > pair[1]) {
            return Err(
                "look-ahead needs: the counts must not decrease from one level to the next",
            );
        }
        for (k, &count) in self.above.iter().enumerate() {
            let level = i32::from(self.reference) - k as i32;
            if (count == 0) != (i32::from(self.most) <= level) {
                return Err(
                    "look-ahead needs: a level's count is 0 exactly when no frame needed more than it",
                );
            }
        }
        Ok(())
    }
}

/// The look-ahead a frame needed ([`LookAheadNeeds`]): it ran with its
/// turns sent `look_ahead` frames before it, the last of them came at
/// `ready_us`, and it could have started up to `deadline_us` without a
/// stall; `frame_us` is a frame period. Any one clock for the two times.
/// `Invalid` for a look-ahead outside 1–250 or a frame period of 0.
pub fn needed_look_ahead(
    look_ahead: u8,
    deadline_us: u64,
    ready_us: u64,
    frame_us: u64,
) -> Result<u8> {
    if !(1..=MAX_LOOK_AHEAD).contains(&look_ahead) {
        return Err(Error::invalid_value("look_ahead", look_ahead, "1 to 250"));
    }
    if frame_us == 0 {
        return Err(Error::invalid_value("frame_us", 0u64, "at least 1 µs"));
    }
    let look_ahead = u64::from(look_ahead);
    let needed = if ready_us <= deadline_us {
        look_ahead.saturating_sub((deadline_us - ready_us) / frame_us)
    } else {
        look_ahead.saturating_add((ready_us - deadline_us).div_ceil(frame_us))
    };
    Ok(needed.clamp(1, u64::from(MAX_LOOK_AHEAD)) as u8)
}

/// One report interval's frames, tallied by the look-ahead each needed.
#[derive(Debug, Clone)]
pub(crate) struct NeedTally {
    /// Frames by the look-ahead they needed (index = look-ahead).
    frames: [u16; MAX_LOOK_AHEAD as usize + 1],
    /// The look-ahead the last frame ran under.
    reference: Option<u8>,
}

impl NeedTally {
    pub(crate) fn new() -> NeedTally {
        NeedTally {
            frames: [0; MAX_LOOK_AHEAD as usize + 1],
            reference: None,
        }
    }

    /// A frame ran under `look_ahead` and needed `needed` (both 1–250).
    pub(crate) fn add(&mut self, look_ahead: u8, needed: u8) {
        let count = &mut self.frames[usize::from(needed)];
        *count = count.saturating_add(1);
        self.reference = Some(look_ahead);
    }

    /// The interval's [`LookAheadNeeds`] (`None` without a frame), and a
    /// new interval.
    pub(crate) fn take(&mut self) -> Option<LookAheadNeeds> {
        let reference = self.reference.take()?;
        let most = self.frames.iter().rposition(|&n| n > 0)? as u8;
        let mut above = [0u16; NEED_LEVELS];
        for (k, count) in above.iter_mut().enumerate() {
            let level = usize::from(reference).saturating_sub(k);
            let frames: u32 = self.frames[level + 1..].iter().map(|&n| u32::from(n)).sum();
            *count = u16::try_from(frames).unwrap_or(u16::MAX);
        }
        self.frames = [0; MAX_LOOK_AHEAD as usize + 1];
        Some(LookAheadNeeds {
            reference,
            most,
            above,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FRAME: u64 = 33_333;

    #[test]
    fn a_frame_ready_early_needed_less_and_one_that_stalled_more() {
        // Ready 2.5 frames before its deadline under 6: 4 would have done.
        let deadline = 1_000_000;
        let early = deadline - 5 * FRAME / 2;
        assert_eq!(needed_look_ahead(6, deadline, early, FRAME), Ok(4));
        // Ready exactly on time: all of it.
        assert_eq!(needed_look_ahead(6, deadline, deadline, FRAME), Ok(6));
        // A hair late: one frame more; 1.2 frames late: two more.
        assert_eq!(needed_look_ahead(6, deadline, deadline + 1, FRAME), Ok(7));
        assert_eq!(
            needed_look_ahead(6, deadline, deadline + 6 * FRAME / 5, FRAME),
            Ok(8)
        );
        // Never below 1 nor above 250.
        assert_eq!(needed_look_ahead(2, deadline, 0, FRAME), Ok(1));
        assert_eq!(needed_look_ahead(250, 0, deadline, FRAME), Ok(250));
        assert!(needed_look_ahead(0, 0, 0, FRAME).is_err());
        assert!(needed_look_ahead(251, 0, 0, FRAME).is_err());
        assert!(needed_look_ahead(6, 0, 0, 0).is_err());
    }

    #[test]
    fn the_tally_counts_the_frames_above_each_level() {
        let mut tally = NeedTally::new();
        assert_eq!(tally.take(), None, "no frame, no needs");
        for needed in [3, 4, 4, 5, 6, 7, 2] {
            tally.add(6, needed);
        }
        let needs = tally.take().unwrap();
        // Above 6: the 7; above 5: 6 and 7; above 4: 5, 6, 7; above 3: all but the 3 and the 2.
        assert_eq!(
            needs,
            LookAheadNeeds {
                reference: 6,
                most: 7,
                above: [1, 2, 3, 5],
            }
        );
        assert_eq!(needs.check(), Ok(()));
        assert_eq!(tally.take(), None, "a new interval");
    }

    #[test]
    fn stalls_under_a_look_ahead_are_read_from_the_counts_or_bounded() {
        let needs = LookAheadNeeds {
            reference: 6,
            most: 7,
            above: [1, 2, 3, 5],
        };
        let frames = 16;
        assert_eq!(needs.stalled_under(7, frames), 0, "at the most, none");
        assert_eq!(needs.stalled_under(6, frames), 1);
        assert_eq!(needs.stalled_under(5, frames), 2);
        assert_eq!(needs.stalled_under(3, frames), 5);
        assert_eq!(needs.stalled_under(2, frames), 16, "beyond the counts: all");
        // Above the reference but below the most: at most those above it.
        let lagging = LookAheadNeeds {
            reference: 4,
            most: 9,
            above: [3, 5, 8, 10],
        };
        assert_eq!(lagging.stalled_under(6, frames), 3);
        assert_eq!(lagging.stalled_under(9, frames), 0);
    }

    #[test]
    fn broken_needs_are_named() {
        let good = LookAheadNeeds {
            reference: 6,
            most: 7,
            above: [1, 2, 3, 5],
        };
        let broken = [
            LookAheadNeeds {
                reference: 0,
                ..good
            },
            LookAheadNeeds { most: 251, ..good },
            LookAheadNeeds {
                above: [2, 1, 3, 5],
                ..good
            },
            // Nothing above 6 although the most is 7.
            LookAheadNeeds {
                above: [0, 2, 3, 5],
                ..good
            },
            // Something above 6 although the most is 6.
            LookAheadNeeds { most: 6, ..good },
        ];
        for needs in broken {
            assert!(needs.check().is_err(), "{needs:?}");
        }
        // Levels below 1: every frame needed more than 0.
        let low = LookAheadNeeds {
            reference: 2,
            most: 2,
            above: [0, 4, 4, 4],
        };
        assert_eq!(low.check(), Ok(()));
    }
}
