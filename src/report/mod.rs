//! Reports (S3): what each machine measures, and the shared record of the
//! reports every machine builds from executed events.

pub mod measure;

pub use measure::{is_report_frame, Measurements};

/// One player's report, as carried by a NETWORK_REPORT event (S3, S7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Report {
    /// Average processing time per frame since the player's previous report, µs.
    pub process_us: u32,
    /// Longest single wait for the other players over the last two report intervals, ms.
    pub max_wait_ms: u32,
    /// Worst round trip to any other player, ms; `None` while any link lacks a
    /// clean measurement (S8). A player alone reports `Some(0)`.
    pub worst_rtt_ms: Option<u32>,
}

pub mod record;

pub use record::{Effect, Record};
