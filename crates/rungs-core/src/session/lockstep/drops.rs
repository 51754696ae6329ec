//! Dropping players whose machines vanished (S4.7, S8): when to drop, the
//! agreement on the cut ([`super::agreement`]), and the turns that travel
//! with it.
//!
//! A machine drops a seat whose link is lost (the liveness timeout, S8) or
//! whose machine restarted — by default; an engine that opted out
//! (`manual_drops`) drops with [`LockstepSession::drop_player`](super::LockstepSession::drop_player). A vote
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

//!
//! [`Drops`] owns every seat's drop and the procedure; it owns nothing of
//! the game. Each call is handed the [`GameFacts`] it needs (seats, what
//! this machine holds of each seat's turns) and answers with the
//! [`DropAction`]s the session carries out: messages to send, cuts decided.

use crate::error::Result;
use crate::report::record::MAX_SEATS;
use crate::wire::turn;

use super::agreement::{Agreement, Holding, Send, View};
use super::turns::Executable;

/// The decision of one drop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cut {
    /// The dropped seat's last valid turn (send frame); `None`: no turn of
    /// it counts at all.
    pub through: Option<u32>,
}

/// One seat's drop, as this machine sees it.
#[derive(Debug, Clone, Default)]
struct DropState {
    agreement: Agreement,
    /// The removal is queued (after the cut, with every turn up to it here).
    removal_queued: bool,
    /// Another machine's vote named this seat as being dropped.
    named: bool,
}

/// What the drop procedure is told of the game for one call: nothing of it
/// is the procedure's own, so the session hands it over each time.
#[derive(Debug, Clone, Copy)]
pub struct GameFacts {
    /// This machine's seat.
    pub local: u8,
    /// The human seats, as a bit mask.
    pub humans: u32,
    /// The seats still in the game (human, not removed), as a bit mask.
    pub present: u32,
    /// The seats this machine hears nothing from (their links are lost).
    pub unheard: u32,
    /// Per seat, the last of its turns this machine holds whole.
    pub holds: [Holding; MAX_SEATS],
}

impl GameFacts {
    fn is_present(&self, seat: u8) -> bool {
        has_seat(self.present, seat)
    }

    fn is_human(&self, seat: u8) -> bool {
        has_seat(self.humans, seat)
    }
}

/// Whether `mask` holds `seat` (any seat number a peer may send).
fn has_seat(mask: u32, seat: u8) -> bool {
    1u32.checked_shl(u32::from(seat))
        .is_some_and(|bit| mask & bit != 0)
}

/// What the session must do for the drop procedure, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DropAction {
    /// Send this control message to `to` (now, or once its link has room).
    Send { to: u8, message: Vec<u8> },
    /// The cut of this seat is decided: void its turns after the cut, take
    /// the ones that waited, queue its removal once they are all queued.
    Decided(u8),
}

/// Every seat's drop, and the players that left whose links linger.
#[derive(Debug, Clone)]
pub struct Drops {
    seats: Vec<DropState>,
    /// Players that left whose links linger until lost: they may still
    /// need a drop decided to run their last frames.
    lingering: u32,
    /// The engine drops vanished players itself (`manual_drops`).
    manual: bool,
}

