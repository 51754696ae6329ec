//! What the relay has to do next, so its work follows its traffic and its
//! timers rather than the number of matches it holds (S10, docs/relay.md
//! "How it scales").
//!
//! * **Matches to drain**: a match whose state changed (a message from a
//!   client, a timer that ran, a connection opened) may have something for
//!   any of its connections; it is queued once, and every connection of it
//!   is pumped and polled when the relay transmits.
//! * **Connections to drain**: a packet that only acknowledged (no message
//!   for the match: most of what clients send) changes one link and nothing
//!   else; only that connection is polled.
//! * **Timers**: each match's earliest timer, in a binary heap. Looking up
//!   the next one is a peek; running the due ones visits only them. A
//!   match's entry is renewed when it is drained; entries a renewal left
//!   behind are skipped when they come up (each match holds one valid one).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

/// Per match (slot index): its place in the queues and its timer.
#[derive(Debug, Clone, Copy, Default)]
struct SlotState {
    /// Its state changed since it was last drained.
    dirty: bool,
    /// Entries in the drain queue (2 when it changed again while being
    /// drained, past the connections already drained).
    queued: u8,
    /// The timer its heap entry is for; `None`: none scheduled.
    deadline: Option<u64>,
}

/// The relay's work list. See the module docs.
#[derive(Debug, Default)]
pub(super) struct Schedule {
    slots: Vec<SlotState>,
    /// Matches to drain, in order.
    dirty: VecDeque<usize>,
    /// Next connection (seat) to drain of `dirty.front()`.
    pub seat_cursor: usize,
    /// Single connections to drain: (slot, seat).
    links: VecDeque<(usize, u8)>,
    timers: BinaryHeap<Reverse<(u64, usize)>>,
}

impl Schedule {
    fn state(&mut self, at: usize) -> &mut SlotState {
        if at >= self.slots.len() {
            self.slots.resize(at + 1, SlotState::default());
        }
        &mut self.slots[at]
    }

    /// Match `at` changed: drain all its connections.
    pub fn mark(&mut self, at: usize) {
        let draining = self.dirty.front() == Some(&at) && self.seat_cursor > 0;
        let s = self.state(at);
        if s.queued == 0 || (s.queued == 1 && draining) {
            s.dirty = true;
            s.queued += 1;
            self.dirty.push_back(at);
        }
    }

    /// Only connection `seat` of match `at` changed (its link).
    pub fn mark_link(&mut self, at: usize, seat: u8) {
        if !self.is_dirty(at) {
            self.links.push_back((at, seat));
        }
    }

    /// Whether match `at` waits to be drained whole.
    pub fn is_dirty(&self, at: usize) -> bool {
        self.slots.get(at).is_some_and(|s| s.dirty)
    }

    /// The match being drained, if any.
    pub fn front(&self) -> Option<usize> {
        self.dirty.front().copied()
    }

    /// Done with the front match; whether it is clean now (its timer is
    /// then to be renewed with [`set_deadline`](Self::set_deadline)).
    pub fn pop_front(&mut self) -> bool {
        self.seat_cursor = 0;
        let Some(at) = self.dirty.pop_front() else {
            return false;
        };
        let s = self.state(at);
        s.queued = s.queued.saturating_sub(1);
        if s.queued == 0 && s.dirty {
            s.dirty = false;
            return true;
        }
        false
    }

    /// The next single connection to drain.
    pub fn front_link(&self) -> Option<(usize, u8)> {
        self.links.front().copied()
    }

    /// Done with the front single connection.
    pub fn pop_link(&mut self) {
        self.links.pop_front();
    }

    /// Match `at`'s earliest timer is `deadline` now.
    pub fn set_deadline(&mut self, at: usize, deadline: Option<u64>) {
        let s = self.state(at);
        if s.deadline == deadline {
            return;
        }
        s.deadline = deadline;
        if let Some(t) = deadline {
            self.timers.push(Reverse((t, at)));
        }
    }

