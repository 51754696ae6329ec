//! One link to one peer (S8), sans-IO: the caller feeds time and validated
//! packets and asks what to send.
//!
//! Sending: every message gets the next number; each packet gets a packet
//! number that is never reused, so an acknowledgement names the exact packet
//! (RFC 9002) and the packet's send time gives an unambiguous sample. Every
//! packet carries the ack block.
//!
//! Acknowledgements ride on data (RFC 9002's delayed ack): a packet that
//! carries messages is not answered by a packet of its own at once; its
//! acknowledgement waits up to [`LinkConfig::max_ack_delay_us`] for the next
//! packet this side sends anyway (in a lockstep game, the next turn), and
//! only when that does not come in time does a pure ack go out. Pings are
//! answered at once. Each ack block says how long it was held after the
//! largest packet arrived; the sender takes that off the round-trip sample
//! (never below the smallest round trip seen, RFC 9002 5.3) and allows for
//! the hold in its retransmission timeout. Unacknowledged messages are re-sent without
//! waiting for a request (S8): piggybacked on outgoing packets within a
//! byte budget, those last sent an RTO or more ago whenever newer data is
//! acknowledged, and all of them when the retransmission timeout fires.
//!
//! Karn's rule (S8): a packet gives a round-trip sample only when it carried
//! at least one message in its first transmission (or was a keep-alive ping)
//! and it is the largest packet the acknowledgement names. A packet that only
//! re-sent messages never gives one.
//!
//! Receiving: packets pass the replay window, then their messages are widened
//! to full numbers, buffered, and handed to the caller exactly once, in order.

use std::collections::{BTreeMap, VecDeque};

use super::encoded::{EncodedMessages, Placed};
use super::ready::ReadyMessages;
use super::replay::{ReplayWindow, REPLAY_WINDOW};
use super::rtt::{ms_rounded_up, RttEstimator};
use super::stats::{DropCounts, DropReason, LinkEvent, LinkStats};
use crate::error::{Error, Result};
use crate::wire::packet::{
    AckBlock, Header, Messages, Packet, PacketWriter, SessionKey, ACK_BLOCK_BYTES,
    FIXED_HEADER_BYTES, FLAG_FIRST_ACK, FLAG_PING, MAX_MESSAGES_PER_PACKET, MAX_MESSAGE_BYTES,
    MAX_PACKET_BYTES, TAG_BYTES,
};

/// Hard ceiling of messages in flight (sent or queued, unacknowledged) per
/// link, and of how far ahead of the next expected message a number may be.
pub const MAX_IN_FLIGHT_LIMIT: usize = 8192;
/// Messages one packet's record can name: its messages span fewer numbers than this.
const PACKET_MESSAGE_SPAN: u64 = 64;
/// Sent-packet records kept for acknowledgements; older ones count as lost.
const SENT_HISTORY_LIMIT: usize = 4096;
/// Ack-eliciting packets the loss estimate looks back over.
const LOSS_WINDOW: usize = 256;
/// Smallest `max_packet_bytes` a link accepts.
pub const MIN_CONFIG_PACKET_BYTES: usize = 64;
/// Events kept for the caller before the oldest is dropped.
const EVENT_QUEUE_LIMIT: usize = 16;
/// Spare message buffers a link keeps for reuse, at most: a link in steady
/// state takes and returns a few per frame, so it allocates none.
const SPARE_BUFFERS: usize = 64;
/// Most messages one retransmission timeout (or one new acknowledgement
/// after it) makes due again (S8: a lost peer is not flooded). The oldest
/// go first; the peer's next acknowledgement releases the next batch.
const RESEND_BATCH: usize = 16;

// Message numbers travel as their low 16 bits and are widened against the
// receiver's next expected message (or the sender's oldest unacknowledged).
// The distance stays below 2^15 when: a correct sender keeps at most
// MAX_IN_FLIGHT_LIMIT messages in flight, and an accepted stale packet is at
// most REPLAY_WINDOW packets old, each with at most MAX_MESSAGES_PER_PACKET
// messages. Hence this bound (see the proof sketch in `widen`).
const _: () =
    assert!((REPLAY_WINDOW as usize) * MAX_MESSAGES_PER_PACKET + 2 * MAX_IN_FLIGHT_LIMIT < 1 << 15);
const _: () = assert!(PACKET_MESSAGE_SPAN as usize >= MAX_MESSAGES_PER_PACKET);

/// What the reports (S3) need from a link at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReportRtt {
    /// At least one clean sample (S8).
    pub clean_measurement: bool,
    /// Unacknowledged messages older than the RTO.
    pub retransmitting: bool,
    /// The latest clean round-trip sample, ms (rounded up). Sampled every
    /// frame, the report interval keeps its worst (S3).
    pub latest_ms: Option<u32>,
}

/// Tunables of a link. [`LinkConfig::default`] suits a lockstep RTS.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkConfig {
    /// Send a ping when no ack-eliciting packet went out for this long, so the
    /// round trip stays fresh while idle. 0 disables keep-alives.
    pub keepalive_interval_us: u64,
    /// Report the link lost after this long with nothing valid heard; `None`
    /// for the adaptive default `clamp(8·SRTT + 250 ms, 2 s, 30 s)` (S8),
    /// with SRTT taken as the 1 s initial RTO before the first sample.
    pub liveness_timeout_us: Option<u64>,
    /// Most messages queued or sent and not yet acknowledged (1–8192).
    pub max_in_flight: usize,
    /// Most received messages held undelivered, in order or waiting for a gap
    /// (1–8192). A packet that would exceed it is dropped unacknowledged.
    pub receive_capacity: usize,
    /// Largest datagram to send (64–1200 bytes).
    pub max_packet_bytes: usize,
    /// Bytes of already-sent, unacknowledged messages a packet may re-send on
    /// the side (S8's resend-everything, bounded). 0 re-sends only on RTO.
    pub piggyback_budget_bytes: usize,
    /// Longest an acknowledgement of a packet with messages waits for a
    /// packet that carries data before it goes out alone (0–250 ms; 0 acks
    /// every such packet at once). The peer's retransmission timeout allows
    /// for this much: both ends of a link use the same value.
    pub max_ack_delay_us: u64,
}

/// Largest [`LinkConfig::max_ack_delay_us`].
pub const MAX_ACK_DELAY_LIMIT_US: u64 = 250_000;

impl Default for LinkConfig {
    fn default() -> Self {
        LinkConfig {
            keepalive_interval_us: 250_000,
            liveness_timeout_us: None,
            max_in_flight: 1024,
            receive_capacity: 1024,
            max_packet_bytes: MAX_PACKET_BYTES,
            piggyback_budget_bytes: 512,
            // A lockstep game sends a turn within 100 ms at send period 1
            // from 10 fps up, and up to send period 3 at 30 fps: its acks
            // ride on turns. (50 ms left a third of the acks alone at send
            // period 2; stalls and latency were the same either way.)
            max_ack_delay_us: 100_000,
        }
    }
}

impl LinkConfig {
    /// Check every field's range.
    pub fn validate(&self) -> Result<()> {
        if self.liveness_timeout_us == Some(0) {
            return Err(Error::invalid_value(
                "liveness_timeout_us",
                0u64,
                "positive, or none",
            ));
        }
        if !(1..=MAX_IN_FLIGHT_LIMIT).contains(&self.max_in_flight) {
            return Err(Error::invalid_value(
                "max_in_flight",
                self.max_in_flight,
                "1 to 8192",
            ));
        }
        if !(1..=MAX_IN_FLIGHT_LIMIT).contains(&self.receive_capacity) {
            return Err(Error::invalid_value(
                "receive_capacity",
                self.receive_capacity,
                "1 to 8192",
            ));
        }
        if !(MIN_CONFIG_PACKET_BYTES..=MAX_PACKET_BYTES).contains(&self.max_packet_bytes) {
            return Err(Error::invalid_value(
                "max_packet_bytes",
                self.max_packet_bytes,
                "64 to 1200",
            ));
        }
        if self.piggyback_budget_bytes > MAX_PACKET_BYTES {
            return Err(Error::invalid_value(
                "piggyback_budget_bytes",
                self.piggyback_budget_bytes,
                "at most 1200",
            ));
        }
        if self.max_ack_delay_us > MAX_ACK_DELAY_LIMIT_US {
            return Err(Error::invalid_value(
                "max_ack_delay_us",
                self.max_ack_delay_us,
                "at most 250000",
            ));
        }
        Ok(())
    }

