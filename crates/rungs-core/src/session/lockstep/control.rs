//! Control messages (drop votes and decisions, relay requests, relays,
//! pongs) that wait for room on a full link: sent in order per seat, a full
//! link holding back only its own (a vanished peer's full link must not
//! hold the votes that drop it), bounded (S8).

use std::collections::VecDeque;

use crate::error::Error;
use crate::link::Endpoint;

/// Control messages waiting for room on a full link, at most.
const MAX_PENDING_CONTROL: usize = 4096;

/// The control messages waiting for room, oldest first.
#[derive(Debug, Default)]
pub(super) struct ControlQueue {
    pending: VecDeque<(u8, Vec<u8>)>,
}

impl ControlQueue {
    /// Send `message` to `seat` on `endpoint` now, or once its link has room.
    pub(super) fn send(&mut self, endpoint: &mut Endpoint, seat: u8, message: &[u8]) {
        // Behind a message already waiting for the same seat, to keep order.
        let waiting = self.pending.iter().any(|(s, _)| *s == seat);
        if !waiting && endpoint.send(seat, message).is_ok() {
            return;
        }
        if self.pending.len() < MAX_PENDING_CONTROL {
            self.pending.push_back((seat, message.to_vec()));
        }
    }

    /// Send what waits for room, per seat in order; what waits for a seat
    /// outside `reachable` (a bit per seat) is gone with it.
    pub(super) fn flush(&mut self, endpoint: &mut Endpoint, reachable: u32) {
        let mut blocked = 0u32;
        let mut index = 0;
        while index < self.pending.len() {
            let (seat, message) = &self.pending[index];
            let seat = *seat;
            if blocked & (1 << seat) != 0 {
                index += 1;
                continue;
            }
            let gone = reachable & 1 << seat == 0;
            match if gone {
                Ok(0)
            } else {
                endpoint.send(seat, message)
            } {
                Err(Error::Full(_)) => {
                    blocked |= 1 << seat;
                    index += 1;
                }
                // Sent, or for a seat that is gone: done with it.
                Ok(_) | Err(_) => {
                    self.pending.remove(index);
                }
            }
        }
    }

    /// Whether nothing waits.
    pub(super) fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    /// Bytes held, for the session's bound (S8).
    pub(super) fn bytes(&self) -> usize {
        self.pending.iter().map(|(_, m)| m.len() + 8).sum()
    }
}
