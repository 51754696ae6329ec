//! Turns (S5): the schedule of send frames every machine shares, the
//! outbox of what this machine sends next, the store of items waiting for
//! their frame, and per peer the assembly of incoming turns — each bounded
//! (S8) so that no peer and no engine burst can grow them without limit.

use std::collections::VecDeque;

use crate::timing::ladder::{MAX_LOOK_AHEAD, MAX_SEND_PERIOD};
use crate::wire::turn::{Item, PartPlan, Record, TurnPart, MAX_TURN_PARTS};

/// Send frames remembered: the schedule that validates peers' turns and
/// finds the drop cut's tags. A peer is never more than a look-ahead and a
/// send period away from us (it cannot run a frame our turns may still
/// fill), so this covers every turn that can arrive.
pub const KEPT_SEND_FRAMES: usize = 2 * (MAX_LOOK_AHEAD as usize + MAX_SEND_PERIOD as usize);
/// How far past our latest send frame a peer's turn may be: a peer runs
/// frame `F` only with our turns tagged up to `F`, so its send frames stay
/// below our latest tag plus a send period.
pub const MAX_FRAMES_AHEAD: u32 = MAX_LOOK_AHEAD as u32 + 2 * MAX_SEND_PERIOD as u32;
/// Complete turns held per peer ahead of our schedule, and their bytes.
pub const MAX_TURNS_AHEAD: usize = MAX_FRAMES_AHEAD as usize;
pub const MAX_BYTES_AHEAD: usize = 1 << 20;
/// Raw turn bytes kept per peer for relaying after a drop (most recent).
pub const KEPT_RELAY_BYTES: usize = 512 * 1024;

/// One of this machine's send frames: when, the tag its turn carried, and
/// who was the master once that frame ran (S4.7: the master "when sent").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SendFrame {
    pub frame: u32,
    pub tag: u32,
    pub master: Option<u8>,
}

/// The send frames this machine has run, oldest first. The same on every
/// machine, because they follow from executed events only (S5).
#[derive(Debug, Default)]
pub struct SendSchedule {
    frames: VecDeque<SendFrame>,
}

impl SendSchedule {
    pub fn push(&mut self, send: SendFrame) {
        if self.frames.len() >= KEPT_SEND_FRAMES {
            self.frames.pop_front();
        }
        self.frames.push_back(send);
    }

    pub fn latest(&self) -> Option<SendFrame> {
        self.frames.back().copied()
    }

    pub fn oldest(&self) -> Option<SendFrame> {
        self.frames.front().copied()
    }

    pub fn get(&self, frame: u32) -> Option<SendFrame> {
        // Frames increase: binary search.
        let index = self.frames.binary_search_by_key(&frame, |s| s.frame).ok()?;
        Some(self.frames[index])
    }

    /// The first send frame after `frame` (`None`: after nothing, the first).
    pub fn next_after(&self, frame: Option<u32>) -> Option<SendFrame> {
        match frame {
            None => self.oldest(),
            Some(f) => {
                // Turns arrive in order, so the answer is nearly always
                // among the latest few send frames: look there first.
                let recent = self.frames.iter().rev().take(16).position(|s| s.frame <= f);
                let index = match recent {
                    Some(back) => self.frames.len() - back,
                    None => self.frames.partition_point(|s| s.frame <= f),
                };
                self.frames.get(index).copied()
            }
        }
    }

    /// The last send frame whose turns may hold commands due by `frame`.
    pub fn last_due_by(&self, frame: u32) -> Option<u32> {
        self.frames
            .iter()
            .rev()
            .find(|s| s.tag <= frame)
            .map(|s| s.frame)
    }

    /// The highest frame a peer's turn may be for now.
    pub fn horizon(&self) -> u32 {
        self.latest()
            .map_or(0, |s| s.tag)
            .saturating_add(MAX_FRAMES_AHEAD)
    }
}

/// What this machine sends with its next turn, with the part plan that
/// tells before accepting a command whether the turn still fits.
#[derive(Debug)]
pub struct Outbox {
    items: Vec<Item>,
    records: Vec<Record>,
    plan: PartPlan,
    max_message_bytes: usize,
}

impl Outbox {
    pub fn new(max_message_bytes: usize) -> Outbox {
        Outbox {
            items: Vec::new(),
            records: Vec::new(),
            plan: PartPlan::new(max_message_bytes),
            max_message_bytes,
        }
    }