    /// Largest message payload a packet of `max_packet_bytes` can carry.
    pub fn max_message_bytes(&self) -> usize {
        let room = self.max_packet_bytes - FIXED_HEADER_BYTES - ACK_BLOCK_BYTES - TAG_BYTES;
        // Four bytes of message header for anything of 128 bytes or more.
        let fits = if room >= 4 + 0x80 { room - 4 } else { room - 3 };
        fits.min(MAX_MESSAGE_BYTES)
    }
}

/// Who is talking to whom, and with which key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkIdentity {
    /// The game's session id (S8).
    pub session_id: u32,
    /// The session's 128-bit key for packet tags.
    pub key: SessionKey,
    /// This machine's seat.
    pub local_seat: u8,
    /// The peer's seat.
    pub peer_seat: u8,
}

#[derive(Debug)]
struct OutMessage {
    /// Its encoding in `Link::encoded`.
    placed: Placed,
    acked: bool,
    /// Due to go out in the next packet (never sent, or the RTO fired).
    needs_send: bool,
    transmissions: u32,
    first_sent_us: u64,
    last_sent_us: u64,
}

#[derive(Debug, Clone, Copy)]
struct SentPacket {
    sent_us: u64,
    /// Number of the first message carried; `carried` bit `i` is message
    /// `first_message + i`.
    first_message: u64,
    carried: u64,
    ack_eliciting: bool,
    /// Carried a first transmission or was a ping (Karn's rule).
    gives_rtt_sample: bool,
    acked: bool,
}

/// Outcomes (lost or not) of the last [`LOSS_WINDOW`] ack-eliciting packets.
#[derive(Debug, Clone, Default)]
struct LossWindow {
    lost_bits: [u64; LOSS_WINDOW / 64],
    next: usize,
    filled: usize,
    lost: usize,
}

impl LossWindow {
    fn record(&mut self, lost: bool) {
        let (word, bit) = (self.next / 64, 1u64 << (self.next % 64));
        if self.filled == LOSS_WINDOW && self.lost_bits[word] & bit != 0 {
            self.lost -= 1;
        }
        if lost {
            self.lost_bits[word] |= bit;
            self.lost += 1;
        } else {
            self.lost_bits[word] &= !bit;
        }
        self.next = (self.next + 1) % LOSS_WINDOW;
        self.filled = (self.filled + 1).min(LOSS_WINDOW);
    }

    fn permille(&self) -> u32 {
        (self.lost * 1000).checked_div(self.filled).unwrap_or(0) as u32
    }
}

/// What [`Link::check_packet`] found that [`Link::accept_packet`] acts on.
struct CheckedPacket<'a> {
    /// The widened cumulative ack to apply, if any.
    cumulative_ack: Option<u64>,
    /// How many of the first messages were delivered already.
    duplicates: u64,
    /// The messages after those.
    past_duplicates: Messages<'a>,
}

#[derive(Debug, Default, Clone, Copy)]
struct Counters {
    packets_sent: u64,
    packets_received: u64,
    bytes_sent: u64,
    bytes_received: u64,
    messages_sent: u64,
    messages_delivered: u64,
    messages_retransmitted: u64,
    rto_expirations: u64,
    duplicate_messages: u64,
}

/// One peer link. See the module docs.
#[derive(Debug)]
pub struct Link {
    config: LinkConfig,
    identity: LinkIdentity,

    // Sending side.
    /// Number of `outgoing[0]`: every message below it is acknowledged.
    send_base: u64,
    outgoing: VecDeque<OutMessage>,
    /// The encodings of `outgoing`'s messages, copied into every packet
    /// that carries one.
    encoded: EncodedMessages,
    messages_due: usize,
    /// Next packet number; `u32::MAX + 1` means numbers are exhausted.
    next_packet_number: u64,
    /// Packet number of `sent[0]`; records are contiguous by packet number.
    sent_base: u64,
    sent: VecDeque<SentPacket>,
    /// The packet numbers the peer's ack blocks have named, as a mask below
    /// the largest named: bit `i` is packet `acked_largest - i`. Those were
    /// handled when first named; a new block repeats most of them, and only
    /// the rest need a look.
    acked_largest: Option<u32>,
    acked_mask: u64,
    rto_started_us: Option<u64>,
    last_ack_eliciting_sent_us: u64,
    /// No message that [`resend_oldest`](Self::resend_oldest) could make due
    /// (sent, unacknowledged, not due) was last sent before this: set by its
    /// full scans, lowered by any send earlier than it. Most calls (every
    /// packet that acknowledges new data) find nothing stale, and this says
    /// so without walking the messages.
    resend_floor_us: u64,

    // Receiving side.
    replay: ReplayWindow,
    /// Next message number to deliver.
    recv_next: u64,
    out_of_order: BTreeMap<u64, Vec<u8>>,
    ready: ReadyMessages,
    /// Buffers of messages received out of order to reuse once they are
    /// ready: no allocation per message.
    spare: Vec<Vec<u8>>,
    /// When the acknowledgement owed for received messages must go out at
    /// the latest (it rides on any packet sent before); `None`: none owed.
    ack_due_us: Option<u64>,
    /// When the largest packet number so far arrived: the ack delay counts
    /// from it.
    largest_received_us: u64,
    /// The largest packet number this side has acknowledged so far, to mark
    /// the first ack of each new largest (`FLAG_FIRST_ACK`).
    largest_acknowledged: Option<u32>,

    // Health.
    rtt: RttEstimator,
    created_us: u64,
    last_heard_us: Option<u64>,
    lost: bool,
    events: VecDeque<LinkEvent>,
    loss: LossWindow,
    counters: Counters,
    dropped: DropCounts,

    // Connections (S8 restarts and moves).
    /// This machine's connection epoch (never 0).
    local_epoch: u32,
    /// This run's connection nonce (never 0).
    local_nonce: u32,
    /// The peer's epoch and nonce, once heard.
    peer_epoch: Option<u32>,
    peer_nonce: Option<u32>,
    /// Nonces of the peer's earlier runs (0: none), so that their late
    /// packets are stale rather than new restarts.
    retired_nonces: [u32; RETIRED_NONCES],
    restarts: u64,
    address_changes: u64,
}

/// Earlier runs of a peer a link remembers.
const RETIRED_NONCES: usize = 8;

/// Whether epoch `a` is newer than `b` (serial-number order, so epochs taken
/// from a wrapping clock still compare right within half the range).
fn epoch_is_newer(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) > 0
}

impl Link {
    /// A link created at `now_us` (the liveness clock starts then).
    pub fn new(config: LinkConfig, identity: LinkIdentity, now_us: u64) -> Result<Link> {
        config.validate()?;
        if identity.local_seat == identity.peer_seat {
            return Err(Error::invalid_value(
                "identity.peer_seat",
                identity.peer_seat,
                "a seat other than identity.local_seat",
            ));
        }
        Ok(Link {
            config,
            identity,
            send_base: 0,
            outgoing: VecDeque::new(),
            encoded: EncodedMessages::default(),
            messages_due: 0,
            next_packet_number: 0,
            sent_base: 0,
            sent: VecDeque::new(),
            acked_largest: None,
            acked_mask: 0,
            rto_started_us: None,
            last_ack_eliciting_sent_us: now_us,
            resend_floor_us: 0,
            replay: ReplayWindow::new(),
            recv_next: 0,
            out_of_order: BTreeMap::new(),
            ready: ReadyMessages::default(),
            spare: Vec::new(),
            ack_due_us: None,
            largest_received_us: now_us,
            largest_acknowledged: None,
            rtt: RttEstimator::with_max_ack_delay(config.max_ack_delay_us),
            created_us: now_us,
            last_heard_us: None,
            lost: false,
            events: VecDeque::new(),
            loss: LossWindow::default(),
            counters: Counters::default(),
            dropped: DropCounts::default(),
            local_epoch: 1,
            local_nonce: super::nonce::connection_nonce(),
            peer_epoch: None,
            peer_nonce: None,
            retired_nonces: [0; RETIRED_NONCES],
            restarts: 0,
            address_changes: 0,
        })
    }

    /// Set this machine's connection epoch (before anything is sent).
    pub fn set_local_epoch(&mut self, epoch: u32) -> Result<()> {
        if epoch == 0 {
            return Err(Error::invalid_value("epoch", 0u32, "not 0"));
        }
        self.local_epoch = epoch;
        Ok(())
    }

