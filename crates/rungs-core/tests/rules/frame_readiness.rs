//! Frame readiness through real engine sessions (S5; decisions 25 and 67).
//!
//! Three machines run `EngineSession`s in an engine that keeps its own queue
//! and packets. The master's engine drives the timing to `3/9` and then
//! stages a decrease to `2/6`: `3/9` in force, `2/6` executes on 39, so
//! `W = 48`, `A = 48`, and send frames 45 (under `3/9`) and 48 (under `2/6`)
//! are both tagged 54. An order seat 0 issues on frame 47 travels in the
//! packet of send frame 48; that one packet, to seat 1 only, is late.
//!
//! - The naive rule ("a packet tagged at or after F from every peer") lets
//!   seat 1 run frame 54 holding only send frame 45's packet: seat 1 runs the
//!   order on 56, the others on 54. A desync.
//! - The session's rule (`frame_ready`: hold the last send frame tagged at
//!   or before F) makes seat 1 wait, and every machine runs the order on 54.

use rungs_core::session::{EngineRules, EngineSession, EventIds, SessionConfig, SessionOutput};
use rungs_core::timing::{MachineConfig, Timing};
use rungs_core::wire::{ReportLayout, TimingLayout};

use crate::timing_payload;
use timing_payload::timing_payload;

