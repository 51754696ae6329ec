//! Dropping players whose machines vanished (S4.7, S8): votes, the cut, and
//! who relays the turns up to it.
//!
//! Every machine that drops a seat votes with the last turn of that seat it
//! holds whole, and names in its vote every seat it is dropping (a mask).
//! Hearing a vote makes a machine join every drop the mask names, so two
//! machines that vanish together are dropped together, and a vanished voter
//! is never waited for: the voters for a drop are the present humans that
//! this machine is not itself dropping, and a vote from a seat being dropped
//! is ignored. Once every voter's vote is in, the *cut* is the highest vote
//! and the *holder* the lowest voter holding it. A machine that lacks turns
//! up to the cut asks the holder (a relay request); the holder answers with
//! the raw turn parts it holds; relayed parts are accepted only from the
//! holder, only inside a decided drop, only up to the cut, whole and
//! de-duplicated by part index. Turns of the dropped seat after the cut are
//! void, and its removal executes on the tag of the first send frame after
//! the cut — a frame no machine can have run.

use crate::error::{Error, Result};
use crate::report::record::MAX_SEATS;
use crate::wire::turn::{self, Item, TurnPart};

use super::turns::{Origin, Stored};
use super::LockstepSession;

/// The decision of one drop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cut {
    /// The dropped seat's last valid turn (send frame); `None`: no turn of
    /// it counts at all.
    pub through: Option<u32>,
    /// Who relays turns up to the cut; `None` when `through` is `None`.
    pub holder: Option<u8>,
}

/// Which of a seat's turns this machine may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Holdable {
    /// Not being dropped: any the schedule allows.
    All,
    /// Being dropped: up to this send frame (this machine's own vote until
    /// the cut is decided, then the cut).
    Through(u32),
    /// Being dropped and nothing of it counts.
    Nothing,
}

/// A voter's vote: the last turn of the dropped seat it holds whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Vote {
    pub holds: Option<u32>,
}

/// A relay request waiting for this machine's own decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RelayRequest {
    pub from: u8,
    pub after: Option<u32>,
}