    /// Room for `item` while leaving one part free for rungs' own items and
    /// records (report, timing event, removal, checksums, anchor).
    pub fn has_room_for(&self, item: &Item) -> bool {
        let mut plan = self.plan;
        plan.add(item.encoded_len()).is_some() && plan.parts() < usize::from(MAX_TURN_PARTS)
    }

    /// Queue an engine command; the caller checked [`has_room_for`](Self::has_room_for).
    pub fn push_command(&mut self, item: Item) {
        let _ = self.plan.add(item.encoded_len());
        self.items.push(item);
    }

    /// Queue one of rungs' own items (few per turn; they use the reserved part).
    pub fn push_own(&mut self, item: Item) {
        let _ = self.plan.add(item.encoded_len());
        self.items.push(item);
    }

    pub fn push_record(&mut self, record: Record) {
        // At most one anchor and a checksum or two per turn; keep the newest.
        if self.records.len() >= 8 {
            self.records.remove(0);
        }
        let _ = self.plan.add(Record::ENCODED_LEN);
        self.records.push(record);
    }

    /// Parts the turn would take if sent now.
    pub fn parts(&self) -> usize {
        self.plan.parts()
    }

    /// Move the turn's items and records into `items` and `records`
    /// (emptied first), leaving their buffers here for the next turn.
    pub fn take_into(&mut self, items: &mut Vec<Item>, records: &mut Vec<Record>) {
        self.plan = PartPlan::new(self.max_message_bytes);
        items.clear();
        records.clear();
        std::mem::swap(&mut self.items, items);
        std::mem::swap(&mut self.records, records);
    }

    pub fn bytes(&self) -> usize {
        self.items.iter().map(Item::encoded_len).sum()
    }

    /// For a modified client only: no plan, no checks.
    #[cfg(any(test, feature = "testing"))]
    pub fn push_unchecked(&mut self, item: Item) {
        self.items.push(item);
    }
}

/// Which of a seat's turns this machine may execute (the drop procedure
/// says, for a seat being dropped).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Executable {
    /// Not being dropped: any the schedule allows.
    All,
    /// Being dropped: up to this send frame (this machine's own vote until
    /// the cut is decided, then the cut).
    Through(u32),
    /// Being dropped and nothing of it may execute.
    Nothing,
}

impl Executable {
    pub fn allows(self, send_frame: u32) -> bool {
        match self {
            Executable::All => true,
            Executable::Through(through) => send_frame <= through,
            Executable::Nothing => false,
        }
    }
}

/// Where a queued item came from, which decides whether it may act (S4.7).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// In the turn its seat sent on `send_frame`.
    Turn { send_frame: u32 },
    /// The removal the agreed drop procedure queued.
    Drop,
}

/// An item waiting in the timing machine's queue for its frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stored {
    pub item: Item,
    pub origin: Origin,
}

/// Items behind the queue's handles (handle `i + 1` is slot `i`).
#[derive(Debug, Default)]
pub struct ItemStore {
    slots: Vec<Option<Stored>>,
    free: Vec<usize>,
}

impl ItemStore {
    pub fn put(&mut self, stored: Stored) -> u64 {
        match self.free.pop() {
            Some(index) => {
                self.slots[index] = Some(stored);
                index as u64 + 1
            }
            None => {
                self.slots.push(Some(stored));
                self.slots.len() as u64
            }
        }
    }

    pub fn take(&mut self, handle: u64) -> Option<Stored> {
        let index = usize::try_from(handle.checked_sub(1)?).ok()?;
        let stored = self.slots.get_mut(index)?.take();
        if stored.is_some() {
            self.free.push(index);
        }
        stored
    }

    pub fn bytes(&self) -> usize {
        self.slots
            .iter()
            .flatten()
            .map(|s| s.item.encoded_len() + 16)
            .sum::<usize>()
            + self.slots.len() * 8
    }
}

/// A whole turn of one seat.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Turn {
    pub send_frame: u32,
    pub tag: u32,
    pub items: Vec<Item>,
    pub records: Vec<Record>,
    /// Its parts as received, for relaying, when it had more than one (a
    /// one-part turn's bytes are the message itself).
    pub raw: Vec<Vec<u8>>,
    /// Their length in bytes.
    pub raw_bytes: usize,
}

