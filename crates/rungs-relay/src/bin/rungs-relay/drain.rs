//! Graceful drain: what SIGTERM and SIGINT start.
//!
//! The relay stops taking new matches (the setup file is no longer read,
//! the admin socket's `create` is refused; a client whose ticket names a
//! match the relay does not hold is rejected `UnknownMatch`, as always) and
//! keeps serving the matches it holds — reconnects included — until every
//! one is over or `--drain-seconds` have passed. At that deadline (or at a
//! second signal) it ends the matches still going; their clients hear
//! MatchOver, reason `Ended`. Then it serves [`FLUSH`] more, or until its
//! last connection closed, so those last bundles reach the clients, and
//! exits: [`Outcome::code`] says whether every match finished on its own.
//!
//! Why keep loading matches rather than end them at once: a lobby that
//! created a match expects it played; the drain's deadline bounds the wait
//! either way, and `/health` (503 while draining) tells a lobby to create
//! new matches elsewhere.

use std::time::{Duration, Instant};

use rungs_core::relay::Relay;

/// How long a drain waits for matches by default (`--drain-seconds`).
pub const DEFAULT_DRAIN_SECONDS: u64 = 300;
/// Longest `--drain-seconds`.
pub const MAX_DRAIN_SECONDS: u64 = 86_400;
/// After the last match is over, how long the relay keeps serving while
/// connections remain, so the final bundles and MatchOver are delivered
/// (resent if lost).
pub const FLUSH: Duration = Duration::from_secs(1);

/// How a drain ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Every match was over before the deadline (none ended by the drain).
    Finished,
    /// This many matches were still going at the deadline and were ended.
    EndedAtDeadline(usize),
}

