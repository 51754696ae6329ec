//! Several engine sessions in one process (S7): each machine is a tiny
//! Tiberian Sun-style engine with its own event queue and event IDs, its own
//! packets over an in-memory network with per-player delays, and lockstep
//! waiting. The sessions run the adaptive timing; the test checks that every
//! machine executes the same events on the same frames, through a spike and a
//! recovery, a master removal, and that the timing follows the delays.
//!
//! A second test replays the shared vectors through sessions: the vector's
//! reports travel as NETWORK_REPORT payloads and the master's TIMING events
//! through the engines' own queues, and the outcome must match the vector.

use std::collections::VecDeque;
use std::path::PathBuf;

use rungs_core::report::Report;
use rungs_core::session::{EngineRules, EngineSession, EventIds, SessionConfig, SessionOutput};
use rungs_core::timing::replay::{replay, Expect, Input, Vector};
use rungs_core::timing::{player_message_text, MachineConfig, Output, Timing};
use rungs_core::wire::{ReportLayout, TimingLayout};

const TIMING_ID: u8 = 31;
const REPORT_ID: u8 = 37;
const REMOVE_ID: u8 = 34;
const ORDER_ID: u8 = 1;

/// One event in an engine's queue: tagged frame, sender, issue order, type, bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Event {
    tag: u32,
    seat: u8,
    seq: u64,
    type_id: u8,
    payload: Vec<u8>,
}

/// A packet: the events one machine sent on one send frame.
#[derive(Debug, Clone)]
struct Packet {
    from: u8,
    to: u8,
    send_frame: u32,
    events: Vec<Event>,
    arrives_ms: u64,
}

struct Engine {
    seat: u8,
    session: EngineSession,
    frame: u32,
    next_frame_ms: u64,
    fps: u8,
    queue: Vec<Event>,
    outbox: Vec<(u8, Vec<u8>)>,
    next_seq: u64,
    /// (send frame, tag) of every send frame so far: the same on every machine.
    send_history: Vec<(u32, u32)>,
    /// Per seat: the latest send frame received from it.
    received_through: Vec<Option<u32>>,
    executed: Vec<(u32, Event)>,
    waiting_since_ms: Option<u64>,
    removed: Vec<u8>,
    timings: Vec<(u32, Timing)>,
    messages: Vec<(u32, String)>,
}

struct Game {
    engines: Vec<Engine>,
    in_flight: Vec<Packet>,
    now_ms: u64,
    /// One-way access delay per seat, ms, as a function of time.
    delay: Box<dyn Fn(u8, u64) -> u64>,
    /// A removal of `seat` issued by the first remaining machine on `frame`.
    removal: Option<(u32, u8)>,
}

fn session_config(seats: u8, local: u8) -> SessionConfig {
    SessionConfig {
        machine: MachineConfig::adaptive(30, vec![true; usize::from(seats)], Some(local)),
        ids: EventIds {
            timing: TIMING_ID,
            network_report: REPORT_ID,
            latency_fudge: Some(35),
        },
        timing_layout: TimingLayout::TIBERIAN_SUN,
        report_layout: ReportLayout::Extended,
        rules: EngineRules::default(),
    }
}

impl Engine {
    fn new(seats: u8, seat: u8) -> Engine {
        Engine {
            seat,
            session: EngineSession::new(&session_config(seats, seat)).unwrap(),
            frame: 0,
            next_frame_ms: 0,
            fps: 30,
            queue: Vec::new(),
            outbox: Vec::new(),
            next_seq: 0,
            send_history: Vec::new(),
            received_through: vec![None; usize::from(seats)],
            executed: Vec::new(),
            waiting_since_ms: None,
            removed: Vec::new(),
            timings: Vec::new(),
            messages: Vec::new(),
        }
    }

    /// Whether every present peer's packets with events due by `frame` are here.
    fn ready(&self, frame: u32) -> bool {
        // The last send frame whose tag is at or before `frame`: every packet
        // up to it may hold events due now. Its tag was fixed when it was sent.
        let Some(&(needed, _)) = self
            .send_history
            .iter()
            .rev()
            .find(|(_, tag)| *tag <= frame)
        else {
            return true;
        };
        (0..self.received_through.len() as u8)
            .filter(|s| *s != self.seat && !self.removed.contains(s))
            .all(|s| self.received_through[usize::from(s)].is_some_and(|r| r >= needed))
    }

