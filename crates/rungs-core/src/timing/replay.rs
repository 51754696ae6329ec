//! Timing vectors (`tests/vectors/README.md`): the parser and the replay.
//!
//! A vector is one game replayed through the adaptive timing: executed
//! reports and removals go in; every timing event the master sends, every
//! change of the timing in force and every player message come out. The
//! replay drives one [`TimingMachine`] per human seat exactly as an engine
//! would, including queueing the master's timing events as commands.

use std::fmt;

use super::machine::{player_message_text, MachineConfig, Output, TimingMachine};
use super::{Timing, TimingEvent};
use crate::error::{Error, Result};
use crate::report::Report;
use crate::wire::cursor::DecodeError;

/// The replay vector's text as a layout, in error messages.
const LAYOUT: &str = "replay vector";

/// A line of the vector that breaks `rule`.
fn bad_line(rule: &'static str) -> Error {
    Error::malformed(LAYOUT, DecodeError::Invalid(rule))
}

/// One line of output, in the vector's own words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expect {
    /// `send F SP LA FPS`
    Send { frame: u32, timing: Timing, fps: u8 },
    /// `force F SP LA FPS`
    Force { frame: u32, timing: Timing, fps: u8 },
    /// `message F TEXT`
    Message { frame: u32, text: String },
}

impl fmt::Display for Expect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Expect::Send { frame, timing, fps } => {
                write!(
                    f,
                    "send {frame} {} {} {fps}",
                    timing.send_period(),
                    timing.look_ahead()
                )
            }
            Expect::Force { frame, timing, fps } => {
                write!(
                    f,
                    "force {frame} {} {} {fps}",
                    timing.send_period(),
                    timing.look_ahead()
                )
            }
            Expect::Message { frame, text } => write!(f, "message {frame} {text}"),
        }
    }
}

/// An executed input event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Input {
    Report {
        frame: u32,
        seat: u8,
        report: Report,
    },
    Remove {
        frame: u32,
        seat: u8,
    },
}

impl Input {
    fn frame(&self) -> u32 {
        match self {
            Input::Report { frame, .. } | Input::Remove { frame, .. } => *frame,
        }
    }
}

/// A parsed vector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Vector {
    pub speed_fps: u8,
    /// Human players in house order.
    pub players: Vec<u8>,
    pub until: u32,
    /// Inputs in file order.
    pub inputs: Vec<Input>,
    /// Expected outputs in file order.
    pub expects: Vec<Expect>,
}

fn field<T: std::str::FromStr>(word: Option<&str>, what: &'static str) -> Result<T> {
    word.and_then(|w| w.parse().ok())
        .ok_or_else(|| bad_line(what))
}

fn timing_fields<'a>(words: &mut impl Iterator<Item = &'a str>) -> Result<(u32, Timing, u8)> {
    let frame = field(words.next(), "frame")?;
    let send_period = field(words.next(), "send period")?;
    let look_ahead = field(words.next(), "look-ahead")?;
    let fps = field(words.next(), "fps")?;
    Ok((frame, Timing::new(send_period, look_ahead)?, fps))
}

impl Vector {
    /// Parse a `.vec` text. Errors name the line.
    pub fn parse(text: &str) -> std::result::Result<Vector, String> {
        let mut vector = Vector {
            speed_fps: 0,
            players: Vec::new(),
            until: 0,
            inputs: Vec::new(),
            expects: Vec::new(),
        };
        for (index, raw) in text.lines().enumerate() {
            let line = raw.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            vector
                .parse_line(line)
                .map_err(|e| format!("line {}: {e}: {raw}", index + 1))?;
        }
        if vector.speed_fps == 0 || vector.players.is_empty() {
            return Err("a vector needs `speed` and `players`".to_string());
        }
        Ok(vector)
    }

    fn parse_line(&mut self, line: &str) -> Result<()> {
        let mut words = line.split_whitespace();
        match words.next() {
            Some("speed") => self.speed_fps = field(words.next(), "speed")?,
            Some("players") => {
                self.players = words
                    .map(|w| field(Some(w), "player"))
                    .collect::<Result<_>>()?;
                return Ok(());
            }
            Some("until") => self.until = field(words.next(), "until")?,
            Some("report") => {
                let frame = field(words.next(), "frame")?;
                let seat = field(words.next(), "player")?;
                let process_us = field(words.next(), "process µs")?;
                let max_wait_ms = field(words.next(), "max wait")?;
                let worst_rtt_ms = match words.next() {
                    Some("-") => None,
                    rtt => Some(field(rtt, "round trip")?),
                };
                let report = Report {
                    process_us,
                    max_wait_ms,
                    worst_rtt_ms,
                    detail: None,
                };
                self.inputs.push(Input::Report {
                    frame,
                    seat,
                    report,
                });
            }
            Some("remove") => {
                let frame = field(words.next(), "frame")?;
                let seat = field(words.next(), "player")?;
                self.inputs.push(Input::Remove { frame, seat });
            }
            Some("expect") => {
                let kind = words.next();
                let expect = match kind {
                    Some("send") => {
                        let (frame, timing, fps) = timing_fields(&mut words)?;
                        Expect::Send { frame, timing, fps }
                    }
                    Some("force") => {
                        let (frame, timing, fps) = timing_fields(&mut words)?;
                        Expect::Force { frame, timing, fps }
                    }
                    Some("message") => {
                        let frame = field(words.next(), "frame")?;
                        let text = words.collect::<Vec<_>>().join(" ");
                        Expect::Message { frame, text }
                    }
                    _ => return Err(bad_line("expect send|force|message")),
                };
                self.expects.push(expect);
                return Ok(());
            }
            _ => return Err(bad_line("unknown directive")),
        }
        if words.next().is_some() {
            return Err(bad_line("extra words"));
        }
        Ok(())
    }
}

