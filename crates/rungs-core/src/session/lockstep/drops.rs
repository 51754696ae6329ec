//! Dropping players whose machines vanished (S4.7, S8): when to drop, the
//! agreement on the cut ([`super::agreement`]), and the turns that travel
//! with it.
//!
//! A machine drops a seat whose link is lost (the liveness timeout, S8) or
//! whose machine restarted — by default; an engine that opted out
//! (`manual_drops`) drops with [`LockstepSession::drop_player`]. A vote
//! names every seat its voter is dropping, and a machine that hears a vote
//! naming a seat it does not hear either joins that drop too: two machines
//! that vanish together are dropped together, and one player alone cannot
//! drop another that is alive.
//!
//! The agreement decides the cut: the last of the dropped seat's turns that
//! executes, the same on every survivor, holding every turn any survivor
//! executed. Until it decides, a machine executes none of that seat's turns
//! past its own vote; turns relayed to it meanwhile wait. Relays are taken
//! only from a seat this machine asked, and only up to the cut once there
//! is one. The dropped seat's turns after the cut are void, and its removal
//! executes on the tag of the first send frame after the cut — a frame no
//! machine can have run — so whatever it sent executes on all machines or
//! none.
//!
//! A player that quits is removed like any command, but it may still be
//! running its last frames and need a drop decided to reach them: its link
//! lingers after its removal (no turns, only the drop's messages) until it
//! is lost.

use crate::error::Result;
use crate::report::record::MAX_SEATS;
use crate::wire::turn::{self, Item, TurnPart};

use super::agreement::{Agreement, Holding, Send, View};
use super::turns::{Origin, Stored};
use super::LockstepSession;

/// The decision of one drop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cut {
    /// The dropped seat's last valid turn (send frame); `None`: no turn of
    /// it counts at all.
    pub through: Option<u32>,
}

/// Which of a seat's turns this machine may execute.
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

/// One seat's drop, as this machine sees it.
#[derive(Debug, Clone, Default)]
pub struct DropState {
    pub agreement: Agreement,
    /// The removal is queued (after the cut, with every turn up to it here).
    pub removal_queued: bool,
    /// Another machine's vote named this seat as being dropped.
    named: bool,
}

/// Every seat's drop.
#[derive(Debug, Clone)]
pub struct Drops {
    seats: Vec<DropState>,
}

impl Default for Drops {
    fn default() -> Self {
        Drops {
            seats: vec![DropState::default(); MAX_SEATS],
        }
    }
}

impl Drops {
    pub fn get(&self, seat: u8) -> &DropState {
        &self.seats[usize::from(seat)]
    }

    /// Whether this machine is dropping `seat`.
    pub fn is_dropping(&self, seat: u8) -> bool {
        self.seats[usize::from(seat)].agreement.is_joined()
    }

    /// The decided cut for `seat`, if any.
    pub fn cut(&self, seat: u8) -> Option<Cut> {
        let through = self.seats[usize::from(seat)].agreement.decided()?;
        Some(Cut { through })
    }

    /// Which of `seat`'s turns this machine (`local`) may execute: none
    /// past its own vote until the cut is decided, none past the cut after.
    pub fn executable(&self, seat: u8, local: u8) -> Executable {
        let agreement = &self.seats[usize::from(seat)].agreement;
        let through = match (agreement.decided(), agreement.vote(local)) {
            (Some(cut), _) => cut,
            (None, Some(vote)) => vote,
            (None, None) => return Executable::All,
        };
        through.map_or(Executable::Nothing, Executable::Through)
    }

    /// Another machine's vote named `seat`.
    pub fn note_named(&mut self, seat: u8) {
        self.seats[usize::from(seat)].named = true;
    }

    /// Whether another machine's vote named `seat`.
    pub fn is_named(&self, seat: u8) -> bool {
        self.seats[usize::from(seat)].named
    }