    /// Run one frame if it is due and ready; returns the packet to broadcast.
    fn step(&mut self, now_ms: u64, removal: Option<(u32, u8)>) -> Option<(u32, Vec<Event>)> {
        if now_ms < self.next_frame_ms {
            return None;
        }
        let frame = self.frame;
        if !self.ready(frame) {
            if self.waiting_since_ms.is_none() {
                self.waiting_since_ms = Some(now_ms);
                self.session
                    .measurements()
                    .wait_begin(now_ms * 1000)
                    .unwrap();
            }
            return None;
        }
        if self.waiting_since_ms.take().is_some() {
            self.session.measurements().wait_end(now_ms * 1000).unwrap();
        }
        let executes = self.session.frame_begin(frame).unwrap();
        if executes {
            let mut due: Vec<Event> = Vec::new();
            self.queue.retain(|e| {
                if e.tag <= frame {
                    due.push(e.clone());
                    false
                } else {
                    true
                }
            });
            due.sort_by_key(|e| (e.tag, e.seat, e.seq));
            for event in due {
                match event.type_id {
                    TIMING_ID | REPORT_ID => self
                        .session
                        .event_executed(event.type_id, event.seat, frame, &event.payload)
                        .unwrap(),
                    REMOVE_ID => {
                        let gone = event.payload[0];
                        self.session.player_removed(gone).unwrap();
                        self.removed.push(gone);
                    }
                    _ => {}
                }
                self.executed.push((frame, event));
            }
        }
        // Game input: an order every 7 frames, offset by seat.
        if (frame + u32::from(self.seat)) % 7 == 0 {
            self.outbox
                .push((ORDER_ID, vec![self.seat, (frame % 251) as u8]));
        }
        if let Some((at, seat)) = removal {
            let issuer = (0..self.received_through.len() as u8)
                .find(|s| *s != seat)
                .unwrap();
            if frame == at && self.seat == issuer {
                self.outbox.push((REMOVE_ID, vec![seat]));
            }
        }
        self.session
            .measurements()
            .add_frame_work_us(6000 + 500 * u64::from(self.seat));
        self.session.frame_end().unwrap();
        let mut packet = None;
        while let Some(output) = self.session.poll_output() {
            match output {
                SessionOutput::QueueEvent {
                    type_id, payload, ..
                } => self.outbox.push((type_id, payload.as_bytes().to_vec())),
                SessionOutput::SendFrame { frame, tag } => {
                    let events: Vec<Event> = self
                        .outbox
                        .drain(..)
                        .map(|(type_id, payload)| {
                            self.next_seq += 1;
                            Event {
                                tag,
                                seat: self.seat,
                                seq: self.next_seq,
                                type_id,
                                payload,
                            }
                        })
                        .collect();
                    self.queue.extend(events.iter().cloned());
                    self.send_history.push((frame, tag));
                    packet = Some((frame, events));
                }
                SessionOutput::Timing(Output::FrameRateChanged { fps, .. }) => self.fps = fps,
                SessionOutput::Timing(Output::TimingChanged { frame, timing }) => {
                    self.timings.push((frame, timing))
                }
                SessionOutput::Timing(Output::PlayerMessage { frame, tier }) => self
                    .messages
                    .push((frame, player_message_text(tier).to_string())),
                SessionOutput::Timing(Output::MasterChanged { .. }) | SessionOutput::Log { .. } => {
                }
            }
        }
        self.frame += 1;
        self.next_frame_ms = now_ms + 1000 / u64::from(self.fps);
        packet
    }
}

impl Game {
    fn new(seats: u8, delay: Box<dyn Fn(u8, u64) -> u64>, removal: Option<(u32, u8)>) -> Game {
        Game {
            engines: (0..seats).map(|s| Engine::new(seats, s)).collect(),
            in_flight: Vec::new(),
            now_ms: 0,
            delay,
            removal,
        }
    }