const PLAYERS: u8 = 3;
const TIMING_ID: u8 = 31;
const REPORT_ID: u8 = 37;
const ORDER_ID: u8 = 1;
const FRAMES: u32 = 100;
const LATE_SEND_FRAME: u32 = 48;
const LATE_BY_TICKS: u64 = 20;
/// Payload of seat 0's order of frame 47 (other orders carry their seat).
const LATE_ORDER_MARK: u8 = 0xAA;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Rule {
    /// Every peer has sent a packet tagged at or after F.
    NaiveTag,
    /// `EngineSession::frame_ready`.
    Session,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Event {
    tag: u32,
    seat: u8,
    seq: u32,
    type_id: u8,
    payload: Vec<u8>,
}

struct Packet {
    from: u8,
    to: u8,
    send_frame: u32,
    tag: u32,
    events: Vec<Event>,
    arrives: u64,
}

struct Machine {
    seat: u8,
    session: EngineSession,
    next_frame: u32,
    out_list: Vec<Event>,
    do_list: Vec<Event>,
    next_seq: u32,
    /// Per seat: the latest send frame held and the highest tag held.
    held_send_frame: [Option<u32>; PLAYERS as usize],
    held_tag: [Option<u32>; PLAYERS as usize],
    /// (frame executed on, seat, seq, type, first payload byte) of every
    /// event executed.
    executed: Vec<(u32, u8, u32, u8, u8)>,
    /// (send frame, tag) of every send.
    sends: Vec<(u32, u32)>,
}

impl Machine {
    fn new(seat: u8) -> Machine {
        let config = SessionConfig {
            machine: MachineConfig::adaptive(30, vec![true; usize::from(PLAYERS)], Some(seat)),
            ids: EventIds {
                timing: TIMING_ID,
                network_report: REPORT_ID,
                latency_fudge: None,
            },
            timing_layout: TimingLayout::TIBERIAN_SUN,
            report_layout: ReportLayout::Compact,
            rules: EngineRules::default(),
        };
        Machine {
            seat,
            session: EngineSession::new(&config).unwrap(),
            next_frame: 0,
            out_list: Vec::new(),
            do_list: Vec::new(),
            next_seq: 0,
            held_send_frame: [None; PLAYERS as usize],
            held_tag: [None; PLAYERS as usize],
            executed: Vec::new(),
            sends: Vec::new(),
        }
    }

    fn issue(&mut self, type_id: u8, payload: Vec<u8>) {
        self.next_seq += 1;
        self.out_list.push(Event {
            tag: 0,
            seat: self.seat,
            seq: self.next_seq,
            type_id,
            payload,
        });
    }

    fn ready(&self, rule: Rule, frame: u32) -> bool {
        match rule {
            // Nothing can be due before the first packet's tag (0 + 6 under 2/6).
            Rule::NaiveTag => {
                frame < 6
                    || self
                        .session
                        .peers()
                        .all(|p| self.held_tag[usize::from(p)].is_some_and(|t| t >= frame))
            }
            Rule::Session => self
                .session
                .frame_ready(frame, |p| self.held_send_frame[usize::from(p)])
                .unwrap(),
        }
    }

    /// Run the next frame if the rule allows; packets go to `network`.
    fn step(&mut self, rule: Rule, tick: u64, network: &mut Vec<Packet>) {
        let frame = self.next_frame;
        if frame > FRAMES || !self.ready(rule, frame) {
            return;
        }
        if self.session.frame_begin(frame).unwrap() {
            self.do_list.sort_by_key(|e| (e.tag, e.seat, e.seq));
            let due = self.do_list.partition_point(|e| e.tag <= frame);
            for event in self.do_list.drain(..due).collect::<Vec<_>>() {
                if event.type_id != ORDER_ID {
                    self.session
                        .event_executed(event.type_id, event.seat, frame, &event.payload)
                        .unwrap();
                }
                let mark = event.payload.first().copied().unwrap_or(0);
                self.executed
                    .push((frame, event.seat, event.seq, event.type_id, mark));
            }
        }
        if self.seat == 0 {
            match frame {
                10 => self.issue(TIMING_ID, timing_payload(3, 9)),
                30 => self.issue(TIMING_ID, timing_payload(2, 6)),
                47 => self.issue(ORDER_ID, vec![LATE_ORDER_MARK]),
                _ => {}
            }
        }
        if frame % 5 == u32::from(self.seat) {
            self.issue(ORDER_ID, vec![self.seat]);
        }
        self.session.frame_end().unwrap();
        self.next_frame += 1;
        while let Some(output) = self.session.poll_output() {
            match output {
                SessionOutput::QueueEvent {
                    type_id, payload, ..
                } => self.issue(type_id, payload.as_bytes().to_vec()),
                SessionOutput::SendFrame { frame, tag } => {
                    for event in &mut self.out_list {
                        event.tag = tag;
                    }
                    let events = std::mem::take(&mut self.out_list);
                    self.sends.push((frame, tag));
                    for to in self.session.peers().collect::<Vec<_>>() {
                        let late = self.seat == 0 && to == 1 && frame == LATE_SEND_FRAME;
                        let delay = if late { LATE_BY_TICKS } else { 1 };
                        // Links deliver in order: nothing overtakes a late packet.
                        let behind = network
                            .iter()
                            .filter(|p| p.from == self.seat && p.to == to)
                            .map(|p| p.arrives)
                            .max()
                            .unwrap_or(0);
                        network.push(Packet {
                            from: self.seat,
                            to,
                            send_frame: frame,
                            tag,
                            events: events.clone(),
                            arrives: (tick + delay).max(behind),
                        });
                    }
                    self.do_list.extend(events);
                }
                SessionOutput::Timing(_) | SessionOutput::Log { .. } => {}
            }
        }
    }
}

/// Run the game under `rule`; every machine's executed events and sends.
fn play(rule: Rule) -> Vec<Machine> {
    let mut machines: Vec<Machine> = (0..PLAYERS).map(Machine::new).collect();
    let mut network: Vec<Packet> = Vec::new();
    for tick in 0..2_000u64 {
        let (arrived, in_flight): (Vec<Packet>, Vec<Packet>) =
            network.drain(..).partition(|p| p.arrives <= tick);
        network = in_flight;
        for packet in arrived {
            let m = &mut machines[usize::from(packet.to)];
            m.held_send_frame[usize::from(packet.from)] = Some(packet.send_frame);
            m.held_tag[usize::from(packet.from)] = Some(packet.tag);
            m.do_list.extend(packet.events);
        }
        for m in machines.iter_mut() {
            m.step(rule, tick, &mut network);
        }
        if machines.iter().all(|m| m.next_frame > FRAMES) {
            return machines;
        }
    }
    panic!("the game stalled");
}

/// The frame on which `m` executed seat 0's order of frame 47 (the one in
/// send frame 48's packet).
fn late_order_frame(m: &Machine) -> Option<u32> {
    m.executed
        .iter()
        .find(|e| e.1 == 0 && e.3 == ORDER_ID && e.4 == LATE_ORDER_MARK)
        .map(|e| e.0)
}

#[test]
fn the_staged_decrease_gives_two_consecutive_send_frames_one_tag() {
    for rule in [Rule::NaiveTag, Rule::Session] {
        for m in &play(rule) {
            // 2/6 executes on 39 under 3/9: W = 48 = A; 45 and 48 both tagged 54.
            let at = m.sends.iter().position(|&s| s == (45, 54)).unwrap();
            assert_eq!(m.sends[at + 1], (48, 54));
            assert_eq!(m.session.machine().timing(), Timing::new(2, 6).unwrap());
        }
    }
}

#[test]
fn the_naive_tag_rule_desyncs_on_the_shared_tag() {
    let machines = play(Rule::NaiveTag);
    assert_eq!(late_order_frame(&machines[0]), Some(54));
    assert_eq!(late_order_frame(&machines[2]), Some(54));
    assert_eq!(
        late_order_frame(&machines[1]),
        Some(56),
        "seat 1 ran frame 54 holding send frame 45's packet (tag 54) but not 48's (tag 54)"
    );
    assert_ne!(machines[0].executed, machines[1].executed, "a desync");
}

#[test]
fn the_session_rule_keeps_every_machine_on_the_same_events() {
    let machines = play(Rule::Session);
    for m in &machines {
        assert_eq!(late_order_frame(m), Some(54));
    }
    assert_eq!(machines[0].executed, machines[1].executed);
    assert_eq!(machines[0].executed, machines[2].executed);
    assert!(machines[0].executed.len() > 40);
}
