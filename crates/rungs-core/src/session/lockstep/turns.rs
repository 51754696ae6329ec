//! Turns (S5): the schedule of send frames every machine shares, the
//! outbox of what this machine sends next, the store of items waiting for
//! their frame, and per peer the assembly of incoming turns — each bounded
//! (S8) so that no peer and no engine burst can grow them without limit.
//! [`Turns`] owns them all; the session hands it the timing machine and the
//! endpoint when a step needs them.

use std::collections::VecDeque;

use crate::link::Endpoint;
use crate::report::record::MAX_SEATS;
use crate::timing::ladder::{MAX_LOOK_AHEAD, MAX_SEND_PERIOD};
use crate::timing::TimingMachine;
use crate::wire::turn::{self, Item, Message, PartPlan, Record, TurnPart, MAX_TURN_PARTS};

use super::drops::Cut;

/// Send frames remembered: the schedule that validates peers' turns and
/// finds the drop cut's tags. A peer is never more than a look-ahead and a
/// send period away from us (it cannot run a frame our turns may still
/// fill), so this covers every turn that can arrive.
pub(super) const KEPT_SEND_FRAMES: usize = 2 * (MAX_LOOK_AHEAD as usize + MAX_SEND_PERIOD as usize);
/// How far past our latest send frame a peer's turn may be: a peer runs
/// frame `F` only with our turns tagged up to `F`, so its send frames stay
/// below our latest tag plus a send period.
pub(super) const MAX_FRAMES_AHEAD: u32 = MAX_LOOK_AHEAD as u32 + 2 * MAX_SEND_PERIOD as u32;
/// Complete turns held per peer ahead of our schedule, and their bytes.
pub(super) const MAX_TURNS_AHEAD: usize = MAX_FRAMES_AHEAD as usize;
pub(super) const MAX_BYTES_AHEAD: usize = 1 << 20;
/// Raw turn bytes kept per peer for relaying after a drop (most recent).
pub(super) const KEPT_RELAY_BYTES: usize = 512 * 1024;

/// This machine's turn state: the schedule of its send frames, the outbox
/// of its next turn, the items queued in the timing machine, and per seat
/// the turns received from it, with the buffers their paths reuse. It owns
/// all of them and nothing else: the timing machine, the endpoint and the
/// frame the session is at come in as arguments, and what is counted or
/// reported (refusals, messages sent, checksums, anchors) goes back to the
/// session as return values.
///
/// What it keeps true:
/// - an item goes into the store only together with its handle in the
///   machine's queue (taken back at once if the machine refuses it), and
///   comes out when the machine pops that handle as due
///   ([`take_due`](Self::take_due));
/// - each seat's turns are queued in schedule order: a turn is the
///   schedule's next send frame after the last one queued for its seat,
///   with the tag the schedule gives it ([`fits`](Self::fits)); turns the
///   schedule has not reached wait ahead until it does;
/// - everything held is bounded (S8) whatever peers send
///   ([`bytes`](Self::bytes)).
///
/// Who calls what, in which order (the session,
/// [`PeerSession`](super::peer::PeerSession)):
/// - commands, rungs' own items and checksums go into the outbox at any
///   time; on a send frame, once the frame executed and its own items
///   (report, timing event) are in the outbox, [`send`](Self::send) adds
///   the frame to the schedule and sends and queues the turn;
/// - a received message is decoded with [`decode`](Self::decode); a turn
///   part goes to [`add_part`](Self::add_part) under the bound
///   [`limit`](Self::limit) gives, and a turn made whole to
///   [`keep`](Self::keep), then [`place`](Self::place);
/// - a turn to take (from [`place`](Self::place), or held ahead and handed
///   back by [`take_reached`](Self::take_reached) once the schedule reached
///   it) is checked with [`fits`](Self::fits); the session handles its
///   records, then [`queue`](Self::queue) puts its items in the machine;
/// - readiness asks [`last_due_by`](Self::last_due_by) and
///   [`is_missing`](Self::is_missing), execution
///   [`master_when_sent`](Self::master_when_sent);
/// - a drop with its cut decided [`void_after`](Self::void_after)s the
///   seat's later turns, then queues its removal once every turn up to the
///   cut is queued ([`queue_removal`](Self::queue_removal)); a relay
///   request is answered with [`relays_after`](Self::relays_after).
#[derive(Debug)]
pub(super) struct Turns {
    /// The shared schedule of send frames.
    schedule: SendSchedule,
    /// What this machine sends with its next turn.
    outbox: Outbox,
    /// Items waiting in the timing machine's queue for their frame.
    store: ItemStore,
    /// Per seat, its turns as received.
    inbound: Vec<Inbound>,
    buffers: TurnBuffers,
}