/// One seat's drop, as this machine sees it.
#[derive(Debug, Clone, Default)]
pub struct DropState {
    /// This machine is dropping the seat (it voted).
    pub joined: bool,
    votes: [Option<Vote>; MAX_SEATS],
    pub cut: Option<Cut>,
    /// The removal is queued (after the cut, with every turn up to it here).
    pub removal_queued: bool,
    /// Requests received before the cut was decided (at most one per seat).
    pending_requests: Vec<RelayRequest>,
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
        self.seats[usize::from(seat)].joined
    }

    /// The decided cut for `seat`, if any.
    pub fn cut(&self, seat: u8) -> Option<Cut> {
        self.seats[usize::from(seat)].cut
    }

    /// Which of `seat`'s turns this machine (`local`) may take: a machine
    /// holds no turn past its own vote until the cut is decided, and none
    /// past the cut after.
    pub fn holdable(&self, seat: u8, local: u8) -> Holdable {
        let state = &self.seats[usize::from(seat)];
        let through = match (state.cut, state.joined) {
            (Some(cut), _) => cut.through,
            (None, true) => state.votes[usize::from(local)].and_then(|v| v.holds),
            (None, false) => return Holdable::All,
        };
        through.map_or(Holdable::Nothing, Holdable::Through)
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
            .filter(|(_, d)| d.joined)
            .fold(0, |mask, (seat, _)| mask | 1 << seat)
    }

    /// Join the drop of `seat` with this machine's own vote; false if it
    /// had already joined.
    pub fn join(&mut self, seat: u8, local: u8, holds: Option<u32>) -> bool {
        let state = &mut self.seats[usize::from(seat)];
        if state.joined {
            return false;
        }
        state.joined = true;
        state.votes[usize::from(local)] = Some(Vote { holds });
        true
    }

    /// Note `voter`'s vote on `seat` (the first vote of a voter stands).
    pub fn record_vote(&mut self, seat: u8, voter: u8, vote: Vote) {
        let slot = &mut self.seats[usize::from(seat)].votes[usize::from(voter)];
        if slot.is_none() {
            *slot = Some(vote);
        }
    }

    /// Decide the drop of `seat` if every voter's vote is in. Returns the
    /// cut when it is decided by this call.
    pub fn try_decide(&mut self, seat: u8, voters: &[u8]) -> Option<Cut> {
        let state = &mut self.seats[usize::from(seat)];
        if state.cut.is_some() || !state.joined {
            return None;
        }
        let mut votes = Vec::with_capacity(voters.len());
        for voter in voters {
            votes.push((*voter, state.votes[usize::from(*voter)]?));
        }
        let through = votes.iter().filter_map(|(_, v)| v.holds).max();
        let holder = through.and_then(|t| {
            votes
                .iter()
                .filter(|(_, v)| v.holds == Some(t))
                .map(|(voter, _)| *voter)
                .min()
        });
        let cut = Cut { through, holder };
        state.cut = Some(cut);
        Some(cut)
    }

    /// Remember a relay request until this machine's cut is decided.
    pub fn defer_request(&mut self, seat: u8, request: RelayRequest) {
        let pending = &mut self.seats[usize::from(seat)].pending_requests;
        pending.retain(|r| r.from != request.from);
        if pending.len() < MAX_SEATS {
            pending.push(request);
        }
    }

    /// The requests deferred for `seat`'s drop.
    pub fn take_requests(&mut self, seat: u8) -> Vec<RelayRequest> {
        std::mem::take(&mut self.seats[usize::from(seat)].pending_requests)
    }

    pub fn set_removal_queued(&mut self, seat: u8) {
        self.seats[usize::from(seat)].removal_queued = true;
    }
}

/// The drop procedure, as the session runs it.
impl LockstepSession {
    /// Join the drop of `seat`: vote with the last turn held whole, and tell
    /// every peer still played with.
    pub(super) fn join_drop(&mut self, seat: u8) {
        let holds = self.inbound[usize::from(seat)].held_through();
        if !self.drops.join(seat, self.local_seat, holds) {
            return;
        }
        let message = turn::encode_drop_vote(seat, holds, self.drops.mask());
        let peers: Vec<u8> = self.peers().collect();
        for peer in peers {
            self.send_control(peer, &message);
        }
    }

    /// Decide every drop whose votes are all in (the voters are the present
    /// humans this machine is not dropping).
    pub(super) fn decide_drops(&mut self) {
        let voters: Vec<u8> = self
            .present()
            .filter(|s| !self.drops.is_dropping(*s))
            .collect();
        for seat in 0..self.machine.seats().count() {
            if let Some(cut) = self.drops.try_decide(seat, &voters) {
                self.on_decided(seat, cut);
            }
        }
    }

    pub(super) fn on_decided(&mut self, seat: u8, cut: Cut) {
        let s = usize::from(seat);
        self.inbound[s].void_after(cut.through);
        let holds = self.inbound[s].held_through();
        if let (Some(through), Some(holder)) = (cut.through, cut.holder) {
            if holds.map_or(true, |h| h < through) && holder != self.local_seat {
                self.send_control(holder, &turn::encode_relay_request(seat, holds));
            }
        }
        if cut.holder == Some(self.local_seat) {
            for request in self.drops.take_requests(seat) {
                self.answer_relay_request(seat, request);
            }
        }
        self.maybe_queue_removal(seat);
    }

