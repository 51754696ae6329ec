//! Engines that keep Tiberian Sun's own queue rules (S7), through real
//! engine sessions.
//!
//! Three machines run `EngineSession`s in an engine shaped like Tiberian
//! Sun's multiplayer queue: events run only on their exact frame (one found
//! for an earlier frame is the fatal "packet too late"), packets may be
//! delivered out of order (a lost packet is resent after later ones), and —
//! in Tiberian Sun's frame order — a send frame sends before it waits and
//! executes. The master's engine drives the timing through a send-period
//! increase (`3/9` to `5/10`, whose old tags fall between the new executing
//! frames) and a staged decrease. Each test sets one of the engine's rules
//! against the naive way and shows what rungs adds:
//!
//! - restamping the due tags (`EngineSession::due_tags`) keeps the exact-frame
//!   DoList from finding any event late; without it the increase makes one;
//! - the packet-numbered readiness helper (`packet_received`, `peers_ready`)
//!   keeps every machine on the same events when a packet is resent after
//!   later ones; "the latest send frame held" desyncs;
//! - send-before-execute (`SendOrder::BeforeExecute`) plays the same game in
//!   Tiberian Sun's frame order;
//! - wrong readiness arguments are refused before they can desync;
//! - a tick-timer engine is only asked for rates its timer hits.

use rungs_core::session::{
    EngineRules, EngineSession, EventIds, SendOrder, SessionConfig, SessionOutput,
};
use rungs_core::timing::{MachineConfig, Output, TickTimer, Timing, TimingEvent, TimingMachine};
use rungs_core::wire::{ReportLayout, TimingLayout};
use rungs_core::{report::Report, Error};

use crate::timing_payload;
use timing_payload::timing_payload;

const PLAYERS: u8 = 3;
const TIMING_ID: u8 = 31;
/// The engine's own NETWORK_REPORT ID (37: after Tiberian Sun's 0-35 and the
/// spawner's 36).
const REPORT_ID: u8 = 37;
const ORDER_ID: u8 = 1;
const FRAMES: u32 = 120;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Ready {
    /// `frame_ready` with the latest send frame received from each peer.
    LatestHeld,
    /// `packet_received` for each packet, then `peers_ready`.
    Packets,
}

#[derive(Clone, Copy, Debug)]
struct Rules {
    order: SendOrder,
    /// Restamp the due tags to the executing frame before the exact-frame
    /// DoList runs.
    restamp: bool,
    ready: Ready,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Event {
    /// The DoList's frame: the tag, restamped to its executing frame.
    frame: u32,
    /// The tag it was sent with.
    tag: u32,
    seat: u8,
    packet: u32,
    index: u32,
    type_id: u8,
    payload: Vec<u8>,
    executed: bool,
}

struct Packet {
    from: u8,
    to: u8,
    number: u32,
    send_frame: u32,
    events: Vec<Event>,
    arrives: u64,
}

/// A packet the network holds back, so later ones overtake it.
#[derive(Clone, Copy)]
struct Late {
    from: u8,
    to: u8,
    send_frame: u32,
    by_ticks: u64,
}

struct Machine {
    seat: u8,
    rules: Rules,
    session: EngineSession,
    next_frame: u32,
    /// The frame begun and waiting for its peers, if any.
    begun: Option<(u32, bool)>,
    out_list: Vec<Event>,
    do_list: Vec<Event>,
    packets_sent: u32,
    latest_held: [Option<u32>; PLAYERS as usize],
    /// (frame, seat, packet, index, type, first payload byte).
    executed: Vec<(u32, u8, u32, u32, u8, u8)>,
    /// Events the exact-frame DoList found for an earlier frame.
    too_late: u32,
    sends: Vec<(u32, u32)>,
}

fn config(seat: u8, order: SendOrder) -> SessionConfig {
    SessionConfig {
        machine: MachineConfig::adaptive(30, vec![true; usize::from(PLAYERS)], Some(seat)),
        ids: EventIds {
            timing: TIMING_ID,
            network_report: REPORT_ID,
            latency_fudge: None,
        },
        timing_layout: TimingLayout::TIBERIAN_SUN,
        report_layout: ReportLayout::Compact,
        rules: EngineRules {
            tick_timer: Some(TickTimer::SIXTY_HZ),
            send_order: order,
        },
    }
}

impl Machine {
    fn new(seat: u8, rules: Rules) -> Machine {
        Machine {
            seat,
            rules,
            session: EngineSession::new(&config(seat, rules.order)).unwrap(),
            next_frame: 0,
            begun: None,
            out_list: Vec::new(),
            do_list: Vec::new(),
            packets_sent: 0,
            latest_held: [None; PLAYERS as usize],
            executed: Vec::new(),
            too_late: 0,
            sends: Vec::new(),
        }
    }

