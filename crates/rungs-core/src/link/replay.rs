//! The receive window over packet numbers (S8): a packet number seen before
//! is a duplicate or a replay, one more than [`REPLAY_WINDOW`] below the
//! largest seen is outside the window. Like netcode.io's replay protection,
//! but 64 packets wide (one bitmask), which the number widening in
//! [`Link`](super::Link) relies on.

use super::stats::DropReason;

/// How far below the largest packet number a packet is still accepted.
pub(crate) const REPLAY_WINDOW: u32 = 64;

/// Which recent packet numbers of one peer have been accepted.
#[derive(Debug, Clone, Default)]
pub(crate) struct ReplayWindow {
    largest: Option<u32>,
    /// Bit `i`: packet `largest - i` was accepted (bit 0 is `largest`).
    seen: u64,
}

impl ReplayWindow {
    /// An empty window.
    pub(crate) fn new() -> ReplayWindow {
        ReplayWindow::default()
    }

    /// The largest packet number accepted so far.
    pub(crate) fn largest(&self) -> Option<u32> {
        self.largest
    }

    /// Whether `pn` would be accepted; changes nothing, so a packet that fails
    /// a later check leaves no trace (S8: never acted on).
    pub(crate) fn check(&self, pn: u32) -> Result<(), DropReason> {
        let Some(largest) = self.largest else {
            return Ok(());
        };
        if pn > largest {
            return Ok(());
        }
        let behind = largest - pn;
        if behind >= REPLAY_WINDOW {
            return Err(DropReason::OutsideWindow);
        }
        if self.seen & (1u64 << behind) != 0 {
            return Err(DropReason::Replayed);
        }
        Ok(())
    }

    /// Record `pn` as accepted. Call only after [`check`](Self::check) passed.
    pub(crate) fn accept(&mut self, pn: u32) {
        match self.largest {
            None => {
                self.largest = Some(pn);
                self.seen = 1;
            }
            Some(largest) if pn > largest => {
                let ahead = pn - largest;
                self.seen = if ahead >= 64 { 0 } else { self.seen << ahead };
                self.seen |= 1;
                self.largest = Some(pn);
            }
            Some(largest) => {
                let behind = largest - pn;
                if behind < REPLAY_WINDOW {
                    self.seen |= 1u64 << behind;
                }
            }
        }
    }

    /// The ack bits of the packet format: bit `i` is packet `largest - 1 - i`.
    pub(crate) fn ack_bits(&self) -> u16 {
        ((self.seen >> 1) & 0xFFFF) as u16
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicates_and_stale_packets_are_refused() {
        let mut w = ReplayWindow::new();
        assert_eq!(w.check(5), Ok(()));
        w.accept(5);
        assert_eq!(w.check(5), Err(DropReason::Replayed));
        assert_eq!(w.check(3), Ok(()));
        w.accept(3);
        assert_eq!(w.check(3), Err(DropReason::Replayed));
        w.accept(100);
        assert_eq!(w.largest(), Some(100));
        assert_eq!(w.check(37), Ok(()), "63 behind is inside");
        assert_eq!(
            w.check(36),
            Err(DropReason::OutsideWindow),
            "64 behind is outside"
        );
        assert_eq!(w.check(5), Err(DropReason::OutsideWindow));
        assert_eq!(w.check(101), Ok(()));
    }

    #[test]
    fn ack_bits_mirror_the_window() {
        let mut w = ReplayWindow::new();
        for pn in [10, 9, 7, 11] {
            w.accept(pn);
        }
        // largest 11; 10 -> bit 0, 9 -> bit 1, 7 -> bit 3.
        assert_eq!(w.ack_bits(), 0b1011);
        w.accept(u32::MAX);
        assert_eq!(w.ack_bits(), 0);
        assert_eq!(w.check(u32::MAX), Err(DropReason::Replayed));
    }
}
