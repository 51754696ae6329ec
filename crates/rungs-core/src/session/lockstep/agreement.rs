//! The drop agreement (S4.7): how the machines still in a game agree on the
//! *cut* of a player whose machine vanished — the last of its turns that
//! executes — in every interleaving of crashes, losses and message orders.
//!
//! One [`Agreement`] per dropped seat on each machine, sans-IO and pure: it
//! takes what the machine knows ([`View`]) and the messages of the other
//! participants, and says what to send ([`Send`]) and, once, what it
//! decided. The session (its `drops.rs`) keeps the turns; the model
//! checker (`tools/drop-model`) drives this same code through every
//! interleaving of 3 to 5 seats.
//!
//! # The problem
//!
//! A machine runs frame `F` only with the dropped seat's turns up to the
//! last send frame due by `F`, so what it executed is at most what it
//! holds. The turns that seat sent just before it vanished may have reached
//! some machines and not others, and the machines that hold the most may
//! vanish too, in the middle of the drop. Every survivor must execute the
//! same turns of the dropped seat: the same cut, at least every turn any
//! survivor executed, made of turns some survivor can hand to the others.
//!
//! # The rule
//!
//! The participants are the human seats other than the dropped one,
//! ranked by seat. A participant is *out*, as this machine sees it, once
//! this machine is dropping it too or its removal executed. Failure
//! detection is the links' liveness timeout: within the model the checker
//! explores, a machine is out only once it stopped for good (crashed,
//! restarted, or left the game: a player that quits may be out before it
//! stops, and that does not break the rule, see below).
//!
//! 1. **Vote.** On joining the drop, a machine votes what it holds of the
//!    dropped seat's turns and executes none past its vote until it decides.
//! 2. **Collect.** A machine whose turn it is to decide waits for the vote
//!    of every participant that is not out; its proposal is the highest of
//!    them. It fetches the turns up to the proposal from the lowest voter
//!    that holds them (a relay request), and if that voter goes out first,
//!    proposes again without its vote. So it holds its proposal whole.
//! 3. **Decide in rank order** (the hierarchical consensus of Cachin,
//!    Guerraoui and Rodrigues, *Introduction to Reliable and Secure
//!    Distributed Programming*, 5.1.4). A machine decides once every
//!    participant ranked below it is out or has told it its decision. It
//!    decides what the highest-ranked of those told it, else its own
//!    proposal, and tells the participants ranked above it.
//! 4. **A decision is delivered with its turns.** A machine takes another's
//!    decision only once it holds the turns up to that cut: it asks the
//!    sender for what it lacks, and if the sender goes out first, it never
//!    took the decision (as if it had never arrived).
//!
//! Why it holds: the lowest-ranked survivor `L` never sees a survivor out,
//! so every survivor ranked above waits for `L`'s decision and takes it,
//! and every machine between them decided `L`'s value too. `L` collected
//! every survivor's vote (or took a decision whose maker did), so the cut
//! holds every turn any survivor executed; whoever decided holds the cut
//! whole and hands it on. A player that quits is out for the others once
//! its removal executed; it still hears them (its link lingers, see the
//! session's `drops.rs`) and decides in turn, and any decision it makes holds
//! every survivor's vote, which is all it needs to run its last frames
//! like the others. `tools/drop-model` checks all of this exhaustively.

use crate::report::record::MAX_SEATS;

/// What a machine holds of the dropped seat's turns: the last send frame
/// held whole, `None` for none. Ordered: `None` below every frame.
pub type Holding = Option<u32>;

/// What this machine knows when the agreement acts, as bit masks of seats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct View {
    /// This machine's seat (a participant).
    pub local: u8,
    /// The participants: the human seats other than the dropped one.
    pub participants: u32,
    /// Participants that are out: dropped or removed, as this machine sees it.
    pub out: u32,
    /// Seats messages can go to (the participants not out, and players
    /// that left but still hear us).
    pub reachable: u32,
    /// What this machine holds of the dropped seat's turns now.
    pub holds: Holding,
}

impl View {
    fn is_out(&self, seat: u8) -> bool {
        self.out & 1 << seat != 0
    }

