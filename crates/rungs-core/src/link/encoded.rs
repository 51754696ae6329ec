//! A link's unacknowledged messages, each encoded once as a packet carries
//! it (S8 layout: number, length, payload), back to back in one buffer.
//!
//! Every packet re-sends the newest unacknowledged messages (at a round
//! trip of 150 ms and 30 turns a second, about five ride in each packet),
//! so a message is copied into many packets. Encoded once, each copy is one
//! move of bytes that sit together in memory, where a buffer per message
//! meant writing its header again and reaching for another allocation for
//! every copy.

use crate::wire::packet::{encode_message, EncodedMessage, MAX_MESSAGE_BYTES};

/// Encoded messages, oldest first. Positions are offsets in the stream of
/// every byte ever encoded: they only grow, so a message's position stays
/// valid when acknowledged messages are forgotten and the buffer compacted.
#[derive(Debug, Default)]
pub(super) struct EncodedMessages {
    bytes: Vec<u8>,
    /// Stream offset of `bytes[0]`.
    base: u64,
    /// Stream offset of the oldest byte still needed.
    start: u64,
}

/// Where [`EncodedMessages::push`] put a message.
#[derive(Debug, Clone, Copy)]
pub(super) struct Placed {
    /// Stream offset of its first byte.
    pub(super) at: u64,
    /// Bytes of its encoding.
    pub(super) encoded_len: u32,
    /// Bytes of its payload.
    pub(super) payload_len: u32,
}

impl EncodedMessages {
    /// Encode message `number` (low 16 bits) with `payload` after the others.
    pub(super) fn push(&mut self, number: u16, payload: &[u8]) -> Placed {
        // Between compactions the buffer grows to twice what is in flight:
        // when it must grow, it makes room for that and a largest message
        // at once, so a game past its first round trips allocates nothing.
        let encoded_len = payload.len() + 4;
        if self.bytes.capacity() < self.bytes.len() + encoded_len {
            let in_flight = (self.base + self.bytes.len() as u64 - self.start) as usize;
            let room = 2 * (in_flight + encoded_len + MAX_MESSAGE_BYTES);
            self.bytes.reserve(room.saturating_sub(self.bytes.len()));
        }
        let at = self.base + self.bytes.len() as u64;
        encode_message(number, payload, &mut self.bytes);
        Placed {
            at,
            encoded_len: (self.base + self.bytes.len() as u64 - at) as u32,
            payload_len: payload.len() as u32,
        }
    }

    /// The message `push` placed as `placed` (not yet forgotten).
    #[inline(always)]
    pub(super) fn get(&self, placed: &Placed) -> EncodedMessage<'_> {
        let from = (placed.at - self.base) as usize;
        EncodedMessage {
            bytes: &self.bytes[from..from + placed.encoded_len as usize],
            payload_len: placed.payload_len as usize,
        }
    }

    /// Forget every message placed before stream offset `at` (those
    /// acknowledged, oldest first), or all of them with `None`. The buffer
    /// is compacted once more than half of it is forgotten: each byte moves
    /// at most once on average, and it stops growing once it holds twice
    /// what is in flight.
    pub(super) fn forget_before(&mut self, at: Option<u64>) {
        let end = self.base + self.bytes.len() as u64;
        self.start = at.unwrap_or(end).clamp(self.start, end);
        let forgotten = (self.start - self.base) as usize;
        if self.start == end {
            self.bytes.clear();
            self.base = end;
        } else if forgotten > self.bytes.len() / 2 {
            self.bytes.drain(..forgotten);
            self.base = self.start;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::packet::{Header, PacketWriter};

    #[test]
    fn copies_are_the_bytes_push_writes_through_compactions() {
        let mut messages = EncodedMessages::default();
        let mut placed = std::collections::VecDeque::new();
        let payload = |n: u16| vec![n as u8; usize::from(n % 7) * 40];
        for n in 0..200u16 {
            placed.push_back((n, messages.push(n, &payload(n))));
            if n % 3 == 2 {
                placed.pop_front();
                messages.forget_before(placed.front().map(|(_, p)| p.at));
            }
            for (number, at) in &placed {
                let header = Header {
                    flags: 0,
                    sender: 1,
                    session_id: 2,
                    packet_number: 3,
                    epoch: 4,
                    nonce: 5,
                    peer_nonce: 0,
                    ack: None,
                };
                let (mut by_push, mut by_copy) = ([0u8; 512], [0u8; 512]);
                let mut w = PacketWriter::new(&mut by_push, &header).unwrap();
                assert!(w.push(*number, &payload(*number)));
                let mut c = PacketWriter::new(&mut by_copy, &header).unwrap();
                assert!(c.push_encoded(&messages.get(at)));
                assert_eq!(w.message_count(), c.message_count());
                assert_eq!(by_push, by_copy, "message {number}");
            }
        }
        let live: usize = placed.iter().map(|(_, p)| p.encoded_len as usize).sum();
        assert!(messages.bytes.len() <= 2 * live, "compacted at half");
        messages.forget_before(None);
        assert!(messages.bytes.is_empty());
    }
}
