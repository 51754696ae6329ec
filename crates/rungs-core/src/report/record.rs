//! The shared record of reports (S3).
//!
//! Every machine builds the same record from executed events only, so every
//! machine reaches the same timing decisions. Players are the *human* seats:
//! AI seats have no machine and never report.
//!
//! Late events are normal play (S3): a report that executes after its
//! sender's removal (it was in flight when the removal was issued) and a
//! second removal of a seat already removed (several machines issued one for
//! the same lost player) change nothing and are accepted. Only a seat that
//! never was a human seat of the game is refused (`UnknownSeat`).

use super::Report;
use crate::error::{Error, Result};
use crate::timing::TickTimer;

/// A report stays fresh for this many frames after it executes (S3).
pub(crate) const REPORT_LIFETIME_FRAMES: u32 = 512;

/// Seats are numbered by house order; at most this many.
pub const MAX_SEATS: usize = 16;

#[derive(Debug, Clone, Copy)]
struct PlayerEntry {
    seat: u8,
    /// Latest executed report and the frame it executed on.
    latest: Option<(Report, u32)>,
    /// Whether any report with a round trip has ever executed (S3, *silent*).
    ever_reported_rtt: bool,
}

/// What executing an event did to the record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// The record changed.
    Applied,
    /// The seat was a player of the game but has been removed: a late report
    /// or a repeated removal, accepted and changing nothing (S3).
    LateNoOp,
}

/// The record of the players' latest reports (S3).
#[derive(Debug, Clone)]
pub struct Record {
    start_frame: u32,
    /// Bit `i`: seat `i` was a human player at the start (present or removed).
    seated_at_start: u32,
    /// Present players in house order. Removal drops the entry.
    players: Vec<PlayerEntry>,
    /// The game's tick timer, when its engines pace by one: S4.2's rate is
    /// read from the record, so every policy asks for rates it hits.
    tick_timer: Option<TickTimer>,
}

impl Record {
    /// The game's engines pace by `tick_timer` (the same on every machine).
    pub fn set_tick_timer(&mut self, tick_timer: Option<TickTimer>) {
        self.tick_timer = tick_timer;
    }

    /// `fps` as the game may ask for it: the largest rate at or below it
    /// the game's tick timer hits (`timing::tick_timer`), or `fps` itself.
    pub fn fit_rate(&self, fps: u8) -> u8 {
        self.tick_timer.map_or(fps, |timer| timer.rate_at_most(fps))
    }

    /// A record starting on `start_frame` with the given human seats, in house order.
    pub fn new(start_frame: u32, human_seats: impl IntoIterator<Item = u8>) -> Record {
        let mut players = Vec::with_capacity(MAX_SEATS);
        players.extend(human_seats.into_iter().map(|seat| PlayerEntry {
            seat,
            latest: None,
            ever_reported_rtt: false,
        }));
        let seated_at_start = players
            .iter()
            .filter(|p| usize::from(p.seat) < MAX_SEATS)
            .fold(0u32, |mask, p| mask | 1 << p.seat);
        Record {
            start_frame,
            seated_at_start,
            players,
            tick_timer: None,
        }
    }

    /// The frame the record started on.
    pub fn start_frame(&self) -> u32 {
        self.start_frame
    }

    /// The seats still in the game, in house order.
    pub fn seats(&self) -> impl Iterator<Item = u8> + '_ {
        self.players.iter().map(|p| p.seat)
    }

    /// Whether `seat` is a present player.
    pub fn contains(&self, seat: u8) -> bool {
        self.players.iter().any(|p| p.seat == seat)
    }

    /// Whether `seat` was a human player when the record started (it may
    /// have been removed since).
    pub fn was_seated(&self, seat: u8) -> bool {
        usize::from(seat) < MAX_SEATS && self.seated_at_start & (1 << seat) != 0
    }

    /// Where `seat`'s entry is: `Ok(Some(index))` for a present player,
    /// `Ok(None)` for a removed one (late events are no-ops), `UnknownSeat`
    /// for a seat that never was a human player of the game.
    fn position(&self, seat: u8) -> Result<Option<usize>> {
        match self.players.iter().position(|p| p.seat == seat) {
            Some(index) => Ok(Some(index)),
            None if self.was_seated(seat) => Ok(None),
            None => Err(Error::UnknownSeat(seat)),
        }
    }

    /// A player's report executed on `frame`: it replaces that player's
    /// latest (S3). A report from a removed player is a late no-op.
    pub fn apply_report(&mut self, seat: u8, frame: u32, report: Report) -> Result<Effect> {
        let Some(index) = self.position(seat)? else {
            return Ok(Effect::LateNoOp);
        };
        let entry = &mut self.players[index];
        entry.latest = Some((report, frame));
        entry.ever_reported_rtt |= report.worst_rtt_ms.is_some();
        Ok(Effect::Applied)
    }

    /// A player's removal executed: drop the player and its report (S3). A
    /// second removal of the same seat is a late no-op.
    pub fn remove(&mut self, seat: u8) -> Result<Effect> {
        let Some(index) = self.position(seat)? else {
            return Ok(Effect::LateNoOp);
        };
        self.players.remove(index);
        Ok(Effect::Applied)
    }

    /// The player's latest report with the frame it executed on, fresh or not.
    pub fn latest(&self, seat: u8) -> Option<(Report, u32)> {
        self.players
            .iter()
            .find(|p| p.seat == seat)
            .and_then(|p| p.latest)
    }

    /// Fresh reports on `frame`: `frame < executed + 512` (S3).
    pub fn fresh_reports(&self, frame: u32) -> impl Iterator<Item = &Report> + '_ {
        self.players.iter().filter_map(move |p| match &p.latest {
            Some((report, executed)) if is_fresh(*executed, frame) => Some(report),
            _ => None,
        })
    }

    /// Whether every present player has a fresh report on `frame` (S4.2).
    pub fn all_fresh(&self, frame: u32) -> bool {
        self.players
            .iter()
            .all(|p| matches!(p.latest, Some((_, executed)) if is_fresh(executed, frame)))
    }

    /// Whether any player is *missing*: no fresh report, or its latest report
    /// has no round trip (S3).
    pub fn any_missing(&self, frame: u32) -> bool {
        self.players.iter().any(|p| match &p.latest {
            Some((report, executed)) => {
                !is_fresh(*executed, frame) || report.worst_rtt_ms.is_none()
            }
            None => true,
        })
    }

    /// Whether any player is *silent*: no report with a round trip from it
    /// has ever executed (S3).
    pub fn any_silent(&self) -> bool {
        self.players.iter().any(|p| !p.ever_reported_rtt)
    }

    /// The largest round trip among fresh reports, if any carries one.
    pub fn worst_fresh_rtt(&self, frame: u32) -> Option<u32> {
        self.fresh_reports(frame)
            .filter_map(|r| r.worst_rtt_ms)
            .max()
    }

    /// The longest processing time among fresh reports.
    pub fn max_fresh_process_us(&self, frame: u32) -> Option<u32> {
        self.fresh_reports(frame).map(|r| r.process_us).max()
    }

    /// The longest wait among fresh reports.
    pub fn max_fresh_wait_ms(&self, frame: u32) -> Option<u32> {
        self.fresh_reports(frame).map(|r| r.max_wait_ms).max()
    }
}