    fn is_reachable(&self, seat: u8) -> bool {
        seat != self.local && self.reachable & 1 << seat != 0
    }

    /// Participants not out, lowest first (this machine included).
    fn live(&self) -> impl Iterator<Item = u8> + '_ {
        (0..MAX_SEATS as u8).filter(|s| self.participants & 1 << s != 0 && !self.is_out(*s))
    }

    fn reachable_peers(&self) -> impl Iterator<Item = u8> + '_ {
        (0..MAX_SEATS as u8).filter(|s| self.is_reachable(*s))
    }
}

/// A message the agreement asks the session to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Send {
    /// This machine's vote: what it holds.
    Vote {
        /// The seat to send it to.
        to: u8,
        /// What this machine holds of the dropped seat's turns.
        holds: Holding,
    },
    /// This machine's decision.
    Decided {
        /// The seat to send it to.
        to: u8,
        /// The dropped seat's last send frame that executes.
        cut: Holding,
    },
    /// Ask `to` for the dropped seat's turns after `after`.
    RelayRequest {
        /// The seat to ask (one that holds more).
        to: u8,
        /// The last send frame of the dropped seat's turns this machine
        /// holds whole.
        after: Holding,
    },
}

/// One drop as one machine sees it. See the module docs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Agreement {
    /// Every participant's vote this machine has (its own once it joined).
    votes: [Option<Holding>; MAX_SEATS],
    /// This machine joined (voted).
    joined: bool,
    /// Seats whose decision was delivered (with its turns).
    delivered: u32,
    /// The decision of the highest-ranked seat below this one delivered so
    /// far: (seat, cut).
    adopted: Option<(u8, Holding)>,
    /// Decisions received whose turns this machine does not hold yet.
    pending: [Option<Holding>; MAX_SEATS],
    /// The voter this machine fetches its proposal's turns from.
    fetching: Option<u8>,
    /// Seats asked for turns (relays are taken only from them).
    asked: u32,
    decided: Option<Holding>,
}

impl Agreement {
    /// Whether this machine joined the drop.
    pub fn is_joined(&self) -> bool {
        self.joined
    }

    /// This machine's own vote, once joined.
    pub fn vote(&self, local: u8) -> Option<Holding> {
        self.votes[usize::from(local)]
    }

    /// The decided cut, once decided.
    pub fn decided(&self) -> Option<Holding> {
        self.decided
    }

    /// Whether this machine asked `seat` for turns (so relays from it are
    /// answers, not forgeries).
    pub fn asked(&self, seat: u8) -> bool {
        self.asked & 1 << seat != 0
    }

    /// Join with this machine's vote (what it holds now) and tell everyone
    /// reachable. False if it had joined already.
    pub fn join(&mut self, view: &View, out: &mut Vec<Send>) -> bool {
        if self.joined {
            return false;
        }
        self.joined = true;
        self.votes[usize::from(view.local)] = Some(view.holds);
        for to in view.reachable_peers() {
            out.push(Send::Vote {
                to,
                holds: view.holds,
            });
        }
        true
    }

    /// `from`'s vote. A vote from a seat that is out does not count; a
    /// machine that decided answers a vote from a seat ranked above with its
    /// decision (a late participant may still wait for it).
    pub fn on_vote(&mut self, view: &View, from: u8, holds: Holding, out: &mut Vec<Send>) {
        if let Some(cut) = self.decided {
            if from > view.local && view.is_reachable(from) {
                out.push(Send::Decided { to: from, cut });
            }
            return;
        }
        if view.is_out(from) || view.participants & 1 << from == 0 {
            return;
        }
        let slot = &mut self.votes[usize::from(from)];
        if slot.is_none() {
            *slot = Some(holds);
        }
    }