/// What becomes of a whole turn received ([`Turns::place`]).
#[derive(Debug)]
pub(super) enum Placement {
    /// Reached by the schedule, executable and next in order: check and queue it now.
    Take(Turn),
    /// Held ahead until the schedule reaches it; turns held before it may
    /// be taken now.
    Held,
    /// Beyond the bounds of what is held ahead: refused and counted.
    Refused,
}

impl Turns {
    /// Turn state before frame 0, for messages of `max_message_bytes`.
    pub(super) fn new(max_message_bytes: usize) -> Turns {
        Turns {
            schedule: SendSchedule::default(),
            outbox: Outbox::new(max_message_bytes),
            store: ItemStore::default(),
            inbound: (0..MAX_SEATS).map(|_| Inbound::default()).collect(),
            buffers: TurnBuffers::default(),
        }
    }

    /// Queue an engine command in the next turn; `false` (and nothing
    /// queued) when the turn cannot take it.
    pub(super) fn push_command(&mut self, item: Item) -> bool {
        if !self.outbox.has_room_for(&item) {
            return false;
        }
        self.outbox.push_command(item);
        true
    }

    /// Queue one of rungs' own items in the next turn.
    pub(super) fn push_own(&mut self, item: Item) {
        self.outbox.push_own(item);
    }

    /// Queue a record (checksum, anchor) in the next turn.
    pub(super) fn push_record(&mut self, record: Record) {
        self.outbox.push_record(record);
    }

    /// For a modified client only: into the next turn, unchecked.
    #[cfg(any(test, feature = "testing"))]
    pub(super) fn push_unchecked(&mut self, item: Item) {
        self.outbox.push_unchecked(item);
    }

    /// Link messages the next turn takes, plus one for rungs' own items a
    /// frame may add: the room every link needs before a frame runs (S8).
    pub(super) fn parts_needed(&self) -> usize {
        self.outbox.parts() + 1
    }

    /// This machine's latest send frame.
    #[cfg(any(test, feature = "testing"))]
    pub(super) fn latest_send(&self) -> Option<SendFrame> {
        self.schedule.latest()
    }

    /// The last send frame whose turns may hold commands due by `frame`.
    pub(super) fn last_due_by(&self, frame: u32) -> Option<u32> {
        self.schedule.last_due_by(frame)
    }

    /// Who was master once `send_frame` ran (S4.7: a timing event counts
    /// only from the master when its turn was sent).
    pub(super) fn master_when_sent(&self, send_frame: u32) -> Option<u8> {
        self.schedule.get(send_frame).and_then(|s| s.master)
    }

    /// The last send frame of `seat` held whole (queued or waiting ahead).
    pub(super) fn held_through(&self, seat: u8) -> Option<u32> {
        self.inbound[usize::from(seat)].held_through()
    }

