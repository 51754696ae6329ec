//! Reports (S3): what each machine measures, and the shared record of the
//! reports every machine builds from executed events.

mod measure;
pub(crate) mod needs;

pub use measure::{is_report_frame, Measurements};
pub use needs::{needed_look_ahead, LookAheadNeeds, NEED_LEVELS};

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
    /// What the detailed layout (NETWORK_REPORT version 2) adds; `None` from
    /// the compact and extended layouts, which cannot carry it.
    pub detail: Option<ReportDetail>,
}

/// The distribution of round trips and the stalls a player suffered in one
/// report interval: what the `tracking` policy reads (docs/tracking.md).
/// Carried only by the detailed NETWORK_REPORT layout (docs/payloads.md).
///
/// Invariants (the decoder refuses bytes that break them, the encoder
/// refuses a detail that does): the round trips are all `None` exactly when
/// the report's `worst_rtt_ms` is, and then `median <= p90 <= worst` and
/// `latest <= worst`; `stalled_frames <= frames`; no stall time, no stalled
/// frame and no seat waited for unless there was a stall.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReportDetail {
    /// Median round trip of this interval's clean samples, per peer, the
    /// largest over peers, ms.
    pub median_rtt_ms: Option<u32>,
    /// 90th percentile, the same way, ms.
    pub p90_rtt_ms: Option<u32>,
    /// The latest clean sample when the report was taken, the largest over
    /// peers, ms: whether a high worst is still going on or already over.
    pub latest_rtt_ms: Option<u32>,
    /// Frames this machine ran in the interval.
    pub frames: u32,
    /// Of those, the frames it had to wait for (a stall each).
    pub stalled_frames: u32,
    /// Total time it waited in the interval, ms rounded up.
    pub stall_ms: u32,
    /// The seat whose turns it waited for longest in the interval; `None`
    /// when it did not wait, or waited for something else (room to send).
    pub waited_for: Option<u8>,
    /// How much look-ahead the interval's frames needed; carried only by
    /// the needs layout (NETWORK_REPORT version 3), `None` in the detailed
    /// one and for an interval whose frames were not measured.
    pub needs: Option<LookAheadNeeds>,
}

impl ReportDetail {
    /// The detail of a report that has only its worst round trip (from a
    /// layout without detail): every round trip that one, nothing counted.
    pub fn from_worst(worst_rtt_ms: Option<u32>) -> ReportDetail {
        ReportDetail {
            median_rtt_ms: worst_rtt_ms,
            p90_rtt_ms: worst_rtt_ms,
            latest_rtt_ms: worst_rtt_ms,
            ..ReportDetail::default()
        }
    }
}

pub(crate) mod record;

pub use record::{Effect, Record, MAX_SEATS};