impl Drops {
    /// No drop yet; `manual`: the engine decides when to drop.
    pub fn new(manual: bool) -> Drops {
        Drops {
            seats: vec![DropState::default(); MAX_SEATS],
            lingering: 0,
            manual,
        }
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

    /// Every seat this machine is dropping, as a bit mask.
    pub fn mask(&self) -> u32 {
        self.seats
            .iter()
            .enumerate()
            .filter(|(_, d)| d.agreement.is_joined())
            .fold(0, |mask, (seat, _)| mask | 1 << seat)
    }

    /// Whether `seat`'s removal is queued.
    pub fn is_removal_queued(&self, seat: u8) -> bool {
        self.seats[usize::from(seat)].removal_queued
    }

    pub fn set_removal_queued(&mut self, seat: u8) {
        self.seats[usize::from(seat)].removal_queued = true;
    }

    /// `seat` left (its removal executed) while this machine still hears
    /// it: its link lingers for the drops it may need decided.
    pub fn linger(&mut self, seat: u8) {
        self.lingering |= 1 << seat;
    }

    /// `seat`'s link is gone: if it was a player that left, it is gone for
    /// good (true: remove its link; the drops move on, one voter fewer).
    pub fn stop_lingering(&mut self, seat: u8) -> bool {
        let was = self.lingering & 1 << seat != 0;
        self.lingering &= !(1 << seat);
        was
    }

    /// Whether a lost link or a restart of `seat` makes this machine drop
    /// it: by default; with manual drops only once another machine's vote
    /// named it and its link is lost (`lost`).
    pub fn drops_on_loss(&self, seat: u8, lost: bool) -> bool {
        !self.manual || (lost && self.seats[usize::from(seat)].named)
    }

    /// Seats control messages go to: the peers this machine plays with
    /// (present, not being dropped), and players that left whose links
    /// linger.
    /// `present`: the seats in the game; `local`: this machine's.
    pub fn reachable(&self, present: u32, local: u8) -> u32 {
        let peers = present & !(1 << local) & !self.mask();
        peers | self.lingering
    }

    /// What this machine knows of `seat`'s drop (see [`View`]).
    fn view(&self, seat: u8, facts: &GameFacts) -> View {
        let participants = facts.humans & !(1 << seat);
        View {
            local: facts.local,
            participants,
            out: participants & (self.mask() | !facts.present),
            reachable: self.reachable(facts.present, facts.local),
            holds: facts.holds[usize::from(seat)],
        }
    }

    /// Join the drop of `seat`: vote with what this machine holds of its
    /// turns, and tell everyone reachable. Every other drop moves on (one
    /// voter fewer).
    pub fn join(&mut self, seat: u8, facts: &GameFacts, out: &mut Vec<DropAction>) {
        if seat == facts.local || !facts.is_present(seat) {
            return;
        }
        let view = self.view(seat, facts);
        let mut sends = Vec::new();
        if !self.seats[usize::from(seat)]
            .agreement
            .join(&view, &mut sends)
        {
            return;
        }
        self.dispatch(seat, view.holds, sends, out);
        self.progress_all(facts, out);
    }

    /// Move every drop on with what this machine knows now.
    pub fn progress_all(&mut self, facts: &GameFacts, out: &mut Vec<DropAction>) {
        for seat in 0..MAX_SEATS as u8 {
            self.progress(seat, facts, out);
        }
    }

    /// Move `seat`'s drop on.
    pub fn progress(&mut self, seat: u8, facts: &GameFacts, out: &mut Vec<DropAction>) {
        let state = &self.seats[usize::from(seat)].agreement;
        if !state.is_joined() || state.decided().is_some() {
            return;
        }
        let decided = self.step(seat, facts, out, |agreement, view, sends| {
            agreement.progress(view, sends)
        });
        if decided.is_some() {
            out.push(DropAction::Decided(seat));
        }
    }

    /// One step of `seat`'s agreement with what this machine knows now;
    /// the messages it asks for go to `out`. Returns what the step does.
    fn step<T>(
        &mut self,
        seat: u8,
        facts: &GameFacts,
        out: &mut Vec<DropAction>,
        step: impl FnOnce(&mut Agreement, &View, &mut Vec<Send>) -> T,
    ) -> T {
        let view = self.view(seat, facts);
        let mut sends = Vec::new();
        let done = step(
            &mut self.seats[usize::from(seat)].agreement,
            &view,
            &mut sends,
        );
        self.dispatch(seat, view.holds, sends, out);
        done
    }

    /// The messages `seat`'s agreement asks for.
    fn dispatch(&self, seat: u8, holds: Holding, sends: Vec<Send>, out: &mut Vec<DropAction>) {
        for send in sends {
            let (to, message) = match send {
                Send::Vote { to, .. } => (to, turn::encode_drop_vote(seat, holds, self.mask())),
                Send::Decided { to, cut } => (to, turn::encode_drop_decided(seat, cut)),
                Send::RelayRequest { to, after } => (to, turn::encode_relay_request(seat, after)),
            };
            out.push(DropAction::Send { to, message });
        }
    }

    /// A drop vote from `seat`: count it, join the drops it names whose
    /// seat this machine does not hear either, move on.
    pub fn on_vote(
        &mut self,
        seat: u8,
        dropped: u8,
        holds: Holding,
        dropping: u32,
        facts: &GameFacts,
        out: &mut Vec<DropAction>,
    ) -> Result<()> {
        if !facts.is_human(dropped) || dropped == seat || dropping & (1 << seat) != 0 {
            return Err(turn::invalid("a drop vote for no other human seat"));
        }
        let gone = self.step(dropped, facts, out, |agreement, view, sends| {
            agreement.on_vote(view, seat, holds, sends);
            view.out
        });
        if gone & 1 << seat != 0 {
            return Ok(()); // a vanished voter names nobody
        }
        // Join every drop the voter names whose seat this machine does not
        // hear either (two machines that vanish together are dropped
        // together); a seat this machine still hears is joined only once its
        // link is lost too, so one player alone cannot drop another that is
        // alive (S4.7).
        for d in 0..MAX_SEATS as u8 {
            let named = dropping & (1 << d) != 0;
            if named && d != facts.local && facts.is_present(d) {
                self.seats[usize::from(d)].named = true;
                if facts.unheard & 1 << d != 0 {
                    self.join(d, facts, out);
                }
            }
        }
        self.progress_all(facts, out);
        Ok(())
    }

    /// `seat` decided the cut of `dropped`.
    pub fn on_decided(
        &mut self,
        seat: u8,
        dropped: u8,
        cut: Holding,
        facts: &GameFacts,
        out: &mut Vec<DropAction>,
    ) -> Result<()> {
        if !facts.is_human(dropped) || dropped == seat {
            return Err(turn::invalid("a drop decision for no other human seat"));
        }
        self.step(dropped, facts, out, |agreement, view, sends| {
            agreement.on_decided(view, seat, cut, sends)
        });
        self.progress(dropped, facts, out);
        Ok(())
    }

    /// `seat` asks for `dropped`'s turns: whether to answer (this machine
    /// is in that drop and plays with `seat`). Malformed for no other
    /// human seat.
    pub fn answers_relay_request(&self, seat: u8, dropped: u8, facts: &GameFacts) -> Result<bool> {
        if !facts.is_human(dropped) || dropped == seat {
            return Err(turn::invalid("a relay request for no other human seat"));
        }
        let reachable = self.reachable(facts.present, facts.local);
        Ok(self.is_dropping(dropped) && reachable & 1 << seat != 0)
    }

    /// Whether to take a relayed turn of `dropped` from `seat`: only inside
    /// a drop this machine joined, only from a seat it asked that is not
    /// out (S4.7).
    pub fn takes_relay(&self, seat: u8, dropped: u8, facts: &GameFacts) -> bool {
        facts.is_human(dropped)
            && self.seats[usize::from(dropped)].agreement.asked(seat)
            && self.view(dropped, facts).out & 1 << seat == 0
    }
}
