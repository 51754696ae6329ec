//! A model of one drop (S4.7) for the `stateright` model checker, driving
//! rungs' own drop agreement ([`rungs_core::session::agreement`]): the
//! same code the lockstep session runs, fed every interleaving of
//! crashes, detections, deliveries, losses and message orders.
//!
//! # What is modelled
//!
//! A game of `seats` seats; the last one vanished, and the others (the
//! *participants*, seats `0 .. seats − 1`, ranked by seat) drop it. Each
//! participant starts holding a prefix of the vanished seat's turns — any
//! of none, turn 0, …, turn `turns − 1`, independently — and has executed
//! everything it holds (the worst case). Then, in any order:
//!
//! - a participant joins the drop (votes);
//! - a message in flight is delivered — any of them, in any order (the
//!   network is a multiset: no per-link order is assumed);
//! - a participant crashes (up to all but one of them: with the vanished
//!   seat, any number up to `seats − 1`); its messages still in flight may
//!   be delivered or lost, each on its own (lost: never delivered before
//!   the addressee notices the crash, which discards them);
//! - a survivor detects a crash (the liveness timeout);
//! - with `lossy`, any message may be lost, also between live machines
//!   (then only safety is checked: a lost message stalls a real game no
//!   more than a dead link does);
//! - with `late_turns`, a turn of the vanished seat still in flight reaches
//!   a participant after it joined;
//! - with `quitters`, a participant quits: the others may count it out at
//!   any moment (its removal executed) while it keeps running and hearing
//!   them until it stops.
//!
//! A turn relayed is modelled by its range: a relay answer raises the
//! asker's holding to what the answerer holds.
//!
//! # Properties
//!
//! - **agreement**: every two live participants that are not quitters
//!   and have decided, decided the same cut;
//! - **validity**: every decided cut (quitters' included) holds every turn
//!   a live participant that is not a quitter executed;
//! - **holding**: whoever decided holds its cut whole (it can run it);
//! - **termination** (not with `lossy`): once nothing can happen but more
//!   crashes or early removals, every live participant has decided.
//!
//! The properties are checked in every reachable state, so a participant
//! that crashes later was held to them while it lived: stronger than the
//! specification, which speaks of survivors.
//!
//! [`Protocol::VotesOnly`] is the rule rungs used before (decide once the
//! votes of the participants not out are in; the cut is the highest vote;
//! its holder relays): the checker must find the counterexample to it, or
//! it would prove nothing.

use std::collections::BTreeMap;

use rungs_core::session::agreement::{Agreement, Holding, Send, View};
use stateright::{Model, Property};

/// Which decision rule the participants run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// rungs' drop agreement.
    Agreement,
    /// The rule before it: decide when the votes are in, highest vote wins.
    VotesOnly,
}

/// One configuration to check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DropModel {
    /// Seats of the game, the vanished one included (3 to 5).
    pub seats: u8,
    /// Turns of the vanished seat anyone may hold (holdings: none, 0, ...).
    pub turns: u32,
    /// Any message may be lost (safety only).
    pub lossy: bool,
    /// Turns of the vanished seat may still arrive after a participant joined.
    pub late_turns: bool,
    /// Participants that quit (bit mask).
    pub quitters: u32,
    pub protocol: Protocol,
}

/// A message between participants.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Body {
    Vote(Holding),
    Decided(Holding),
    RelayRequest(Holding),
    /// The answer: the asker now holds through this.
    Relay(Holding),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Message {
    pub from: u8,
    pub to: u8,
    pub body: Body,
}

/// The naive rule's state (see [`Protocol::VotesOnly`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct VotesOnly {
    joined: bool,
    votes: [Option<Holding>; 8],
    decided: Option<Holding>,
    /// The holder named by the decision, asked for its turns.
    asked: Option<u8>,
}

/// The rule a participant runs. (Unboxed: states are copied by the
/// million, and a box would cost an allocation each.)
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[allow(clippy::large_enum_variant)]
pub enum Rule {
    Agreement(Agreement),
    VotesOnly(VotesOnly),
}

/// One participant.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Node {
    pub rule: Rule,
    /// What it holds of the vanished seat's turns.
    pub holds: Holding,
    /// What it executed before voting (all it held).
    pub executed: Holding,
    pub alive: bool,
    /// Participants out, as it sees them.
    pub out: u32,
    /// Participants it sends nothing to (they stopped and it noticed).
    pub unreachable: u32,
}

impl Node {
    fn decided(&self) -> Option<Holding> {
        match &self.rule {
            Rule::Agreement(a) => a.decided(),
            Rule::VotesOnly(v) => v.decided,
        }
    }

    fn joined(&self) -> bool {
        match &self.rule {
            Rule::Agreement(a) => a.is_joined(),
            Rule::VotesOnly(v) => v.joined,
        }
    }

