//! When each peer's turns arrived, and from that the look-ahead each frame
//! needed (`report::needs`; docs/tracking.md, rule 10).
//!
//! A frame needs every peer's turn of one send frame (the last one tagged
//! at or before it, [`SendSchedule::last_due_by`]); the last of those to
//! arrive made it ready. The session notes when each turn is complete and,
//! as each frame starts, turns that and the frame's deadline into the
//! look-ahead the frame needed for the reports.
//!
//! [`SendSchedule::last_due_by`]: super::turns::SendSchedule::last_due_by

use crate::report::record::MAX_SEATS;
use crate::timing::ladder::{MAX_LOOK_AHEAD, MAX_SEND_PERIOD};

use super::turns::MAX_FRAMES_AHEAD;

/// Send frames remembered per peer. A frame looks up the turns of a send
/// frame at most a look-ahead and a send period before it, and no peer's
/// turn is more than [`MAX_FRAMES_AHEAD`] past our schedule, so a ring this
/// long still holds every turn a frame can ask for.
const KEPT: usize = 1024;
const _: () =
    assert!(KEPT > MAX_FRAMES_AHEAD as usize + MAX_LOOK_AHEAD as usize + MAX_SEND_PERIOD as usize);

/// One peer's ring: `(send frame, local arrival time µs)`, by send frame.
type Ring = [(u32, u64); KEPT];

/// Per peer seat, when its complete turns arrived.
pub(super) struct TurnArrivals {
    rings: Vec<Option<Box<Ring>>>,
}

impl TurnArrivals {
    /// Rings for `peers` (allocated here, once, not while the game runs).
    pub(super) fn new(peers: impl Iterator<Item = u8>) -> TurnArrivals {
        let mut rings: Vec<Option<Box<Ring>>> = (0..MAX_SEATS).map(|_| None).collect();
        for peer in peers {
            if let Some(slot) = rings.get_mut(usize::from(peer)) {
                *slot = Some(Box::new([(u32::MAX, 0); KEPT]));
            }
        }
        TurnArrivals { rings }
    }

    /// `seat`'s turn of `send_frame` is complete at local `now_us`.
    pub(super) fn arrived(&mut self, seat: u8, send_frame: u32, now_us: u64) {
        if let Some(Some(ring)) = self.rings.get_mut(usize::from(seat)) {
            ring[send_frame as usize % KEPT] = (send_frame, now_us);
        }
    }

    /// The look-ahead a frame needed (`report::needs`): the frame `frame`
    /// needs the `peers`' turns of `needed` (a send frame), it starts at
    /// local `now_us` and could have started up to `deadline_us` without
    /// counting as a stall. Returns (look-ahead in force, look-ahead
    /// needed); `None` when no peer's turn was waited for (a player alone,
    /// a peer dropped before that turn).
    pub(super) fn need(
        &self,
        frame: u32,
        needed: u32,
        peers: impl Iterator<Item = u8>,
        now_us: u64,
        deadline_us: u64,
        frame_us: u64,
    ) -> Option<(u8, u8)> {
        let ready = peers
            .filter_map(|peer| self.arrival(peer, needed))
            .max()?
            .min(now_us);
        let look_ahead = u8::try_from(frame.saturating_sub(needed))
            .unwrap_or(MAX_LOOK_AHEAD)
            .clamp(1, MAX_LOOK_AHEAD);
        let need =
            crate::report::needed_look_ahead(look_ahead, deadline_us, ready, frame_us).ok()?;
        Some((look_ahead, need))
    }

    /// When `seat`'s turn of `send_frame` arrived, if it is remembered.
    pub(super) fn arrival(&self, seat: u8, send_frame: u32) -> Option<u64> {
        let ring = self.rings.get(usize::from(seat))?.as_ref()?;
        let (frame, at) = ring[send_frame as usize % KEPT];
        (frame == send_frame).then_some(at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arrivals_are_kept_per_peer_and_send_frame() {
        let mut arrivals = TurnArrivals::new([1, 3].into_iter());
        arrivals.arrived(1, 10, 5_000);
        arrivals.arrived(3, 10, 7_000);
        arrivals.arrived(2, 10, 9_000); // not a peer: ignored
        assert_eq!(arrivals.arrival(1, 10), Some(5_000));
        assert_eq!(arrivals.arrival(3, 10), Some(7_000));
        assert_eq!(arrivals.arrival(2, 10), None);
        assert_eq!(arrivals.arrival(1, 11), None, "not arrived");
        // A send frame a whole ring later takes the slot: the old one is gone.
        arrivals.arrived(1, 10 + KEPT as u32, 8_000);
        assert_eq!(arrivals.arrival(1, 10), None);
        assert_eq!(arrivals.arrival(1, 10 + KEPT as u32), Some(8_000));
        assert_eq!(arrivals.arrival(40, 10), None, "no such seat");
    }
}