    /// Whether `seat`'s turns up to send frame `needed` are not all queued
    /// yet; `cut` is its drop's, if any (nothing after the cut is waited for).
    pub(super) fn is_missing(&self, seat: u8, needed: u32, cut: Option<Cut>) -> bool {
        let limit = match cut {
            Some(Cut { through: None }) => return false,
            Some(Cut {
                through: Some(cut), ..
            }) => needed.min(cut),
            None => needed,
        };
        !self.inbound[usize::from(seat)]
            .through
            .is_some_and(|r| r >= limit)
    }

    /// Decode `message` into the lists kept for reuse.
    pub(super) fn decode(&mut self, message: &[u8]) -> crate::error::Result<Message> {
        let buffers = &mut self.buffers;
        buffers.ready_for_decode();
        turn::decode_reusing(message, &mut buffers.next_items, &mut buffers.next_records)
    }

    /// The highest send frame of a seat's turn accepted for `send_frame`'s
    /// part: the horizon, or with the seat's drop decided, the cut. `None`:
    /// the part is void (after the cut, or nothing of the seat counts).
    pub(super) fn limit(&self, cut: Option<Cut>, send_frame: u32) -> Option<u32> {
        // Held up to the horizon (a seat being dropped too: what waits for
        // the cut is not executed); once the cut is decided, up to it.
        match cut {
            None => Some(self.schedule.horizon()),
            Some(Cut { through: Some(cut) }) if send_frame <= cut => Some(cut),
            Some(_) => None,
        }
    }

    /// One part of `seat`'s turn (see [`Inbound::add_part`]).
    pub(super) fn add_part(
        &mut self,
        seat: u8,
        part: TurnPart,
        raw: &[u8],
        limit: u32,
        strict: bool,
    ) -> Result<Option<Turn>, Refusal> {
        self.inbound[usize::from(seat)].add_part(part, raw, limit, strict)
    }

    /// Keep a whole turn's raw parts for relaying; `raw` is the message of
    /// a one-part turn.
    pub(super) fn keep(&mut self, seat: u8, turn: &Turn, raw: &[u8]) {
        let inbound = &mut self.inbound[usize::from(seat)];
        if turn.raw.is_empty() {
            inbound.keep(turn.send_frame, std::iter::once(raw));
        } else {
            let parts = turn.raw.iter().map(Vec::as_slice);
            inbound.keep(turn.send_frame, parts);
        }
    }

    /// Take a whole turn of `seat` now, if this machine ran its send frame
    /// (`our_frame` is the latest frame run), it may execute and no earlier
    /// turn waits ahead; else hold it ahead.
    pub(super) fn place(
        &mut self,
        seat: u8,
        turn: Turn,
        our_frame: Option<u32>,
        executable: Executable,
    ) -> Placement {
        let inbound = &mut self.inbound[usize::from(seat)];
        let reached = our_frame.is_some_and(|f| turn.send_frame <= f);
        if reached && executable.allows(turn.send_frame) && inbound.holds_none_ahead() {
            Placement::Take(turn)
        } else if inbound.hold_ahead(turn).is_err() {
            Placement::Refused
        } else {
            Placement::Held
        }
    }

    /// `seat`'s oldest turn held ahead, once the schedule reached it (see
    /// [`Inbound::take_reached`]).
    pub(super) fn take_reached(
        &mut self,
        seat: u8,
        our_frame: Option<u32>,
        executable: Executable,
    ) -> Option<Turn> {
        self.inbound[usize::from(seat)].take_reached(our_frame, executable)
    }

    /// Whether `turn` is `seat`'s next in the schedule, with the tag the
    /// schedule gives it: else it is refused.
    pub(super) fn fits(&self, seat: u8, turn: &Turn) -> bool {
        let expected = self
            .schedule
            .next_after(self.inbound[usize::from(seat)].through);
        expected.is_some_and(|e| e.frame == turn.send_frame && e.tag == turn.tag)
    }