    /// Every seat this machine is dropping, as a bit mask.
    pub fn mask(&self) -> u32 {
        self.seats
            .iter()
            .enumerate()
            .filter(|(_, d)| d.agreement.is_joined())
            .fold(0, |mask, (seat, _)| mask | 1 << seat)
    }

    pub fn set_removal_queued(&mut self, seat: u8) {
        self.seats[usize::from(seat)].removal_queued = true;
    }
}

/// The drop procedure, as the session runs it.
impl LockstepSession {
    /// What this machine knows of `seat`'s drop (see [`View`]).
    fn drop_view(&self, seat: u8) -> View {
        let seats = self.machine.seats();
        let humans = (0..seats.count())
            .filter(|s| seats.is_human(*s))
            .fold(0u32, |mask, s| mask | 1 << s);
        let present = self.present().fold(0u32, |mask, s| mask | 1 << s);
        let participants = humans & !(1 << seat);
        View {
            local: self.local_seat,
            participants,
            out: participants & (self.drops.mask() | !present),
            reachable: self.reachable(),
            holds: self.inbound[usize::from(seat)].held_through(),
        }
    }

    /// Seats control messages go to: the peers this machine plays with,
    /// and players that left whose links linger.
    pub(super) fn reachable(&self) -> u32 {
        self.peers().fold(self.lingering, |mask, s| mask | 1 << s)
    }

    /// Join the drop of `seat`: vote with what this machine holds of its
    /// turns, and tell everyone reachable. Every other drop moves on (one
    /// voter fewer).
    pub(super) fn join_drop(&mut self, seat: u8) {
        if seat == self.local_seat || !self.is_present(seat) {
            return;
        }
        let view = self.drop_view(seat);
        let mut sends = Vec::new();
        if !self.drops.seats[usize::from(seat)]
            .agreement
            .join(&view, &mut sends)
        {
            return;
        }
        self.dispatch(seat, view.holds, sends);
        self.progress_drops();
    }

    /// Move every drop on with what this machine knows now; act on the
    /// cuts decided.
    pub(super) fn progress_drops(&mut self) {
        for seat in 0..self.machine.seats().count() {
            self.progress_drop(seat);
        }
    }

    /// Move `seat`'s drop on.
    pub(super) fn progress_drop(&mut self, seat: u8) {
        let state = &self.drops.seats[usize::from(seat)].agreement;
        if !state.is_joined() || state.decided().is_some() {
            return;
        }
        let view = self.drop_view(seat);
        let mut sends = Vec::new();
        let decided = self.drops.seats[usize::from(seat)]
            .agreement
            .progress(&view, &mut sends);
        self.dispatch(seat, view.holds, sends);
        if decided.is_some() {
            self.on_decided(seat);
        }
    }

    /// Send what `seat`'s agreement asks for.
    fn dispatch(&mut self, seat: u8, holds: Holding, sends: Vec<Send>) {
        for send in sends {
            let (to, message) = match send {
                Send::Vote { to, .. } => {
                    (to, turn::encode_drop_vote(seat, holds, self.drops.mask()))
                }
                Send::Decided { to, cut } => (to, turn::encode_drop_decided(seat, cut)),
                Send::RelayRequest { to, after } => (to, turn::encode_relay_request(seat, after)),
            };
            self.send_control(to, &message);
        }
    }

    /// The cut of `seat` is decided: void its turns after the cut, take
    /// the ones that waited, queue its removal when they are all queued.
    fn on_decided(&mut self, seat: u8) {
        let Some(cut) = self.drops.cut(seat) else {
            return;
        };
        self.inbound[usize::from(seat)].void_after(cut.through);
        self.accept_reached_turns();
        self.maybe_queue_removal(seat);
    }