    /// Run until every remaining machine reached `frames`, one ms at a time.
    fn run(&mut self, frames: u32) {
        let removed_seat = self.removal.map(|(_, s)| s);
        while self
            .engines
            .iter()
            .any(|e| e.frame < frames && Some(e.seat) != removed_seat)
        {
            // Deliver packets that have arrived.
            let now = self.now_ms;
            let (arrived, pending): (Vec<Packet>, Vec<Packet>) =
                self.in_flight.drain(..).partition(|p| p.arrives_ms <= now);
            self.in_flight = pending;
            for packet in arrived {
                for engine in self.engines.iter_mut().filter(|e| e.seat == packet.to) {
                    engine.queue.extend(packet.events.iter().cloned());
                    engine.received_through[usize::from(packet.from)] = Some(packet.send_frame);
                    let rtt = 2 * ((self.delay)(packet.from, now) + (self.delay)(engine.seat, now));
                    engine
                        .session
                        .rtt_sample(packet.from, rtt as u32, true)
                        .ok();
                }
            }
            for index in 0..self.engines.len() {
                let engine = &mut self.engines[index];
                // A player that quits keeps running (and sending) until its
                // removal executes, as a graceful quit does; then it stops.
                if engine.removed.contains(&engine.seat) {
                    continue;
                }
                if engine.frame >= frames {
                    continue;
                }
                if let Some((send_frame, events)) = engine.step(now, self.removal) {
                    let from = engine.seat;
                    for to in 0..self.engines.len() as u8 {
                        if to == from {
                            continue;
                        }
                        let delay = (self.delay)(from, now) + (self.delay)(to, now);
                        // In order per link: never before an earlier packet.
                        let last = self
                            .in_flight
                            .iter()
                            .filter(|p| p.from == from && p.to == to)
                            .map(|p| p.arrives_ms)
                            .max()
                            .unwrap_or(0);
                        self.in_flight.push(Packet {
                            from,
                            to,
                            send_frame,
                            events: events.clone(),
                            arrives_ms: (now + delay).max(last),
                        });
                    }
                }
            }
            self.now_ms += 1;
            if self.now_ms >= 10_000_000 {
                let state: Vec<String> = self
                    .engines
                    .iter()
                    .map(|e| {
                        format!(
                            "seat {} on frame {}, received {:?}",
                            e.seat, e.frame, e.received_through
                        )
                    })
                    .collect();
                panic!("the game stalled: {state:?}");
            }
        }
    }
}

#[test]
fn sessions_agree_on_every_event_through_a_spike_and_a_master_removal() {
    // Four players at 20, 30, 40, 50 ms one way; player 2 rises to 300 ms
    // between 20 s and 80 s (long enough to span evaluations: a spike that
    // only one report sees is replaced before the master reads it). The
    // master (seat 0) is removed on frame 2500.
    let delay = Box::new(|seat: u8, now_ms: u64| -> u64 {
        let base = 20 + 10 * u64::from(seat);
        if seat == 2 && (20_000..80_000).contains(&now_ms) {
            300
        } else {
            base
        }
    });
    let mut game = Game::new(4, delay, Some((2500, 0)));
    game.run(4000);

    let survivors: Vec<&Engine> = game.engines.iter().filter(|e| e.seat != 0).collect();
    let reference = &survivors[0].executed;
    assert!(
        reference.len() > 1000,
        "orders, reports and timing events executed"
    );
    for engine in &survivors[1..] {
        assert_eq!(engine.executed, *reference, "seat {} diverged", engine.seat);
        assert_eq!(engine.timings, survivors[0].timings);
        assert_eq!(engine.messages, survivors[0].messages);
    }
    // The removed master agrees on everything it executed.
    let master = &game.engines[0];
    assert_eq!(master.executed[..], reference[..master.executed.len()]);

    // The timing followed the delays: up for the spike, back down after.
    let timings = &survivors[0].timings;
    let worst = timings.iter().map(|(_, t)| *t).max().unwrap();
    assert!(
        worst.send_period() >= 6,
        "the spike raised the timing: {timings:?}"
    );
    let last = timings.last().unwrap().1;
    assert!(
        last.send_period() <= 3,
        "the timing came back down: {timings:?}"
    );
    let messages: Vec<&str> = survivors[0]
        .messages
        .iter()
        .map(|(_, m)| m.as_str())
        .collect();
    assert!(
        messages.contains(&"Connection quality target: Poor"),
        "{messages:?}"
    );
    // Orders were executed exactly once each, on every machine.
    let orders = reference
        .iter()
        .filter(|(_, e)| e.type_id == ORDER_ID)
        .count();
    let mut unique: Vec<_> = reference
        .iter()
        .filter(|(_, e)| e.type_id == ORDER_ID)
        .map(|(_, e)| (e.seat, e.seq))
        .collect();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), orders);
}