    /// Queue a turn that [`fits`](Self::fits), its records handled: its
    /// items into `machine`, its lists kept for reuse.
    pub(super) fn queue(&mut self, seat: u8, turn: Turn, machine: &mut TimingMachine) {
        let mut items = turn.items;
        for item in items.drain(..) {
            let handle = self.store.put(Stored {
                item,
                origin: Origin::Turn {
                    send_frame: turn.send_frame,
                },
            });
            if machine.queue_command(turn.tag, seat, handle).is_err() {
                // Unreachable: a turn within the schedule is tagged after
                // this machine's frame (readiness waited for it).
                self.store.take(handle);
            }
        }
        self.buffers.recycle(items, turn.records);
        self.inbound[usize::from(seat)].through = Some(turn.send_frame);
    }

    /// The item behind a handle the machine popped as due.
    pub(super) fn take_due(&mut self, handle: u64) -> Option<Stored> {
        self.store.take(handle)
    }

    /// Send this send frame's turn: `frame` joins the schedule with the
    /// machine's command tag and master, the outbox (with `anchor`, the
    /// master's, last) goes out whole to every seat of `peers` (a bit mask;
    /// the session checked every link has room), and this machine's own
    /// items are queued as `local_seat`'s. Returns the messages sent.
    pub(super) fn send(
        &mut self,
        frame: u32,
        anchor: Option<Record>,
        peers: u32,
        local_seat: u8,
        machine: &mut TimingMachine,
        endpoint: &mut Endpoint,
    ) -> u64 {
        let tag = machine.command_tag();
        self.schedule.push(SendFrame {
            frame,
            tag,
            master: machine.master(),
        });
        if let Some(anchor) = anchor {
            self.outbox.push_record(anchor);
        }
        let buffers = &mut self.buffers;
        self.outbox
            .take_into(&mut buffers.items, &mut buffers.records);
        let max = endpoint.config().link.max_message_bytes();
        let mut sent = 0;
        match turn::encode_turn_into(
            frame,
            tag,
            &buffers.items,
            &buffers.records,
            max,
            &mut buffers.parts,
        ) {
            Ok(count) => {
                for peer in (0..MAX_SEATS as u8).filter(|p| peers & 1 << p != 0) {
                    for message in &buffers.parts[..count] {
                        if endpoint.send(peer, message).is_ok() {
                            sent += 1;
                        }
                    }
                }
            }
            // Unreachable: the outbox keeps a part free for rungs' own items.
            Err(_) => debug_assert!(false, "a turn larger than the outbox allows"),
        }
        // Our own items execute here too, in issue order.
        for item in buffers.items.drain(..) {
            let handle = self.store.put(Stored {
                item,
                origin: Origin::Turn { send_frame: frame },
            });
            if machine.queue_command(tag, local_seat, handle).is_err() {
                self.store.take(handle);
            }
        }
        sent
    }

    /// Forget `seat`'s turns after `cut` (its drop voids them).
    pub(super) fn void_after(&mut self, seat: u8, cut: Option<u32>) {
        self.inbound[usize::from(seat)].void_after(cut);
    }

    /// With every turn of dropped `seat` up to `cut` queued, queue its
    /// removal on the tag of the first send frame after the cut. `false`:
    /// not queued (turns still missing, that send frame not run yet).
    pub(super) fn queue_removal(
        &mut self,
        seat: u8,
        cut: Option<u32>,
        machine: &mut TimingMachine,
    ) -> bool {
        if self.inbound[usize::from(seat)].through < cut {
            return false;
        }
        // `None`: this machine has not reached that send frame yet.
        let Some(first_void) = self.schedule.next_after(cut) else {
            return false;
        };
        let handle = self.store.put(Stored {
            item: Item::Removal(seat),
            origin: Origin::Drop,
        });
        if machine.queue_command(first_void.tag, seat, handle).is_err() {
            // Unreachable while readiness holds every machine before that tag.
            self.store.take(handle);
            return false;
        }
        true
    }