    /// `from`'s decision: delivered at once if this machine holds its
    /// turns, else once they arrive (it asks `from` for them). Ignored
    /// before joining (the decider answers the vote again), from a seat
    /// that is out and from a seat ranked above this one (it never counts).
    pub fn on_decided(&mut self, view: &View, from: u8, cut: Holding, out: &mut Vec<Send>) {
        let participant = view.participants & 1 << from != 0;
        if !self.joined || self.decided.is_some() || !participant || view.is_out(from) {
            return;
        }
        if from >= view.local {
            return; // only the seats ranked below count
        }
        if view.holds >= cut {
            self.deliver(view.local, from, cut);
        } else if self.pending[usize::from(from)] != Some(cut) {
            self.pending[usize::from(from)] = Some(cut);
            self.ask(from, view.holds, out);
        }
    }

    fn ask(&mut self, to: u8, after: Holding, out: &mut Vec<Send>) {
        self.asked |= 1 << to;
        out.push(Send::RelayRequest { to, after });
    }

    fn deliver(&mut self, local: u8, from: u8, cut: Holding) {
        self.delivered |= 1 << from;
        let higher = self.adopted.map_or(true, |(rank, _)| from > rank);
        if from < local && higher {
            self.adopted = Some((from, cut));
        }
    }

    /// Move on with what `view` says: deliver decisions whose turns are
    /// here, drop those whose senders went out, fetch, decide. Returns the
    /// cut when this call decided it. Call it whenever the view changes
    /// (a vote, a decision, turns, a seat out).
    pub fn progress(&mut self, view: &View, out: &mut Vec<Send>) -> Option<Holding> {
        if !self.joined || self.decided.is_some() {
            return None;
        }
        for seat in 0..MAX_SEATS as u8 {
            let Some(cut) = self.pending[usize::from(seat)] else {
                continue;
            };
            if view.is_out(seat) {
                // Its sender went out before its turns arrived: as if the
                // decision had never arrived.
                self.pending[usize::from(seat)] = None;
            } else if view.holds >= cut {
                self.pending[usize::from(seat)] = None;
                self.deliver(view.local, seat, cut);
            }
        }
        // Every participant ranked below: out, or its decision delivered.
        let waiting = view
            .live()
            .filter(|s| *s < view.local)
            .any(|s| self.delivered & 1 << s == 0);
        if waiting {
            return None;
        }
        let cut = match self.adopted {
            Some((_, cut)) => cut,
            None => self.proposal(view, out)?,
        };
        // Decided: nothing else of the drop matters any more.
        *self = Agreement {
            joined: true,
            decided: Some(cut),
            ..Agreement::default()
        };
        // Only the seats ranked above wait for this decision.
        for to in view.reachable_peers().filter(|s| *s > view.local) {
            out.push(Send::Decided { to, cut });
        }
        Some(cut)
    }