    pub(super) fn answer_relay_request(&mut self, seat: u8, request: RelayRequest) {
        let Some(Cut {
            through: Some(through),
            ..
        }) = self.drops.cut(seat)
        else {
            return;
        };
        let relays: Vec<Vec<u8>> = self.inbound[usize::from(seat)]
            .kept_between(request.after, through)
            .map(|raw| turn::encode_relay(seat, raw))
            .collect();
        for relay in relays {
            self.send_control(request.from, &relay);
        }
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

    /// A drop vote from `seat`: record it, join the drops it names whose
    /// seat this machine does not hear either, decide what can be decided.
    pub(super) fn on_drop_vote(
        &mut self,
        seat: u8,
        dropped: u8,
        holds: Option<u32>,
        dropping: u32,
    ) -> Result<()> {
        if !self.is_human(dropped) || dropped == seat || dropping & (1 << seat) != 0 {
            return Err(Error::Malformed("a drop vote for no other human seat"));
        }
        if self.drops.is_dropping(seat) {
            return Ok(()); // a vanished voter is not a voter
        }
        self.drops.record_vote(dropped, seat, Vote { holds });
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
        self.decide_drops();
        Ok(())
    }

    /// `seat` asks for `dropped`'s turns after `after`: answer if this
    /// machine is the holder, wait if it has not decided yet.
    pub(super) fn on_relay_request(
        &mut self,
        seat: u8,
        dropped: u8,
        after: Option<u32>,
    ) -> Result<()> {
        if !self.is_human(dropped) || dropped == seat {
            return Err(Error::Malformed("a relay request for no other human seat"));
        }
        let request = RelayRequest { from: seat, after };
        match self.drops.cut(dropped) {
            None => self.drops.defer_request(dropped, request),
            Some(cut) if cut.holder == Some(self.local_seat) => {
                self.answer_relay_request(dropped, request)
            }
            Some(_) => self.stats.refused_messages += 1,
        }
        Ok(())
    }

    /// A relayed part of `dropped`'s turn from `seat`: only inside a decided
    /// drop, only from the holder the votes name, only up to the cut (S4.7).
    pub(super) fn on_relay(&mut self, seat: u8, dropped: u8, part: TurnPart, raw: &[u8]) {
        let from_holder = self.is_human(dropped)
            && self
                .drops
                .cut(dropped)
                .is_some_and(|cut| cut.holder == Some(seat) && cut.holder != Some(self.local_seat));
        if !from_holder {
            self.stats.refused_messages += 1;
            return;
        }
        self.receive_part(dropped, part, raw);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_drop_is_decided_by_the_voters_alone() {
        let mut drops = Drops::default();
        assert!(drops.join(2, 0, Some(10)));
        assert!(drops.join(3, 0, Some(12)));
        // Seat 3's vote on seat 2 would be its own business: it is not a voter.
        drops.record_vote(2, 3, Vote { holds: Some(40) });
        assert_eq!(drops.try_decide(2, &[0, 1]), None, "seat 1 has not voted");
        drops.record_vote(2, 1, Vote { holds: Some(11) });
        assert_eq!(
            drops.try_decide(2, &[0, 1]),
            Some(Cut {
                through: Some(11),
                holder: Some(1)
            })
        );
        assert_eq!(drops.try_decide(2, &[0, 1]), None, "decided once");
        assert_eq!(drops.mask(), 0b1100);
    }

    #[test]
    fn nobody_holding_a_turn_cuts_before_the_first() {
        let mut drops = Drops::default();
        drops.join(1, 0, None);
        drops.record_vote(1, 2, Vote { holds: None });
        assert_eq!(
            drops.try_decide(1, &[0, 2]),
            Some(Cut {
                through: None,
                holder: None
            })
        );
    }

    #[test]
    fn ties_go_to_the_lowest_voter() {
        let mut drops = Drops::default();
        drops.join(0, 3, Some(7));
        drops.record_vote(0, 1, Vote { holds: Some(7) });
        drops.record_vote(0, 2, Vote { holds: Some(5) });
        assert_eq!(drops.try_decide(0, &[1, 2, 3]).unwrap().holder, Some(1));
    }
}