    fn view(&self, local: u8, participants: u32) -> View {
        View {
            local,
            participants,
            out: self.out,
            reachable: participants & !self.unreachable & !(1 << local),
            holds: self.holds,
        }
    }
}

/// The state: every participant and the messages in flight (a multiset).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct State {
    pub nodes: Vec<Node>,
    pub net: BTreeMap<Message, u8>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    Join(u8),
    Deliver(Message),
    Lose(Message),
    Crash(u8),
    /// `.0` notices that `.1` stopped.
    Detect(u8, u8),
    /// `.0` counts the quitter `.1` out before it stopped.
    Remove(u8, u8),
    /// A late turn of the vanished seat reaches `.0`.
    LateTurn(u8),
}

impl DropModel {
    /// rungs' agreement, `seats` seats, turns none/0/1, no quitters.
    pub fn new(seats: u8) -> DropModel {
        DropModel {
            seats,
            turns: 2,
            lossy: false,
            late_turns: false,
            quitters: 0,
            protocol: Protocol::Agreement,
        }
    }

    fn participants(&self) -> u8 {
        self.seats - 1
    }

    fn mask(&self) -> u32 {
        (1u32 << self.participants()) - 1
    }

    fn is_quitter(&self, seat: u8) -> bool {
        self.quitters & 1 << seat != 0
    }

    /// Holdings a participant may start with: none, turn 0, ...
    fn holdings(&self) -> Vec<Holding> {
        std::iter::once(None)
            .chain((0..self.turns).map(Some))
            .collect()
    }

    /// Whether `seat` may crash now: someone who is not a quitter survives.
    fn may_crash(&self, state: &State, seat: u8) -> bool {
        if self.is_quitter(seat) {
            return true;
        }
        let staying = (0..self.participants())
            .filter(|s| !self.is_quitter(*s) && state.nodes[usize::from(*s)].alive)
            .count();
        staying > 1
    }

    /// Let `seat` act on `what`, then send what it says.
    fn act(
        &self,
        state: &mut State,
        seat: u8,
        what: impl FnOnce(&mut Node, &View, &mut Vec<Send>),
    ) {
        let mut sends = Vec::new();
        let node = &mut state.nodes[usize::from(seat)];
        let view = node.view(seat, self.mask());
        what(node, &view, &mut sends);
        // Whatever changed, the rule moves on with the new view.
        let view = node.view(seat, self.mask());
        match &mut node.rule {
            Rule::Agreement(a) => {
                a.progress(&view, &mut sends);
            }
            Rule::VotesOnly(v) => votes_only_progress(v, &view, &mut sends),
        }
        for send in sends {
            let (to, body) = match send {
                Send::Vote { to, holds } => (to, Body::Vote(holds)),
                Send::Decided { to, cut } => (to, Body::Decided(cut)),
                Send::RelayRequest { to, after } => (to, Body::RelayRequest(after)),
            };
            if state.nodes[usize::from(to)].alive {
                *state
                    .net
                    .entry(Message {
                        from: seat,
                        to,
                        body,
                    })
                    .or_default() += 1;
            }
        }
    }

    fn deliver(&self, state: &mut State, m: Message) {
        self.act(state, m.to, |node, view, sends| {
            match (&mut node.rule, m.body) {
                (Rule::Agreement(a), Body::Vote(h)) => a.on_vote(view, m.from, h, sends),
                (Rule::Agreement(a), Body::Decided(c)) => a.on_decided(view, m.from, c, sends),
                (Rule::VotesOnly(v), Body::Vote(h)) => {
                    if !view.out_has(m.from) && v.votes[usize::from(m.from)].is_none() {
                        v.votes[usize::from(m.from)] = Some(h);
                    }
                }
                (Rule::VotesOnly(_), Body::Decided(_)) => {}
                // Answered in `next_state`: it needs the whole state.
                (_, Body::RelayRequest(_)) => {}
                (Rule::Agreement(a), Body::Relay(through)) => {
                    let taken = a.is_joined() && a.decided().is_none() && a.asked(m.from);
                    if taken && !view.out_has(m.from) {
                        node.holds = node.holds.max(through);
                    }
                }
                (Rule::VotesOnly(v), Body::Relay(through)) => {
                    if v.asked == Some(m.from) {
                        node.holds = node.holds.max(through);
                    }
                }
            }
        });
    }