fn vectors_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../rungs-core/tests/vectors")
}

/// Replay one vector through sessions: reports from the vector enter as
/// NETWORK_REPORT payloads executed at the vector's frames; the master's
/// TIMING events go through an engine queue, tagged at the send frame.
fn replay_through_sessions(vector: &Vector) -> Vec<Expect> {
    let seat_count = vector.players.iter().copied().max().unwrap() + 1;
    let mut humans = vec![false; usize::from(seat_count)];
    for p in &vector.players {
        humans[usize::from(*p)] = true;
    }
    let mut sessions: Vec<EngineSession> = vector
        .players
        .iter()
        .map(|p| {
            let mut config = session_config(seat_count, *p);
            config.machine.human_seats = humans.clone();
            config.machine.speed_fps = vector.speed_fps;
            config.report_layout = ReportLayout::Extended;
            EngineSession::new(&config).unwrap()
        })
        .collect();
    let mut queue: Vec<Event> = Vec::new();
    let mut outbox: VecDeque<(u8, Vec<u8>, u8)> = VecDeque::new();
    let (mut sends, mut forces, mut messages) = (Vec::new(), Vec::new(), Vec::new());
    let mut last_force = None;
    let mut seq = 0;
    for frame in 0..=vector.until {
        let mut send_tag = None;
        let mut executes = false;
        for s in sessions.iter_mut() {
            executes = s.frame_begin(frame).unwrap();
        }
        if executes {
            queue.sort_by_key(|e| (e.tag, e.seat, e.seq));
            let due: Vec<Event> = queue.iter().filter(|e| e.tag <= frame).cloned().collect();
            queue.retain(|e| e.tag > frame);
            for e in due {
                for s in sessions.iter_mut() {
                    s.event_executed(e.type_id, e.seat, frame, &e.payload)
                        .unwrap();
                }
            }
        }
        for input in &vector.inputs {
            match *input {
                Input::Report {
                    frame: f,
                    seat,
                    report,
                } if f == frame => {
                    let mut bytes = [0u8; 16];
                    let len = ReportLayout::Extended.encode(&report, &mut bytes).unwrap();
                    for s in sessions.iter_mut() {
                        s.event_executed(REPORT_ID, seat, frame, &bytes[..len])
                            .unwrap();
                    }
                }
                Input::Remove { frame: f, seat } if f == frame => {
                    for s in sessions.iter_mut() {
                        s.player_removed(seat).unwrap();
                    }
                }
                _ => {}
            }
        }
        let machine = sessions[0].machine();
        let now = (machine.timing(), machine.fps());
        if last_force != Some(now) {
            forces.push(Expect::Force {
                frame,
                timing: now.0,
                fps: now.1,
            });
            last_force = Some(now);
        }
        for (index, s) in sessions.iter_mut().enumerate() {
            s.frame_end().unwrap();
            while let Some(output) = s.poll_output() {
                match output {
                    // Vectors give every report as executed: the sessions' own are not sent.
                    SessionOutput::QueueEvent {
                        type_id: TIMING_ID,
                        payload,
                        frame,
                    } => {
                        let event = TimingLayout::TIBERIAN_SUN
                            .decode(payload.as_bytes())
                            .unwrap();
                        sends.push(Expect::Send {
                            frame,
                            timing: event.target,
                            fps: event.fps,
                        });
                        outbox.push_back((
                            TIMING_ID,
                            payload.as_bytes().to_vec(),
                            vector.players[index],
                        ));
                    }
                    SessionOutput::SendFrame { tag, .. } if index == 0 => send_tag = Some(tag),
                    SessionOutput::Timing(Output::PlayerMessage { frame, tier }) if index == 0 => {
                        messages.push(Expect::Message {
                            frame,
                            text: player_message_text(tier).to_string(),
                        })
                    }
                    _ => {}
                }
            }
        }
        // Everything issued on this frame goes out on it if it is a send frame.
        if let Some(tag) = send_tag {
            for (type_id, payload, seat) in outbox.drain(..) {
                seq += 1;
                queue.push(Event {
                    tag,
                    seat,
                    seq,
                    type_id,
                    payload,
                });
            }
        }
    }
    sends.extend(forces);
    sends.extend(messages);
    sends
}

