//! Transport packets (S8): byte layout, encoding into a caller buffer, and
//! validating decoding that never panics and never allocates.
//!
//! # Layout, version 4
//!
//! All multi-byte integers are little-endian. Offsets are from the start of
//! the UDP payload.
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 1 | magic, `0xB7` |
//! | 1 | 1 | protocol version, `4` |
//! | 2 | 1 | flags: bit 0 `ACK` (the ack block follows), bit 1 `PING` (keep-alive that asks for a prompt ack), bit 2 `FIRST_ACK` (with `ACK` only: the first packet to acknowledge the block's largest); bits 3–7 must be 0 |
//! | 3 | 1 | sender seat |
//! | 4 | 4 | session id (`u32`) |
//! | 8 | 4 | packet number (`u32`), never reused within a link |
//! | 12 | 4 | sender's connection epoch (`u32`, never 0): the engine's, a restarted machine uses a newer one (S8) |
//! | 16 | 4 | sender's connection nonce (`u32`, never 0): drawn at random for each run of the program (S8) |
//! | 20 | 4 | the addressee's nonce as the sender last heard it (`u32`), 0 before it heard anything |
//! | 24 | 4 | *ack block, when `ACK`:* largest packet number received from the addressee (`u32`) |
//! | 28 | 2 | ack bits (`u16`): bit `i` set means packet `largest − 1 − i` was received too |
//! | 30 | 2 | next message number expected from the addressee, low 16 bits: every message below it has been received (cumulative message ack) |
//! | 32 | 2 | ack delay (`u16`): how long the sender held this acknowledgement after receiving the largest packet, in units of [`ACK_DELAY_UNIT_US`] (8 µs), saturating at `0xFFFF` |
//! | 24 or 34 | … | messages, back to back, until the tag |
//! | len − 8 | 8 | tag: SipHash-2-4 (`u64`) keyed with the 128-bit session key over the addressee's seat (one byte, not sent) followed by bytes `0 .. len − 8` |
//!
//! Each message is
//!
//! | size | field |
//! |---|---|
//! | 2 | message number, low 16 bits (`u16`) |
//! | 1 or 2 | payload length `L`: one byte `L` for `L < 128`; else two bytes `0x80 \| (L >> 8)`, `L & 0xFF` (canonical: the short form whenever it fits) |
//! | `L` | payload, `L <= MAX_MESSAGE_BYTES` |
//!
//! Messages in one packet have strictly increasing numbers and there are at
//! most [`MAX_MESSAGES_PER_PACKET`] of them. A packet of one short message
//! with the ack block costs 34 + 3 + 8 = **45 bytes** of overhead
//! ([`OVERHEAD_ONE_MESSAGE`]); ENet spends 10 on one reliable message plus 8
//! for a separate ack command and authenticates nothing.
//!
//! Why an ack delay (new in version 3): acknowledgements ride on the packets
//! that carry data (a lockstep player sends a turn every send frame), so a
//! receiver holds an ack up to the link's `max_ack_delay_us` waiting for
//! one instead of sending a packet of its own for it; that halves the
//! packets of a game. The round trip the sender samples includes the hold,
//! so the packet says how long it was and the sender takes it off (RFC 9002
//! 5.3, never below the smallest round trip seen). Version 2 acknowledged
//! every packet at once and had no such field.
//!
//! Why truncated message numbers are safe: the receiver widens them against
//! its next expected message (and the sender widens the cumulative ack against
//! its oldest unacknowledged one). A correct sender keeps every number it puts
//! on the wire within `MAX_IN_FLIGHT_LIMIT` of those references, and the
//! replay window bounds how stale an accepted packet can be, so the distance
//! stays below 2^15 and the widening is exact (see `link` and the compile-time
//! check there).
//!
//! Why the addressee is in the tag but not on the wire: a packet meant for
//! seat 2 and redirected to seat 3 (same session, same key) fails the tag,
//! for free.
//!
//! Why an epoch and a nonce: a packet of a restarted peer carries a newer
//! sender epoch, or the same epoch with another nonce, so the receiver
//! resets the link instead of taking the new packet and message numbers for
//! duplicates of the old ones (and acknowledging messages it dropped); a
//! packet still addressed to *our* previous run (sent before the peer heard
//! of our restart: it names our old nonce) is dropped, so nothing of the
//! old connection leaks into the new one. The epoch orders runs, so an old
//! run's packets never count as a restart; the nonce tells two runs apart
//! even when the engine passes the same epoch to both (version 3 carried
//! only epochs, and a peer restarted with the same epoch lost messages
//! silently). All of it is under the tag. Version 1 had none of it.
//!
//! Validation order on receipt (S8): magic, version, length bounds — then
//! the endpoint checks session, sender and source address — then the tag,
//! then the body (flags, ack block, message framing). [`peek`] does the
//! first part, [`verify_tag`] the tag, [`decode`] the structure. Magic and
//! version precede the length because they are the two bytes every version
//! keeps in place ([`MAGIC`]): a packet of another version is recognised
//! as one, never as merely too short or too long.
//!
//! The version byte precedes the tag and is not covered by any key this
//! build knows how to check: anyone can send a packet that claims another
//! version. The endpoint therefore only counts such a packet and, when it
//! comes from a peer's bound address, reports the version once
//! ([`crate::link::ProtocolMismatch`]); nothing else changes.
//!
//! The codec keeps the contract of every wire codec (the [`super`] module
//! docs): [`decode`] never panics, never allocates and leaves no byte
//! unread (the messages fill the packet up to the tag exactly).