    /// The highest vote of the participants not out, once all are in and
    /// this machine holds the turns up to it (fetching them if not).
    fn proposal(&mut self, view: &View, out: &mut Vec<Send>) -> Option<Holding> {
        let mut highest: Option<Holding> = None;
        for seat in view.live() {
            let vote = self.votes[usize::from(seat)]?;
            highest = Some(highest.map_or(vote, |h| h.max(vote)));
        }
        let highest = highest?;
        if view.holds >= highest {
            return Some(highest);
        }
        // The lowest voter holding it has the turns: ask it, once.
        let from = view
            .live()
            .find(|s| self.votes[usize::from(*s)] == Some(highest))?;
        if self.fetching != Some(from) {
            self.fetching = Some(from);
            self.ask(from, view.holds, out);
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(local: u8, participants: u32, out: u32, holds: Holding) -> View {
        View {
            local,
            participants,
            out,
            reachable: participants & !out & !(1 << local),
            holds,
        }
    }

    #[test]
    fn the_lowest_survivor_decides_the_highest_vote_once_it_holds_it() {
        // Seats 0, 1, 2; seat 3 vanished. Seat 0 holds through 4, seat 2 through 6.
        let mut a = Agreement::default();
        let mut out = Vec::new();
        let v = view(0, 0b0111, 0, Some(4));
        assert!(a.join(&v, &mut out));
        assert_eq!(out.len(), 2, "a vote to each other participant");
        out.clear();
        a.on_vote(&v, 1, Some(5), &mut out);
        assert_eq!(a.progress(&v, &mut out), None, "seat 2 has not voted");
        a.on_vote(&v, 2, Some(6), &mut out);
        assert_eq!(a.progress(&v, &mut out), None, "it lacks turns 5 and 6");
        assert_eq!(
            out,
            vec![Send::RelayRequest {
                to: 2,
                after: Some(4)
            }]
        );
        assert!(a.asked(2));
        out.clear();
        let v = view(0, 0b0111, 0, Some(6));
        assert_eq!(a.progress(&v, &mut out), Some(Some(6)));
        assert_eq!(out.len(), 2, "the decision to each other participant");
    }

    #[test]
    fn a_voter_that_goes_out_before_relaying_is_left_out_of_the_proposal() {
        let mut a = Agreement::default();
        let mut out = Vec::new();
        let v = view(0, 0b0111, 0, Some(4));
        a.join(&v, &mut out);
        a.on_vote(&v, 1, Some(5), &mut out);
        a.on_vote(&v, 2, Some(6), &mut out);
        assert_eq!(a.progress(&v, &mut out), None);
        // Seat 2 vanishes: the proposal is seat 1's vote, fetched from seat 1.
        let v = view(0, 0b0111, 0b0100, Some(4));
        out.clear();
        assert_eq!(a.progress(&v, &mut out), None);
        assert_eq!(
            out,
            vec![Send::RelayRequest {
                to: 1,
                after: Some(4)
            }]
        );
        let v = view(0, 0b0111, 0b0100, Some(5));
        assert_eq!(
            a.progress(&v, &mut out),
            Some(Some(5)),
            "seat 2's turn 6 is not in the cut"
        );
    }

    #[test]
    fn a_machine_takes_the_decision_of_the_highest_ranked_seat_below_it() {
        let mut a = Agreement::default();
        let mut out = Vec::new();
        let v = view(2, 0b0111, 0, Some(3));
        a.join(&v, &mut out);
        out.clear();
        // Seat 1's decision arrives first, but seat 0 is below it and live.
        a.on_decided(&v, 1, Some(3), &mut out);
        assert_eq!(a.progress(&v, &mut out), None, "waits for seat 0");
        // Seat 0 decides 5: the turns are missing, so it asks seat 0.
        a.on_decided(&v, 0, Some(5), &mut out);
        assert_eq!(
            out,
            vec![Send::RelayRequest {
                to: 0,
                after: Some(3)
            }]
        );
        out.clear();
        assert_eq!(
            a.progress(&v, &mut out),
            None,
            "seat 0's turns are not here"
        );
        let v = view(2, 0b0111, 0, Some(5));
        assert_eq!(
            a.progress(&v, &mut out),
            Some(Some(3)),
            "seat 1 ranks above seat 0: its decision stands"
        );
    }

    #[test]
    fn a_decision_whose_sender_went_out_before_its_turns_arrived_is_never_taken() {
        let mut a = Agreement::default();
        let mut out = Vec::new();
        let v = view(1, 0b0111, 0, None);
        a.join(&v, &mut out);
        a.on_decided(&v, 0, Some(9), &mut out);
        let v = view(1, 0b0111, 0b0001, None);
        a.on_vote(&v, 2, Some(2), &mut out);
        out.clear();
        // Seat 0 is out: seat 1 decides on its own, from the votes of 1 and 2.
        assert_eq!(a.progress(&v, &mut out), None, "fetching seat 2's turns");
        let v = view(1, 0b0111, 0b0001, Some(2));
        assert_eq!(a.progress(&v, &mut out), Some(Some(2)));
    }

    #[test]
    fn a_machine_that_decided_answers_a_late_vote_with_its_decision() {
        let mut a = Agreement::default();
        let mut out = Vec::new();
        let v = view(0, 0b011, 0, None);
        a.join(&v, &mut out);
        a.on_vote(&v, 1, None, &mut out);
        assert_eq!(a.progress(&v, &mut out), Some(None));
        out.clear();
        a.on_vote(&v, 1, None, &mut out);
        assert_eq!(out, vec![Send::Decided { to: 1, cut: None }]);
    }
}
