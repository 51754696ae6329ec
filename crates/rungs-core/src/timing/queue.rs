//! Commands waiting for their frame (S5).
//!
//! A command tagged for frame `t` executes on the first send frame at or
//! after `t`, on every machine alike; within one frame commands execute in
//! (tag, seat, issue order). The queue keeps that order by construction, so
//! due commands are always a prefix.

use std::collections::VecDeque;

/// One queued command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Queued<T> {
    /// The frame the command was tagged for.
    pub tag: u32,
    /// The seat that issued it.
    pub seat: u8,
    /// The caller's handle for the command.
    pub item: T,
    /// Arrival order; for one seat, arrival order is issue order.
    order: u64,
}

/// Commands ordered by (tag, seat, issue order).
#[derive(Debug, Clone)]
pub(crate) struct CommandQueue<T> {
    items: VecDeque<Queued<T>>,
    next_order: u64,
}

impl<T: Copy> CommandQueue<T> {
    /// An empty queue with room for `capacity` commands before it allocates.
    pub(crate) fn with_capacity(capacity: usize) -> Self {
        CommandQueue {
            items: VecDeque::with_capacity(capacity),
            next_order: 0,
        }
    }

    /// Queue `item` from `seat`, tagged for `tag`. Commands from one seat must
    /// be pushed in the order that seat issued them.
    pub(crate) fn push(&mut self, tag: u32, seat: u8, item: T) {
        let order = self.next_order;
        self.next_order += 1;
        let key = (tag, seat, order);
        let index = self
            .items
            .partition_point(|q| (q.tag, q.seat, q.order) < key);
        self.items.insert(
            index,
            Queued {
                tag,
                seat,
                item,
                order,
            },
        );
    }

    /// The next command due on `frame` (a send frame), removing it.
    pub(crate) fn pop_due(&mut self, frame: u32) -> Option<Queued<T>> {
        if self.items.front()?.tag <= frame {
            self.items.pop_front()
        } else {
            None
        }
    }

    /// The earliest tag waiting, if any.
    #[cfg(test)]
    pub(crate) fn earliest_tag(&self) -> Option<u32> {
        self.items.front().map(|q| q.tag)
    }

    /// Number of commands waiting.
    pub(crate) fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether no command is waiting.
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn due_commands_come_out_in_tag_seat_issue_order() {
        let mut queue = CommandQueue::with_capacity(8);
        queue.push(12, 1, "b1");
        queue.push(10, 2, "c1");
        queue.push(12, 0, "a1");
        queue.push(12, 1, "b2");
        queue.push(14, 0, "a2");
        let mut out = Vec::new();
        while let Some(q) = queue.pop_due(13) {
            out.push(q.item);
        }
        assert_eq!(out, vec!["c1", "a1", "b1", "b2"]);
        assert_eq!(queue.earliest_tag(), Some(14));
        assert!(queue.pop_due(13).is_none());
        assert_eq!(queue.pop_due(14).map(|q| q.item), Some("a2"));
        assert!(queue.is_empty());
    }
}