    /// `dropped`'s kept turns after `after`, each as a relay message.
    pub(super) fn relays_after(&self, dropped: u8, after: Option<u32>) -> Vec<Vec<u8>> {
        self.inbound[usize::from(dropped)]
            .kept_between(after, u32::MAX)
            .map(|raw| turn::encode_relay(dropped, raw))
            .collect()
    }

    /// Bytes held: queued items, turns being assembled, held ahead or kept
    /// for relaying, and the outbox.
    pub(super) fn bytes(&self) -> usize {
        self.store.bytes()
            + self.inbound.iter().map(Inbound::bytes).sum::<usize>()
            + self.outbox.bytes()
    }
}

/// One of this machine's send frames: when, the tag its turn carried, and
/// who was the master once that frame ran (S4.7: the master "when sent").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct SendFrame {
    pub(super) frame: u32,
    pub(super) tag: u32,
    pub(super) master: Option<u8>,
}

/// The send frames this machine has run, oldest first. The same on every
/// machine, because they follow from executed events only (S5).
#[derive(Debug, Default)]
pub(super) struct SendSchedule {
    frames: VecDeque<SendFrame>,
}

impl SendSchedule {
    pub(super) fn push(&mut self, send: SendFrame) {
        if self.frames.len() >= KEPT_SEND_FRAMES {
            self.frames.pop_front();
        }
        self.frames.push_back(send);
    }

    pub(super) fn latest(&self) -> Option<SendFrame> {
        self.frames.back().copied()
    }

    pub(super) fn oldest(&self) -> Option<SendFrame> {
        self.frames.front().copied()
    }

    pub(super) fn get(&self, frame: u32) -> Option<SendFrame> {
        // Frames increase: binary search.
        let index = self.frames.binary_search_by_key(&frame, |s| s.frame).ok()?;
        Some(self.frames[index])
    }

    /// The first send frame after `frame` (`None`: after nothing, the first).
    pub(super) fn next_after(&self, frame: Option<u32>) -> Option<SendFrame> {
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
    pub(super) fn last_due_by(&self, frame: u32) -> Option<u32> {
        self.frames
            .iter()
            .rev()
            .find(|s| s.tag <= frame)
            .map(|s| s.frame)
    }

    /// The highest frame a peer's turn may be for now.
    pub(super) fn horizon(&self) -> u32 {
        self.latest()
            .map_or(0, |s| s.tag)
            .saturating_add(MAX_FRAMES_AHEAD)
    }
}

/// What this machine sends with its next turn, with the part plan that
/// tells before accepting a command whether the turn still fits.
#[derive(Debug)]
pub(super) struct Outbox {
    items: Vec<Item>,
    records: Vec<Record>,
    plan: PartPlan,
    max_message_bytes: usize,
}

impl Outbox {
    pub(super) fn new(max_message_bytes: usize) -> Outbox {
        Outbox {
            items: Vec::new(),
            records: Vec::new(),
            plan: PartPlan::new(max_message_bytes),
            max_message_bytes,
        }
    }

    /// Room for `item` while leaving one part free for rungs' own items and
    /// records (report, timing event, removal, checksums, anchor).
    pub(super) fn has_room_for(&self, item: &Item) -> bool {
        let mut plan = self.plan;
        plan.add(item.encoded_len()).is_some() && plan.parts() < usize::from(MAX_TURN_PARTS)
    }

    /// Queue an engine command; the caller checked [`has_room_for`](Self::has_room_for).
    pub(super) fn push_command(&mut self, item: Item) {
        let _ = self.plan.add(item.encoded_len());
        self.items.push(item);
    }

    /// Queue one of rungs' own items (few per turn; they use the reserved part).
    pub(super) fn push_own(&mut self, item: Item) {
        let _ = self.plan.add(item.encoded_len());
        self.items.push(item);
    }