use super::cursor::{DecodeError, PutLe, Reader, Writer};

/// First byte of every rungs transport packet.
///
/// **In every version, past and future, the magic is byte 0 and the
/// version byte 1**, whatever else the layout changes: that is what lets a
/// build recognise a packet of another version as one ([`peek`] judges
/// them before anything else, length included) and report the mismatch
/// with both numbers instead of timing out. The two bytes are outside any
/// authentication (the tag's key and layout are the version's), so a
/// mismatch is a report, never a reason to change state.
pub const MAGIC: u8 = 0xB7;
/// The transport protocol version this code speaks, byte 1 of every packet
/// (see [`MAGIC`] for the rule that keeps it there); `wire` in
/// [`crate::ProtocolVersions`].
pub const VERSION: u8 = 4;
/// Flag bit: the ack block is present.
pub const FLAG_ACK: u8 = 0x01;
/// Flag bit: a keep-alive asking for a prompt acknowledgement.
pub(crate) const FLAG_PING: u8 = 0x02;
/// Flag bit (with `FLAG_ACK`): this is the first packet to acknowledge the
/// ack block's largest packet number. Round trips are sampled only from such
/// acks: a later one (the first was lost) is delayed by however long the
/// acker had nothing else to send, which is not the round trip.
pub const FLAG_FIRST_ACK: u8 = 0x04;
const KNOWN_FLAGS: u8 = FLAG_ACK | FLAG_PING | FLAG_FIRST_ACK;

/// Bytes before the ack block.
pub(crate) const FIXED_HEADER_BYTES: usize = 24;
/// Bytes of the ack block.
pub(crate) const ACK_BLOCK_BYTES: usize = 10;
/// Microseconds per unit of the ack block's ack delay.
pub const ACK_DELAY_UNIT_US: u64 = 8;
/// Bytes of the authentication tag.
pub const TAG_BYTES: usize = 8;
/// Shortest valid packet: a fixed header and a tag.
pub const MIN_PACKET_BYTES: usize = FIXED_HEADER_BYTES + TAG_BYTES;
/// Longest packet rungs sends or accepts: fits the IPv6 minimum MTU (1280)
/// minus IPv6 and UDP headers with room to spare, so it is never fragmented.
pub const MAX_PACKET_BYTES: usize = 1200;
/// Largest message payload.
pub const MAX_MESSAGE_BYTES: usize = 1024;
/// Most messages one packet may carry.
pub const MAX_MESSAGES_PER_PACKET: usize = 64;
/// Message header bytes for a payload of `len` bytes.
pub(crate) const fn message_header_bytes(len: usize) -> usize {
    if len < 0x80 {
        3
    } else {
        4
    }
}
/// Overhead of a packet carrying one short message, ack block included.
pub const OVERHEAD_ONE_MESSAGE: usize =
    FIXED_HEADER_BYTES + ACK_BLOCK_BYTES + message_header_bytes(0) + TAG_BYTES;

// A maximal message with the largest headers must fit one packet.
const _: () = assert!(
    FIXED_HEADER_BYTES + ACK_BLOCK_BYTES + 4 + MAX_MESSAGE_BYTES + TAG_BYTES <= MAX_PACKET_BYTES
);
// The two-byte length form holds 15 bits.
const _: () = assert!(MAX_MESSAGE_BYTES < 0x8000);

/// The fields checked before the tag: enough to find the link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prefix {
    /// Seat of the sender.
    pub sender: u8,
    /// Session id the sender believes it is in.
    pub session_id: u32,
}

/// Check magic, version and length bounds, and read the sender and session.
/// The errors are the ones the link counts apart: `BadMagic`, `BadVersion`
/// (its `got` is the other version), `TooShort` (below
/// [`MIN_PACKET_BYTES`]), `TooLong` (above [`MAX_PACKET_BYTES`]). Magic and
/// version come first because every version keeps them at bytes 0 and 1
/// while the length bounds are this version's: a packet of another version
/// is `BadVersion` whatever its length (a datagram too short to hold both
/// bytes is `TooShort`).
#[inline]
pub fn peek(packet: &[u8]) -> Result<Prefix, DecodeError> {
    if let [magic, version, ..] = *packet {
        if magic != MAGIC {
            return Err(DecodeError::BadMagic {
                got: magic,
                expected: MAGIC,
            });
        }
        if version != VERSION {
            return Err(DecodeError::BadVersion {
                got: version,
                expected: VERSION,
            });
        }
    }
    if packet.len() < MIN_PACKET_BYTES {
        return Err(DecodeError::TooShort {
            got: packet.len(),
            expected: MIN_PACKET_BYTES,
        });
    }
    if packet.len() > MAX_PACKET_BYTES {
        return Err(DecodeError::TooLong {
            got: packet.len(),
            expected: MAX_PACKET_BYTES,
        });
    }
    let mut r = Reader::new(packet);
    let [_magic, _version, _flags, sender] = r.array()?;
    Ok(Prefix {
        sender,
        session_id: r.u32()?,
    })
}