    fn issue(&mut self, type_id: u8, payload: Vec<u8>) {
        self.out_list.push(Event {
            frame: 0,
            tag: 0,
            seat: self.seat,
            packet: 0,
            index: 0,
            type_id,
            payload,
            executed: false,
        });
    }

    fn receive(&mut self, packet: Packet) {
        let from = usize::from(packet.from);
        self.latest_held[from] = self.latest_held[from].max(Some(packet.send_frame));
        if self.rules.ready == Ready::Packets {
            self.session
                .packet_received(packet.from, packet.number, packet.send_frame)
                .unwrap();
        }
        self.do_list.extend(packet.events);
    }

    fn ready(&self, frame: u32) -> bool {
        match self.rules.ready {
            Ready::LatestHeld => self
                .session
                .frame_ready(frame, |p| self.latest_held[usize::from(p)])
                .unwrap(),
            Ready::Packets => self.session.peers_ready().unwrap().ready,
        }
    }

    /// The exact-frame DoList of `frame`: restamp (if the engine does), the
    /// fatal late check, then the events of this frame in (seat, packet,
    /// position) order.
    fn execute_do_list(&mut self, frame: u32) {
        if self.rules.restamp {
            let (first, last) = self.session.due_tags().unwrap();
            for event in self.do_list.iter_mut().filter(|e| !e.executed) {
                if (first..=last).contains(&event.frame) {
                    event.frame = frame;
                }
            }
        }
        for event in self.do_list.iter_mut().filter(|e| !e.executed) {
            if event.frame < frame {
                // "Packet received too late": Tiberian Sun stops the game.
                self.too_late += 1;
                event.executed = true;
            }
        }
        let mut due: Vec<Event> = self
            .do_list
            .iter()
            .filter(|e| !e.executed && e.frame == frame)
            .cloned()
            .collect();
        due.sort_by_key(|e| (e.seat, e.packet, e.index));
        for event in &due {
            if event.type_id != ORDER_ID {
                self.session
                    .event_executed(event.type_id, event.seat, frame, &event.payload)
                    .unwrap();
            }
            let mark = event.payload.first().copied().unwrap_or(0);
            self.executed.push((
                frame,
                event.seat,
                event.packet,
                event.index,
                event.type_id,
                mark,
            ));
        }
        self.do_list.retain(|e| !e.executed && e.frame != frame);
    }

    fn step(&mut self, tick: u64, network: &mut Vec<Packet>, late: Option<Late>) {
        let frame = self.next_frame;
        if frame > FRAMES {
            return;
        }
        if self.begun.is_none() {
            let executes = self.session.frame_begin(frame).unwrap();
            self.begun = Some((frame, executes));
            self.deliver(tick, network, late);
        }
        let (_, executes) = self.begun.unwrap();
        if executes {
            if !self.ready(frame) {
                return;
            }
            self.execute_do_list(frame);
        }
        self.begun = None;
        if self.seat == 0 {
            match frame {
                3 => self.issue(TIMING_ID, timing_payload(3, 9)),
                // Executes on 36 (sent on 27 under 3/9): old tags between the
                // multiples of 5 follow it.
                26 => self.issue(TIMING_ID, timing_payload(5, 10)),
                // A staged decrease back to 2/6.
                60 => self.issue(TIMING_ID, timing_payload(2, 6)),
                _ => {}
            }
        }
        self.issue(ORDER_ID, vec![self.seat, frame as u8]);
        self.session.frame_end().unwrap();
        self.next_frame += 1;
        self.deliver(tick, network, late);
    }

