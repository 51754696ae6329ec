//! One connection of the original games' connection manager
//! (`ConnectionClass` over `CommBufferClass`), as far as timing goes:
//!
//! - A packet with events asks for an acknowledgement; it stays queued
//!   until acknowledged, and is sent again whenever more than the resend
//!   delay (`RetryDelta`, ticks) has passed since its last send — the
//!   connection is serviced continuously, so at the tick that follows.
//!   A packet without events (a FRAMEINFO alone) is sent once.
//! - The receiver acknowledges a packet at once, again if it comes again,
//!   and passes it on only the first time.
//! - An acknowledgement adds the packet's delay since its *first* send, in
//!   whole ticks, to the connection's response time ([`ResponseTime`]).
//!
//! Ticks are the machine's own 60 Hz timer (its local clock).

use std::collections::{BTreeSet, VecDeque};

use rungs_core::timing::baselines::ResponseTime;

/// A packet waiting for its acknowledgement.
#[derive(Debug, Clone)]
struct Queued {
    id: u32,
    bytes: Vec<u8>,
    first_tick: u64,
    last_tick: u64,
}

#[derive(Debug, Clone)]
pub(super) struct Connection {
    next_id: u32,
    queued: VecDeque<Queued>,
    retry_ticks: u32,
    response: ResponseTime,
    /// Every acknowledged-kind packet id up to this one has arrived.
    received_through: u32,
    /// Those that arrived beyond it.
    received_ahead: BTreeSet<u32>,
}

impl Connection {
    pub(super) fn new(retry_ticks: u32) -> Connection {
        Connection {
            next_id: 1,
            queued: VecDeque::new(),
            retry_ticks,
            response: ResponseTime::new(),
            received_through: 0,
            received_ahead: BTreeSet::new(),
        }
    }

    /// `Set_Timing`: the resend delay from now on.
    pub(super) fn set_retry_ticks(&mut self, ticks: u32) {
        self.retry_ticks = ticks;
    }

    pub(super) fn response(&self) -> &ResponseTime {
        &self.response
    }

    /// Packets queued (not yet acknowledged): `Num_Send`.
    pub(super) fn queued(&self) -> usize {
        self.queued.len()
    }

    /// Queue a packet that asks for an acknowledgement, sent now (tick
    /// `now_tick`): the id to put in it. The caller sends `bytes` now.
    pub(super) fn next_id(&mut self) -> u32 {
        let id = self.next_id;
        self.next_id = self.next_id.wrapping_add(1);
        id
    }

    /// Keep `bytes`, packet `id`, until it is acknowledged.
    pub(super) fn keep(&mut self, id: u32, bytes: Vec<u8>, now_tick: u64) {
        self.queued.push_back(Queued {
            id,
            bytes,
            first_tick: now_tick,
            last_tick: now_tick,
        });
    }

    /// Packet `id` was acknowledged at `now_tick`.
    pub(super) fn acknowledged(&mut self, id: u32, now_tick: u64) {
        if let Some(at) = self.queued.iter().position(|q| q.id == id) {
            let q = self.queued.remove(at).expect("found above");
            let delay = now_tick.saturating_sub(q.first_tick);
            self.response
                .add_delay(delay.min(u64::from(u32::MAX)) as u32);
        }
    }

    /// The packets due to be sent again at `now_tick`, each marked sent.
    pub(super) fn resends(&mut self, now_tick: u64, mut send: impl FnMut(&[u8])) {
        let retry = u64::from(self.retry_ticks);
        for q in &mut self.queued {
            if now_tick.saturating_sub(q.last_tick) > retry {
                q.last_tick = now_tick;
                send(&q.bytes);
            }
        }
    }

    /// The tick at which the next resend is due, if any packet is queued.
    pub(super) fn next_resend_tick(&self) -> Option<u64> {
        let retry = u64::from(self.retry_ticks);
        self.queued.iter().map(|q| q.last_tick + retry + 1).min()
    }

    /// An acknowledged-kind packet `id` arrived: whether it is new (to be
    /// passed on). It is acknowledged either way.
    pub(super) fn arrived(&mut self, id: u32) -> bool {
        if id <= self.received_through || !self.received_ahead.insert(id) {
            return false;
        }
        while self.received_ahead.remove(&(self.received_through + 1)) {
            self.received_through += 1;
        }
        true
    }

    /// Bytes held for resends.
    pub(super) fn held_bytes(&self) -> usize {
        self.queued.iter().map(|q| q.bytes.len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_packet_is_resent_after_the_retry_delay_and_timed_from_its_first_send() {
        let mut c = Connection::new(10);
        let id = c.next_id();
        c.keep(id, vec![1, 2, 3], 100);
        assert_eq!(c.next_resend_tick(), Some(111));
        let mut sent = 0;
        c.resends(110, |_| sent += 1);
        assert_eq!(sent, 0, "not more than 10 ticks yet");
        c.resends(111, |b| {
            assert_eq!(b, &[1, 2, 3]);
            sent += 1
        });
        assert_eq!((sent, c.next_resend_tick()), (1, Some(122)));
        c.set_retry_ticks(20);
        assert_eq!(c.next_resend_tick(), Some(132));
        // The acknowledgement of the resend is timed from the first send.
        c.acknowledged(id, 125);
        assert_eq!((c.response().mean_ticks(), c.queued()), (25, 0));
        c.acknowledged(id, 130);
        assert_eq!(c.response().samples(), 1, "a second ack counts nothing");
    }

    #[test]
    fn a_packet_is_passed_on_once_however_often_it_comes() {
        let mut c = Connection::new(10);
        assert!(c.arrived(2));
        assert!(!c.arrived(2));
        assert!(c.arrived(1));
        assert!(!c.arrived(1));
        assert!(c.arrived(3));
        assert_eq!(c.received_through, 3);
        assert!(c.received_ahead.is_empty());
    }
}