impl Turn {
    fn bytes(&self) -> usize {
        self.raw_bytes
    }
}

/// Buffers the turn paths reuse, so that a running game allocates nothing
/// per frame: this send frame's items, records and encoded parts, and the
/// item and record lists of received turns once queued, for the next decode.
#[derive(Debug, Default)]
pub struct TurnBuffers {
    pub items: Vec<Item>,
    pub records: Vec<Record>,
    pub parts: Vec<Vec<u8>>,
    /// The lists the next decoded turn part takes.
    pub next_items: Vec<Item>,
    pub next_records: Vec<Record>,
    spare_items: Vec<Vec<Item>>,
    spare_records: Vec<Vec<Record>>,
}

/// Lists of each kind kept for reuse, at most.
const SPARE_LISTS: usize = 64;

impl TurnBuffers {
    /// Make sure the next decode has lists with room, from the spares.
    pub fn ready_for_decode(&mut self) {
        if self.next_items.capacity() == 0 {
            if let Some(items) = self.spare_items.pop() {
                self.next_items = items;
            }
        }
        if self.next_records.capacity() == 0 {
            if let Some(records) = self.spare_records.pop() {
                self.next_records = records;
            }
        }
    }

    /// A received turn's lists, used: keep them for later decodes.
    pub fn recycle(&mut self, mut items: Vec<Item>, mut records: Vec<Record>) {
        if items.capacity() > 0 && self.spare_items.len() < SPARE_LISTS {
            items.clear();
            self.spare_items.push(items);
        }
        if records.capacity() > 0 && self.spare_records.len() < SPARE_LISTS {
            records.clear();
            self.spare_records.push(records);
        }
    }
}

/// Why a part was not taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// A turn we already hold whole, or a part we already have: ignored,
    /// not counted (duplicates are normal after a relay).
    Duplicate,
    /// Outside what the schedule or the bounds allow: ignored and counted.
    Refused,
}

/// One turn being put together from its parts, de-duplicated by part index.
#[derive(Debug, Default)]
struct Assembly {
    send_frame: u32,
    tag: u32,
    parts: Vec<Option<(TurnPart, Vec<u8>)>>,
}

/// Everything received from one seat: the last turn queued, the one being
/// assembled, whole turns ahead of our schedule, and recent raw turns for
/// relaying after a drop.
#[derive(Debug, Default)]
pub struct Inbound {
    /// The last turn whose items are queued (validated against the schedule).
    pub through: Option<u32>,
    assembly: Option<Assembly>,
    /// Whole turns not yet validated: our schedule has not reached them.
    ahead: VecDeque<Turn>,
    ahead_bytes: usize,
    /// Raw parts of recent turns, for relaying.
    kept: KeptTurns,
}

/// The raw parts of one seat's recent turns, for relaying after a drop, as
/// one append-only log of bytes: keeping a turn writes its bytes at the end,
/// forgetting the oldest only moves the start, and the log is compacted
/// once half of it is forgotten. Writes are sequential and nothing old is
/// touched to forget it, so keeping every turn costs little and, once the
/// log has its working size, allocates nothing.
#[derive(Debug, Default)]
struct KeptTurns {
    log: Vec<u8>,
    /// Log offset of the oldest kept byte.
    start: usize,
    /// Per part, oldest first: its send frame, log offset and length.
    parts: VecDeque<(u32, usize, usize)>,
    /// Turns kept (each has one or more parts).
    turns: usize,
}

impl KeptTurns {
    fn bytes(&self) -> usize {
        self.log.len() - self.start
    }

