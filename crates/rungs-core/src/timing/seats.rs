//! Who is in the game (S4.6, S4.7): the seats in house order, which are
//! human players, which of those are still present, and who is the master
//! (the lowest present human). One model for the timing machine and the
//! sessions built on it; changed only by executed removals, so it is the
//! same on every machine.

use crate::error::{Error, Result};
use crate::report::record::MAX_SEATS;

/// The seats of a game and who is present.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seats {
    count: u8,
    human: [bool; MAX_SEATS],
    removed: [bool; MAX_SEATS],
    master: Option<u8>,
}

impl Seats {
    /// A game of `human_seats.len()` seats (1..=16), at least one human.
    pub fn new(human_seats: &[bool]) -> Result<Seats> {
        if human_seats.is_empty() || human_seats.len() > MAX_SEATS {
            return Err(Error::invalid_value(
                "the number of seats",
                human_seats.len(),
                "1 to 16",
            ));
        }
        let mut human = [false; MAX_SEATS];
        human[..human_seats.len()].copy_from_slice(human_seats);
        let mut seats = Seats {
            count: human_seats.len() as u8,
            human,
            removed: [false; MAX_SEATS],
            master: None,
        };
        let master = seats.present().next();
        seats.master = master;
        if seats.master.is_none() {
            return Err(Error::invalid_value(
                "the number of human seats",
                0u8,
                "at least one",
            ));
        }
        Ok(seats)
    }

    /// Seats in the game, human or not.
    pub fn count(&self) -> u8 {
        self.count
    }

    /// Whether `seat` is a seat of the game.
    pub fn is_seat(&self, seat: u8) -> bool {
        seat < self.count
    }

    /// Whether `seat` is a human player's (present or removed).
    pub fn is_human(&self, seat: u8) -> bool {
        self.is_seat(seat) && self.human[usize::from(seat)]
    }

    /// Whether `seat` is a human player still in the game.
    pub fn is_present(&self, seat: u8) -> bool {
        self.is_human(seat) && !self.removed[usize::from(seat)]
    }

    /// The present human seats, lowest first.
    pub fn present(&self) -> impl Iterator<Item = u8> + '_ {
        (0..self.count).filter(|s| self.is_present(*s))
    }

    /// The master: the lowest present human; `None` once none is left.
    pub fn master(&self) -> Option<u8> {
        self.master
    }

    /// Remove the present human `seat`; true if the master changed.
    pub fn remove(&mut self, seat: u8) -> Result<bool> {
        if !self.is_present(seat) {
            return Err(Error::UnknownSeat(seat));
        }
        self.removed[usize::from(seat)] = true;
        let master = self.present().next();
        let changed = master != self.master;
        self.master = master;
        Ok(changed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_master_is_the_lowest_present_human() {
        let mut seats = Seats::new(&[false, true, true, false, true]).unwrap();
        assert_eq!(seats.master(), Some(1));
        assert!(!seats.is_human(0) && !seats.is_seat(5));
        assert_eq!(seats.remove(2), Ok(false));
        assert_eq!(seats.remove(1), Ok(true));
        assert_eq!(seats.master(), Some(4));
        assert_eq!(seats.present().collect::<Vec<_>>(), vec![4]);
        assert_eq!(seats.remove(1), Err(Error::UnknownSeat(1)));
        assert_eq!(seats.remove(0), Err(Error::UnknownSeat(0)));
        assert_eq!(seats.remove(4), Ok(true));
        assert_eq!(seats.master(), None);
        assert!(Seats::new(&[false, false]).is_err());
        assert!(Seats::new(&[]).is_err());
    }
}