/// The 128-bit per-session key of the authentication tag.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct SessionKey(pub [u8; 16]);

impl std::fmt::Debug for SessionKey {
    // Keys stay out of logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SessionKey(..)")
    }
}

impl SessionKey {
    /// Whether every byte is 0: refused, since it is what an unset key
    /// looks like (S8).
    pub fn is_zero(&self) -> bool {
        self.0 == [0; 16]
    }

    /// SipHash-2-4 under this key of the addressee's seat byte followed by
    /// the authenticated bytes.
    fn tag(&self, addressee: u8, authenticated: &[u8]) -> u64 {
        let (k0, k1) = self.0.split_at(8);
        siphash24_after_byte(
            u64::from_le_bytes(k0.try_into().unwrap_or([0; 8])),
            u64::from_le_bytes(k1.try_into().unwrap_or([0; 8])),
            addressee,
            authenticated,
        )
    }
}

/// SipHash-2-4 (Aumasson and Bernstein) of `first` followed by `rest`, in
/// one pass: every packet is tagged once and checked once, so this is a
/// good share of a game's work. It reads the message's 8-byte words
/// straight out of `rest` (one byte behind, since `first` leads), where a
/// streaming hasher fed the seat byte and then the packet would carry the
/// odd byte through every word. Equal to `siphasher`'s `SipHasher24` fed
/// the same bytes (tested).
fn siphash24_after_byte(k0: u64, k1: u64, first: u8, rest: &[u8]) -> u64 {
    #[inline(always)]
    fn round(v: &mut [u64; 4]) {
        v[0] = v[0].wrapping_add(v[1]);
        v[1] = v[1].rotate_left(13) ^ v[0];
        v[0] = v[0].rotate_left(32);
        v[2] = v[2].wrapping_add(v[3]);
        v[3] = v[3].rotate_left(16) ^ v[2];
        v[0] = v[0].wrapping_add(v[3]);
        v[3] = v[3].rotate_left(21) ^ v[0];
        v[2] = v[2].wrapping_add(v[1]);
        v[1] = v[1].rotate_left(17) ^ v[2];
        v[2] = v[2].rotate_left(32);
    }
    #[inline(always)]
    fn compress(v: &mut [u64; 4], m: u64) {
        v[3] ^= m;
        round(v);
        round(v);
        v[0] ^= m;
    }
    let mut v = [
        k0 ^ 0x736f_6d65_7073_6575,
        k1 ^ 0x646f_7261_6e64_6f6d,
        k0 ^ 0x6c79_6765_6e65_7261,
        k1 ^ 0x7465_6462_7974_6573,
    ];
    let total = rest.len() + 1;
    let words = total / 8;
    let tail = total - 8 * words;
    // The last word: the last 0 to 7 bytes and the length's low byte.
    let last = if rest.len() >= 8 {
        // Every packet: whole 8-byte loads, no copy of a variable length
        // (a call to memcpy, per packet, for at most 7 bytes).
        // Word 0: `first` and the first 7 bytes of `rest`.
        compress(&mut v, u64::from(first) | word(rest, 0) << 8);
        // Word i: rest[8i - 1 .. 8i + 7].
        for chunk in rest[7..8 * words - 1].chunks_exact(8) {
            compress(&mut v, word(chunk, 0));
        }
        // The tail is the top `tail` bytes of the last 8.
        let end = word(rest, rest.len() - 8);
        let tail_bytes = if tail == 0 { 0 } else { end >> (64 - 8 * tail) };
        tail_bytes | u64::from(total as u8) << 56
    } else {
        let mut last = [0u8; 8];
        if words == 0 {
            last[0] = first;
            last[1..tail].copy_from_slice(rest);
        } else {
            // total == 8: the one word is `first` and all of `rest`.
            let mut head = [0u8; 8];
            head[0] = first;
            head[1..].copy_from_slice(rest);
            compress(&mut v, u64::from_le_bytes(head));
        }
        last[7] = total as u8;
        u64::from_le_bytes(last)
    };
    compress(&mut v, last);
    v[2] ^= 0xff;
    for _ in 0..4 {
        round(&mut v);
    }
    v[0] ^ v[1] ^ v[2] ^ v[3]
}

/// Whether the packet's tag is right for `key` and the receiving seat.
/// Call only on bytes [`peek`] accepted (shorter input is simply rejected).
pub fn verify_tag(packet: &[u8], key: &SessionKey, addressee: u8) -> bool {
    if packet.len() < MIN_PACKET_BYTES {
        return false;
    }
    let (body, tag) = packet.split_at(packet.len() - TAG_BYTES);
    // One 64-bit comparison: no early exit an attacker could time byte by byte.
    key.tag(addressee, body) == word(tag, 0)
}

/// Write the tag of a packet assembled by other means into its last
/// [`TAG_BYTES`] bytes (tests and tools; [`PacketWriter::finish`] does this
/// for packets it builds). Input shorter than a tag is left alone.
pub fn write_tag(packet: &mut [u8], key: &SessionKey, addressee: u8) {
    let Some(body_len) = packet.len().checked_sub(TAG_BYTES) else {
        return;
    };
    let tag = key.tag(addressee, &packet[..body_len]);
    packet[body_len..].copy_from_slice(&tag.to_le_bytes());
}