#[test]
fn sessions_reach_the_vectors_decisions_for_the_same_reports() {
    let mut files: Vec<PathBuf> = std::fs::read_dir(vectors_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "vec"))
        .collect();
    files.sort();
    assert!(files.len() >= 12);
    for file in files {
        let vector = Vector::parse(&std::fs::read_to_string(&file).unwrap()).unwrap();
        let direct = replay(&vector).unwrap();
        let through_sessions = replay_through_sessions(&vector);
        assert_eq!(through_sessions, direct, "{}", file.display());
        // And both equal the vector's own expectations (as sorted by kind).
        let mut expected = vector.expects.clone();
        expected.sort_by_key(|e| match e {
            Expect::Send { .. } => 0,
            Expect::Force { .. } => 1,
            Expect::Message { .. } => 2,
        });
        assert_eq!(through_sessions, expected, "{}", file.display());
    }
}

#[test]
fn a_report_payload_survives_the_engine_unchanged() {
    let report = Report {
        process_us: 12_345,
        max_wait_ms: 150,
        worst_rtt_ms: Some(222),
        detail: None,
    };
    let mut bytes = [0u8; 16];
    let len = ReportLayout::Extended.encode(&report, &mut bytes).unwrap();
    assert_eq!(
        ReportLayout::Extended.decode(&bytes[..len]).unwrap(),
        report
    );
}

/// An engine session takes its round trips from rungs' own transport links
/// (S3, S8): none while the link has no clean measurement, then the link's
/// measured round trip.
#[test]
fn round_trips_come_from_the_transport_links() {
    use rungs_core::link::{Endpoint, EndpointConfig, LinkConfig};
    use rungs_core::wire::SessionKey;
    use rungs_sim::{Cluster, Conditions, NetSim};
    use std::net::SocketAddr;

    let address = |seat: u8| SocketAddr::from(([10, 0, 0, seat + 1], 7000));
    let mut cluster = Cluster::new(NetSim::new(1, Conditions::delay_ms(40)));
    for seat in 0..2u8 {
        let mut endpoint = Endpoint::new(EndpointConfig {
            session_id: 9,
            key: SessionKey([3; 16]),
            local_seat: seat,
            link: LinkConfig::default(),
        })
        .unwrap();
        endpoint.add_peer(1 - seat, address(1 - seat), 0).unwrap();
        cluster.add_host(address(seat), endpoint);
    }
    let mut session = EngineSession::new(&session_config(2, 0)).unwrap();
    let report_after = |session: &mut EngineSession, from: u32| {
        // Frames `from..from + 32` end on a report frame (32, then 64).
        for frame in from..=from + 32 {
            session.frame_begin(frame).unwrap();
            session.frame_end().unwrap();
        }
        let mut report = None;
        while let Some(output) = session.poll_output() {
            if let SessionOutput::QueueEvent {
                type_id: REPORT_ID,
                payload,
                ..
            } = output
            {
                report = Some(ReportLayout::Extended.decode(payload.as_bytes()).unwrap());
            }
        }
        report.expect("a report frame")
    };
    session.sample_links(&cluster.host(0).endpoint, cluster.now_us());
    assert_eq!(
        report_after(&mut session, 0).worst_rtt_ms,
        None,
        "no clean measurement yet"
    );
    cluster.host_mut(0).endpoint.send(1, b"hello").unwrap();
    cluster.run_until(1_000_000);
    session.sample_links(&cluster.host(0).endpoint, cluster.now_us());
    let rtt = report_after(&mut session, 33).worst_rtt_ms.unwrap();
    assert!(
        (80..=82).contains(&rtt),
        "measured {rtt} ms over an 80 ms round trip"
    );
}