    /// Set this run's connection nonce (before anything is sent): random
    /// by default; a caller that needs the same bytes on every run (a
    /// simulation) sets its own, different for every run.
    pub fn set_local_nonce(&mut self, nonce: u32) -> Result<()> {
        if nonce == 0 {
            return Err(Error::invalid_value("nonce", 0u32, "not 0"));
        }
        self.local_nonce = nonce;
        Ok(())
    }

    /// This run's connection nonce.
    pub fn local_nonce(&self) -> u32 {
        self.local_nonce
    }

    /// The peer's connection epoch, once heard.
    pub fn peer_epoch(&self) -> Option<u32> {
        self.peer_epoch
    }

    /// The peer's connection nonce, once heard.
    pub fn peer_nonce(&self) -> Option<u32> {
        self.peer_nonce
    }

    /// Whether an authentic packet of the peer's run `(epoch, nonce)` comes
    /// from a new run: a newer epoch, or the same epoch with a nonce that
    /// is neither the known one nor one of an earlier run (S8).
    pub fn is_new_run(&self, epoch: u32, nonce: u32) -> bool {
        let (Some(known_epoch), Some(known_nonce)) = (self.peer_epoch, self.peer_nonce) else {
            return false;
        };
        epoch_is_newer(epoch, known_epoch)
            || (epoch == known_epoch
                && nonce != known_nonce
                && !self.retired_nonces.contains(&nonce))
    }

    /// The peer restarted as run `(epoch, nonce)`: start over as a fresh
    /// link (what either side had in flight is gone; the session is told
    /// through [`LinkEvent::Restarted`]), keeping the diagnostics.
    pub fn reset_for_restart(&mut self, now_us: u64, epoch: u32, nonce: u32) {
        let fresh = Link::new(self.config, self.identity, now_us);
        let Ok(mut fresh) = fresh else { return }; // same config: cannot fail
        fresh.local_epoch = self.local_epoch;
        fresh.local_nonce = self.local_nonce;
        fresh.peer_epoch = Some(epoch);
        fresh.peer_nonce = Some(nonce);
        fresh.retired_nonces = self.retired_nonces;
        if let Some(old) = self.peer_nonce {
            fresh.retired_nonces.rotate_right(1);
            fresh.retired_nonces[0] = old;
        }
        fresh.restarts = self.restarts + 1;
        fresh.address_changes = self.address_changes;
        fresh.dropped = self.dropped;
        *self = fresh;
        self.push_event(LinkEvent::Restarted);
    }

    /// The peer's address changed on an authenticated packet.
    pub fn note_address_change(&mut self) {
        self.address_changes += 1;
    }

    /// Whether packet number `pn` would be the newest yet from the peer.
    pub fn is_newest(&self, pn: u32) -> bool {
        self.replay.largest().map_or(true, |largest| pn > largest)
    }

    /// Use `key` for this link's tags from now on (per-pair keys, S8).
    pub fn set_key(&mut self, key: crate::wire::packet::SessionKey) {
        self.identity.key = key;
    }

    /// The link's configuration.
    pub fn config(&self) -> &LinkConfig {
        &self.config
    }

    /// The seats and session of the link.
    pub fn identity(&self) -> &LinkIdentity {
        &self.identity
    }

    /// Queue a message for reliable, in-order delivery; returns its number.
    /// `Error::Full` when `max_in_flight` messages are unacknowledged;
    /// `Error::Invalid` when it is larger than one packet can carry.
    pub fn send(&mut self, payload: &[u8]) -> Result<u64> {
        if payload.len() > self.config.max_message_bytes() {
            return Err(Error::invalid_value(
                "the message's length",
                payload.len(),
                format!(
                    "at most {} bytes (one packet)",
                    self.config.max_message_bytes()
                ),
            ));
        }
        if self.outgoing.len() >= self.config.max_in_flight {
            return Err(Error::Full("messages in flight on this link"));
        }
        let number = self.send_base + self.outgoing.len() as u64;
        let placed = self.encoded.push(number as u16, payload);
        self.outgoing.push_back(OutMessage {
            placed,
            acked: false,
            needs_send: true,
            transmissions: 0,
            first_sent_us: 0,
            last_sent_us: 0,
        });
        self.messages_due += 1;
        self.counters.messages_sent += 1;
        Ok(number)
    }

    /// Messages [`send`](Self::send) accepts now before `Error::Full`.
    pub fn send_capacity(&self) -> usize {
        self.config
            .max_in_flight
            .saturating_sub(self.outgoing.len())
    }

    /// Take the next message delivered in order, if any.
    pub fn recv(&mut self) -> Option<Vec<u8>> {
        let message = self.ready.front()?.to_vec();
        self.ready.pop_front();
        self.counters.messages_delivered += 1;
        Some(message)
    }

    /// Copy the next message delivered in order into `buf` and return its
    /// length; `None` when none is ready or `buf` is too short (it stays
    /// queued, see [`next_message_len`](Self::next_message_len)).
    // Once per message received, like the three below per packet: inlined
    // where the hot paths call them (rungs-sim: 1.5 % fewer instructions
    // with `decode`, docs/rungs-sim.md "Two threads").
    #[inline(always)]
    pub fn recv_into(&mut self, buf: &mut [u8]) -> Option<usize> {
        let message = self.ready.front()?;
        let len = message.len();
        buf.get_mut(..len)?.copy_from_slice(message);
        self.ready.pop_front();
        self.counters.messages_delivered += 1;
        Some(len)
    }

    /// A buffer holding `bytes`, reused when one is spare.
    #[inline(always)]
    fn buffer_with(&mut self, bytes: &[u8]) -> Vec<u8> {
        let mut buffer = self.spare.pop().unwrap_or_default();
        refill(&mut buffer, bytes);
        buffer
    }

    /// Keep a buffer for reuse (a bounded number of them).
    fn recycle(&mut self, buffer: Vec<u8>) {
        if self.spare.len() < SPARE_BUFFERS {
            self.spare.push(buffer);
        }
    }

    /// Length of the message [`recv`](Self::recv) would return next.
    pub fn next_message_len(&self) -> Option<usize> {
        self.ready.front().map(<[u8]>::len)
    }

    /// Messages ready for [`recv`](Self::recv).
    pub fn ready_messages(&self) -> usize {
        self.ready.len()
    }

    /// Datagrams claiming to come from this peer that were dropped, by reason.
    pub fn dropped(&self) -> &DropCounts {
        &self.dropped
    }

    /// Count a drop the endpoint attributed to this peer (spoofed address, bad tag).
    pub fn count_drop(&mut self, reason: DropReason) {
        self.dropped.count(reason);
    }

    /// Act on a packet from the peer whose tag the endpoint verified and whose
    /// structure [`decode`](crate::wire::packet::decode) accepted. Either the
    /// whole packet is acted on, or nothing is and the reason is counted and
    /// returned.
    pub fn handle_packet(
        &mut self,
        now_us: u64,
        packet: &Packet<'_>,
        datagram_len: usize,
    ) -> std::result::Result<(), DropReason> {
        match self.check_packet(packet) {
            Ok(checked) => {
                self.accept_packet(now_us, packet, datagram_len, checked);
                Ok(())
            }
            Err(reason) => {
                self.dropped.count(reason);
                Err(reason)
            }
        }
    }

