//! CnCNet's spawner, protocol 0: latency levels chosen from the players'
//! response times, rising only. Two public versions are modelled, named by
//! their table:
//!
//! - [`Protocol0Table::YurisRevenge`]: the Red Alert 2 / Yuri's Revenge
//!   spawner (`CnCNet/yrpp-spawner`, `src/Spawner/ProtocolZero*.cpp`,
//!   `Spawner::InitNetwork`): MaxAhead 1, 4, 6, 12, 16, 20, 24, 28, 32, 36
//!   by level 0–9; the first response time goes out after frame
//!   `FrameSendRate + 240`.
//! - [`Protocol0Table::TiberianSun`]: Vinifera's Tiberian Sun port, in its
//!   newer version: MaxAhead 1, 4, 6, 9, 12, …, 27; the first response time
//!   after frame 180 (the port's `6 * SendResponseTimeInterval`).
//!
//! Each player sends a RESPONSE_TIME_2 event (its response time plus one,
//! and the level that response time asks for) every 31 frames (the
//! spawner waits until the frame is past `NextSendFrame`, then sets it 30
//! frames on). Every machine executes every player's event and keeps, per
//! player, the latest; players not heard from for 120 frames do not count.
//! The highest level among the rest applies when it is above the level in
//! force: send period `L`, MaxAhead from the table, the frame rate set to
//! 60 (`PrecalcDesiredFrameRate`), for the master's next TIMING event.
//! Levels never come down.

use super::super::ladder::Timing;
use crate::report::record::MAX_SEATS;

/// Which spawner's latency table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol0Table {
    /// The Red Alert 2 / Yuri's Revenge spawner's.
    YurisRevenge,
    /// Vinifera's newer Tiberian Sun one.
    TiberianSun,
}

/// The highest level.
pub(crate) const MAX_LEVEL: u8 = 9;
/// Frames between a player's response-time events, as the spawners count:
/// the next goes out once the frame is past the last one's plus this, 31
/// frames later.
pub const SEND_INTERVAL: u32 = 30;
/// A player not heard from for this many frames no longer counts
/// (`SendResponseTimeFrame / 2` in the RA2/YR spawner, `4 * 30` in the port).
pub(crate) const SILENT_FRAMES: u32 = 120;
/// The frame rate a level change sets (`PrecalcDesiredFrameRate = 60`).
pub(crate) const LEVEL_FPS: u8 = 60;
/// The timing before any level: FrameSendRate 2, MaxAhead `2 * 6`.
pub const START: (u8, u8) = (2, 12);
/// `WorstMaxAhead` before any player's response time (level 6's MaxAhead).
pub(crate) const START_WORST_MAX_AHEAD: u32 = 24;
/// The resend delay at the start of a game, ticks (`SetTiming(60, -1, 600)`).
pub const START_RETRY_TICKS: u32 = 60;

impl Protocol0Table {
    /// MaxAhead of `level` (0–9; higher levels read as 9).
    pub fn max_ahead(self, level: u8) -> u8 {
        const YR: [u8; 10] = [1, 4, 6, 12, 16, 20, 24, 28, 32, 36];
        const TS: [u8; 10] = [1, 4, 6, 9, 12, 15, 18, 21, 24, 27];
        let table = match self {
            Protocol0Table::YurisRevenge => &YR,
            Protocol0Table::TiberianSun => &TS,
        };
        table[usize::from(level.min(MAX_LEVEL))]
    }

    /// The level a response time asks for: the smallest of 1–8 whose
    /// MaxAhead is at least the response time in ticks (compared as if
    /// ticks were frames), else 9.
    pub fn level_for(self, response_ticks: u32) -> u8 {
        (1..MAX_LEVEL)
            .find(|level| response_ticks <= u32::from(self.max_ahead(*level)))
            .unwrap_or(MAX_LEVEL)
    }

    /// The timing a level applies: send period `L`, the table's MaxAhead.
    pub fn timing(self, level: u8) -> Timing {
        let level = level.clamp(1, MAX_LEVEL);
        Timing::new(level, self.max_ahead(level)).unwrap_or(Timing::START)
    }

    /// The frame of a player's first response-time event: the first frame
    /// past `FrameSendRate + 240` (RA2/YR), or past 180 (the TS port).
    pub fn first_send_frame(self, send_period: u8) -> u32 {
        match self {
            Protocol0Table::YurisRevenge => u32::from(send_period) + 240 + 1,
            Protocol0Table::TiberianSun => 6 * SEND_INTERVAL + 1,
        }
    }

    /// Whether a player whose latest event executed on `last` is silent on
    /// `frame` (RA2/YR: `frame >= last + 120`; the TS port: `frame > last + 120`).
    pub fn is_silent(self, last: u32, frame: u32) -> bool {
        let limit = u64::from(last) + u64::from(SILENT_FRAMES);
        match self {
            Protocol0Table::YurisRevenge => u64::from(frame) >= limit,
            Protocol0Table::TiberianSun => u64::from(frame) > limit,
        }
    }
}

/// A RESPONSE_TIME_2 event's content, as a player sends it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResponseEvent {
    /// The player's response time plus one, ticks (`MaxAhead` field).
    pub max_ahead: u8,
    /// The level its response time asks for.
    pub level: u8,
}

impl ResponseEvent {
    /// What a player whose response time (the worst of its connections)
    /// is `response_ticks` sends.
    pub fn of(table: Protocol0Table, response_ticks: u32) -> ResponseEvent {
        ResponseEvent {
            max_ahead: response_ticks.min(254) as u8 + 1,
            level: table.level_for(response_ticks),
        }
    }
}