    fn all_actions(&self, state: &State, actions: &mut Vec<Action>, optional: bool) {
        let p = self.participants();
        for seat in 0..p {
            let node = &state.nodes[usize::from(seat)];
            if node.alive && !node.joined() {
                actions.push(Action::Join(seat));
            }
            if node.alive && self.late_turns && node.joined() && node.decided().is_none() {
                let last = Some(self.turns - 1);
                if node.holds < last {
                    actions.push(Action::LateTurn(seat));
                }
            }
            if !node.alive {
                for other in 0..p {
                    let o = &state.nodes[usize::from(other)];
                    // (A machine that decided has nothing left to learn.)
                    let undecided = o.decided().is_none();
                    if o.alive && undecided && o.unreachable & 1 << seat == 0 {
                        actions.push(Action::Detect(other, seat));
                    }
                }
            }
        }
        for m in state.net.keys() {
            actions.push(Action::Deliver(*m));
            // A stopped machine's messages that are never delivered are
            // dropped when their addressee notices it stopped (it would
            // ignore them from then on): the same states as losing them.
            if self.lossy {
                actions.push(Action::Lose(*m));
            }
        }
        if optional {
            for seat in 0..p {
                let node = &state.nodes[usize::from(seat)];
                if node.alive && self.may_crash(state, seat) {
                    actions.push(Action::Crash(seat));
                }
                if node.alive && self.is_quitter(seat) {
                    for other in (0..p).filter(|o| *o != seat) {
                        let o = &state.nodes[usize::from(other)];
                        if o.alive && o.decided().is_none() && o.out & 1 << seat == 0 {
                            actions.push(Action::Remove(other, seat));
                        }
                    }
                }
            }
        }
    }

    /// One state for all the pasts that lead to the same futures: a machine
    /// that decided answers only relay requests and the votes of seats
    /// ranked above it (with its decision), and only while they live; every
    /// other message to it, and what it knows of who is out, changes
    /// nothing any more.
    fn forget_what_no_longer_matters(&self, state: &mut State) {
        let alive = (0..self.participants())
            .filter(|s| state.nodes[usize::from(*s)].alive)
            .fold(0u32, |mask, s| mask | 1 << s);
        let mut decided = 0u32;
        for (seat, node) in state.nodes.iter_mut().enumerate() {
            if node.alive && node.decided().is_some() {
                decided |= 1 << seat;
                node.out = 0;
                node.unreachable &= alive;
            }
        }
        state.net.retain(|m, _| {
            let to_decided = decided & 1 << m.to != 0;
            let answered = alive & 1 << m.from != 0
                && match m.body {
                    Body::Vote(_) => m.from > m.to,
                    Body::RelayRequest(_) => true,
                    Body::Decided(_) | Body::Relay(_) => false,
                };
            !to_decided || answered
        });
    }

    /// Nothing can happen but crashes and early removals.
    fn quiescent(&self, state: &State) -> bool {
        let mut actions = Vec::new();
        self.all_actions(state, &mut actions, false);
        actions.is_empty()
    }

    /// The participants alive, with their seats.
    fn live<'a>(&self, state: &'a State) -> impl Iterator<Item = (u8, &'a Node)> + 'a {
        (0..self.participants())
            .map(move |s| (s, &state.nodes[usize::from(s)]))
            .filter(|(_, n)| n.alive)
    }
}

trait OutHas {
    fn out_has(&self, seat: u8) -> bool;
}

impl OutHas for View {
    fn out_has(&self, seat: u8) -> bool {
        self.out & 1 << seat != 0
    }
}

/// The rule before the agreement: once the vote of every participant not
/// out is in, the cut is the highest vote and the lowest voter holding it
/// relays it.
fn votes_only_join(v: &mut VotesOnly, view: &View, sends: &mut Vec<Send>) {
    v.joined = true;
    v.votes[usize::from(view.local)] = Some(view.holds);
    for to in (0..8u8).filter(|s| s != &view.local && view.reachable & 1 << s != 0) {
        sends.push(Send::Vote {
            to,
            holds: view.holds,
        });
    }
}

fn votes_only_progress(v: &mut VotesOnly, view: &View, sends: &mut Vec<Send>) {
    if !v.joined || v.decided.is_some() {
        return;
    }
    let live: Vec<u8> = (0..8u8)
        .filter(|s| view.participants & 1 << s != 0 && !view.out_has(*s))
        .collect();
    let mut votes = Vec::new();
    for s in &live {
        match v.votes[usize::from(*s)] {
            Some(h) => votes.push((*s, h)),
            None => return,
        }
    }
    let cut = votes.iter().map(|(_, h)| *h).max().flatten();
    let holder = votes.iter().find(|(_, h)| *h == cut).map(|(s, _)| *s);
    v.decided = Some(cut);
    if let Some(holder) = holder.filter(|h| *h != view.local && view.holds < cut) {
        v.asked = Some(holder);
        sends.push(Send::RelayRequest {
            to: holder,
            after: view.holds,
        });
    }
}

