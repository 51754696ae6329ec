//! The transport's protocol (S8), sans-IO: one [`Link`] per peer (numbering,
//! acknowledgement, resend until acked, validation, the round-trip estimator
//! and liveness) and one [`Endpoint`] per machine that routes datagrams to
//! links by seat and checks each one's source address.
//!
//! Nothing here touches a socket or a clock: callers pass `now_us`
//! (microseconds on any monotonic clock) and datagrams, and ask what to send.
//! The `rungs-net` crate's `UdpDriver` drives an endpoint over UDP; the
//! `rungs-sim` crate drives several over a simulated network.
//!
//! For a session (S3), per seat: [`Link::has_clean_measurement`],
//! [`Link::is_retransmitting`], [`Link::worst_recent_rtt_ms`] and
//! [`Link::stats`].

mod encoded;
mod endpoint;
mod mismatch;
mod nonce;
mod peer;
mod ready;
mod replay;
pub(crate) mod rtt;
mod seat_index;
mod stats;

pub use endpoint::{
    canonical_address, Endpoint, EndpointConfig, Transmit, MAX_QUEUED_PROTOCOL_MISMATCHES,
};
pub use mismatch::{HeardVersions, Protocol, ProtocolMismatch};
pub use nonce::{connection_nonce, seed_connection_nonces};
pub use peer::{
    Link, LinkConfig, LinkIdentity, ReportRtt, MAX_ACK_DELAY_LIMIT_US, MAX_IN_FLIGHT_LIMIT,
    MIN_CONFIG_PACKET_BYTES,
};
pub use rtt::RttEstimator;
pub(crate) use seat_index::SeatIndex;
pub use stats::{DropCounts, DropReason, LinkEvent, LinkStats};