    fn deliver(&mut self, tick: u64, network: &mut Vec<Packet>, late: Option<Late>) {
        while let Some(output) = self.session.poll_output() {
            match output {
                SessionOutput::QueueEvent {
                    type_id, payload, ..
                } => self.issue(type_id, payload.as_bytes().to_vec()),
                SessionOutput::SendFrame { frame, tag } => {
                    let number = self.packets_sent;
                    self.packets_sent += 1;
                    let mut events = std::mem::take(&mut self.out_list);
                    for (index, event) in events.iter_mut().enumerate() {
                        event.frame = tag;
                        event.tag = tag;
                        event.packet = number;
                        event.index = index as u32;
                    }
                    self.sends.push((frame, tag));
                    for to in self.session.peers().collect::<Vec<_>>() {
                        let delay = match late {
                            Some(l)
                                if l.from == self.seat && l.to == to && l.send_frame == frame =>
                            {
                                l.by_ticks
                            }
                            _ => 1,
                        };
                        network.push(Packet {
                            from: self.seat,
                            to,
                            number,
                            send_frame: frame,
                            events: events.clone(),
                            arrives: tick + delay,
                        });
                    }
                    self.do_list.extend(events);
                }
                SessionOutput::Timing(_) | SessionOutput::Log { .. } => {}
            }
        }
    }
}

fn play(rules: Rules, late: Option<Late>) -> Vec<Machine> {
    let mut machines: Vec<Machine> = (0..PLAYERS).map(|s| Machine::new(s, rules)).collect();
    let mut network: Vec<Packet> = Vec::new();
    for tick in 0..5_000u64 {
        let (arrived, in_flight): (Vec<Packet>, Vec<Packet>) =
            network.drain(..).partition(|p| p.arrives <= tick);
        network = in_flight;
        for packet in arrived {
            machines[usize::from(packet.to)].receive(packet);
        }
        for m in machines.iter_mut() {
            m.step(tick, &mut network, late);
        }
        if machines.iter().all(|m| m.next_frame > FRAMES) {
            return machines;
        }
    }
    panic!("the game stalled");
}

const TS: Rules = Rules {
    order: SendOrder::BeforeExecute,
    restamp: true,
    ready: Ready::Packets,
};

fn assert_in_step(machines: &[Machine]) {
    for m in machines {
        assert_eq!(m.too_late, 0, "seat {} found an event too late", m.seat);
        assert_eq!(
            m.executed, machines[0].executed,
            "seat {} executed other events than seat 0",
            m.seat
        );
    }
    assert!(machines[0].executed.len() > 2 * FRAMES as usize);
}

#[test]
fn tiberian_sun_order_with_restamped_tags_keeps_every_machine_in_step() {
    let machines = play(TS, None);
    assert_in_step(&machines);
    let m = &machines[0];
    // The send period went to 5 and back down to 2.
    assert!(m.sends.iter().any(|&(f, t)| f % 5 == 0 && t == f + 10));
    assert_eq!(m.session.machine().timing(), Timing::new(2, 6).unwrap());
    // Every send frame executes and every executing frame sends (Tiberian
    // Sun runs its DoList only on send frames).
    let executing: Vec<u32> = m.executed.iter().map(|e| e.0).collect();
    for frame in executing {
        assert!(m.sends.iter().any(|&(f, _)| f == frame));
    }
}

#[test]
fn without_restamping_a_send_period_increase_makes_an_event_too_late() {
    let machines = play(
        Rules {
            restamp: false,
            ..TS
        },
        None,
    );
    for m in &machines {
        assert!(
            m.too_late > 0,
            "seat {}: a tag between the new executing frames must be found late",
            m.seat
        );
    }
}

#[test]
fn restamped_events_execute_on_the_first_executing_frame_at_or_after_their_tag() {
    let machines = play(TS, None);
    let m = &machines[0];
    // Every event executed on the first send frame at or after its tag (S5),
    // which is what the restamping gives an exact-frame engine.
    let send_frames: Vec<u32> = m.sends.iter().map(|s| s.0).collect();
    let tags: std::collections::HashMap<(u8, u32), u32> = machines
        .iter()
        .flat_map(|m| {
            m.sends
                .iter()
                .enumerate()
                .map(move |(n, s)| ((m.seat, n as u32), s.1))
        })
        .collect();
    let mut moved = 0;
    for &(frame, seat, packet, _, _, _) in &m.executed {
        let tag = tags[&(seat, packet)];
        let first = *send_frames.iter().find(|&&f| f >= tag).unwrap();
        assert_eq!(frame, first, "an event tagged {tag} from seat {seat}");
        moved += u32::from(frame != tag);
    }
    assert!(moved > 0, "the increase left tags between executing frames");
}

/// Seat 0's packet of send frame 40 reaches seat 1 long after later ones,
/// as Tiberian Sun's transport resends a lost packet.
const RESENT: Late = Late {
    from: 0,
    to: 1,
    send_frame: 40,
    by_ticks: 40,
};

#[test]
fn the_latest_send_frame_held_desyncs_when_a_packet_is_resent_after_later_ones() {
    let machines = play(
        Rules {
            ready: Ready::LatestHeld,
            ..TS
        },
        Some(RESENT),
    );
    let late_found = machines[1].too_late > 0;
    let differs = machines[1].executed != machines[0].executed;
    assert!(
        late_found || differs,
        "seat 1 ran the frames of send frame 40 without its packet"
    );
}

#[test]
fn packet_numbered_readiness_waits_for_a_packet_resent_after_later_ones() {
    let machines = play(TS, Some(RESENT));
    assert_in_step(&machines);
}

#[test]
fn the_same_game_in_rungs_own_order_agrees_too() {
    let machines = play(
        Rules {
            order: SendOrder::AfterExecute,
            ..TS
        },
        Some(RESENT),
    );
    assert_in_step(&machines);
}

fn kind<T: std::fmt::Debug>(r: rungs_core::Result<T>) -> Error {
    r.unwrap_err().kind().clone()
}

#[test]
fn wrong_readiness_arguments_are_refused_before_they_can_desync() {
    let mut s = EngineSession::new(&config(1, SendOrder::BeforeExecute)).unwrap();
    for frame in 0..=20 {
        s.frame_begin(frame).unwrap();
        s.frame_end().unwrap();
    }
    while s.poll_output().is_some() {}
    // 2/6: send frames 0, 2, 4, ...; packet n carries send frame 2n.
    s.packet_received(0, 0, 0).unwrap();
    s.packet_received(0, 1, 2).unwrap();
    s.packet_received(0, 1, 2).unwrap(); // a copy
                                         // The tag (8) passed for send frame 2: refused, naming what was expected.
    let tag_for_frame = s.packet_received(0, 2, 10).unwrap_err();
    assert!(matches!(tag_for_frame.kind(), Error::Invalid(_)));
    assert!(
        tag_for_frame.to_string().contains("expected send frame 4"),
        "{tag_for_frame}"
    );
    // The message names the likely mistake: 10 is packet 2's tag...
    assert!(
        tag_for_frame.to_string().contains("10 is packet 2's tag"),
        "{tag_for_frame}"
    );
    // ...packets numbered from 1 (send frame 4 is packet 2)...
    let from_one = s.packet_received(0, 3, 4).unwrap_err().to_string();
    assert!(
        from_one.contains("send frame 4 is packet 2 of the game"),
        "{from_one}"
    );
    // ...a frame that ended here without being a send frame.
    let odd = s.packet_received(0, 3, 5).unwrap_err().to_string();
    assert!(odd.contains("frame 5 was not a send frame here"), "{odd}");
    // A number counted twice (or skipped): the same check.
    assert!(matches!(
        kind(s.packet_received(0, 4, 6)),
        Error::Invalid(_)
    ));
    // A packet of a send frame this machine has not reached: only "after
    // every send frame so far" can be checked now...
    assert!(matches!(
        kind(s.packet_received(0, 11, 19)),
        Error::Invalid(_)
    ));
    s.packet_received(2, 0, 0).unwrap();
    s.packet_received(2, 12, 25).unwrap(); // the 12th send frame is 24, known later
                                           // Own seat, a seat that never was a player.
    assert!(matches!(
        kind(s.packet_received(1, 0, 0)),
        Error::Invalid(_)
    ));
    assert!(matches!(
        kind(s.packet_received(7, 0, 0)),
        Error::UnknownSeat(7)
    ));
    // Far ahead of anything checked: bounded.
    assert!(matches!(
        kind(s.packet_received(0, 5_000, 10_000)),
        Error::Full(_)
    ));
    // ...and once the schedule reaches send frame 24, the wrong packet 12 of
    // seat 2 fails every readiness question instead of letting a frame run.
    for frame in 21..=31 {
        s.frame_begin(frame).unwrap();
        s.frame_end().unwrap();
    }
    s.frame_begin(32).unwrap();
    let fault = s.peers_ready().unwrap_err();
    assert!(matches!(fault.kind(), Error::Invalid(_)));
    assert!(
        fault
            .to_string()
            .contains("the send frame of packet 12 from seat 2 is 25"),
        "{fault}"
    );
    // The old call refuses a held frame that was never a send frame (a tag).
    assert!(matches!(
        kind(s.frame_ready(32, |_| Some(21))),
        Error::Invalid(_)
    ));
}

#[test]
fn a_cut_ends_a_vanished_players_stream_at_the_agreed_packet() {
    let mut s = EngineSession::new(&config(1, SendOrder::BeforeExecute)).unwrap();
    let begin = |s: &mut EngineSession, frame| {
        s.frame_begin(frame).unwrap();
        while s.poll_output().is_some() {}
    };
    for frame in 0..=19 {
        begin(&mut s, frame);
        s.frame_end().unwrap();
    }
    for n in 0..=3 {
        s.packet_received(0, n, 2 * n).unwrap();
        s.packet_received(2, n, 2 * n).unwrap();
    }
    // Seat 2 keeps sending; seat 0 vanished after packet 3 (send frame 6,
    // tag 12). Frame 14 needs send frame 8 (tag 14) from both.
    for n in 4..=9 {
        s.packet_received(2, n, 2 * n).unwrap();
    }
    begin(&mut s, 20);
    let ready = s.peers_ready().unwrap();
    assert!(!ready.ready);
    assert_eq!(ready.waiting_for, Some(0));
    assert_eq!(s.packet_watermark(0), Some(3));
    // A cut below what is held is the engine's error.
    assert!(matches!(kind(s.peer_cut(0, Some(2))), Error::Invalid(_)));
    s.peer_cut(0, Some(3)).unwrap();
    assert!(s.peers_ready().unwrap().ready);
    // Its removal goes on the tag of the first send frame after the cut.
    assert_eq!(s.cut_tag(Some(3)), Some(14));
    assert!(matches!(kind(s.packet_received(0, 4, 8)), Error::State(_)));
}

fn report(process_us: u32) -> Report {
    Report {
        process_us,
        max_wait_ms: 0,
        worst_rtt_ms: Some(40),
        detail: None,
    }
}

#[test]
fn a_tick_timer_engine_is_only_asked_for_rates_its_timer_hits() {
    let timer = TickTimer::SIXTY_HZ;
    // Game speed 45: a 60 Hz timer runs 45 as 60; rungs asks for 30.
    let config = MachineConfig::adaptive(45, vec![true, true], Some(0));
    let mut machines = [
        TimingMachine::with_tick_timer(&config, Some(timer)).unwrap(),
        TimingMachine::with_tick_timer(
            &MachineConfig {
                local_seat: Some(1),
                ..config.clone()
            },
            Some(timer),
        )
        .unwrap(),
    ];
    let mut rates = Vec::new();
    let mut events = Vec::new();
    for frame in 0..=700 {
        for (seat, m) in machines.iter_mut().enumerate() {
            m.begin_frame(frame).unwrap();
            if frame == 40 || frame == 300 || frame == 600 {
                // 24 ms a frame on one machine (41 fps), then 14 ms (71 fps).
                let slow = if frame < 300 { 24_000 } else { 14_000 };
                m.execute_report(0, report(slow)).unwrap();
                m.execute_report(1, report(5_000)).unwrap();
            }
            for (at, event) in &events {
                if *at + 9 == frame {
                    m.execute_timing_event(0, *event).unwrap();
                }
            }
            if let Some(event) = m.end_frame().unwrap() {
                assert_eq!(seat, 0, "only the master sends");
                events.push((frame, event));
            }
            while let Some(output) = m.poll_output() {
                if let Output::FrameRateChanged { fps, .. } = output {
                    rates.push(fps);
                }
            }
        }
    }
    assert!(!rates.is_empty() && !events.is_empty());
    for fps in rates.iter().chain(events.iter().map(|(_, e)| &e.fps)) {
        assert!(timer.hits(*fps), "asked for {fps} fps");
    }
    assert_eq!(rates[0], 30, "the game starts at 30, not 45");
    // 41 fps becomes 30; 45 (the speed) stays 30: no event for a rate
    // change the timer cannot show.
    assert!(events.iter().all(|(_, e)| e.fps == 30), "{events:?}");
    // An event from a build without the timer runs at a rate the timer hits.
    let m = &mut machines[0];
    m.begin_frame(701).unwrap();
    m.execute_timing_event(
        0,
        TimingEvent {
            target: Timing::new(3, 9).unwrap(),
            fps: 45,
        },
    )
    .unwrap();
    assert_eq!(m.fps(), 30);
}

#[test]
fn tick_measurements_become_the_reports_units() {
    let mut s = EngineSession::new(&config(0, SendOrder::BeforeExecute)).unwrap();
    // 6 ticks at 60 Hz is 100 ms; a resent packet's sample is not clean.
    s.rtt_sample_ticks(1, 6, false).unwrap();
    s.rtt_sample_ticks(2, 9, true).unwrap();
    s.rtt_sample_ticks(2, 3, false).unwrap();
    for _ in 0..3 {
        s.add_frame_ticks(1).unwrap();
    }
    s.add_frame_ticks(0).unwrap();
    let report = s.measurements().take_report();
    assert_eq!(report.worst_rtt_ms, Some(100));
    // 3 ticks of 16 667 µs in 4 frames, the average rounded up.
    assert_eq!(report.process_us, 12_501);
    let mut plain = config(0, SendOrder::AfterExecute);
    plain.rules.tick_timer = None;
    let mut s = EngineSession::new(&plain).unwrap();
    assert!(matches!(kind(s.add_frame_ticks(1)), Error::State(_)));
}

#[test]
fn an_acknowledgement_that_arrives_after_its_senders_removal_is_a_late_no_op() {
    let mut s = EngineSession::new(&config(0, SendOrder::BeforeExecute)).unwrap();
    s.rtt_sample_ticks(1, 6, false).unwrap();
    s.rtt_sample_ticks(2, 12, false).unwrap();
    s.frame_begin(0).unwrap();
    s.player_removed(2).unwrap();
    // The acknowledgement of a packet to seat 2 was on its way when the
    // removal executed: normal play, like a report from a removed player.
    s.rtt_sample_ticks(2, 30, false).unwrap();
    s.rtt_sample(2, 900, true).unwrap();
    // The own seat and a seat that never was a player stay errors.
    assert!(matches!(
        kind(s.rtt_sample_ticks(0, 6, false)),
        Error::UnknownSeat(0)
    ));
    assert!(matches!(
        kind(s.rtt_sample(7, 6, true)),
        Error::UnknownSeat(7)
    ));
    // Nothing changed: the worst round trip is seat 1's 6 ticks.
    assert_eq!(s.measurements().take_report().worst_rtt_ms, Some(100));
}

#[test]
fn an_observer_far_behind_hands_refused_packets_again_and_misses_none() {
    // Nobody waits for an observer, so the players can run more packets
    // ahead of it than rungs holds for a peer.
    let mut observing = config(0, SendOrder::BeforeExecute);
    observing.machine.local_seat = None;
    let mut s = EngineSession::new(&observing).unwrap();
    // 2/6 throughout: packet n carries send frame 2n.
    let mut refused = Vec::new();
    for n in 0..600u32 {
        for seat in 0..PLAYERS {
            if let Err(e) = s.packet_received(seat, n, 2 * n) {
                assert!(matches!(e.kind(), Error::Full(_)), "{e}");
                assert!(e.to_string().contains("hand it again"), "{e}");
                refused.push((seat, n));
            }
        }
    }
    assert_eq!(refused.len(), 3 * (600 - 512));
    // Nothing of a refused packet was recorded; handed again as the
    // observer runs, each is taken before a frame needs it.
    for frame in 0..1_100 {
        s.frame_begin(frame).unwrap();
        while s.poll_output().is_some() {}
        refused.retain(|&(seat, n)| s.packet_received(seat, n, 2 * n).is_err());
        assert!(s.peers_ready().unwrap().ready, "frame {frame}");
        s.frame_end().unwrap();
    }
    assert!(refused.is_empty());
}

#[test]
fn the_look_ahead_is_converted_at_the_rate_the_timer_plays() {
    // 250 ms round trips; the slowest machine can keep 52 fps, so a 60 Hz
    // timer plays 30. Calibration (S4.3, with headroom) at 30 fps needs
    // `ceil(250 * 5 * 30 / 8000)` = 5 frames: `3/9`. At 52 fps, which the
    // timer cannot play, it would be 9 frames: `5/15`, 500 ms at 30 fps.
    let calibrate = |timer: Option<TickTimer>| {
        let config = MachineConfig::adaptive(60, vec![true, true], Some(0));
        let mut m = TimingMachine::with_tick_timer(&config, timer).unwrap();
        let report = Report {
            process_us: 19_000,
            max_wait_ms: 0,
            worst_rtt_ms: Some(250),
            detail: None,
        };
        let mut sent = None;
        for frame in 0..=64 {
            m.begin_frame(frame).unwrap();
            if frame == 40 {
                m.execute_report(0, report).unwrap();
                m.execute_report(1, report).unwrap();
            }
            sent = m.end_frame().unwrap().or(sent);
        }
        let event = sent.expect("calibration sends");
        (event.target.to_string(), event.fps)
    };
    assert_eq!(
        calibrate(Some(TickTimer::SIXTY_HZ)),
        ("3/9".to_string(), 30)
    );
    assert_eq!(calibrate(None), ("5/15".to_string(), 52));
}
