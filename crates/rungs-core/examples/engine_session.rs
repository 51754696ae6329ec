//! An engine that keeps its own network, event queue and event IDs, with
//! rungs choosing its timing: the engine session path (`docs/model.md` S5,
//! S7). Two machines run in one process; each "sends" its packet straight
//! into the other's inbox, so the example shows the calls and their order,
//! not a network.
//!
//! Per frame, each engine: `frame_begin`; when the frame executes, checks
//! `peers_ready`, executes every queued event due by now in (tag, seat,
//! issue) order and hands rungs' own events to `event_executed`; measures;
//! `frame_end`; then acts on the outputs: queue rungs' events in its own
//! stream, flush its packet on a send frame stamped with the tag rungs
//! gives, pace at the frame rate rungs asks for.
//!
//! Run it with `cargo run -p rungs-core --example engine_session`.

use rungs_core::session::{EngineRules, EngineSession, EventIds, SessionConfig, SessionOutput};
use rungs_core::timing::{MachineConfig, Output};
use rungs_core::wire::{ReportLayout, TimingLayout};

/// The engine's own event IDs: rungs never invents one.
const ORDER_ID: u8 = 1;
const TIMING_ID: u8 = 31;
const REPORT_ID: u8 = 60;

/// One event in an engine's queue.
#[derive(Clone)]
struct Event {
    type_id: u8,
    seat: u8,
    tag: u32,
    issue: u32,
    payload: Vec<u8>,
}

/// A packet of one send frame: its number in the sender's stream, the send
/// frame, and the events collected since the previous one.
struct Packet {
    from: u8,
    number: u32,
    send_frame: u32,
    events: Vec<Event>,
}

struct Engine {
    seat: u8,
    session: EngineSession,
    queue: Vec<Event>,
    outbox: Vec<(u8, Vec<u8>)>,
    packets_sent: u32,
    issued: u32,
    executed_orders: Vec<(u32, u8, Vec<u8>)>,
    fps: u8,
}

impl Engine {
    fn new(seat: u8) -> Engine {
        let config = SessionConfig {
            machine: MachineConfig::adaptive(30, vec![true, true], Some(seat)),
            ids: EventIds {
                timing: TIMING_ID,
                network_report: REPORT_ID,
                latency_fudge: None,
            },
            timing_layout: TimingLayout::TIBERIAN_SUN,
            report_layout: ReportLayout::Extended,
            rules: EngineRules::default(),
        };
        Engine {
            seat,
            session: EngineSession::new(&config).expect("a valid configuration"),
            queue: Vec::new(),
            outbox: Vec::new(),
            packets_sent: 0,
            issued: 0,
            executed_orders: Vec::new(),
            fps: 30,
        }
    }

    /// One frame; returns the packet to send, if this is a send frame.
    fn frame(&mut self, frame: u32) -> Option<Packet> {
        if self.session.frame_begin(frame).expect("frames in order") {
            // Instant delivery: every packet is here. A real engine waits
            // (and measures the wait) until this says ready.
            assert!(self.session.peers_ready().expect("no faulty peer").ready);
            let mut due: Vec<Event> = Vec::new();
            self.queue.retain(|e| {
                let is_due = e.tag <= frame;
                if is_due {
                    due.push(e.clone());
                }
                !is_due
            });
            due.sort_by_key(|e| (e.tag, e.seat, e.issue));
            for event in due {
                match event.type_id {
                    TIMING_ID | REPORT_ID => self
                        .session
                        .event_executed(event.type_id, event.seat, frame, &event.payload)
                        .expect("rungs' own events are valid"),
                    _ => self
                        .executed_orders
                        .push((frame, event.seat, event.payload)),
                }
            }
        }
        // The player's input: an order every 20 frames.
        if frame % 20 == u32::from(self.seat) {
            self.outbox.push((ORDER_ID, vec![self.seat, frame as u8]));
        }
        // Measurements: this frame's work, and a 40 ms round trip to the peer.
        self.session.measurements().add_frame_work_us(4_000);
        if frame % 30 == 0 {
            let peer = 1 - self.seat;
            self.session.rtt_sample(peer, 40, true).expect("a peer");
        }
        self.session.frame_end().expect("a frame is running");

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
                            self.issued += 1;
                            Event {
                                type_id,
                                seat: self.seat,
                                tag,
                                issue: self.issued,
                                payload,
                            }
                        })
                        .collect();
                    // Lockstep: this machine executes its own events too.
                    self.queue.extend(events.iter().cloned());
                    packet = Some(Packet {
                        from: self.seat,
                        number: self.packets_sent,
                        send_frame: frame,
                        events,
                    });
                    self.packets_sent += 1;
                }
                SessionOutput::Timing(Output::TimingChanged { frame, timing })
                    if self.seat == 0 =>
                {
                    println!("frame {frame}: timing {timing}");
                }
                SessionOutput::Timing(Output::FrameRateChanged { fps, .. }) => self.fps = fps,
                SessionOutput::Timing(_) | SessionOutput::Log { .. } => {}
            }
        }
        packet
    }

    fn receive(&mut self, packet: Packet) {
        self.session
            .packet_received(packet.from, packet.number, packet.send_frame)
            .expect("packets in order from a peer");
        self.queue.extend(packet.events);
    }
}

fn main() {
    let mut engines = [Engine::new(0), Engine::new(1)];
    for frame in 0..900 {
        let packets: Vec<Packet> = engines.iter_mut().filter_map(|e| e.frame(frame)).collect();
        for packet in packets {
            let to = usize::from(1 - packet.from);
            engines[to].receive(packet);
        }
    }
    assert_eq!(
        engines[0].executed_orders, engines[1].executed_orders,
        "both machines executed the same orders on the same frames"
    );
    println!(
        "900 frames: {} orders executed identically on both machines, pacing at {} fps",
        engines[0].executed_orders.len(),
        engines[0].fps
    );
}
