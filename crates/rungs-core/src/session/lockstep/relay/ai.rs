//! AI orders behind a relay (S10): every client computes the AI seats
//! itself, and an AI decision made at tick `t` yields an order for tick
//! `t + ai_order_delay` on every machine — whatever the number of worker
//! threads or how long the computation took.
//!
//! The engine says which tick a decision was made on. An engine that
//! computes its AI in the background (the point of a delay of 8) *begins*
//! the decision on its tick, from its game loop, and *ends* it when the
//! computation is in: the due tick does not run on any machine until every
//! decision due by then has ended, so the same decision lands on the same
//! tick everywhere. An order for a decision that was never begun and whose
//! due tick already ran is refused as late.

use std::collections::{BTreeMap, BTreeSet};

use super::super::ExecutedCommand;
use crate::error::{Error, Result};

/// Most AI orders a session holds for later ticks.
pub(crate) const MAX_PENDING_AI_ORDERS: usize = 4096;
/// Most AI decisions begun and not yet ended.
pub(crate) const MAX_OPEN_AI_DECISIONS: usize = 256;

/// The AI orders waiting for their tick, and the decisions still computing.
#[derive(Debug, Default)]
pub(super) struct AiOrders {
    /// By due tick: (seat, order), in submission order.
    due: BTreeMap<u32, Vec<(u8, Vec<u8>)>>,
    /// Decisions begun and not ended: (due tick, seat, decision tick).
    open: BTreeSet<(u32, u8, u32)>,
    count: usize,
}

impl AiOrders {
    /// A decision of `seat` at tick `decided`, due on `due`, has begun.
    pub(super) fn begin(&mut self, seat: u8, decided: u32, due: u32) -> Result<()> {
        if self.open.len() >= MAX_OPEN_AI_DECISIONS {
            return Err(Error::Full("AI decisions begun and not ended"));
        }
        if !self.open.insert((due, seat, decided)) {
            return Err(Error::State("this AI decision has begun already"));
        }
        Ok(())
    }

    /// The decision of `seat` at `decided` has ended (its orders are in).
    pub(super) fn end(&mut self, seat: u8, decided: u32, due: u32) -> Result<()> {
        if !self.open.remove(&(due, seat, decided)) {
            return Err(Error::State(
                "no such AI decision begun (begin it on its tick first)",
            ));
        }
        Ok(())
    }

    /// Queue `order` of `seat` for tick `due`.
    pub(super) fn add(&mut self, seat: u8, due: u32, order: &[u8]) -> Result<()> {
        if self.count >= MAX_PENDING_AI_ORDERS {
            return Err(Error::Full("AI orders waiting for their tick"));
        }
        self.due
            .entry(due)
            .or_default()
            .push((seat, order.to_vec()));
        self.count += 1;
        Ok(())
    }

    /// The AI seats whose decisions due at or before `tick` are still
    /// computing (bit per seat): the tick waits for them.
    pub(super) fn computing_by(&self, tick: u32) -> u32 {
        self.open
            .iter()
            .take_while(|(due, _, _)| *due <= tick)
            .fold(0, |mask, (_, seat, _)| mask | 1 << seat)
    }

    /// Hand the orders due at or before `tick` to `out` (tag `tick`).
    pub(super) fn take_due(&mut self, tick: u32, out: &mut Vec<ExecutedCommand>) {
        while let Some(entry) = self.due.first_entry() {
            if *entry.key() > tick {
                break;
            }
            for (seat, bytes) in entry.remove() {
                self.count -= 1;
                out.push(ExecutedCommand {
                    seat,
                    tag: tick,
                    bytes,
                });
            }
        }
    }

    /// Forget everything (the engine reloads and recomputes its AI).
    pub(super) fn clear(&mut self) {
        *self = AiOrders::default();
    }

    /// Bytes held.
    pub(super) fn held_bytes(&self) -> usize {
        self.due
            .values()
            .flatten()
            .map(|(_, order)| order.len() + 1)
            .sum::<usize>()
            + self.open.len() * 12
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_due_tick_waits_for_the_decisions_due_by_it() {
        let mut ai = AiOrders::default();
        ai.begin(3, 10, 18).unwrap();
        ai.begin(2, 11, 19).unwrap();
        assert!(ai.begin(3, 10, 18).is_err(), "begun twice");
        assert_eq!(ai.computing_by(17), 0);
        assert_eq!(ai.computing_by(18), 1 << 3);
        assert_eq!(ai.computing_by(19), 1 << 3 | 1 << 2);
        ai.add(3, 18, b"a").unwrap();
        ai.end(3, 10, 18).unwrap();
        assert!(ai.end(3, 10, 18).is_err(), "ended twice");
        assert_eq!(ai.computing_by(18), 0);
        let mut out = Vec::new();
        ai.take_due(18, &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(
            (out[0].seat, out[0].tag, &out[0].bytes[..]),
            (3, 18, &b"a"[..])
        );
    }
}