/// Replay `vector` and return every send, force and message in the order
/// they happened (sends, then forces, then messages, each by frame — the
/// order `expect` lists use).
pub fn replay(vector: &Vector) -> Result<Vec<Expect>> {
    let seat_count = vector
        .players
        .iter()
        .copied()
        .max()
        .map_or(0, |m| usize::from(m) + 1);
    let mut human_seats = vec![false; seat_count];
    for &p in &vector.players {
        human_seats[usize::from(p)] = true;
    }
    let config =
        |local_seat| MachineConfig::adaptive(vector.speed_fps, human_seats.clone(), local_seat);
    // An observer for the record of outputs, plus one machine per player.
    let mut observer = TimingMachine::new(&config(None))?;
    let mut players = vector
        .players
        .iter()
        .map(|&p| TimingMachine::new(&config(Some(p))))
        .collect::<Result<Vec<_>>>()?;

    let mut sends = Vec::new();
    let mut forces = Vec::new();
    let mut messages = Vec::new();
    let mut issued: Vec<(u8, TimingEvent)> = Vec::new(); // command handle -> (seat, event)
    let mut outgoing: Vec<u64> = Vec::new(); // issued since the previous send frame
    let mut in_force: Option<(Timing, u8)> = None;
    let mut next_input = 0;
    let mut inputs: Vec<Input> = vector.inputs.clone();
    inputs.sort_by_key(Input::frame); // stable: file order within a frame

    for frame in 0..=vector.until {
        // 1. Staged decreases.
        let start = observer.begin_frame(frame)?;
        for machine in players.iter_mut() {
            if machine.begin_frame(frame)? != start {
                return Err(Error::State("machines disagree on the send frame"));
            }
        }
        // 2. Due commands.
        while let Some(due) = observer.pop_due() {
            let (seat, event) = issued[due.item as usize];
            observer.execute_timing_event(seat, event)?;
            for machine in players.iter_mut() {
                if machine.pop_due() != Some(due) {
                    return Err(Error::State("machines disagree on the due commands"));
                }
                machine.execute_timing_event(seat, event)?;
            }
        }
        // 3. The vector's inputs for this frame, in file order. A report from a
        // removed player and a repeated removal are late no-ops (S3), accepted
        // like any other; only a seat that never was a player is an error.
        while next_input < inputs.len() && inputs[next_input].frame() == frame {
            for machine in std::iter::once(&mut observer).chain(players.iter_mut()) {
                let _applied_or_late = match inputs[next_input] {
                    Input::Report { seat, report, .. } => machine.execute_report(seat, report)?,
                    Input::Remove { seat, .. } => machine.execute_removal(seat)?,
                };
            }
            next_input += 1;
        }
        // 4. The timing in force on this frame.
        let now = (observer.timing(), observer.fps());
        if in_force != Some(now) {
            forces.push(Expect::Force {
                frame,
                timing: now.0,
                fps: now.1,
            });
            in_force = Some(now);
        }
        // 5. Evaluation: only the master's machine returns an event.
        observer.end_frame()?;
        for machine in players.iter_mut() {
            if let Some(event) = machine.end_frame()? {
                let seat = machine
                    .master()
                    .ok_or(Error::State("an event without a master"))?;
                sends.push(Expect::Send {
                    frame,
                    timing: event.target,
                    fps: event.fps,
                });
                outgoing.push(issued.len() as u64);
                issued.push((seat, event));
            }
            if machine.timing() != observer.timing() || machine.fps() != observer.fps() {
                return Err(Error::State("machines disagree on the timing in force"));
            }
        }
        // 6. Send frame: everything issued since the previous one goes out.
        if observer.is_send_frame() {
            let tag = observer.command_tag();
            for handle in outgoing.drain(..) {
                let seat = issued[handle as usize].0;
                for machine in std::iter::once(&mut observer).chain(players.iter_mut()) {
                    machine.queue_command(tag, seat, handle)?;
                }
            }
        }
        while let Some(output) = observer.poll_output() {
            if let Output::PlayerMessage { frame, tier } = output {
                messages.push(Expect::Message {
                    frame,
                    text: player_message_text(tier).to_string(),
                });
            }
        }
        for machine in players.iter_mut() {
            while machine.poll_output().is_some() {}
        }
    }
    sends.extend(forces);
    sends.extend(messages);
    Ok(sends)
}

/// The first difference between what a vector expects and what the replay
/// produced, in words; `None` when they match exactly.
pub fn first_difference(expected: &[Expect], actual: &[Expect]) -> Option<String> {
    for (index, (e, a)) in expected.iter().zip(actual).enumerate() {
        if e != a {
            return Some(format!(
                "expectation {}: expected `{e}`, got `{a}`",
                index + 1
            ));
        }
    }
    match expected.len().cmp(&actual.len()) {
        std::cmp::Ordering::Less => Some(format!("unexpected `{}`", actual[expected.len()])),
        std::cmp::Ordering::Greater => Some(format!("missing `{}`", expected[actual.len()])),
        std::cmp::Ordering::Equal => None,
    }
}
