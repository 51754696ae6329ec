//! Desync checks: every machine's state checksum for a frame, compared once
//! every present seat's value is in.

use std::collections::VecDeque;

use crate::report::record::MAX_SEATS;

/// Checksum frames kept for comparison.
const KEPT_CHECKSUM_FRAMES: usize = 64;

/// The values received for one frame, by seat.
#[derive(Debug, Clone)]
struct FrameChecksums {
    frame: u32,
    values: [Option<u64>; MAX_SEATS],
}

/// Checksums waiting for comparison, oldest first (bounded).
#[derive(Debug, Default)]
pub struct Checksums {
    /// Frames between checksums; 0 for none.
    interval: u32,
    frames: VecDeque<FrameChecksums>,
}

impl Checksums {
    /// Checksums every `interval` frames (0: none).
    pub fn new(interval: u32) -> Checksums {
        Checksums {
            interval,
            frames: VecDeque::new(),
        }
    }

    /// Whether the state after `frame` is compared: `frame` is a multiple
    /// of the interval.
    pub fn is_checksum_frame(&self, frame: u32) -> bool {
        self.interval > 0 && frame % self.interval == 0
    }

    /// Note `seat`'s `value` for `frame`. Once every seat in `present` has
    /// one, compare them: returns the seats whose value differs from the
    /// lowest present seat's, as a bit mask, if any does.
    pub fn note(&mut self, frame: u32, seat: u8, value: u64, present: &[u8]) -> Option<u32> {
        let index = match self.frames.iter().position(|f| f.frame == frame) {
            Some(i) => i,
            None => {
                if self.frames.len() >= KEPT_CHECKSUM_FRAMES {
                    self.frames.pop_front();
                }
                self.frames.push_back(FrameChecksums {
                    frame,
                    values: [None; MAX_SEATS],
                });
                self.frames.len() - 1
            }
        };
        let values = &mut self.frames[index].values;
        values[usize::from(seat)] = Some(value);
        if !present.iter().all(|s| values[usize::from(*s)].is_some()) {
            return None;
        }
        let reference = values[usize::from(*present.first()?)];
        let differ = present
            .iter()
            .filter(|s| values[usize::from(**s)] != reference)
            .fold(0u32, |mask, s| mask | 1 << s);
        self.frames.remove(index);
        (differ != 0).then_some(differ)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_is_compared_once_every_present_seat_reported() {
        let mut c = Checksums::new(64);
        assert_eq!(c.note(64, 0, 7, &[0, 1, 2]), None);
        assert_eq!(c.note(64, 2, 8, &[0, 1, 2]), None);
        assert_eq!(c.note(64, 1, 7, &[0, 1, 2]), Some(0b100));
        assert_eq!(c.note(128, 0, 1, &[0, 1]), None);
        assert_eq!(c.note(128, 1, 1, &[0, 1]), None, "equal: no desync");
    }
}