    /// Match `at` has a timer at `t` (one of its connections' links): make
    /// sure it is run then, whatever else is scheduled.
    pub fn lower_deadline(&mut self, at: usize, t: u64) {
        if self.state(at).deadline.map_or(true, |d| t < d) {
            self.set_deadline(at, Some(t));
        }
    }

    /// Match `at` is gone.
    pub fn forget(&mut self, at: usize) {
        let s = self.state(at);
        s.deadline = None;
    }

    /// The earliest scheduled timer (possibly one a renewal left behind:
    /// then the relay wakes once for nothing), and the dirty matches'
    /// timers, which `dirty_deadline` computes.
    pub fn earliest(&self, dirty_deadline: impl Fn(usize) -> Option<u64>) -> Option<u64> {
        let scheduled = self.timers.peek().map(|Reverse((t, _))| *t);
        let dirty = self.dirty.iter().filter_map(|&at| dirty_deadline(at)).min();
        match (scheduled, dirty) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Put the matches whose scheduled timer is due at `now_us` into `due`
    /// (each once), and the dirty ones `dirty_due` says are due.
    pub fn take_due(
        &mut self,
        now_us: u64,
        dirty_due: impl Fn(usize) -> bool,
        due: &mut Vec<usize>,
    ) {
        due.clear();
        while let Some(&Reverse((t, at))) = self.timers.peek() {
            if t > now_us {
                break;
            }
            self.timers.pop();
            let s = self.state(at);
            if s.deadline == Some(t) {
                // Consumed: the match schedules its next one when drained.
                s.deadline = None;
                due.push(at);
            }
        }
        due.extend(self.dirty.iter().copied().filter(|&at| dirty_due(at)));
        due.sort_unstable();
        due.dedup();
    }

    /// Timer entries held (valid and left behind), for tests.
    #[cfg(test)]
    fn entries(&self) -> usize {
        self.timers.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn due_timers_come_out_once_and_stale_entries_are_skipped() {
        let mut s = Schedule::default();
        s.set_deadline(0, Some(100));
        s.set_deadline(1, Some(50));
        s.set_deadline(0, Some(80)); // renewed: the 100 entry is left behind
        s.set_deadline(2, Some(300));
        assert_eq!(s.earliest(|_| None), Some(50));
        let mut due = Vec::new();
        s.take_due(99, |_| false, &mut due);
        assert_eq!(due, [0, 1]);
        s.take_due(99, |_| false, &mut due);
        assert!(due.is_empty(), "consumed");
        s.take_due(150, |_| false, &mut due);
        assert!(due.is_empty(), "the left-behind 100 is skipped");
        assert_eq!(s.entries(), 1);
        s.lower_deadline(2, 400);
        s.lower_deadline(2, 200);
        s.take_due(250, |_| false, &mut due);
        assert_eq!(due, [2]);
    }

    #[test]
    fn dirty_matches_drain_once_or_twice_and_links_only_when_clean() {
        let mut s = Schedule::default();
        s.mark(3);
        s.mark(3);
        s.mark_link(3, 1);
        s.mark_link(4, 2);
        assert_eq!(s.front(), Some(3));
        assert_eq!(s.front_link(), Some((4, 2)), "match 3 drains whole");
        // Changed again while being drained past its first connection.
        s.seat_cursor = 2;
        s.mark(3);
        assert!(!s.pop_front(), "queued again");
        assert_eq!(s.front(), Some(3));
        assert!(s.pop_front());
        assert_eq!(s.front(), None);
        assert!(!s.is_dirty(3));
        assert_eq!(
            s.earliest(|at| Some(at as u64)),
            None,
            "nothing dirty, nothing scheduled"
        );
        s.mark(5);
        assert_eq!(s.earliest(|at| Some(at as u64 * 10)), Some(50));
        let mut due = Vec::new();
        s.take_due(60, |at| at == 5, &mut due);
        assert_eq!(due, [5]);
    }
}