    pub(super) fn push_record(&mut self, record: Record) {
        // At most one anchor and a checksum or two per turn; keep the newest.
        if self.records.len() >= 8 {
            self.records.remove(0);
        }
        let _ = self.plan.add(Record::ENCODED_LEN);
        self.records.push(record);
    }

    /// Parts the turn would take if sent now.
    pub(super) fn parts(&self) -> usize {
        self.plan.parts()
    }

    /// Move the turn's items and records into `items` and `records`
    /// (emptied first), leaving their buffers here for the next turn.
    pub(super) fn take_into(&mut self, items: &mut Vec<Item>, records: &mut Vec<Record>) {
        self.plan = PartPlan::new(self.max_message_bytes);
        items.clear();
        records.clear();
        std::mem::swap(&mut self.items, items);
        std::mem::swap(&mut self.records, records);
    }

    pub(super) fn bytes(&self) -> usize {
        self.items.iter().map(Item::encoded_len).sum()
    }

    /// For a modified client only: no plan, no checks.
    #[cfg(any(test, feature = "testing"))]
    pub(super) fn push_unchecked(&mut self, item: Item) {
        self.items.push(item);
    }
}

/// Which of a seat's turns this machine may execute (the drop procedure
/// says, for a seat being dropped).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Executable {
    /// Not being dropped: any the schedule allows.
    All,
    /// Being dropped: up to this send frame (this machine's own vote until
    /// the cut is decided, then the cut).
    Through(u32),
    /// Being dropped and nothing of it may execute.
    Nothing,
}

impl Executable {
    pub(super) fn allows(self, send_frame: u32) -> bool {
        match self {
            Executable::All => true,
            Executable::Through(through) => send_frame <= through,
            Executable::Nothing => false,
        }
    }
}

/// Where a queued item came from, which decides whether it may act (S4.7).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Origin {
    /// In the turn its seat sent on `send_frame`.
    Turn { send_frame: u32 },
    /// The removal the agreed drop procedure queued.
    Drop,
}

/// An item waiting in the timing machine's queue for its frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Stored {
    pub(super) item: Item,
    pub(super) origin: Origin,
}

/// Items behind the queue's handles (handle `i + 1` is slot `i`).
#[derive(Debug, Default)]
pub(super) struct ItemStore {
    slots: Vec<Option<Stored>>,
    free: Vec<usize>,
}