/// The ack block (S8): which of the addressee's packets arrived, and how many
/// of its messages were received in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AckBlock {
    /// Largest packet number received from the addressee.
    pub largest: u32,
    /// Bit `i`: packet `largest - 1 - i` was received too.
    pub bits: u16,
    /// Low 16 bits of the next message number expected from the addressee.
    pub next_message: u16,
    /// How long the sender held the ack after receiving `largest`, in
    /// units of [`ACK_DELAY_UNIT_US`].
    pub delay: u16,
}

impl AckBlock {
    /// The ack delay field for a hold of `us` microseconds (rounded down,
    /// saturating).
    pub fn delay_field(us: u64) -> u16 {
        u16::try_from(us / ACK_DELAY_UNIT_US).unwrap_or(u16::MAX)
    }

    /// The ack delay in microseconds.
    pub fn delay_us(&self) -> u64 {
        u64::from(self.delay) * ACK_DELAY_UNIT_US
    }

    /// Every packet number this block acknowledges, largest first.
    pub fn acked(&self) -> impl Iterator<Item = u32> + '_ {
        std::iter::once(self.largest).chain((0..16u32).filter_map(move |i| {
            let set = self.bits & (1 << i) != 0;
            let pn = self.largest.checked_sub(1 + i)?;
            set.then_some(pn)
        }))
    }
}

/// The fixed part of a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// `FLAG_*` bits.
    pub flags: u8,
    /// Seat of the sender.
    pub sender: u8,
    /// Session id.
    pub session_id: u32,
    /// Packet number, never reused within a link.
    pub packet_number: u32,
    /// The sender's connection epoch (never 0).
    pub epoch: u32,
    /// The sender's connection nonce (never 0): random for each run.
    pub nonce: u32,
    /// The addressee's nonce as the sender last heard it; 0: not heard yet.
    pub peer_nonce: u32,
    /// The ack block, when the sender has received anything yet.
    pub ack: Option<AckBlock>,
}

impl Header {
    /// Whether the packet asks for a prompt acknowledgement.
    pub fn is_ping(&self) -> bool {
        self.flags & FLAG_PING != 0
    }

    /// Whether this packet is the first to acknowledge its ack block's largest.
    pub fn is_first_ack(&self) -> bool {
        self.flags & FLAG_FIRST_ACK != 0 && self.ack.is_some()
    }
}

/// One message as it appears in a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MessageRef<'a> {
    /// Low 16 bits of the message number.
    pub number: u16,
    /// The payload, borrowed from the packet.
    pub payload: &'a [u8],
}

/// A structurally valid packet, borrowing the received bytes.
#[derive(Debug, Clone, Copy)]
pub struct Packet<'a> {
    /// The header.
    pub header: Header,
    messages: &'a [u8],
    message_count: usize,
}

impl<'a> Packet<'a> {
    /// The messages, in packet order (numbers strictly increasing as sent by
    /// a correct peer; the link checks that after widening them).
    pub fn messages(&self) -> Messages<'a> {
        Messages {
            rest: self.messages,
        }
    }

    /// How many messages the packet carries.
    pub fn message_count(&self) -> usize {
        self.message_count
    }

    /// Whether the packet carries messages or is a ping: either way the
    /// receiver owes an acknowledgement (a ping's at once, messages' within
    /// the link's max ack delay, on a packet with data if one goes out).
    pub fn is_ack_eliciting(&self) -> bool {
        self.message_count > 0 || self.header.is_ping()
    }
}

/// Iterator over the messages of a [`Packet`] that [`decode`] validated.
#[derive(Debug, Clone)]
pub struct Messages<'a> {
    rest: &'a [u8],
}

impl<'a> Iterator for Messages<'a> {
    type Item = MessageRef<'a>;

    #[inline(always)]
    fn next(&mut self) -> Option<MessageRef<'a>> {
        // `decode` checked the framing (canonical lengths, the payload
        // bound, the end at the tag), so this only finds the boundaries
        // again: the link walks every packet's messages twice, most of
        // them copies it already has. Bytes that do not frame end the
        // iteration rather than panicking.
        let rest = self.rest;
        let [low, high, first, ..] = *rest else {
            return None;
        };
        let (header, len) = if first < 0x80 {
            (3, usize::from(first))
        } else {
            let second = *rest.get(3)?;
            (4, usize::from(first & 0x7F) << 8 | usize::from(second))
        };
        let payload = rest.get(header..header + len)?;
        self.rest = &rest[header + len..];
        Some(MessageRef {
            number: u16::from_le_bytes([low, high]),
            payload,
        })
    }
}

/// Read one message at the reader: the number, the length (canonical form
/// only: one meaning per byte string) and the payload.
#[inline(always)]
fn read_message<'a>(r: &mut Reader<'a>) -> Result<MessageRef<'a>, DecodeError> {
    let number = r.u16()?;
    let first = r.u8()?;
    let len = if first < 0x80 {
        usize::from(first)
    } else {
        let len = usize::from(first & 0x7F) << 8 | usize::from(r.u8()?);
        if len < 0x80 {
            return Err(DecodeError::Invalid(
                "a message length in the two-byte form must not fit the one-byte form",
            ));
        }
        len
    };
    if len > MAX_MESSAGE_BYTES {
        return Err(DecodeError::Invalid(
            "a message payload must be at most MAX_MESSAGE_BYTES (1024)",
        ));
    }
    Ok(MessageRef {
        number,
        payload: r.take(len)?,
    })
}