impl Outcome {
    /// The process's exit code: 0 when every match finished, 3 when the
    /// drain ended some (1 and 2 are errors and bad usage).
    pub fn code(self) -> u8 {
        match self {
            Outcome::Finished => 0,
            Outcome::EndedAtDeadline(_) => 3,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Serving,
    Draining {
        deadline: Instant,
    },
    /// No match is going: delivering the last datagrams.
    Closing {
        since: Instant,
        outcome: Outcome,
    },
}

/// The drain's state, stepped once per iteration of the serving loop.
#[derive(Debug)]
pub struct Drain {
    phase: Phase,
    drain_for: Duration,
}

impl Drain {
    pub fn new(drain_for: Duration) -> Drain {
        Drain {
            phase: Phase::Serving,
            drain_for,
        }
    }

    /// Whether new matches may be added.
    pub fn accepting_matches(&self) -> bool {
        self.phase == Phase::Serving
    }

    /// Whether the deadline came with matches going (they were ended): a
    /// match that ends with reason `Ended` now is one of them.
    pub fn ended_matches(&self) -> bool {
        matches!(
            self.phase,
            Phase::Closing {
                outcome: Outcome::EndedAtDeadline(_),
                ..
            }
        )
    }

    /// Advance with the count of termination signals received so far: the
    /// first starts the drain, a second ends it at once. `Exit` when the
    /// relay should exit now.
    pub fn step(
        &mut self,
        signals: u32,
        relay: &mut Relay,
        now_us: u64,
        log: impl Fn(&str),
    ) -> Step {
        let now = Instant::now();
        if self.phase == Phase::Serving {
            if signals == 0 {
                return Step::Serve;
            }
            let going = going(relay).count();
            log(&format!(
                "draining: no new matches; {going} match(es) going, ended in {} s if not over by then (a second signal ends them now)",
                self.drain_for.as_secs()
            ));
            self.phase = Phase::Draining {
                deadline: now + self.drain_for,
            };
        }
        match self.phase {
            Phase::Serving => Step::Serve,
            Phase::Draining { deadline } => {
                let over = going(relay).next().is_none();
                if over {
                    log("drained: every match is over");
                    self.phase = Phase::Closing {
                        since: now,
                        outcome: Outcome::Finished,
                    };
                } else if signals >= 2 || now >= deadline {
                    let ids: Vec<u64> = going(relay).collect();
                    for id in &ids {
                        let _ = relay.end_match(*id, now_us);
                    }
                    log(&format!(
                        "drain {}: ended {} match(es) still going",
                        if signals >= 2 {
                            "cut short by a second signal"
                        } else {
                            "deadline"
                        },
                        ids.len()
                    ));
                    self.phase = Phase::Closing {
                        since: now,
                        outcome: Outcome::EndedAtDeadline(ids.len()),
                    };
                    return Step::Ended(ids.len());
                }
                Step::Serve
            }
            Phase::Closing { since, outcome } => {
                let delivered = relay.connection_count() == 0;
                if delivered || now >= since + FLUSH {
                    Step::Exit(outcome)
                } else {
                    Step::Serve
                }
            }
        }
    }
}

/// What the serving loop does after a [`Drain::step`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Go on serving.
    Serve,
    /// Go on serving: the drain has just ended this many matches.
    Ended(usize),
    /// Exit now.
    Exit(Outcome),
}

/// The matches not over.
fn going(relay: &Relay) -> impl Iterator<Item = u64> + '_ {
    relay
        .match_ids()
        .filter(|id| relay.sequencer(*id).is_some_and(|s| !s.is_over()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rungs_core::relay::ticket::LobbySecret;
    use rungs_core::relay::{MatchSetup, RelayConfig};

    fn relay_with_matches(ids: &[u64]) -> Relay {
        let secret = LobbySecret::new(*b"drain-test-key-1").unwrap();
        let mut relay = Relay::new(RelayConfig::new(secret)).unwrap();
        for id in ids {
            relay.add_match(MatchSetup::new(*id, 2, 0b11), 0).unwrap();
        }
        relay
    }

    #[test]
    fn no_match_going_drains_at_once_and_exits_0() {
        let mut relay = relay_with_matches(&[]);
        let mut drain = Drain::new(Duration::from_secs(300));
        assert_eq!(drain.step(0, &mut relay, 0, |_| {}), Step::Serve);
        assert!(drain.accepting_matches());
        assert_eq!(drain.step(1, &mut relay, 0, |_| {}), Step::Serve);
        assert!(!drain.accepting_matches());
        // No connection to wait for: out on the next step.
        assert_eq!(
            drain.step(1, &mut relay, 0, |_| {}),
            Step::Exit(Outcome::Finished)
        );
        assert_eq!(Outcome::Finished.code(), 0);
    }

    #[test]
    fn matches_going_at_the_deadline_are_ended_and_the_code_says_so() {
        let mut relay = relay_with_matches(&[1, 2]);
        relay.end_match(2, 0).unwrap();
        let mut drain = Drain::new(Duration::ZERO);
        let lines = std::cell::RefCell::new(Vec::new());
        let log = |l: &str| lines.borrow_mut().push(l.to_string());
        assert_eq!(drain.step(1, &mut relay, 10, log), Step::Ended(1));
        assert!(relay.sequencer(1).unwrap().is_over(), "ended by the drain");
        assert!(drain.ended_matches());
        assert_eq!(
            drain.step(1, &mut relay, 10, log),
            Step::Exit(Outcome::EndedAtDeadline(1))
        );
        assert_eq!(Outcome::EndedAtDeadline(1).code(), 3);
        assert_eq!(
            lines.borrow().as_slice(),
            [
                "draining: no new matches; 1 match(es) going, ended in 0 s if not over by then (a second signal ends them now)",
                "drain deadline: ended 1 match(es) still going",
            ]
        );
    }

    #[test]
    fn a_second_signal_ends_the_drain_before_its_deadline() {
        let mut relay = relay_with_matches(&[1]);
        let mut drain = Drain::new(Duration::from_secs(300));
        assert_eq!(drain.step(1, &mut relay, 0, |_| {}), Step::Serve);
        assert!(!relay.sequencer(1).unwrap().is_over(), "still going");
        assert_eq!(drain.step(2, &mut relay, 0, |_| {}), Step::Ended(1));
        assert!(relay.sequencer(1).unwrap().is_over());
        assert_eq!(
            drain.step(2, &mut relay, 0, |_| {}),
            Step::Exit(Outcome::EndedAtDeadline(1))
        );
    }
}