    /// Every check, no change: what [`accept_packet`](Self::accept_packet) needs.
    fn check_packet<'a>(
        &self,
        packet: &Packet<'a>,
    ) -> std::result::Result<CheckedPacket<'a>, DropReason> {
        let header = &packet.header;
        if header.sender != self.identity.peer_seat || header.session_id != self.identity.session_id
        {
            // The endpoint routes by these; a mismatch is a caller bug, never acted on.
            return Err(DropReason::UnknownSender);
        }
        if header.peer_nonce != 0 && header.peer_nonce != self.local_nonce {
            return Err(DropReason::StaleEpoch); // meant for our earlier run
        }
        if let (Some(epoch), Some(nonce)) = (self.peer_epoch, self.peer_nonce) {
            if header.epoch != epoch || header.nonce != nonce {
                return Err(DropReason::StaleEpoch); // the peer's earlier run
            }
        }
        let pn = header.packet_number;
        self.replay.check(pn)?;
        let is_newest = self.replay.largest().map_or(true, |largest| pn > largest);

        let mut cumulative_ack = None;
        if let Some(ack) = header.ack {
            if u64::from(ack.largest) >= self.next_packet_number {
                return Err(DropReason::Malformed); // acknowledges a packet never sent
            }
            // Cumulative acks only grow in the peer's packet order, so only the
            // newest packet's is used; that also keeps widening exact.
            if is_newest {
                let delta = ack.next_message.wrapping_sub(self.send_base as u16) as i16;
                if delta > 0 {
                    let acked_through = self.send_base + delta as u64;
                    if acked_through > self.send_base + self.outgoing.len() as u64 {
                        return Err(DropReason::Malformed); // acknowledges unsent messages
                    }
                    cumulative_ack = Some(acked_through);
                }
            }
        }

        let mut previous: Option<u64> = None;
        let mut new_messages = 0usize;
        let mut messages = packet.messages();
        let mut duplicates = 0;
        let mut past_duplicates = messages.clone();
        while let Some(message) = messages.next() {
            let number = widen(self.recv_next, message.number);
            if previous.is_some_and(|p| number <= p) {
                return Err(DropReason::Malformed); // numbers must increase
            }
            previous = Some(number);
            if number < self.recv_next {
                // Delivered already: the copies of messages the peer has
                // not seen acknowledged yet, most of what a packet carries.
                // Numbers increase, so these come first.
                duplicates += 1;
                past_duplicates = messages.clone();
                continue;
            }
            if number >= self.recv_next + MAX_IN_FLIGHT_LIMIT as u64 {
                return Err(DropReason::OutsideWindow);
            }
            if !self.out_of_order.contains_key(&number) {
                new_messages += 1;
            }
        }
        // Acknowledging the packet acknowledges its messages, so a receiver
        // that cannot hold them must drop the packet whole (flow control).
        if new_messages > 0
            && self.ready.len() + self.out_of_order.len() + new_messages
                > self.config.receive_capacity
        {
            return Err(DropReason::ReceiverFull);
        }
        Ok(CheckedPacket {
            cumulative_ack,
            duplicates,
            past_duplicates,
        })
    }

    fn accept_packet(
        &mut self,
        now_us: u64,
        packet: &Packet<'_>,
        datagram_len: usize,
        checked: CheckedPacket<'_>,
    ) {
        let CheckedPacket {
            cumulative_ack,
            duplicates,
            past_duplicates,
        } = checked;
        let header = &packet.header;
        if self.is_newest(header.packet_number) {
            self.largest_received_us = now_us;
        }
        self.replay.accept(header.packet_number);
        self.peer_epoch = Some(header.epoch);
        self.peer_nonce = Some(header.nonce);
        self.counters.packets_received += 1;
        self.counters.bytes_received += datagram_len as u64;
        self.last_heard_us = Some(now_us);
        if self.lost {
            self.lost = false;
            self.push_event(LinkEvent::Recovered);
        }

        let mut newly_acked_messages = false;
        if let Some(ack) = header.ack {
            newly_acked_messages |= self.on_packet_acks(now_us, &ack, header.is_first_ack());
        }
        if let Some(acked_through) = cumulative_ack {
            let end = (acked_through - self.send_base) as usize;
            for index in 0..end {
                newly_acked_messages |= self.mark_acked(index);
            }
        }
        if newly_acked_messages {
            while self.outgoing.front().is_some_and(|m| m.acked) {
                self.outgoing.pop_front();
                self.send_base += 1;
            }
            self.encoded
                .forget_before(self.outgoing.front().map(|m| m.placed.at));
            // RFC 6298 5.3: new data acknowledged restarts the timer.
            self.rtt.reset_backoff();
            self.rto_started_us = self.has_unacked_sent().then_some(now_us);
            // Re-send what has waited an RTO since it last went out. The
            // timer just restarted, so under a steady stream of new data it
            // never fires: without this, a lost message larger than the
            // piggyback budget would stall the stream for as long as it
            // flows (tests/relay_link_stall.rs). It also sends the next
            // batch of what an earlier timeout left unsent now rather than
            // one batch per RTO.
            let stale_after = self.rtt.rto_us();
            self.resend_oldest(stale_after, now_us);
        }

        // The leading duplicates need nothing but counting (`check_packet`
        // saw them all below `recv_next`, which has not moved since).
        self.counters.duplicate_messages += duplicates;
        for message in past_duplicates {
            let number = widen(self.recv_next, message.number);
            if number < self.recv_next || self.out_of_order.contains_key(&number) {
                self.counters.duplicate_messages += 1;
            } else if number == self.recv_next {
                self.ready.push(message.payload);
                self.recv_next += 1;
            } else {
                let payload = self.buffer_with(message.payload);
                self.out_of_order.insert(number, payload);
            }
        }
        while let Some(payload) = self.out_of_order.remove(&self.recv_next) {
            self.ready.push(&payload);
            self.recycle(payload);
            self.recv_next += 1;
        }
        if packet.is_ack_eliciting() {
            // A ping asks for a prompt answer; messages can wait a while
            // for a packet to ride on.
            let delay = if header.is_ping() {
                0
            } else {
                self.config.max_ack_delay_us
            };
            let due = now_us.saturating_add(delay);
            self.ack_due_us = Some(self.ack_due_us.map_or(due, |d| d.min(due)));
        }
    }

    /// Apply the packet-level acknowledgements; whether any message became acked.
    fn on_packet_acks(&mut self, now_us: u64, ack: &AckBlock, first_ack: bool) -> bool {
        let mut newly_acked_messages = false;
        // Largest first, then downwards, as the block lists them.
        let mut fresh = self.not_yet_named(ack);
        while fresh != 0 {
            let below = fresh.trailing_zeros();
            fresh &= fresh - 1;
            let Some(pn) = ack.largest.checked_sub(below) else {
                continue;
            };
            let pn = u64::from(pn);
            let Some(index) = pn.checked_sub(self.sent_base) else {
                continue; // record already retired
            };
            let Some(record) = self.sent.get_mut(index as usize) else {
                continue;
            };
            if record.acked {
                continue;
            }
            record.acked = true;
            let record = *record;
            if record.ack_eliciting {
                self.loss.record(false);
            }
            // RFC 9002 5.1: sample only from the largest acknowledged, newly
            // acked; Karn's rule via `gives_rtt_sample` (S8); and only from the
            // peer's first ack of it (`FLAG_FIRST_ACK`): a repeat ack after a
            // lost one waited for the peer's next packet.
            // The peer held the ack `delay_us` before sending it: not part of
            // the path's round trip (RFC 9002 5.3), and never counted beyond
            // the most it may hold one.
            if pn == u64::from(ack.largest) && record.gives_rtt_sample && first_ack {
                let ack_delay_us = ack.delay_us().min(self.config.max_ack_delay_us);
                self.rtt.on_delayed_sample(
                    now_us,
                    now_us.saturating_sub(record.sent_us),
                    ack_delay_us,
                );
            }
            let mut carried = record.carried;
            while carried != 0 {
                let offset = u64::from(carried.trailing_zeros());
                carried &= carried - 1;
                let number = record.first_message + offset;
                if let Some(index) = number.checked_sub(self.send_base) {
                    newly_acked_messages |= self.mark_acked(index as usize);
                }
            }
        }
        // Records the ack bits can no longer reach are settled: unacked means lost.
        let horizon = u64::from(ack.largest).saturating_sub(16);
        while self.sent_base < horizon {
            self.retire_oldest_record();
        }
        newly_acked_messages
    }

    /// The packets `ack` names that no earlier block named, as a mask below
    /// `ack.largest` (bit `i`: packet `largest - i`); remembers them named.
    fn not_yet_named(&mut self, ack: &AckBlock) -> u64 {
        // Bit 0 the largest, bit 1 + i the block's bit i.
        let block = 1 | u64::from(ack.bits) << 1;
        let Some(known) = self.acked_largest else {
            self.acked_largest = Some(ack.largest);
            self.acked_mask = block;
            return block;
        };
        if ack.largest >= known {
            let shift = ack.largest - known;
            let earlier = if shift >= 64 {
                0
            } else {
                self.acked_mask << shift
            };
            self.acked_largest = Some(ack.largest);
            self.acked_mask = earlier | block;
            return block & !earlier;
        }
        // An older block (reordered): align it with the mask if it fits.
        let shift = known - ack.largest;
        if shift >= 64 - 17 {
            return block; // beyond the mask: every record says for itself
        }
        let aligned = block << shift;
        let fresh = aligned & !self.acked_mask;
        self.acked_mask |= aligned;
        fresh >> shift
    }

    /// Mark `outgoing[index]` acknowledged; whether it was not already.
    fn mark_acked(&mut self, index: usize) -> bool {
        let Some(message) = self.outgoing.get_mut(index) else {
            return false;
        };
        if message.acked {
            return false;
        }
        message.acked = true;
        if message.needs_send {
            message.needs_send = false;
            self.messages_due -= 1;
        }
        true
    }

    #[inline(always)]
    fn retire_oldest_record(&mut self) {
        if let Some(record) = self.sent.pop_front() {
            if record.ack_eliciting && !record.acked {
                self.loss.record(true);
            }
        }
        self.sent_base += 1;
    }

    fn has_unacked_sent(&self) -> bool {
        self.outgoing
            .iter()
            .any(|m| !m.acked && m.transmissions > 0)
    }

    /// Make due again at most [`RESEND_BATCH`] of the oldest sent,
    /// unacknowledged messages last sent at least `older_than_us` ago;
    /// whether any became due.
    #[inline(always)]
    fn resend_oldest(&mut self, older_than_us: u64, now_us: u64) -> bool {
        let stale = |last_sent_us: u64| {
            older_than_us == u64::MAX || now_us.saturating_sub(last_sent_us) >= older_than_us
        };
        if !stale(self.resend_floor_us) {
            return false; // every candidate was sent since the floor: none is stale
        }
        let mut batch = 0;
        // The candidates left as they are were last sent no earlier than
        // this (nor than now: one sent later has a later time).
        let mut floor = now_us;
        for message in self.outgoing.iter_mut() {
            if batch == RESEND_BATCH {
                floor = 0; // the rest unseen
                break;
            }
            if !message.acked && message.transmissions > 0 && !message.needs_send {
                if stale(message.last_sent_us) {
                    message.needs_send = true;
                    self.messages_due += 1;
                    batch += 1;
                } else {
                    floor = floor.min(message.last_sent_us);
                }
            }
        }
        self.resend_floor_us = floor;
        batch > 0
    }

    fn push_event(&mut self, event: LinkEvent) {
        if self.events.len() == EVENT_QUEUE_LIMIT {
            self.events.pop_front();
        }
        self.events.push_back(event);
    }

    /// The liveness timeout in force (S8).
    pub fn liveness_timeout_us(&self) -> u64 {
        self.config.liveness_timeout_us.unwrap_or_else(|| {
            let srtt = self.rtt.srtt_us().unwrap_or(super::rtt::INITIAL_RTO_US);
            (8 * srtt + 250_000).clamp(2_000_000, 30_000_000)
        })
    }

    /// Fire whatever timers are due at `now_us`: the retransmission timeout
    /// (every unacknowledged message becomes due, the timeout doubles) and
    /// the liveness timeout (a [`LinkEvent::Lost`]).
    /// [`poll_transmit`](Self::poll_transmit) calls this itself.
    pub fn handle_timeout(&mut self, now_us: u64) {
        if self.rto_expired(now_us) {
            let resent = self.resend_oldest(u64::MAX, now_us);
            self.rto_started_us = None;
            if resent {
                self.rtt.on_rto_expired();
                self.counters.rto_expirations += 1;
            }
        }
        if self.liveness_expired(now_us) {
            self.lost = true;
            self.push_event(LinkEvent::Lost);
        }
    }

    /// The retransmission timer runs and has expired at `now_us`.
    fn rto_expired(&self, now_us: u64) -> bool {
        self.rto_started_us
            .is_some_and(|started| now_us.saturating_sub(started) >= self.rtt.backed_off_rto_us())
    }

    /// Not heard from within the liveness timeout, and not reported lost yet.
    fn liveness_expired(&self, now_us: u64) -> bool {
        let heard = self.last_heard_us.unwrap_or(self.created_us);
        !self.lost && now_us.saturating_sub(heard) >= self.liveness_timeout_us()
    }

    /// The earliest time a timer needs [`handle_timeout`](Self::handle_timeout)
    /// or [`poll_transmit`](Self::poll_transmit): the retransmission,
    /// keep-alive and liveness timers, and the latest time an owed ack may
    /// wait. Work that is due at once (messages queued, a ping answered) is
    /// not a timer: drain `poll_transmit` after every `send` and
    /// `handle_packet`.
    pub fn poll_timeout(&self) -> Option<u64> {
        // Straight-line: the endpoint asks after every packet sent or
        // received, and this compiles to much less than folding an array
        // of options. The running minimum is a plain integer with a flag,
        // not an `Option` compared as it goes: the optimiser compared a
        // `None`'s unset payload before looking at the tag (harmless, but
        // valgrind rightly flags a branch on an uninitialised value).
        let mut next = u64::MAX;
        let mut any = false;
        if let Some(due) = self.ack_due_us {
            next = due;
            any = true;
        }
        let mut consider = |due: u64| {
            next = next.min(due);
            any = true;
        };
        if let Some(started) = self.rto_started_us {
            consider(started.saturating_add(self.rtt.backed_off_rto_us()));
        }
        if self.config.keepalive_interval_us > 0 {
            consider(
                self.last_ack_eliciting_sent_us
                    .saturating_add(self.config.keepalive_interval_us),
            );
        }
        if !self.lost {
            let heard = self.last_heard_us.unwrap_or(self.created_us);
            consider(heard.saturating_add(self.liveness_timeout_us()));
        }
        any.then_some(next)
    }

    /// Write the next packet to send into `buf` and return its length, or
    /// `None` when nothing needs sending now. Call until it returns `None`.
    /// `buf` should hold `max_packet_bytes`; a shorter one gets smaller packets.
    pub fn poll_transmit(&mut self, now_us: u64, buf: &mut [u8]) -> Option<usize> {
        self.handle_timeout(now_us);
        self.poll_transmit_no_timer_due(now_us, buf)
    }

    /// [`poll_transmit`](Self::poll_transmit) for a caller that knows no
    /// timer is due at `now_us` ([`poll_timeout`](Self::poll_timeout) is
    /// later, or none): [`handle_timeout`](Self::handle_timeout) would
    /// change nothing, so it is skipped. The endpoint keeps each link's
    /// timer and asks every link after every datagram.
    pub(crate) fn poll_transmit_no_timer_due(
        &mut self,
        now_us: u64,
        buf: &mut [u8],
    ) -> Option<usize> {
        debug_assert!(
            !self.rto_expired(now_us) && !self.liveness_expired(now_us),
            "a timer is due: poll_transmit must handle it"
        );
        let (ack_due, ping_due) = self.transmit_due(now_us)?;
        let ping = ping_due && self.messages_due == 0;
        let largest_received = self.replay.largest();
        let first_ack =
            largest_received.is_some_and(|l| self.largest_acknowledged.map_or(true, |a| l > a));
        let header = Header {
            flags: if ping { FLAG_PING } else { 0 } | if first_ack { FLAG_FIRST_ACK } else { 0 },
            sender: self.identity.local_seat,
            session_id: self.identity.session_id,
            packet_number: self.next_packet_number as u32,
            epoch: self.local_epoch,
            nonce: self.local_nonce,
            peer_nonce: self.peer_nonce.unwrap_or(0),
            ack: self.replay.largest().map(|largest| AckBlock {
                largest,
                bits: self.replay.ack_bits(),
                next_message: self.recv_next as u16,
                delay: AckBlock::delay_field(now_us.saturating_sub(self.largest_received_us)),
            }),
        };
        let limit = buf.len().min(self.config.max_packet_bytes);
        let mut writer = PacketWriter::new(&mut buf[..limit], &header)?;

        let mut first_message: Option<u64> = None;
        let mut carried = 0u64;
        let mut first_transmission = false;
        // A ping stays a pure ping, so the sample it gives never involves a
        // resent message (Karn's rule, S8). Already-sent messages ride only on
        // packets that carry new ones: a pure ack carrying them would itself
        // need an ack, and with data always in flight the acks would answer
        // each other forever (a storm that grows with every message sent).
        let piggyback_budget = if ping || self.messages_due == 0 {
            0
        } else {
            self.config.piggyback_budget_bytes
        };
        // The copies that fit the budget, chosen before anything is pushed.
        let piggyback_from = self.piggyback_from(piggyback_budget, now_us);

        for (index, message) in self.outgoing.iter_mut().enumerate() {
            if message.acked {
                continue;
            }
            let number = self.send_base + index as u64;
            if first_message.is_some_and(|first| number - first >= PACKET_MESSAGE_SPAN) {
                break;
            }
            // Piggyback an already-sent message (S8: every packet
            // re-sends what is unacknowledged, so a lost message is
            // recovered by the very next one), the newest within budget
            // (`piggyback_from`), and never twice in one instant so due
            // messages always make progress.
            let piggyback = !message.needs_send;
            if piggyback && (index < piggyback_from || message.last_sent_us == now_us) {
                continue;
            }
            // `push` writes nothing when the message does not fit.
            if !writer.push_encoded(&self.encoded.get(&message.placed)) {
                if piggyback {
                    continue;
                }
                break; // the rest goes in the next packet
            }
            if message.transmissions == 0 {
                first_transmission = true;
                message.first_sent_us = now_us;
            } else {
                self.counters.messages_retransmitted += 1;
            }
            if message.needs_send {
                message.needs_send = false;
                self.messages_due -= 1;
            }
            message.transmissions += 1;
            message.last_sent_us = now_us;
            self.resend_floor_us = self.resend_floor_us.min(now_us);
            let first = *first_message.get_or_insert(number);
            carried |= 1 << (number - first);
        }

        let message_count = writer.message_count();
        if message_count == 0 && !ack_due && !ping {
            return None; // due messages did not fit a buffer this small
        }
        let len = writer.finish(&self.identity.key, self.identity.peer_seat);

        let ack_eliciting = message_count > 0 || ping;
        if self.sent.len() >= SENT_HISTORY_LIMIT {
            self.retire_oldest_record();
        }
        self.sent.push_back(SentPacket {
            sent_us: now_us,
            first_message: first_message.unwrap_or(0),
            carried,
            ack_eliciting,
            gives_rtt_sample: first_transmission || ping,
            acked: false,
        });
        self.next_packet_number += 1;
        // Whatever this packet carries, its ack block answers everything
        // received so far.
        self.ack_due_us = None;
        if first_ack {
            self.largest_acknowledged = largest_received;
        }
        if ack_eliciting {
            self.last_ack_eliciting_sent_us = now_us;
        }
        if message_count > 0 && self.rto_started_us.is_none() {
            self.rto_started_us = Some(now_us);
        }
        self.counters.packets_sent += 1;
        self.counters.bytes_sent += len as u64;
        Some(len)
    }

    /// Whether [`poll_transmit_no_timer_due`](Self::poll_transmit_no_timer_due)
    /// has anything to send at `now_us` (`None`: it returns `None` at once,
    /// changing nothing): whether an ack is due and whether a keep-alive is.
    fn transmit_due(&self, now_us: u64) -> Option<(bool, bool)> {
        if self.next_packet_number > u64::from(u32::MAX) {
            return None; // 2^32 packets sent: numbers are never reused, so stop.
        }
        let ping_due = self.config.keepalive_interval_us > 0
            && now_us.saturating_sub(self.last_ack_eliciting_sent_us)
                >= self.config.keepalive_interval_us;
        let ack_due = self.ack_due_us.is_some_and(|due| now_us >= due);
        if self.messages_due == 0 && !ack_due && !ping_due {
            return None;
        }
        Some((ack_due, ping_due))
    }

    /// Whether [`poll_transmit_no_timer_due`](Self::poll_transmit_no_timer_due)
    /// at `now_us` may send something; `false` when it would return `None`
    /// without changing anything.
    pub(crate) fn may_transmit_now(&self, now_us: u64) -> bool {
        self.transmit_due(now_us).is_some()
    }

    /// The oldest index of `outgoing` a packet piggybacks from: the newest
    /// already-sent, unacknowledged messages whose copies fit `budget`
    /// bytes. The newest have the fewest copies out (each packet re-sends
    /// the newest first), so a loss among them is repaired by the next
    /// packet; the oldest have been re-sent in many packets already and
    /// wait for their acknowledgement, or the retransmission timeout.
    /// Re-sending the oldest first instead left a message lost while more
    /// than a budget's worth was in flight (round trips of several hundred
    /// ms at send period 1) without a copy until the older ones were
    /// acknowledged: stalls of a third of a round trip, again and again.
    fn piggyback_from(&self, budget: usize, now_us: u64) -> usize {
        let newest = self.outgoing.len();
        let mut left = budget;
        let mut from = newest;
        for (index, message) in self.outgoing.iter().enumerate().rev() {
            // One packet carries message numbers within a span.
            if newest - index > PACKET_MESSAGE_SPAN as usize {
                break;
            }
            if message.acked || message.needs_send || message.last_sent_us == now_us {
                continue;
            }
            let cost = message.placed.payload_len as usize + 4;
            if cost > left {
                break;
            }
            left -= cost;
            from = index;
        }
        from
    }

    /// The next liveness event, if any.
    pub fn poll_event(&mut self) -> Option<LinkEvent> {
        self.events.pop_front()
    }

    /// The round-trip estimator.
    pub fn rtt(&self) -> &RttEstimator {
        &self.rtt
    }

    /// At least one clean round-trip sample (S8).
    pub fn has_clean_measurement(&self) -> bool {
        self.rtt.has_sample()
    }

    /// Unacknowledged messages older than the RTO (S8).
    pub fn is_retransmitting(&self, now_us: u64) -> bool {
        let rto = self.rtt.rto_us();
        self.outgoing.iter().any(|m| {
            !m.acked && m.transmissions > 0 && now_us.saturating_sub(m.first_sent_us) >= rto
        })
    }

    /// Reported lost and not heard since.
    pub fn is_lost(&self) -> bool {
        self.lost
    }

    /// When the last valid packet arrived (µs, the caller's clock); `None`
    /// if none ever did.
    pub fn last_heard_us(&self) -> Option<u64> {
        self.last_heard_us
    }

    /// Worst recent round trip in whole milliseconds, rounded up, for a
    /// report (S3); `None` until the link has a clean measurement.
    pub fn worst_recent_rtt_ms(&self, now_us: u64) -> Option<u32> {
        self.rtt.worst_recent_us(now_us).map(ms_rounded_up)
    }

    /// The latest clean round-trip sample in whole milliseconds, rounded
    /// up; `None` before the first.
    pub fn latest_rtt_ms(&self) -> Option<u32> {
        self.rtt.latest_us().map(ms_rounded_up)
    }

    /// What the reports need now: clean measurement, retransmitting, worst recent (S3, S8).
    pub fn report_rtt(&self, now_us: u64) -> ReportRtt {
        ReportRtt {
            clean_measurement: self.has_clean_measurement(),
            retransmitting: self.is_retransmitting(now_us),
            latest_ms: self.latest_rtt_ms(),
        }
    }

    /// A snapshot of everything measured and counted.
    pub fn stats(&self, now_us: u64) -> LinkStats {
        let c = &self.counters;
        LinkStats {
            clean_measurement: self.has_clean_measurement(),
            retransmitting: self.is_retransmitting(now_us),
            lost: self.lost,
            srtt_us: self.rtt.srtt_us(),
            rttvar_us: self.rtt.rttvar_us(),
            latest_rtt_us: self.rtt.latest_us(),
            min_rtt_us: self.rtt.min_us(),
            worst_recent_rtt_us: self.rtt.worst_recent_us(now_us),
            rto_us: self.rtt.backed_off_rto_us(),
            rtt_samples: self.rtt.samples(),
            loss_permille: self.loss.permille(),
            packets_sent: c.packets_sent,
            packets_received: c.packets_received,
            bytes_sent: c.bytes_sent,
            bytes_received: c.bytes_received,
            messages_sent: c.messages_sent,
            messages_delivered: c.messages_delivered,
            messages_retransmitted: c.messages_retransmitted,
            rto_expirations: c.rto_expirations,
            duplicate_messages: c.duplicate_messages,
            messages_in_flight: self.outgoing.iter().filter(|m| !m.acked).count() as u64,
            last_heard_us: self.last_heard_us,
            dropped: self.dropped,
            restarts: self.restarts,
            address_changes: self.address_changes,
        }
    }

    #[cfg(test)]
    pub(crate) fn set_next_packet_number(&mut self, pn: u64) {
        self.next_packet_number = pn;
        self.sent_base = pn;
        self.sent.clear();
        self.acked_largest = None;
        self.acked_mask = 0;
    }
}