    fn keep<'a>(&mut self, send_frame: u32, raw: impl Iterator<Item = &'a [u8]>) {
        for part in raw {
            self.parts
                .push_back((send_frame, self.log.len(), part.len()));
            self.log.extend_from_slice(part);
        }
        self.turns += 1;
        while self.bytes() > KEPT_RELAY_BYTES || self.turns > KEPT_SEND_FRAMES {
            let Some(&(oldest, ..)) = self.parts.front() else {
                break;
            };
            while let Some(&(frame, at, len)) = self.parts.front() {
                if frame != oldest {
                    break;
                }
                self.parts.pop_front();
                self.start = at + len;
            }
            self.turns -= 1;
        }
        if self.start > self.log.len() / 2 {
            self.log.drain(..self.start);
            for part in &mut self.parts {
                part.1 -= self.start;
            }
            self.start = 0;
        }
        // Between compactions the log grows to twice what it keeps: make
        // room for that at once, so it does not grow a step at a time.
        let room = 2 * (self.bytes() + crate::wire::packet::MAX_MESSAGE_BYTES);
        if self.log.capacity() < room {
            self.log.reserve(room - self.log.len());
        }
    }

    fn between(&self, after: Option<u32>, through: u32) -> impl Iterator<Item = &[u8]> {
        self.parts
            .iter()
            .filter(move |(f, ..)| after.map_or(true, |a| *f > a) && *f <= through)
            .map(|&(_, at, len)| &self.log[at..at + len])
    }
}

impl Inbound {
    /// The last send frame held whole (queued or waiting ahead).
    pub fn held_through(&self) -> Option<u32> {
        self.ahead.back().map(|t| t.send_frame).or(self.through)
    }

    /// Take one part. Returns the turn once all its parts are here.
    /// `limit` is the highest send frame accepted (the drop cut, if any, or
    /// the schedule's horizon). `strict`: the part is relayed, or its seat
    /// is being dropped, so several machines may hand over the same turns:
    /// a turn already held whole is a duplicate, never a restatement.
    pub fn add_part(
        &mut self,
        part: TurnPart,
        raw: &[u8],
        limit: u32,
        strict: bool,
    ) -> Result<Option<Turn>, Refusal> {
        let held = if strict {
            self.held_through()
        } else {
            self.through
        };
        if held.is_some_and(|t| part.send_frame <= t) {
            return Err(Refusal::Duplicate);
        }
        if part.send_frame > limit {
            return Err(Refusal::Refused);
        }
        // A turn at or before one held ahead: the sender restated its
        // stream (an honest one never does: the link is ordered and relays
        // start after what is held), and the latest word counts, so a
        // broken sender cannot wedge its own stream.
        while self
            .ahead
            .back()
            .is_some_and(|t| t.send_frame >= part.send_frame)
        {
            let turn = self.ahead.pop_back().expect("checked");
            self.ahead_bytes -= turn.bytes();
        }
        if part.count == 1 {
            // A turn of one part (nearly all of them) is whole at once: no
            // assembly, its lists become the turn's, and its bytes are the
            // message the caller holds.
            self.assembly = None;
            return Ok(Some(Turn {
                send_frame: part.send_frame,
                tag: part.tag,
                items: part.items,
                records: part.records,
                raw: Vec::new(),
                raw_bytes: raw.len(),
            }));
        }
        let assembly = match &mut self.assembly {
            Some(a) if a.send_frame == part.send_frame => a,
            Some(a) if a.send_frame > part.send_frame => {
                // An earlier turn than the one assembling: only a relay can
                // bring one (the link is ordered), and the earlier turn
                // comes first: restart with it.
                self.assembly = None;
                self.assembly.insert(Assembly::new(&part))
            }
            Some(_) | None => {
                // A later turn while one is incomplete means its sender
                // broke the order; drop the incomplete one (bounded: one
                // assembly per seat).
                self.assembly = None;
                self.assembly.insert(Assembly::new(&part))
            }
        };
        let assembly =
            if assembly.tag != part.tag || assembly.parts.len() != usize::from(part.count) {
                // The same send frame with another shape: only the sender's own
                // stream can say so (the link is authenticated), and the latest
                // word counts, so a broken sender cannot wedge its own turn.
                self.assembly.insert(Assembly::new(&part))
            } else {
                assembly
            };
        let slot = &mut assembly.parts[usize::from(part.index)];
        if slot.is_some() {
            return Err(Refusal::Duplicate);
        }
        *slot = Some((part, raw.to_vec()));
        if assembly.parts.iter().any(Option::is_none) {
            return Ok(None);
        }
        let assembly = self.assembly.take().expect("assembling");
        let mut turn = Turn {
            send_frame: assembly.send_frame,
            tag: assembly.tag,
            items: Vec::new(),
            records: Vec::new(),
            raw: Vec::with_capacity(assembly.parts.len()),
            raw_bytes: 0,
        };
        for (part, raw) in assembly.parts.into_iter().flatten() {
            turn.items.extend(part.items);
            turn.records.extend(part.records);
            turn.raw_bytes += raw.len();
            turn.raw.push(raw);
        }
        Ok(Some(turn))
    }