/// The levels as every machine keeps them (`HandleResponseTime2`,
/// `LatencyLevel::Apply`): the same on every machine, since every machine
/// executes the same events on the same frames.
#[derive(Debug, Clone)]
pub struct LatencyLevels {
    table: Protocol0Table,
    /// Per seat: the latest event and the frame it executed on.
    latest: [Option<(ResponseEvent, u32)>; MAX_SEATS],
    level: u8,
    /// A level applied and not yet sent as a TIMING event by the master.
    pending: Option<u8>,
    /// The worst fresh `max_ahead` (what the spawner's `Response_Time`
    /// returns in place of the real one, so the resend delay follows it).
    worst_max_ahead: u32,
}

impl LatencyLevels {
    /// Levels of `table` at the game's start: level 0, no event yet.
    pub fn new(table: Protocol0Table) -> LatencyLevels {
        LatencyLevels {
            table,
            latest: [None; MAX_SEATS],
            level: 0,
            pending: None,
            worst_max_ahead: START_WORST_MAX_AHEAD,
        }
    }

    /// The game's table of levels.
    pub fn table(&self) -> Protocol0Table {
        self.table
    }

    /// The level in force (0 before any).
    pub fn level(&self) -> u8 {
        self.level
    }

    /// `WorstMaxAhead`: the fresh players' largest `max_ahead`.
    pub fn worst_max_ahead(&self) -> u32 {
        self.worst_max_ahead
    }

    /// `seat`'s event executes on `frame`: the highest level among the
    /// players heard from in the last 120 frames applies if it is above the
    /// level in force. Returns the new level, if any.
    pub fn execute(&mut self, seat: u8, event: ResponseEvent, frame: u32) -> Option<u8> {
        if event.max_ahead == 0 {
            return None;
        }
        if let Some(slot) = self.latest.get_mut(usize::from(seat)) {
            *slot = Some((event, frame));
        }
        let mut highest = 0;
        let mut worst = 0;
        for slot in &mut self.latest {
            match *slot {
                Some((_, last)) if self.table.is_silent(last, frame) => *slot = None,
                Some((e, _)) => {
                    highest = highest.max(e.level);
                    worst = worst.max(u32::from(e.max_ahead));
                }
                None => {}
            }
        }
        self.worst_max_ahead = worst;
        let highest = highest.min(MAX_LEVEL);
        if highest <= self.level {
            return None;
        }
        self.level = highest;
        self.pending = Some(highest);
        Some(highest)
    }

    /// The master takes the level to send (and clears it): the TIMING
    /// event's timing and frame rate.
    pub fn take_pending(&mut self) -> Option<(Timing, u8)> {
        self.pending
            .take()
            .map(|level| (self.table.timing(level), LEVEL_FPS))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_two_tables_and_their_levels() {
        let yr = Protocol0Table::YurisRevenge;
        let ts = Protocol0Table::TiberianSun;
        assert_eq!(yr.level_for(0), 1);
        assert_eq!(yr.level_for(4), 1);
        assert_eq!(yr.level_for(5), 2);
        assert_eq!(yr.level_for(9), 3); // 150 ms: 3/12
        assert_eq!(ts.level_for(9), 3); // 150 ms: 3/9
        assert_eq!(yr.level_for(32), 8);
        assert_eq!(yr.level_for(33), 9);
        assert_eq!(ts.level_for(25), 9);
        assert_eq!(yr.timing(3).to_string(), "3/12");
        assert_eq!(ts.timing(9).to_string(), "9/27");
        for level in 1..=MAX_LEVEL {
            // Every level is a timing S1 allows.
            assert_eq!(yr.timing(level).send_period(), level);
            assert_eq!(ts.timing(level).send_period(), level);
        }
        assert_eq!(yr.first_send_frame(2), 243);
        assert_eq!(ts.first_send_frame(2), 181);
        assert!(yr.is_silent(100, 220) && !ts.is_silent(100, 220));
        assert!(ts.is_silent(100, 221));
    }

    #[test]
    fn the_highest_fresh_level_applies_and_never_comes_down() {
        let mut levels = LatencyLevels::new(Protocol0Table::YurisRevenge);
        assert_eq!(levels.worst_max_ahead(), 24);
        let fast = ResponseEvent::of(Protocol0Table::YurisRevenge, 3);
        let slow = ResponseEvent::of(Protocol0Table::YurisRevenge, 14);
        assert_eq!((slow.max_ahead, slow.level), (15, 4));
        assert_eq!(levels.execute(0, fast, 260), Some(1));
        assert_eq!(
            levels.take_pending().map(|(t, f)| (t.to_string(), f)),
            Some(("1/4".to_owned(), 60))
        );
        assert_eq!(levels.take_pending(), None);
        assert_eq!(levels.execute(1, slow, 262), Some(4));
        assert_eq!(levels.worst_max_ahead(), 15);
        // Player 1 recovers: nothing comes down.
        assert_eq!(levels.execute(1, fast, 293), None);
        assert_eq!(levels.level(), 4);
        assert_eq!(levels.take_pending().unwrap().0.to_string(), "4/16");
        // A player silent for 120 frames no longer counts.
        assert_eq!(levels.execute(0, fast, 293 + 120), None);
        assert_eq!(levels.worst_max_ahead(), 4);
        assert_eq!(
            levels.execute(
                0,
                ResponseEvent {
                    max_ahead: 0,
                    level: 9
                },
                500
            ),
            None
        );
    }
}