impl ItemStore {
    pub(super) fn put(&mut self, stored: Stored) -> u64 {
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

    pub(super) fn take(&mut self, handle: u64) -> Option<Stored> {
        let index = usize::try_from(handle.checked_sub(1)?).ok()?;
        let stored = self.slots.get_mut(index)?.take();
        if stored.is_some() {
            self.free.push(index);
        }
        stored
    }

    pub(super) fn bytes(&self) -> usize {
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
pub(super) struct Turn {
    pub(super) send_frame: u32,
    pub(super) tag: u32,
    pub(super) items: Vec<Item>,
    pub(super) records: Vec<Record>,
    /// Its parts as received, for relaying, when it had more than one (a
    /// one-part turn's bytes are the message itself).
    pub(super) raw: Vec<Vec<u8>>,
    /// Their length in bytes.
    pub(super) raw_bytes: usize,
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
pub(super) struct TurnBuffers {
    pub(super) items: Vec<Item>,
    pub(super) records: Vec<Record>,
    pub(super) parts: Vec<Vec<u8>>,
    /// The lists the next decoded turn part takes.
    pub(super) next_items: Vec<Item>,
    pub(super) next_records: Vec<Record>,
    spare_items: Vec<Vec<Item>>,
    spare_records: Vec<Vec<Record>>,
}

/// Lists of each kind kept for reuse, at most.
const SPARE_LISTS: usize = 64;

impl TurnBuffers {
    /// Make sure the next decode has lists with room, from the spares.
    pub(super) fn ready_for_decode(&mut self) {
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
    pub(super) fn recycle(&mut self, mut items: Vec<Item>, mut records: Vec<Record>) {
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
pub(super) enum Refusal {
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
pub(super) struct Inbound {
    /// The last turn whose items are queued (validated against the schedule).
    pub(super) through: Option<u32>,
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
///
/// The parts lie back to back in the log from `start`, so each needs only
/// its send frame and length: forgetting the oldest turn reads the front
/// of a list of small entries (a game keeps hundreds of turns per peer, and
/// that front was written as many turns ago: the smaller the entries, the
/// fewer of those reads miss the cache), and compacting the log leaves the
/// list alone.
#[derive(Debug, Default)]
struct KeptTurns {
    log: Vec<u8>,
    /// Log offset of the oldest kept byte: where the first part starts.
    start: usize,
    /// Per part, oldest first: its send frame and length.
    parts: VecDeque<KeptPart>,
    /// Turns kept (each has one or more parts).
    turns: usize,
}

/// One part of a kept turn.
#[derive(Debug, Clone, Copy)]
struct KeptPart {
    send_frame: u32,
    /// Bytes (a link message: at most `MAX_MESSAGE_BYTES`).
    len: u32,
}

impl KeptTurns {
    fn bytes(&self) -> usize {
        self.log.len() - self.start
    }

    fn keep<'a>(&mut self, send_frame: u32, raw: impl Iterator<Item = &'a [u8]>) {
        for part in raw {
            self.parts.push_back(KeptPart {
                send_frame,
                len: part.len() as u32,
            });
            self.log.extend_from_slice(part);
        }
        self.turns += 1;
        while self.bytes() > KEPT_RELAY_BYTES || self.turns > KEPT_SEND_FRAMES {
            let Some(oldest) = self.parts.front().map(|p| p.send_frame) else {
                break;
            };
            while let Some(part) = self.parts.front() {
                if part.send_frame != oldest {
                    break;
                }
                self.start += part.len as usize;
                self.parts.pop_front();
            }
            self.turns -= 1;
        }
        if self.start > self.log.len() / 2 {
            self.log.drain(..self.start);
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
            .scan(self.start, |at, part| {
                let from = *at;
                *at += part.len as usize;
                Some((part.send_frame, from..*at))
            })
            .filter(move |(f, _)| after.map_or(true, |a| *f > a) && *f <= through)
            .map(|(_, bytes)| &self.log[bytes])
    }
}

impl Inbound {
    /// The last send frame held whole (queued or waiting ahead).
    pub(super) fn held_through(&self) -> Option<u32> {
        self.ahead.back().map(|t| t.send_frame).or(self.through)
    }

    /// Take one part. Returns the turn once all its parts are here.
    /// `limit` is the highest send frame accepted (the drop cut, if any, or
    /// the schedule's horizon). `strict`: the part is relayed, or its seat
    /// is being dropped, so several machines may hand over the same turns:
    /// a turn already held whole is a duplicate, never a restatement.
    pub(super) fn add_part(
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
    pub(super) fn holds_none_ahead(&self) -> bool {
        self.ahead.is_empty()
    }

    /// Hold a whole turn until our schedule reaches its send frame.
    pub(super) fn hold_ahead(&mut self, turn: Turn) -> Result<(), Refusal> {
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
    pub(super) fn take_reached(
        &mut self,
        our_frame: Option<u32>,
        executable: Executable,
    ) -> Option<Turn> {
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
    pub(super) fn void_after(&mut self, cut: Option<u32>) {
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
    pub(super) fn keep<'a>(&mut self, send_frame: u32, raw: impl Iterator<Item = &'a [u8]>) {
        self.kept.keep(send_frame, raw);
    }

    /// Raw parts of kept turns in `(after, through]`.
    pub(super) fn kept_between(
        &self,
        after: Option<u32>,
        through: u32,
    ) -> impl Iterator<Item = &[u8]> {
        self.kept.between(after, through)
    }

    pub(super) fn bytes(&self) -> usize {
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