    /// With the cut decided and every turn up to it queued, queue the
    /// removal on the tag of the first send frame after the cut.
    pub(super) fn maybe_queue_removal(&mut self, seat: u8) {
        let s = usize::from(seat);
        let Some(cut) = self.drops.cut(seat) else {
            return;
        };
        if self.drops.get(seat).removal_queued || self.inbound[s].through < cut.through {
            return;
        }
        // `None`: this machine has not reached that send frame yet.
        let Some(first_void) = self.schedule.next_after(cut.through) else {
            return;
        };
        let handle = self.store.put(Stored {
            item: Item::Removal(seat),
            origin: Origin::Drop,
        });
        if self
            .machine
            .queue_command(first_void.tag, seat, handle)
            .is_err()
        {
            // Unreachable while readiness holds every machine before that tag.
            self.store.take(handle);
            return;
        }
        self.drops.set_removal_queued(seat);
    }

    /// A drop vote from `seat`: count it, join the drops it names whose
    /// seat this machine does not hear either, move on.
    pub(super) fn on_drop_vote(
        &mut self,
        seat: u8,
        dropped: u8,
        holds: Holding,
        dropping: u32,
    ) -> Result<()> {
        if !self.is_human(dropped) || dropped == seat || dropping & (1 << seat) != 0 {
            return Err(turn::invalid("a drop vote for no other human seat"));
        }
        let view = self.drop_view(dropped);
        let mut sends = Vec::new();
        self.drops.seats[usize::from(dropped)]
            .agreement
            .on_vote(&view, seat, holds, &mut sends);
        self.dispatch(dropped, view.holds, sends);
        if view.out & 1 << seat != 0 {
            return Ok(()); // a vanished voter names nobody
        }
        // Join every drop the voter names whose seat this machine does not
        // hear either (two machines that vanish together are dropped
        // together); a seat this machine still hears is joined only once its
        // link is lost too, so one player alone cannot drop another that is
        // alive (S4.7).
        for d in 0..self.machine.seats().count() {
            let named = dropping & (1 << d) != 0;
            if named && d != self.local_seat && self.is_present(d) {
                self.drops.note_named(d);
                if self.is_unheard(d) {
                    self.join_drop(d);
                }
            }
        }
        self.progress_drops();
        Ok(())
    }

    /// `seat` decided the cut of `dropped`.
    pub(super) fn on_drop_decided(&mut self, seat: u8, dropped: u8, cut: Holding) -> Result<()> {
        if !self.is_human(dropped) || dropped == seat {
            return Err(turn::invalid("a drop decision for no other human seat"));
        }
        let view = self.drop_view(dropped);
        let mut sends = Vec::new();
        self.drops.seats[usize::from(dropped)]
            .agreement
            .on_decided(&view, seat, cut, &mut sends);
        self.dispatch(dropped, view.holds, sends);
        self.progress_drop(dropped);
        Ok(())
    }

    /// `seat` asks for `dropped`'s turns after `after`: answer with every
    /// one kept, if this machine is in that drop and plays with `seat`.
    pub(super) fn on_relay_request(&mut self, seat: u8, dropped: u8, after: Holding) -> Result<()> {
        if !self.is_human(dropped) || dropped == seat {
            return Err(turn::invalid("a relay request for no other human seat"));
        }
        let in_drop = self.drops.is_dropping(dropped);
        if !in_drop || self.reachable() & 1 << seat == 0 {
            self.stats.refused_messages += 1;
            return Ok(());
        }
        let relays: Vec<Vec<u8>> = self.inbound[usize::from(dropped)]
            .kept_between(after, u32::MAX)
            .map(|raw| turn::encode_relay(dropped, raw))
            .collect();
        for relay in relays {
            self.send_control(seat, &relay);
        }
        Ok(())
    }

    /// A relayed part of `dropped`'s turn from `seat`: only inside a drop
    /// this machine joined, only from a seat it asked that is not out, only
    /// up to the cut once decided (S4.7).
    pub(super) fn on_relay(&mut self, seat: u8, dropped: u8, part: TurnPart, raw: &[u8]) {
        let asked = self.is_human(dropped)
            && self.drops.get(dropped).agreement.asked(seat)
            && self.drop_view(dropped).out & 1 << seat == 0;
        if !asked {
            self.stats.refused_messages += 1;
            return;
        }
        self.receive_part(dropped, part, raw, true);
    }
}