impl Model for DropModel {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        let p = usize::from(self.participants());
        let holdings = self.holdings();
        let mut states = Vec::new();
        let combinations = holdings.len().pow(p as u32);
        for index in 0..combinations {
            let mut rest = index;
            let mut nodes = Vec::with_capacity(p);
            for _ in 0..p {
                let holds = holdings[rest % holdings.len()];
                rest /= holdings.len();
                nodes.push(Node {
                    rule: match self.protocol {
                        Protocol::Agreement => Rule::Agreement(Agreement::default()),
                        Protocol::VotesOnly => Rule::VotesOnly(VotesOnly::default()),
                    },
                    holds,
                    executed: holds,
                    alive: true,
                    out: 0,
                    unreachable: 0,
                });
            }
            states.push(State {
                nodes,
                net: BTreeMap::new(),
            });
        }
        states
    }

    fn actions(&self, state: &State, actions: &mut Vec<Action>) {
        self.all_actions(state, actions, true);
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        let mut state = last.clone();
        match action {
            Action::Join(seat) => {
                self.act(&mut state, seat, |node, view, sends| match &mut node.rule {
                    Rule::Agreement(a) => {
                        a.join(view, sends);
                    }
                    Rule::VotesOnly(v) => votes_only_join(v, view, sends),
                })
            }
            Action::Deliver(m) | Action::Lose(m) => {
                let count = state.net.get_mut(&m)?;
                *count -= 1;
                if *count == 0 {
                    state.net.remove(&m);
                }
                if let Action::Deliver(m) = action {
                    if let Body::RelayRequest(_) = m.body {
                        // Answered with a relay of everything the answerer
                        // holds (the session relays every kept turn after
                        // `after`).
                        let answerer = &state.nodes[usize::from(m.to)];
                        let Body::RelayRequest(after) = m.body else {
                            return None;
                        };
                        let reachable = answerer.unreachable & 1 << m.from == 0;
                        if answerer.joined()
                            && reachable
                            && answerer.holds > after
                            && state.nodes[usize::from(m.from)].alive
                        {
                            *state
                                .net
                                .entry(Message {
                                    from: m.to,
                                    to: m.from,
                                    body: Body::Relay(answerer.holds),
                                })
                                .or_default() += 1;
                        }
                    } else {
                        self.deliver(&mut state, m);
                    }
                }
            }
            Action::Crash(seat) => {
                // What a stopped machine knew never matters again: one
                // state for all of its pasts.
                let node = &mut state.nodes[usize::from(seat)];
                *node = Node {
                    rule: match self.protocol {
                        Protocol::Agreement => Rule::Agreement(Agreement::default()),
                        Protocol::VotesOnly => Rule::VotesOnly(VotesOnly::default()),
                    },
                    holds: None,
                    executed: None,
                    alive: false,
                    out: 0,
                    unreachable: 0,
                };
                // Messages to it will never matter.
                state.net.retain(|m, _| m.to != seat);
            }
            Action::Detect(at, seat) => {
                // What it still had on the way to `at` is ignored there.
                state.net.retain(|m, _| !(m.from == seat && m.to == at));
                self.act(&mut state, at, |node, _, _| {
                    node.out |= 1 << seat;
                    node.unreachable |= 1 << seat;
                })
            }
            Action::Remove(at, seat) => {
                // Only its requests still count at `at` (it still hears us).
                state.net.retain(|m, _| {
                    !(m.from == seat && m.to == at && !matches!(m.body, Body::RelayRequest(_)))
                });
                self.act(&mut state, at, |node, _, _| {
                    node.out |= 1 << seat;
                })
            }
            Action::LateTurn(seat) => self.act(&mut state, seat, |node, _, _| {
                node.holds = Some(node.holds.map_or(0, |h| h + 1));
            }),
        }
        self.forget_what_no_longer_matters(&mut state);
        Some(state)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        let mut properties = vec![
            Property::always("agreement", |model: &DropModel, state: &State| {
                let mut cut = None;
                for (seat, node) in model.live(state) {
                    if model.is_quitter(seat) {
                        continue;
                    }
                    if let Some(c) = node.decided() {
                        if cut.is_some_and(|other| other != c) {
                            return false;
                        }
                        cut = Some(c);
                    }
                }
                true
            }),
            Property::always("validity", |model: &DropModel, state: &State| {
                let executed = model
                    .live(state)
                    .filter(|(s, _)| !model.is_quitter(*s))
                    .map(|(_, n)| n.executed)
                    .max()
                    .flatten();
                model
                    .live(state)
                    .all(|(_, n)| n.decided().is_none_or(|c| c >= executed))
            }),
            Property::always("holding", |model: &DropModel, state: &State| {
                model
                    .live(state)
                    .all(|(_, n)| n.decided().is_none_or(|c| n.holds >= c))
            }),
        ];
        if !self.lossy {
            properties.push(Property::always(
                "termination",
                |model: &DropModel, state: &State| {
                    !model.quiescent(state) || model.live(state).all(|(_, n)| n.decided().is_some())
                },
            ));
        }
        properties
    }
}
