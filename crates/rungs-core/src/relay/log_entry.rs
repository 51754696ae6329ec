//! One entry of a match's turn log: what the sequencer writes, the
//! journal keeps and bundles carry (S10).

use crate::wire::relay::EntryKind;

/// One sequenced entry of the turn log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogEntry {
    /// Execution tick.
    pub tick: u32,
    /// Seat.
    pub seat: u8,
    /// Order, quit or dropped.
    pub kind: EntryKind,
    /// The client sequence it was submitted with (0 for a drop).
    pub sequence: u32,
    /// The order (a quit's: the seat's quit order, possibly empty).
    pub payload: Box<[u8]>,
}