    /// Whether no whole turn waits ahead (then a turn our schedule reached
    /// is next in order and may be taken at once).
    pub fn holds_none_ahead(&self) -> bool {
        self.ahead.is_empty()
    }

    /// Hold a whole turn until our schedule reaches its send frame.
    pub fn hold_ahead(&mut self, turn: Turn) -> Result<(), Refusal> {
        let bytes = turn.bytes();
        if self.ahead.len() >= MAX_TURNS_AHEAD || self.ahead_bytes + bytes > MAX_BYTES_AHEAD {
            return Err(Refusal::Refused);
        }
        self.ahead_bytes += bytes;
        self.ahead.push_back(turn);
        Ok(())
    }

    /// The oldest turn held ahead, once our schedule has reached it and
    /// it may execute (a seat being dropped: up to the vote, then the cut).
    pub fn take_reached(&mut self, our_frame: Option<u32>, executable: Executable) -> Option<Turn> {
        let front = self.ahead.front()?.send_frame;
        let reached = our_frame.is_some_and(|f| front <= f);
        if !reached || !executable.allows(front) {
            return None;
        }
        let turn = self.ahead.pop_front()?;
        self.ahead_bytes -= turn.bytes();
        Some(turn)
    }

    /// Forget turns after `cut` (a drop voids them) and any assembly.
    pub fn void_after(&mut self, cut: Option<u32>) {
        let keep = |f: u32| cut.is_some_and(|c| f <= c);
        while self.ahead.back().is_some_and(|t| !keep(t.send_frame)) {
            let turn = self.ahead.pop_back().expect("checked");
            self.ahead_bytes -= turn.bytes();
        }
        if self.assembly.as_ref().is_some_and(|a| !keep(a.send_frame)) {
            self.assembly = None;
        }
    }

    /// Keep a queued turn's raw parts for relaying.
    pub fn keep<'a>(&mut self, send_frame: u32, raw: impl Iterator<Item = &'a [u8]>) {
        self.kept.keep(send_frame, raw);
    }

    /// Raw parts of kept turns in `(after, through]`.
    pub fn kept_between(&self, after: Option<u32>, through: u32) -> impl Iterator<Item = &[u8]> {
        self.kept.between(after, through)
    }

    pub fn bytes(&self) -> usize {
        let assembling: usize = self.assembly.as_ref().map_or(0, |a| {
            a.parts.iter().flatten().map(|(_, raw)| 2 * raw.len()).sum()
        });
        assembling + 2 * self.ahead_bytes + self.kept.bytes()
    }
}

impl Assembly {
    fn new(part: &TurnPart) -> Assembly {
        Assembly {
            send_frame: part.send_frame,
            tag: part.tag,
            parts: vec![None; usize::from(part.count)],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kept_turns_keep_the_latest_and_give_back_their_parts() {
        let mut kept = KeptTurns::default();
        let total = KEPT_SEND_FRAMES as u32 * 3;
        for frame in 0..total {
            let body = [frame as u8; 40];
            if frame % 5 == 0 {
                // A turn of two parts now and then.
                kept.keep(frame, [&body[..10], &body[10..]].into_iter());
            } else {
                kept.keep(frame, std::iter::once(&body[..]));
            }
        }
        assert_eq!(kept.turns, KEPT_SEND_FRAMES);
        let oldest = total - KEPT_SEND_FRAMES as u32;
        assert_eq!(kept.between(None, oldest - 1).count(), 0, "forgotten");
        let parts: Vec<&[u8]> = kept.between(Some(oldest + 4), oldest + 5).collect();
        assert_eq!(parts.len(), 2, "turn {} had two parts", oldest + 5);
        assert_eq!(parts[0], &[(oldest + 5) as u8; 10][..]);
        assert_eq!(parts[1], &[(oldest + 5) as u8; 30][..]);
        let last: Vec<&[u8]> = kept.between(Some(total - 2), total).collect();
        assert_eq!(last, vec![&[(total - 1) as u8; 40][..]]);
        assert_eq!(kept.bytes(), KEPT_SEND_FRAMES * 40);
        assert!(kept.log.len() <= 2 * kept.bytes() + 80, "compacted");
    }
}