/// A report executed on `executed` is fresh on `frame` while `frame < executed + 512`.
fn is_fresh(executed: u32, frame: u32) -> bool {
    u64::from(frame) < u64::from(executed) + u64::from(REPORT_LIFETIME_FRAMES)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(rtt: Option<u32>) -> Report {
        Report {
            process_us: 8000,
            max_wait_ms: 0,
            worst_rtt_ms: rtt,
            detail: None,
        }
    }

    #[test]
    fn reports_expire_512_frames_after_executing() {
        // S3: fresh on f while f < executed + 512.
        let mut record = Record::new(0, [0, 1]);
        record.apply_report(0, 100, report(Some(50))).unwrap();
        record.apply_report(1, 100, report(Some(70))).unwrap();
        assert!(record.all_fresh(611));
        assert_eq!(record.worst_fresh_rtt(611), Some(70));
        assert!(!record.all_fresh(612));
        assert_eq!(record.worst_fresh_rtt(612), None);
        assert!(record.any_missing(612));
    }

    #[test]
    fn a_report_without_round_trip_makes_the_player_missing_and_keeps_it_silent() {
        let mut record = Record::new(0, [0, 1]);
        record.apply_report(0, 10, report(Some(50))).unwrap();
        record.apply_report(1, 10, report(None)).unwrap();
        assert!(record.any_missing(20));
        assert!(record.any_silent());
        record.apply_report(1, 30, report(Some(60))).unwrap();
        assert!(!record.any_missing(40));
        assert!(!record.any_silent());
        // Once a round trip has executed the player is never silent again (S3).
        record.apply_report(1, 50, report(None)).unwrap();
        assert!(!record.any_silent());
        assert!(record.any_missing(60));
    }

    #[test]
    fn the_latest_report_replaces_the_previous_one() {
        let mut record = Record::new(0, [3]);
        record.apply_report(3, 10, report(Some(100))).unwrap();
        record.apply_report(3, 10, report(Some(1300))).unwrap();
        assert_eq!(record.worst_fresh_rtt(11), Some(1300));
    }

    #[test]
    fn removal_drops_the_player_and_late_events_change_nothing() {
        let mut record = Record::new(0, [0, 2]);
        record.apply_report(0, 5, report(Some(40))).unwrap();
        record.apply_report(2, 5, report(None)).unwrap();
        assert!(record.any_silent());
        assert_eq!(record.remove(2), Ok(Effect::Applied));
        assert!(!record.any_silent());
        // S3: a report in flight when its sender was removed, and a second
        // removal of the same seat, are accepted and change nothing.
        assert_eq!(
            record.apply_report(2, 6, report(Some(1))),
            Ok(Effect::LateNoOp)
        );
        assert_eq!(record.remove(2), Ok(Effect::LateNoOp));
        assert_eq!(record.seats().collect::<Vec<_>>(), vec![0]);
        assert!(record.latest(2).is_none());
        assert!(!record.any_silent());
        // Only a seat that never was a human player is an error.
        assert_eq!(
            record.apply_report(1, 6, report(Some(1))),
            Err(Error::UnknownSeat(1))
        );
        assert_eq!(record.remove(1), Err(Error::UnknownSeat(1)));
        assert_eq!(record.remove(200), Err(Error::UnknownSeat(200)));
        assert_eq!(record.seats().collect::<Vec<_>>(), vec![0]);
    }
}
