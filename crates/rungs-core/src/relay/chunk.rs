//! Bundle chunks (S10, `docs/relay.md` "Chunking"): a connection's stream
//! of the turn log from its position to the horizon, cut into link
//! messages.
//!
//! * Whole ticks go into a chunk while they fit; the chunk covers `[from, t)`
//!   where `t` is the first tick that did not fit, and the next chunk starts
//!   at `t`.
//! * A single tick too large for one message (16 seats × 512 bytes) is split
//!   into chunks that all cover `[t, t + 1)`, every one but the last flagged
//!   `MORE`; the client applies the range only when the final chunk came.

use super::log_entry::LogEntry;
use crate::wire::relay::{BundleEntry, BundleWriter, BUNDLE_HEADER_BYTES, ENTRY_HEADER_BYTES};

/// Position of a connection's bundle stream: the next tick to send, and how
/// many entries of that tick already went out in `MORE` chunks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stream {
    pub(crate) tick: u32,
    pub(crate) skip: usize,
}

impl Stream {
    /// A stream from `tick`.
    pub(crate) fn at(tick: u32) -> Stream {
        Stream { tick, skip: 0 }
    }
}

/// Pack the next chunk of `log` for a stream at `from` into `buf`: its length
/// and the stream's next position. See `docs/relay.md` for the rules.
pub(crate) fn write_chunk(
    log: &[LogEntry],
    from: Stream,
    horizon: u32,
    buf: &mut [u8],
) -> Option<(usize, Stream)> {
    let limit = buf.len().min(crate::wire::relay::MAX_MESSAGE_BYTES);
    let start = log.partition_point(|e| e.tick < from.tick) + from.skip;
    let entries = &log[start.min(log.len())..];
    let mut w = BundleWriter::new(buf)?;
    let mut used = BUNDLE_HEADER_BYTES;
    let push = |w: &mut BundleWriter<'_>, e: &LogEntry| {
        w.push(&BundleEntry {
            tick: e.tick,
            seat: e.seat,
            kind: e.kind,
            payload: &e.payload,
        })
    };
    if from.skip > 0 {
        // Inside a tick too large for one message: continue it.
        for (pushed, e) in entries
            .iter()
            .take_while(|e| e.tick == from.tick)
            .enumerate()
        {
            if used + ENTRY_HEADER_BYTES + e.payload.len() > limit || !push(&mut w, e) {
                let len = w.finish(from.tick, from.tick + 1, true)?;
                let next = Stream {
                    tick: from.tick,
                    skip: from.skip + pushed,
                };
                return Some((len, next));
            }
            used += ENTRY_HEADER_BYTES + e.payload.len();
        }
        let len = w.finish(from.tick, from.tick + 1, false)?;
        return Some((
            len,
            Stream {
                tick: from.tick + 1,
                skip: 0,
            },
        ));
    }
    let mut i = 0;
    while i < entries.len() && entries[i].tick < horizon {
        let tick = entries[i].tick;
        let group = entries[i..].iter().take_while(|e| e.tick == tick).count();
        let bytes: usize = entries[i..i + group]
            .iter()
            .map(|e| ENTRY_HEADER_BYTES + e.payload.len())
            .sum();
        if used + bytes <= limit {
            for e in &entries[i..i + group] {
                push(&mut w, e);
            }
            used += bytes;
            i += group;
            continue;
        }
        if w.entry_count() > 0 || tick > from.tick {
            // Close the chunk before this tick.
            let len = w.finish(from.tick, tick, false)?;
            return Some((len, Stream { tick, skip: 0 }));
        }
        // The first tick alone does not fit: split it with MORE.
        let mut pushed = 0;
        for e in &entries[i..i + group] {
            if used + ENTRY_HEADER_BYTES + e.payload.len() > limit || !push(&mut w, e) {
                break;
            }
            used += ENTRY_HEADER_BYTES + e.payload.len();
            pushed += 1;
        }
        let len = w.finish(tick, tick + 1, true)?;
        return Some((len, Stream { tick, skip: pushed }));
    }
    let len = w.finish(from.tick, horizon, false)?;
    Some((
        len,
        Stream {
            tick: horizon,
            skip: 0,
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::relay::{read_server_message, EntryKind, ServerMessage, MAX_ORDER_BYTES};

    #[test]
    fn a_tick_larger_than_one_message_is_chunked_with_more() {
        let log: Vec<LogEntry> = (0..6u8)
            .map(|seat| LogEntry {
                tick: 5,
                seat,
                kind: EntryKind::Order,
                sequence: 1,
                payload: vec![seat; MAX_ORDER_BYTES].into(),
            })
            .chain(std::iter::once(LogEntry {
                tick: 7,
                seat: 0,
                kind: EntryKind::Order,
                sequence: 2,
                payload: vec![9; 10].into(),
            }))
            .collect();
        let mut stream = Stream { tick: 2, skip: 0 };
        let mut buf = [0u8; 1024];
        let mut seen = Vec::new();
        let mut chunks = Vec::new();
        while stream.tick < 9 {
            let (len, next) = write_chunk(&log, stream, 9, &mut buf).unwrap();
            let ServerMessage::TurnBundle(b) = read_server_message(&buf[..len]).unwrap() else {
                panic!()
            };
            chunks.push((b.from_tick, b.horizon_tick, b.more, b.entry_count()));
            seen.extend(b.entries().map(|e| (e.tick, e.seat)));
            stream = next;
        }
        assert_eq!(
            chunks,
            vec![
                (2, 5, false, 0),
                (5, 6, true, 1),
                (5, 6, true, 1),
                (5, 6, true, 1),
                (5, 6, true, 1),
                (5, 6, true, 1),
                (5, 6, false, 1),
                (6, 9, false, 1)
            ]
        );
        assert_eq!(seen.len(), 7);
    }
}