/// Two engine sessions under `tracking` on a perfect network: every event
/// a session queues executes on its tag on both. The master's frame 60
/// waits 684 ms (a spike's first stall) while its round trips, half back,
/// say 810 ms: nothing is raised yet (decision 75: the first stall of a
/// spike says nothing of whether it goes on). Its frame 72 waits as long
/// again, the spike going on: it queues its raise with that report, on
/// the same frame, and both execute it with the report, a look-ahead
/// sooner than the evaluation of that report could have sent it.
#[test]
fn a_tracking_master_queues_its_raise_with_the_report_of_its_own_stall() {
    let config = |local: u8| SessionConfig {
        machine: MachineConfig {
            policy: rungs_core::timing::PolicyKind::Tracking,
            ..MachineConfig::adaptive(30, vec![true, true], Some(local))
        },
        ids: EventIds {
            timing: TIMING_ID,
            network_report: REPORT_ID,
            latency_fudge: None,
        },
        timing_layout: TimingLayout::TIBERIAN_SUN,
        report_layout: ReportLayout::Detailed,
        rules: EngineRules::default(),
    };
    let mut sessions = [
        EngineSession::new(&config(0)).unwrap(),
        EngineSession::new(&config(1)).unwrap(),
    ];
    // (tag, seat, type, payload, queued on) of every event queued.
    let mut queue: Vec<(u32, u8, u8, Vec<u8>, u32)> = Vec::new();
    let mut timings: [Vec<(u32, Timing)>; 2] = [Vec::new(), Vec::new()];
    for frame in 0..=120u32 {
        for (seat, session) in sessions.iter_mut().enumerate() {
            let seat = seat as u8;
            let rtt = if seat == 0 && frame >= 60 { 810 } else { 120 };
            session.rtt_sample(1 - seat, rtt, true).unwrap();
            if seat == 0 && (frame == 60 || frame == 72) {
                let m = session.measurements();
                m.wait_begin_for(0, Some(1)).unwrap();
                m.wait_end(684_000).unwrap();
            }
            if session.frame_begin(frame).unwrap() {
                for (_, from, type_id, payload, _) in queue.iter().filter(|e| e.0 == frame) {
                    session
                        .event_executed(*type_id, *from, frame, payload)
                        .unwrap();
                }
            }
            session.frame_end().unwrap();
            let mut queued = Vec::new();
            while let Some(output) = session.poll_output() {
                match output {
                    SessionOutput::QueueEvent {
                        type_id, payload, ..
                    } => queued.push((type_id, payload.as_bytes().to_vec())),
                    SessionOutput::SendFrame { tag, .. } => {
                        for (type_id, payload) in queued.drain(..) {
                            queue.push((tag, seat, type_id, payload, frame));
                        }
                    }
                    SessionOutput::Timing(Output::TimingChanged { frame, timing }) => {
                        timings[usize::from(seat)].push((frame, timing))
                    }
                    _ => {}
                }
            }
        }
    }
    assert_eq!(
        timings[0], timings[1],
        "both sessions follow the same timing"
    );
    // The first stall's report went alone; the second's went with the
    // raise (the same send frame, so the same tag).
    let on = |queued_on: u32| -> Vec<u8> {
        queue
            .iter()
            .filter(|e| e.1 == 0 && e.4 == queued_on)
            .map(|e| e.2)
            .collect()
    };
    assert_eq!(on(60), [REPORT_ID]);
    assert_eq!(on(72), [TIMING_ID, REPORT_ID]);
    let raise_tag = queue
        .iter()
        .find(|e| e.1 == 0 && e.4 == 72 && e.2 == TIMING_ID)
        .unwrap()
        .0;
    // In force on the frame the report executes, before anything the
    // evaluation of that report sends could be: `1/3` in force (two frames
    // and the game's prior margin), 21 frames lacking, up to the margin's
    // most (9 frames, 300 ms) over the 13 the round trips' distribution
    // needs by now (its 90th percentile is the spike's 810 ms), and the
    // phase frame of a spike's rise (decision 59).
    assert_eq!(raise_tag, 75);
    let raised = timings[0]
        .iter()
        .find(|(frame, _)| *frame == raise_tag)
        .map(|(_, timing)| timing.to_string());
    assert_eq!(raised.as_deref(), Some("1/23"), "{:?}", timings[0]);
}
