//! A link's messages delivered in order and not yet taken, back to back in
//! one buffer.
//!
//! A session takes every ready message right after the packet that made it
//! ready, so the buffer is written and read while it is still in the cache
//! and is usually empty again at once. A buffer per message (taken from a
//! pool and handed back when the message was taken) meant touching a
//! different, long-unused buffer for each one.

use std::collections::VecDeque;

use crate::wire::packet::{MAX_MESSAGES_PER_PACKET, MAX_MESSAGE_BYTES};

/// Ready messages, oldest first.
#[derive(Debug, Default)]
pub(super) struct ReadyMessages {
    bytes: Vec<u8>,
    /// Where the oldest message starts in `bytes`.
    start: usize,
    /// Each message's length, oldest first.
    lens: VecDeque<u32>,
}

impl ReadyMessages {
    /// Queue `message` after the others.
    #[inline(always)]
    pub(super) fn push(&mut self, message: &[u8]) {
        // When it must grow, room for twice what is queued and a largest
        // message, at once: a game past its start allocates nothing here.
        if self.bytes.capacity() < self.bytes.len() + message.len() {
            let queued = self.bytes.len() - self.start;
            let room = 2 * (queued + message.len() + MAX_MESSAGE_BYTES);
            self.bytes.reserve(room.saturating_sub(self.bytes.len()));
        }
        self.bytes.extend_from_slice(message);
        if self.lens.len() == self.lens.capacity() {
            // A packet can make a few dozen messages ready at once.
            self.lens
                .reserve(self.lens.len().max(MAX_MESSAGES_PER_PACKET));
        }
        self.lens.push_back(message.len() as u32);
    }

    /// Messages queued.
    pub(super) fn len(&self) -> usize {
        self.lens.len()
    }

    /// The oldest message.
    #[inline(always)]
    pub(super) fn front(&self) -> Option<&[u8]> {
        let len = *self.lens.front()? as usize;
        self.bytes.get(self.start..self.start + len)
    }

    /// Forget the oldest message. The buffer empties whenever nothing is
    /// queued (the usual case), and is compacted once more than half of it
    /// is taken, so it holds at most twice what is queued.
    #[inline(always)]
    pub(super) fn pop_front(&mut self) {
        let Some(len) = self.lens.pop_front() else {
            return;
        };
        self.start += len as usize;
        if self.lens.is_empty() {
            self.bytes.clear();
            self.start = 0;
        } else if self.start > self.bytes.len() / 2 {
            self.bytes.drain(..self.start);
            self.start = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_come_out_whole_in_order_through_compactions() {
        let mut ready = ReadyMessages::default();
        let message = |n: usize| vec![n as u8; n % 5 * 30];
        let (mut pushed, mut taken) = (0, 0);
        for round in 0..50 {
            for _ in 0..round % 4 + 1 {
                ready.push(&message(pushed));
                pushed += 1;
            }
            for _ in 0..round % 3 + 1 {
                let Some(front) = ready.front() else { break };
                assert_eq!(front, &message(taken)[..], "message {taken}");
                ready.pop_front();
                taken += 1;
            }
            assert_eq!(ready.len(), pushed - taken);
            let queued: usize = ready.lens.iter().map(|l| *l as usize).sum();
            assert_eq!(ready.bytes.len() - ready.start, queued);
            assert!(ready.bytes.len() <= 2 * queued, "compacted at half");
        }
        while ready.front().is_some() {
            ready.pop_front();
        }
        assert!(ready.bytes.is_empty(), "emptied when nothing is queued");
    }
}