/// Decode and check the structure of a packet whose prefix [`peek`] accepted
/// and whose tag [`verify_tag`] accepted. Checks everything [`peek`] checks
/// too, so it is safe on any input. Past the prefix, everything wrong is
/// `Invalid` (the link's one `malformed` counter) but an ack block the
/// packet has no room for, which is `TooShort`.
// Once per packet received: inlined into the endpoint, which has just
// run `peek` on the same bytes (with the link's per-packet helpers, 1.5 %
// fewer instructions in rungs-sim, docs/rungs-sim.md "Two threads").
#[inline(always)]
pub fn decode(packet: &[u8]) -> Result<Packet<'_>, DecodeError> {
    let prefix = peek(packet)?;
    let (body, _tag) = packet.split_at(packet.len() - TAG_BYTES);
    let mut r = Reader::new(body);
    let [_magic, _version, flags, _sender] = r.array()?;
    if flags & !KNOWN_FLAGS != 0 || (flags & FLAG_FIRST_ACK != 0 && flags & FLAG_ACK == 0) {
        return Err(DecodeError::Invalid(
            "a packet's flags must be known bits, FIRST_ACK only with ACK",
        ));
    }
    let _session_id = r.u32()?;
    let packet_number = r.u32()?;
    let epoch = r.u32()?;
    let nonce = r.u32()?;
    let peer_nonce = r.u32()?;
    if epoch == 0 || nonce == 0 {
        return Err(DecodeError::Invalid(
            "a packet's epoch and nonce must not be 0",
        ));
    }
    let ack = if flags & FLAG_ACK != 0 {
        if r.left() < ACK_BLOCK_BYTES {
            return Err(DecodeError::TooShort {
                got: packet.len(),
                expected: MIN_PACKET_BYTES + ACK_BLOCK_BYTES,
            });
        }
        Some(AckBlock {
            largest: r.u32()?,
            bits: r.u16()?,
            next_message: r.u16()?,
            delay: r.u16()?,
        })
    } else {
        None
    };
    let mut framing = r.clone();
    let mut message_count = 0;
    while framing.left() > 0 {
        read_message(&mut framing).map_err(|e| match e {
            DecodeError::Invalid(_) => e,
            _ => DecodeError::Invalid("a message must end at the tag"),
        })?;
        message_count += 1;
        if message_count > MAX_MESSAGES_PER_PACKET {
            return Err(DecodeError::Invalid(
                "a packet must carry at most MAX_MESSAGES_PER_PACKET (64) messages",
            ));
        }
    }
    Ok(Packet {
        header: Header {
            flags,
            sender: prefix.sender,
            session_id: prefix.session_id,
            packet_number,
            epoch,
            nonce,
            peer_nonce,
            ack,
        },
        messages: r.rest(),
        message_count,
    })
}

/// Append to `out` message `number` (its low 16 bits) with `payload` as a
/// packet carries it: number, length (the short form whenever it fits),
/// payload. [`PacketWriter::push_encoded`] copies it into a packet; the
/// result is the same bytes [`PacketWriter::push`] writes.
pub(crate) fn encode_message(number: u16, payload: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(&number.to_le_bytes());
    let len = payload.len();
    if len < 0x80 {
        out.push(len as u8);
    } else {
        out.extend_from_slice(&[0x80 | (len >> 8) as u8, (len & 0xFF) as u8]);
    }
    out.extend_from_slice(payload);
}

/// One message as [`encode_message`] wrote it, with its payload's length.
#[derive(Debug, Clone, Copy)]
pub(crate) struct EncodedMessage<'a> {
    /// Number, length and payload.
    pub(crate) bytes: &'a [u8],
    /// Bytes of the payload alone.
    pub(crate) payload_len: usize,
}

/// Builds one packet in a caller buffer: header first, then messages while
/// they fit, then [`finish`](PacketWriter::finish) writes the tag.
#[derive(Debug)]
pub struct PacketWriter<'b> {
    buf: &'b mut [u8],
    len: usize,
    limit: usize,
    message_count: usize,
}

