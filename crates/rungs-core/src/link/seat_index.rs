//! Where each seat's entry sits in a list: a table by seat number.
//!
//! The endpoint's peers and the measurements' round trips are lists kept
//! sorted by seat, and a session looks a seat up on nearly every datagram,
//! several times. A binary search touches an entry at every step (a whole
//! link, or a sample window, far apart in memory); the table is one read.
//! It changes only when a seat joins or leaves, and is rebuilt then.

/// A seat's place in a list of at most 256 entries, one per seat number.
#[derive(Debug, Clone)]
pub(crate) struct SeatIndex {
    /// Per seat, its place in the list plus one; 0: not in it.
    slot: [u16; 256],
}

impl SeatIndex {
    /// An index of an empty list.
    pub(crate) fn new() -> SeatIndex {
        SeatIndex { slot: [0; 256] }
    }

    /// Where `seat` sits in the list, if it is there.
    #[inline]
    pub(crate) fn get(&self, seat: u8) -> Option<usize> {
        match self.slot[usize::from(seat)] {
            0 => None,
            slot => Some(usize::from(slot) - 1),
        }
    }

    /// Index the list again after it changed: `seats` are its entries'
    /// seats, in its order (at most one per seat number, so at most 256 and
    /// `place + 1` fits).
    pub(crate) fn rebuild(&mut self, seats: impl Iterator<Item = u8>) {
        self.slot = [0; 256];
        for (place, seat) in seats.enumerate() {
            self.slot[usize::from(seat)] = (place + 1) as u16;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_seat_of_the_list_is_found_where_it_sits_and_no_other() {
        let mut index = SeatIndex::new();
        assert_eq!(index.get(0), None);
        index.rebuild([2u8, 5, 255].into_iter());
        assert_eq!(index.get(2), Some(0));
        assert_eq!(index.get(5), Some(1));
        assert_eq!(index.get(255), Some(2));
        assert_eq!(index.get(3), None);
        index.rebuild([5u8].into_iter());
        assert_eq!(index.get(2), None);
        assert_eq!(index.get(5), Some(0));
        // All 256 seat numbers: the last place still fits.
        index.rebuild(0..=255u8);
        assert_eq!(index.get(255), Some(255));
        assert_eq!(index.get(0), Some(0));
    }
}
