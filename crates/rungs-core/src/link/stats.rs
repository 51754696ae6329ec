//! What a link measured and counted (S8, and what CnCNet players ask for:
//! jitter, loss and retry diagnostics).

use crate::wire::cursor::DecodeError;

/// Why a received datagram was dropped without being acted on (S8).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DropReason {
    /// Shorter than the smallest packet, or than its own ack block.
    TooShort,
    /// Longer than the largest packet.
    TooLong,
    /// Not a rungs packet (magic byte).
    BadMagic,
    /// A protocol version this build does not speak.
    BadVersion,
    /// Another session's packet.
    WrongSession,
    /// The sender seat is not a peer of this endpoint (or is our own seat).
    UnknownSender,
    /// The source address is not the one bound to the sender's seat.
    SpoofedAddress,
    /// The authentication tag does not match (wrong key, corrupted, forged).
    BadTag,
    /// A packet number already accepted: a duplicate or a replay.
    Replayed,
    /// A packet number too far behind, or a message number too far ahead.
    OutsideWindow,
    /// Unknown flags, bad message framing, or acknowledgements of things
    /// never sent.
    Malformed,
    /// The receiver holds as many undelivered messages as it may; the packet
    /// is dropped unacknowledged and the peer resends it later (flow control,
    /// not an attack).
    ReceiverFull,
    /// A packet of the peer's earlier connection (an older sender epoch), or
    /// one addressed to this machine's earlier connection (S8 restarts).
    StaleEpoch,
}

impl DropReason {
    /// Every reason, in counter order (the C API numbers them 0, 1, ... in
    /// this order).
    pub const ALL: [DropReason; 13] = [
        DropReason::TooShort,
        DropReason::TooLong,
        DropReason::BadMagic,
        DropReason::BadVersion,
        DropReason::WrongSession,
        DropReason::UnknownSender,
        DropReason::SpoofedAddress,
        DropReason::BadTag,
        DropReason::Replayed,
        DropReason::OutsideWindow,
        DropReason::Malformed,
        DropReason::ReceiverFull,
        DropReason::StaleEpoch,
    ];

    /// Position in [`ALL`](Self::ALL).
    pub fn index(self) -> usize {
        self as usize
    }

    /// A short lowercase name, e.g. `"bad_tag"`.
    pub fn name(self) -> &'static str {
        match self {
            DropReason::TooShort => "too_short",
            DropReason::TooLong => "too_long",
            DropReason::BadMagic => "bad_magic",
            DropReason::BadVersion => "bad_version",
            DropReason::WrongSession => "wrong_session",
            DropReason::UnknownSender => "unknown_sender",
            DropReason::SpoofedAddress => "spoofed_address",
            DropReason::BadTag => "bad_tag",
            DropReason::Replayed => "replayed",
            DropReason::OutsideWindow => "outside_window",
            DropReason::Malformed => "malformed",
            DropReason::ReceiverFull => "receiver_full",
            DropReason::StaleEpoch => "stale_epoch",
        }
    }
}

impl From<DecodeError> for DropReason {
    fn from(e: DecodeError) -> DropReason {
        match e {
            DecodeError::TooShort { .. } => DropReason::TooShort,
            DecodeError::TooLong { .. } => DropReason::TooLong,
            DecodeError::BadMagic { .. } => DropReason::BadMagic,
            DecodeError::BadVersion { .. } => DropReason::BadVersion,
            // A packet has no kind byte: the decoder never says this one.
            DecodeError::UnknownKind(_) | DecodeError::Invalid(_) => DropReason::Malformed,
        }
    }
}

/// One counter per [`DropReason`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DropCounts {
    counts: [u64; DropReason::ALL.len()],
}

impl DropCounts {
    /// Count one drop.
    pub fn count(&mut self, reason: DropReason) {
        self.counts[reason.index()] += 1;
    }

    /// Drops for `reason`.
    pub fn get(&self, reason: DropReason) -> u64 {
        self.counts[reason.index()]
    }

    /// Drops for every reason together.
    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// Add `other`'s counts to these.
    pub fn add(&mut self, other: &DropCounts) {
        for (mine, theirs) in self.counts.iter_mut().zip(other.counts.iter()) {
            *mine += theirs;
        }
    }
}

/// Something the engine should hear about a link (S8 liveness).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkEvent {
    /// Nothing valid heard for the liveness timeout. The link keeps trying;
    /// the engine decides whether to issue a removal event (S8).
    Lost,
    /// A valid packet arrived after the link was reported lost.
    Recovered,
    /// The peer restarted (a newer connection epoch, S8): the link was reset
    /// — messages in flight either way are gone — and continues with the
    /// new connection.
    Restarted,
}

/// A snapshot of one link's health and counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LinkStats {
    /// At least one clean round-trip sample (S8).
    pub clean_measurement: bool,
    /// Unacknowledged messages older than the retransmission timeout (S8).
    pub retransmitting: bool,
    /// Reported lost by the liveness timeout and not heard since.
    pub lost: bool,
    /// Smoothed round trip, µs.
    pub srtt_us: Option<u64>,
    /// Round-trip variance, µs.
    pub rttvar_us: Option<u64>,
    /// Latest sample, µs.
    pub latest_rtt_us: Option<u64>,
    /// Smallest sample ever, µs.
    pub min_rtt_us: Option<u64>,
    /// Worst sample of the last ten seconds (the latest when none), µs (S3).
    pub worst_recent_rtt_us: Option<u64>,
    /// Current retransmission timeout including backoff, µs.
    pub rto_us: u64,
    /// Round-trip samples taken.
    pub rtt_samples: u64,
    /// Share of recent ack-eliciting packets never acknowledged, per mille
    /// (over the last 256 such packets).
    pub loss_permille: u32,
    /// Datagrams sent.
    pub packets_sent: u64,
    /// Valid datagrams received (dropped ones are in `dropped`).
    pub packets_received: u64,
    /// Bytes sent (UDP payload).
    pub bytes_sent: u64,
    /// Bytes of valid datagrams received.
    pub bytes_received: u64,
    /// Messages the caller queued.
    pub messages_sent: u64,
    /// Messages handed to the caller.
    pub messages_delivered: u64,
    /// Message transmissions after the first (resends, piggybacked or on RTO).
    pub messages_retransmitted: u64,
    /// Retransmission timeouts that fired.
    pub rto_expirations: u64,
    /// Messages received again after they had already arrived.
    pub duplicate_messages: u64,
    /// Messages queued or sent and not yet acknowledged.
    pub messages_in_flight: u64,
    /// When a valid packet last arrived (µs, caller's clock); `None` if never.
    pub last_heard_us: Option<u64>,
    /// Datagrams claiming to come from this peer that were dropped, by reason.
    pub dropped: DropCounts,
    /// Times the peer restarted (new connection epoch).
    pub restarts: u64,
    /// Times the peer's address changed on an authenticated packet.
    pub address_changes: u64,
}