/// Make `buffer` hold `bytes`. A buffer that must grow grows to the next
/// power of two (at least 64 bytes), so reused buffers soon fit whatever
/// messages a game sends and stop allocating.
fn refill(buffer: &mut Vec<u8>, bytes: &[u8]) {
    buffer.clear();
    if buffer.capacity() < bytes.len() {
        buffer.reserve_exact(bytes.len().next_power_of_two().max(64));
    }
    buffer.extend_from_slice(bytes);
}

/// Widen the low 16 bits of a message number against `reference`, taking the
/// full number nearest to it (distance below 2^15, see the bound above).
///
/// Proof sketch of exactness on the receive side: the sender only sends
/// numbers in `[its oldest unacked, oldest unacked + MAX_IN_FLIGHT_LIMIT)`,
/// and its oldest unacked never passes our `recv_next`, so a number is at most
/// MAX_IN_FLIGHT_LIMIT ahead. It is behind by at most the messages the peer
/// sent after it in packets we accepted; an accepted packet is at most
/// REPLAY_WINDOW packets behind the newest, so that is at most
/// REPLAY_WINDOW·MAX_MESSAGES_PER_PACKET + 2·MAX_IN_FLIGHT_LIMIT.
fn widen(reference: u64, low: u16) -> u64 {
    let delta = low.wrapping_sub(reference as u16) as i16;
    if delta >= 0 {
        reference + delta as u64
    } else {
        reference.saturating_sub(delta.unsigned_abs() as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::packet::{decode, verify_tag};

    const KEY: SessionKey = SessionKey([0x42; 16]);

    fn pair(config: LinkConfig) -> (Link, Link) {
        let a = Link::new(
            config,
            LinkIdentity {
                session_id: 9,
                key: KEY,
                local_seat: 0,
                peer_seat: 1,
            },
            0,
        )
        .unwrap();
        let b = Link::new(
            config,
            LinkIdentity {
                session_id: 9,
                key: KEY,
                local_seat: 1,
                peer_seat: 0,
            },
            0,
        )
        .unwrap();
        (a, b)
    }

    /// Every packet `from` wants to send now.
    fn drain(from: &mut Link, now: u64) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let mut buf = [0u8; MAX_PACKET_BYTES];
        while let Some(len) = from.poll_transmit(now, &mut buf) {
            out.push(buf[..len].to_vec());
        }
        out
    }

    fn deliver(to: &mut Link, now: u64, bytes: &[u8]) -> std::result::Result<(), DropReason> {
        assert!(verify_tag(bytes, &KEY, to.identity.local_seat));
        let packet = decode(bytes).unwrap();
        to.handle_packet(now, &packet, bytes.len())
    }

    fn no_keepalive() -> LinkConfig {
        LinkConfig {
            keepalive_interval_us: 0,
            ..LinkConfig::default()
        }
    }

    #[test]
    fn widen_picks_the_nearest_number() {
        assert_eq!(widen(0, 5), 5);
        assert_eq!(widen(70_000, 70_001u64 as u16), 70_001);
        assert_eq!(widen(70_000, 69_990u64 as u16), 69_990);
        assert_eq!(widen(65_530, 3), 65_539);
        assert_eq!(widen(3, 65_534), 0, "saturates below zero");
    }

    #[test]
    fn messages_arrive_once_in_order_and_acks_clear_the_queue() {
        let (mut a, mut b) = pair(LinkConfig {
            max_ack_delay_us: 50_000,
            ..no_keepalive()
        });
        for i in 0..5u8 {
            a.send(&[i]).unwrap();
        }
        let packets = drain(&mut a, 1_000);
        assert_eq!(packets.len(), 1);
        // Deliver it twice: the second copy is a replay.
        deliver(&mut b, 50_000, &packets[0]).unwrap();
        assert_eq!(
            deliver(&mut b, 50_001, &packets[0]),
            Err(DropReason::Replayed)
        );
        let got: Vec<_> = std::iter::from_fn(|| b.recv()).collect();
        assert_eq!(got, (0..5u8).map(|i| vec![i]).collect::<Vec<_>>());
        // b holds the ack for a packet to ride on; none comes, so it goes
        // alone after the max ack delay and says it was held 50 ms, which a
        // takes off its clean sample: 149 - 1 - 50 = 98 ms.
        assert!(drain(&mut b, 50_000).is_empty());
        assert_eq!(b.poll_timeout(), Some(100_000));
        let acks = drain(&mut b, 100_000);
        assert_eq!(acks.len(), 1);
        let ack = decode(&acks[0]).unwrap().header.ack.unwrap();
        assert_eq!(ack.delay_us(), 50_000);
        deliver(&mut a, 149_000, &acks[0]).unwrap();
        assert!(a.has_clean_measurement());
        assert_eq!(a.rtt().latest_us(), Some(98_000));
        assert_eq!(a.stats(149_000).messages_in_flight, 0);
        // An ack-only packet asks for no ack back.
        assert!(drain(&mut a, 149_000).is_empty());
        assert_eq!(a.ack_due_us, None);
        assert_eq!(b.stats(0).dropped.get(DropReason::Replayed), 1);
    }

    #[test]
    fn acks_ride_on_data_sent_within_the_max_ack_delay() {
        let (mut a, mut b) = pair(LinkConfig {
            max_ack_delay_us: 50_000,
            ..no_keepalive()
        });
        let mut sent = 0;
        for round in 0..10u64 {
            let t = round * 33_000;
            // Each side sends a message every 33 ms (a turn a frame) and
            // receives the other's 10 ms later.
            a.send(b"turn of a").unwrap();
            b.send(b"turn of b").unwrap();
            let from_a = drain(&mut a, t);
            let from_b = drain(&mut b, t);
            sent += from_a.len() + from_b.len();
            for p in &from_a {
                deliver(&mut b, t + 10_000, p).unwrap();
            }
            for p in &from_b {
                deliver(&mut a, t + 10_000, p).unwrap();
            }
            // Nothing goes out for the acks alone before the next turn.
            assert!(drain(&mut a, t + 10_000).is_empty());
            assert!(drain(&mut b, t + 10_000).is_empty());
        }
        assert_eq!(sent, 20, "one packet per message, none for acks");
        // Every turn but the last is acked, and the samples are the path's
        // 20 ms round trip: the 23 ms each ack waited came off.
        assert_eq!(a.stats(330_000).messages_in_flight, 1);
        assert_eq!(a.rtt().latest_us(), Some(20_000));
        assert_eq!(a.rtt().srtt_us(), Some(20_000));
        // The last turn's ack goes alone at the max ack delay.
        assert_eq!(b.poll_timeout(), Some(9 * 33_000 + 10_000 + 50_000));
    }

    #[test]
    fn a_loss_among_many_in_flight_is_repaired_by_the_next_packet() {
        // A turn a frame (33 ms) on a 900 ms round trip: 27 turns of 40
        // bytes in flight, more than the 512-byte piggyback budget holds.
        let (mut a, mut b) = pair(no_keepalive());
        let mut lost = None;
        for frame in 0..30u64 {
            let t = frame * 33_000;
            a.send(&[frame as u8; 40]).unwrap();
            let packets = drain(&mut a, t);
            assert_eq!(packets.len(), 1);
            if frame == 25 {
                lost = Some(packets[0].clone()); // never arrives
            } else if frame == 26 {
                // The next packet carries the lost turn: the newest copies
                // go first, whatever the older ones wait for.
                deliver(&mut b, t + 450_000, &packets[0]).unwrap();
                let got: Vec<_> = std::iter::from_fn(|| b.recv()).collect();
                assert!(got.is_empty(), "turns 0..25 are still on their way");
                let packet = decode(&packets[0]).unwrap();
                let numbers: Vec<u16> = packet.messages().map(|m| m.number).collect();
                assert!(numbers.contains(&25), "{numbers:?}");
                assert!(!numbers.contains(&0), "the oldest wait: {numbers:?}");
                let carried: usize = packet.messages().map(|m| m.payload.len() + 4).sum();
                assert!(carried <= 512 + 44, "within the budget and the new turn");
            }
        }
        assert!(lost.is_some());
    }

    #[test]
    fn out_of_order_packets_are_reassembled() {
        let (mut a, mut b) = pair(LinkConfig {
            piggyback_budget_bytes: 0,
            ..no_keepalive()
        });
        let mut packets = Vec::new();
        for i in 0..4u8 {
            a.send(&[i]).unwrap();
            packets.extend(drain(&mut a, 10 + u64::from(i)));
        }
        assert_eq!(packets.len(), 4);
        for i in [3, 1, 0, 2] {
            deliver(&mut b, 100, &packets[i]).unwrap();
        }
        let got: Vec<_> = std::iter::from_fn(|| b.recv()).collect();
        assert_eq!(got, vec![vec![0], vec![1], vec![2], vec![3]]);
    }

    #[test]
    fn karn_resent_messages_give_no_sample() {
        let (mut a, mut b) = pair(LinkConfig {
            piggyback_budget_bytes: 0,
            max_ack_delay_us: 0,
            ..no_keepalive()
        });
        a.send(b"lost once").unwrap();
        let first = drain(&mut a, 0);
        assert_eq!(first.len(), 1); // dropped by the network
                                    // Nothing before the 1 s initial RTO.
        assert!(drain(&mut a, 999_999).is_empty());
        let resend = drain(&mut a, 1_000_000);
        assert_eq!(resend.len(), 1);
        assert_eq!(a.stats(1_000_000).rto_expirations, 1);
        deliver(&mut b, 1_050_000, &resend[0]).unwrap();
        assert_eq!(b.recv().as_deref(), Some(&b"lost once"[..]));
        let ack = drain(&mut b, 1_050_000);
        deliver(&mut a, 1_100_000, &ack[0]).unwrap();
        // Acked through the resend packet: no sample, no clean measurement.
        assert_eq!(a.stats(1_100_000).messages_in_flight, 0);
        assert_eq!(a.rtt().samples(), 0);
        assert!(!a.has_clean_measurement());
        // A fresh message gives a sample of its own packet's round trip.
        a.send(b"fresh").unwrap();
        let fresh = drain(&mut a, 2_000_000);
        deliver(&mut b, 2_040_000, &fresh[0]).unwrap();
        let ack = drain(&mut b, 2_040_000);
        deliver(&mut a, 2_080_000, &ack[0]).unwrap();
        assert_eq!(a.rtt().samples(), 1);
        assert_eq!(a.rtt().latest_us(), Some(80_000));
    }

    #[test]
    fn retransmitting_flag_and_backoff() {
        let (mut a, _b) = pair(no_keepalive());
        a.send(b"x").unwrap();
        drain(&mut a, 0);
        assert!(!a.is_retransmitting(999_999));
        assert!(a.is_retransmitting(1_000_000));
        drain(&mut a, 1_000_000); // RTO 1: backoff to 2 s (the ceiling)
        assert_eq!(a.stats(1_000_000).rto_us, 2_000_000);
        assert!(drain(&mut a, 2_999_999).is_empty());
        assert_eq!(drain(&mut a, 3_000_000).len(), 1);
        assert_eq!(a.stats(3_000_000).rto_expirations, 2);
        assert_eq!(a.stats(3_000_000).messages_retransmitted, 2);
    }

    #[test]
    fn keepalive_pings_keep_the_rtt_fresh() {
        let (mut a, mut b) = pair(LinkConfig::default());
        assert!(drain(&mut a, 100_000).is_empty());
        let ping = drain(&mut a, 250_000);
        assert_eq!(ping.len(), 1);
        assert!(decode(&ping[0]).unwrap().header.is_ping());
        deliver(&mut b, 260_000, &ping[0]).unwrap();
        let pong = drain(&mut b, 260_000);
        assert_eq!(pong.len(), 1, "a ping is acked at once");
        deliver(&mut a, 270_000, &pong[0]).unwrap();
        assert_eq!(a.rtt().latest_us(), Some(20_000));
        // b's answer was its own keep-alive too: a answers it at once.
        assert_eq!(a.poll_timeout(), Some(270_000));
        assert_eq!(drain(&mut a, 270_000).len(), 1);
        assert_eq!(a.poll_timeout(), Some(500_000));
    }

    #[test]
    fn liveness_reports_lost_then_recovered_without_removing() {
        let (mut a, mut b) = pair(LinkConfig {
            liveness_timeout_us: Some(3_000_000),
            ..no_keepalive()
        });
        a.handle_timeout(2_999_999);
        assert_eq!(a.poll_event(), None);
        a.handle_timeout(3_000_000);
        assert_eq!(a.poll_event(), Some(LinkEvent::Lost));
        assert!(a.is_lost());
        a.handle_timeout(9_000_000);
        assert_eq!(a.poll_event(), None, "reported once");
        b.send(b"back").unwrap();
        let p = drain(&mut b, 9_000_000);
        deliver(&mut a, 9_000_000, &p[0]).unwrap();
        assert_eq!(a.poll_event(), Some(LinkEvent::Recovered));
        assert!(!a.is_lost());
        assert_eq!(a.recv().as_deref(), Some(&b"back"[..]));
    }

    #[test]
    fn default_liveness_follows_srtt() {
        let (mut a, _) = pair(LinkConfig::default());
        // Before a sample: 8 * 1 s + 250 ms.
        assert_eq!(a.liveness_timeout_us(), 8_250_000);
        a.rtt.on_sample(0, 10_000);
        assert_eq!(a.liveness_timeout_us(), 2_000_000);
        a.rtt = RttEstimator::new();
        a.rtt.on_sample(0, 5_000_000);
        assert_eq!(a.liveness_timeout_us(), 30_000_000);
    }

    #[test]
    fn flow_control_drops_unacknowledged_and_peer_resends() {
        let (mut a, mut b) = pair(LinkConfig {
            receive_capacity: 2,
            piggyback_budget_bytes: 0,
            ..no_keepalive()
        });
        for i in 0..3u8 {
            a.send(&[i]).unwrap();
        }
        let p = drain(&mut a, 0);
        assert_eq!(deliver(&mut b, 10, &p[0]), Err(DropReason::ReceiverFull));
        assert!(drain(&mut b, 10).is_empty(), "nothing acked");
        assert_eq!(b.ready_messages(), 0);
        assert_eq!(a.send(&[9]).map(|_| ()), Ok(()));
        let limited = Link::new(
            LinkConfig {
                max_in_flight: 1,
                ..no_keepalive()
            },
            a.identity,
            0,
        );
        let mut limited = limited.unwrap();
        limited.send(b"1").unwrap();
        assert_eq!(
            limited.send(b"2"),
            Err(Error::Full("messages in flight on this link"))
        );
    }

    #[test]
    fn acks_of_unsent_packets_or_messages_are_malformed() {
        let (mut a, mut b) = pair(LinkConfig {
            max_ack_delay_us: 0,
            ..no_keepalive()
        });
        b.send(b"hello").unwrap();
        let p = drain(&mut b, 0);
        deliver(&mut a, 0, &p[0]).unwrap();
        // a acks b's packet 0; b has sent only packet 0, so that is fine.
        let ack = drain(&mut a, 0);
        // Forge an ack that names packet 5 of b's, which b never sent, to a
        // fresh link of b's run.
        let mut bytes = ack[0].clone();
        bytes[FIXED_HEADER_BYTES] = 5;
        let forged = decode(&bytes).unwrap();
        let mut c = Link::new(no_keepalive(), b.identity, 0).unwrap();
        c.set_local_nonce(b.local_nonce()).unwrap();
        assert_eq!(
            c.handle_packet(0, &forged, bytes.len()),
            Err(DropReason::Malformed)
        );
        assert_eq!(c.stats(0).dropped.get(DropReason::Malformed), 1);
        deliver(&mut b, 0, &ack[0]).unwrap();
    }

    #[test]
    fn exhausted_packet_numbers_stop_sending() {
        let (mut a, _) = pair(no_keepalive());
        a.set_next_packet_number(u64::from(u32::MAX));
        a.send(b"last").unwrap();
        assert_eq!(drain(&mut a, 0).len(), 1);
        a.send(b"never").unwrap();
        assert!(drain(&mut a, 0).is_empty());
    }

    #[test]
    fn config_ranges_are_checked() {
        let breakers: [fn(&mut LinkConfig); 6] = [
            |c| c.liveness_timeout_us = Some(0),
            |c| c.max_in_flight = 0,
            |c| c.receive_capacity = 8193,
            |c| c.max_packet_bytes = 63,
            |c| c.piggyback_budget_bytes = 1201,
            |c| c.max_ack_delay_us = MAX_ACK_DELAY_LIMIT_US + 1,
        ];
        for breaker in breakers {
            let mut config = LinkConfig::default();
            breaker(&mut config);
            assert!(config.validate().is_err(), "{config:?}");
        }
        let small = LinkConfig {
            max_packet_bytes: 64,
            ..LinkConfig::default()
        };
        assert_eq!(small.max_message_bytes(), 64 - 42 - 3);
        assert_eq!(LinkConfig::default().max_message_bytes(), MAX_MESSAGE_BYTES);
    }
}