impl<'b> PacketWriter<'b> {
    /// Start a packet in `buf` (at most [`MAX_PACKET_BYTES`] of it are used).
    /// `None` when `buf` cannot hold the header and the tag.
    pub fn new(buf: &'b mut [u8], header: &Header) -> Option<PacketWriter<'b>> {
        let limit = buf.len().min(MAX_PACKET_BYTES);
        let header_len = FIXED_HEADER_BYTES + header.ack.map_or(0, |_| ACK_BLOCK_BYTES);
        if limit < header_len + TAG_BYTES {
            return None;
        }
        let mut flags = header.flags & FLAG_PING;
        if header.ack.is_some() {
            flags |= FLAG_ACK | (header.flags & FLAG_FIRST_ACK);
        }
        let mut w = Writer::new(buf, header_len);
        w.put(&[MAGIC, VERSION, flags, header.sender]);
        w.u32(header.session_id);
        w.u32(header.packet_number);
        w.u32(header.epoch);
        w.u32(header.nonce);
        w.u32(header.peer_nonce);
        if let Some(ack) = header.ack {
            w.u32(ack.largest);
            w.u16(ack.bits);
            w.u16(ack.next_message);
            w.u16(ack.delay);
        }
        w.finish()?;
        Some(PacketWriter {
            buf,
            len: header_len,
            limit,
            message_count: 0,
        })
    }

    /// Bytes still free for messages (the tag is already reserved).
    pub fn remaining(&self) -> usize {
        self.limit - TAG_BYTES - self.len
    }

    /// Whether a message of `payload_len` bytes would fit now.
    pub fn fits(&self, payload_len: usize) -> bool {
        payload_len <= MAX_MESSAGE_BYTES
            && self.message_count < MAX_MESSAGES_PER_PACKET
            && message_header_bytes(payload_len) + payload_len <= self.remaining()
    }

    /// Append a message [`encode_message`] encoded (its number, length
    /// and payload, as the packet carries them); `false` (and nothing
    /// written) when it does not fit. A link keeps each unacknowledged
    /// message encoded once and copies it into every packet that carries
    /// it, rather than writing its header again for every copy.
    #[inline(always)]
    pub(crate) fn push_encoded(&mut self, encoded: &EncodedMessage<'_>) -> bool {
        if !self.fits(encoded.payload_len) {
            return false;
        }
        let at = self.len;
        let bytes = encoded.bytes;
        copy_bytes(&mut self.buf[at..at + bytes.len()], bytes);
        self.len = at + bytes.len();
        self.message_count += 1;
        true
    }

    /// Append a message; `false` (and nothing written) when it does not fit.
    #[inline(always)]
    pub fn push(&mut self, number: u16, payload: &[u8]) -> bool {
        if !self.fits(payload.len()) {
            return false;
        }
        let at = self.len;
        self.buf[at..at + 2].copy_from_slice(&number.to_le_bytes());
        let len = payload.len();
        let header = if len < 0x80 {
            self.buf[at + 2] = len as u8;
            3
        } else {
            self.buf[at + 2] = 0x80 | (len >> 8) as u8;
            self.buf[at + 3] = (len & 0xFF) as u8;
            4
        };
        copy_bytes(&mut self.buf[at + header..at + header + len], payload);
        self.len = at + header + len;
        self.message_count += 1;
        true
    }

    /// Messages pushed so far.
    pub fn message_count(&self) -> usize {
        self.message_count
    }

    /// Write the tag for `addressee` and return the packet's length.
    pub fn finish(self, key: &SessionKey, addressee: u8) -> usize {
        let tag = key.tag(addressee, &self.buf[..self.len]);
        self.buf[self.len..self.len + TAG_BYTES].copy_from_slice(&tag.to_le_bytes());
        self.len + TAG_BYTES
    }
}

/// `dst.copy_from_slice(src)`, with the short copies a packet's messages
/// mostly are (8 to 32 bytes) done as two overlapping fixed-size moves in
/// line rather than a call to `memcpy` each (a packet carries several).
#[inline(always)]
pub(crate) fn copy_bytes(dst: &mut [u8], src: &[u8]) {
    let len = src.len();
    if (8..=16).contains(&len) && dst.len() == len {
        dst[..8].copy_from_slice(&src[..8]);
        dst[len - 8..].copy_from_slice(&src[len - 8..]);
    } else if (17..=32).contains(&len) && dst.len() == len {
        dst[..16].copy_from_slice(&src[..16]);
        dst[len - 16..].copy_from_slice(&src[len - 16..]);
    } else {
        dst.copy_from_slice(src);
    }
}

/// The little-endian word at `at` of bytes the tag computation has already
/// bounded (hashing, not decoding: no length is in doubt here).
#[inline(always)]
fn word(bytes: &[u8], at: usize) -> u64 {
    let mut raw = [0u8; 8];
    raw.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(raw)
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: SessionKey = SessionKey([7; 16]);

    fn header(ack: Option<AckBlock>) -> Header {
        Header {
            flags: 0,
            sender: 3,
            session_id: 0xDEAD_BEEF,
            packet_number: 0x0102_0304,
            epoch: 0x0A0B_0C0D,
            nonce: 0x1A1B_1C1D,
            peer_nonce: 0,
            ack,
        }
    }

    fn build(ack: Option<AckBlock>, messages: &[(u16, &[u8])]) -> Vec<u8> {
        let mut buf = [0u8; MAX_PACKET_BYTES];
        let mut w = PacketWriter::new(&mut buf, &header(ack)).unwrap();
        for (n, p) in messages {
            assert!(w.push(*n, p));
        }
        let len = w.finish(&KEY, 5);
        buf[..len].to_vec()
    }

    #[test]
    fn layout_is_byte_for_byte_as_documented() {
        let ack = AckBlock {
            largest: 0x1122_3344,
            bits: 0x5566,
            next_message: 0x7788,
            delay: 0x99AA,
        };
        let p = build(Some(ack), &[(0x0A0B, b"hi")]);
        assert_eq!(
            &p[..39],
            &[
                0xB7, 4, FLAG_ACK, 3, // magic, version, flags, sender
                0xEF, 0xBE, 0xAD, 0xDE, // session id
                0x04, 0x03, 0x02, 0x01, // packet number
                0x0D, 0x0C, 0x0B, 0x0A, // sender's epoch
                0x1D, 0x1C, 0x1B, 0x1A, // sender's nonce
                0, 0, 0, 0, // addressee's nonce: not heard yet
                0x44, 0x33, 0x22, 0x11, // largest acked
                0x66, 0x55, // ack bits
                0x88, 0x77, // next message expected
                0xAA, 0x99, // ack delay
                0x0B, 0x0A, 2, b'h', b'i', // message 0x0A0B, length 2
            ]
        );
        assert_eq!(p.len(), 39 + TAG_BYTES);
        assert_eq!(p.len() - 2, OVERHEAD_ONE_MESSAGE);
        assert_eq!(OVERHEAD_ONE_MESSAGE, 45);
        assert_eq!(ack.delay_us(), 0x99AA * ACK_DELAY_UNIT_US);
        assert_eq!(AckBlock::delay_field(17), 2, "rounded down");
        assert_eq!(AckBlock::delay_field(u64::MAX), u16::MAX, "saturated");
    }

    #[test]
    fn round_trip_with_and_without_ack() {
        let long = vec![0x5A; 300];
        for ack in [
            None,
            Some(AckBlock {
                largest: 9,
                bits: 0b101,
                next_message: 4,
                delay: 1234,
            }),
        ] {
            let p = build(ack, &[(1, b""), (2, b"abc"), (3, &long)]);
            assert!(verify_tag(&p, &KEY, 5));
            let d = decode(&p).unwrap();
            let mut expected = header(ack);
            expected.flags = if ack.is_some() { FLAG_ACK } else { 0 };
            assert_eq!(d.header, expected);
            let msgs: Vec<_> = d.messages().collect();
            assert_eq!(msgs.len(), 3);
            assert_eq!(msgs[1].payload, b"abc");
            assert_eq!(msgs[2].number, 3);
            assert_eq!(msgs[2].payload, &long[..]);
        }
    }

    #[test]
    fn the_tag_is_siphash_2_4_of_the_seat_byte_and_the_packet() {
        use siphasher::sip::SipHasher24;
        use std::hash::Hasher;
        let mut bytes = [0u8; 300];
        for (i, b) in bytes.iter_mut().enumerate() {
            *b = (i as u8).wrapping_mul(151).wrapping_add(7);
        }
        let key = SessionKey(*b"0123456789abcdef");
        for len in 0..bytes.len() {
            for addressee in [0u8, 5, 255] {
                let mut reference = SipHasher24::new_with_keys(
                    u64::from_le_bytes(*b"01234567"),
                    u64::from_le_bytes(*b"89abcdef"),
                );
                reference.write(&[addressee]);
                reference.write(&bytes[..len]);
                assert_eq!(
                    key.tag(addressee, &bytes[..len]),
                    reference.finish(),
                    "{len}"
                );
            }
        }
    }

    #[test]
    fn copy_bytes_copies_every_length() {
        let src: Vec<u8> = (0..80u8).map(|i| i.wrapping_mul(37) ^ 0x5A).collect();
        for len in 0..=src.len() {
            let mut dst = vec![0xEEu8; len];
            copy_bytes(&mut dst, &src[..len]);
            assert_eq!(dst, &src[..len], "{len}");
        }
    }

    #[test]
    fn tag_binds_key_addressee_and_every_byte() {
        let p = build(None, &[(1, b"order")]);
        assert!(verify_tag(&p, &KEY, 5));
        assert!(!verify_tag(&p, &KEY, 6), "redirected to another seat");
        assert!(!verify_tag(&p, &SessionKey([8; 16]), 5), "other key");
        let mut resigned = p.clone();
        resigned[12] ^= 1;
        assert!(!verify_tag(&resigned, &KEY, 5));
        write_tag(&mut resigned, &KEY, 5);
        assert!(verify_tag(&resigned, &KEY, 5));
        for i in 0..p.len() {
            let mut q = p.clone();
            q[i] ^= 0x01;
            assert!(!verify_tag(&q, &KEY, 5), "flip at byte {i} undetected");
        }
    }

    #[test]
    fn prefix_checks_in_order() {
        let p = build(None, &[]);
        assert_eq!(p.len(), MIN_PACKET_BYTES);
        assert_eq!(
            peek(&p[..MIN_PACKET_BYTES - 1]),
            Err(DecodeError::TooShort {
                got: MIN_PACKET_BYTES - 1,
                expected: MIN_PACKET_BYTES
            })
        );
        let mut too_long = [0u8; MAX_PACKET_BYTES + 1];
        too_long[..2].copy_from_slice(&[MAGIC, VERSION]);
        assert_eq!(
            peek(&too_long),
            Err(DecodeError::TooLong {
                got: MAX_PACKET_BYTES + 1,
                expected: MAX_PACKET_BYTES
            })
        );
        let mut q = p.clone();
        q[0] = 0;
        assert_eq!(
            peek(&q),
            Err(DecodeError::BadMagic {
                got: 0,
                expected: MAGIC
            })
        );
        let mut q = p.clone();
        q[1] = 1;
        assert_eq!(
            peek(&q),
            Err(DecodeError::BadVersion {
                got: 1,
                expected: VERSION
            })
        );
        assert_eq!(
            peek(&p),
            Ok(Prefix {
                sender: 3,
                session_id: 0xDEAD_BEEF
            })
        );
    }

    #[test]
    fn another_version_is_recognised_whatever_its_length() {
        let other = |len: usize| {
            let mut q = vec![0u8; len];
            q[..2].copy_from_slice(&[MAGIC, VERSION + 1]);
            peek(&q)
        };
        for len in [
            2,
            MIN_PACKET_BYTES - 1,
            MIN_PACKET_BYTES,
            MAX_PACKET_BYTES + 1,
        ] {
            assert_eq!(
                other(len),
                Err(DecodeError::BadVersion {
                    got: VERSION + 1,
                    expected: VERSION
                }),
                "{len} bytes"
            );
        }
        assert!(matches!(peek(&[MAGIC]), Err(DecodeError::TooShort { .. })));
        assert!(matches!(peek(&[]), Err(DecodeError::TooShort { .. })));
        assert!(matches!(peek(&[0, 0]), Err(DecodeError::BadMagic { .. })));
    }

    #[test]
    fn malformed_bodies_are_rejected() {
        let p = build(None, &[(1, b"abc")]);
        // Epoch 0, nonce 0.
        for at in [12, 16] {
            let mut q = p.clone();
            q[at..at + 4].copy_from_slice(&[0; 4]);
            assert!(matches!(decode(&q), Err(DecodeError::Invalid(_))));
        }
        // Unknown flag.
        let mut q = p.clone();
        q[2] |= 0x80;
        assert!(matches!(decode(&q), Err(DecodeError::Invalid(_))));
        // Length running past the tag.
        let mut q = p.clone();
        q[FIXED_HEADER_BYTES + 2] = 100;
        assert!(matches!(decode(&q), Err(DecodeError::Invalid(_))));
        // Truncated message header.
        let mut q = build(None, &[]);
        q.splice(FIXED_HEADER_BYTES..FIXED_HEADER_BYTES, [1u8]);
        assert!(matches!(decode(&q), Err(DecodeError::Invalid(_))));
        // Non-canonical long length form.
        let mut q = build(None, &[]);
        q.splice(
            FIXED_HEADER_BYTES..FIXED_HEADER_BYTES,
            [1u8, 0, 0x80, 0x01, b'x'],
        );
        assert!(matches!(decode(&q), Err(DecodeError::Invalid(_))));
        // Over-long message.
        let mut q = build(None, &[]);
        let len = MAX_MESSAGE_BYTES + 1;
        let mut m = vec![1u8, 0, 0x80 | (len >> 8) as u8, len as u8];
        m.resize(4 + len, 0);
        q.splice(FIXED_HEADER_BYTES..FIXED_HEADER_BYTES, m);
        assert!(matches!(decode(&q), Err(DecodeError::Invalid(_))));
        // ACK flag without room for the block.
        let mut q = build(None, &[]);
        q[2] = FLAG_ACK;
        assert!(matches!(decode(&q), Err(DecodeError::TooShort { .. })));
        // Too many messages.
        let mut q = build(None, &[]);
        let many: Vec<u8> = (0..=MAX_MESSAGES_PER_PACKET as u16)
            .flat_map(|n| [n as u8, (n >> 8) as u8, 0])
            .collect();
        q.splice(FIXED_HEADER_BYTES..FIXED_HEADER_BYTES, many);
        assert!(matches!(decode(&q), Err(DecodeError::Invalid(_))));
    }

    #[test]
    fn writer_respects_small_buffers_and_limits() {
        let mut tiny = [0u8; MIN_PACKET_BYTES - 1];
        assert!(PacketWriter::new(&mut tiny, &header(None)).is_none());
        let mut buf = [0u8; MIN_PACKET_BYTES + 4];
        let mut w = PacketWriter::new(&mut buf, &header(None)).unwrap();
        assert!(w.push(1, b"x"));
        assert!(!w.push(2, b"y"), "no room left");
        assert_eq!(w.finish(&KEY, 0), MIN_PACKET_BYTES + 4);
        let mut big = [0u8; 4 * MAX_PACKET_BYTES];
        let mut w = PacketWriter::new(&mut big, &header(None)).unwrap();
        assert!(!w.fits(MAX_MESSAGE_BYTES + 1));
        for n in 0..MAX_MESSAGES_PER_PACKET as u16 {
            assert!(w.push(n, b""));
        }
        assert!(!w.push(99, b""), "message count limit");
        assert!(w.finish(&KEY, 0) <= MAX_PACKET_BYTES);
    }

    #[test]
    fn ack_block_lists_acked_packets() {
        let ack = AckBlock {
            largest: 20,
            bits: 0b1000_0000_0000_0101,
            next_message: 0,
            delay: 0,
        };
        assert_eq!(ack.acked().collect::<Vec<_>>(), vec![20, 19, 17, 4]);
        let low = AckBlock {
            largest: 1,
            bits: 0xFFFF,
            next_message: 0,
            delay: 0,
        };
        assert_eq!(low.acked().collect::<Vec<_>>(), vec![1, 0]);
    }
}
