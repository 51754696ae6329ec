//! The datagrams of the modelled engines. Their content is the original
//! games' (a FRAMEINFO with the events of a send period, acknowledgements,
//! FRAMESYNC); the layout is the simulator's own, little-endian:
//!
//! | kind | bytes | fields |
//! | --- | --- | --- |
//! | 0 data, acknowledged | 1 + 4 + 12 + events | kind, packet id, FRAMEINFO, events |
//! | 1 data, not acknowledged | 1 + 12 | kind, FRAMEINFO (no events: a packet with events asks for an ack) |
//! | 2 ACK | 1 + 4 | kind, the acknowledged packet's id |
//! | 3 FRAMESYNC | 1 + 12 | kind, FRAMEINFO |
//!
//! FRAMEINFO: sender's seat (u8), its send frame (u32: the original's
//! `Frame - Delay`), the frame its events execute on (u32), the events it
//! has sent in all so far (u16, `CommandCount`), the number of events here
//! (u8). An event: its type (u8), then a command's length (u8) and bytes,
//! a PROCESS_TIME's ticks (u16), a TIMING's frame rate, MaxAhead and
//! FrameSendRate (3 × u8), or a RESPONSE_TIME_2's MaxAhead and level
//! (2 × u8).

use rungs_core::timing::baselines::protocol0::ResponseEvent;

/// One event of the original games' queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Event {
    /// A player's command (the engine's bytes).
    Command(Vec<u8>),
    /// The sender's average ticks per frame since its last one.
    ProcessTime(u16),
    /// The master's timing: frame rate, MaxAhead, FrameSendRate.
    Timing {
        fps: u8,
        max_ahead: u8,
        send_period: u8,
    },
    /// Protocol 0's response time and level.
    ResponseTime(ResponseEvent),
}

/// A FRAMEINFO (or FRAMESYNC) header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct FrameInfo {
    pub(super) seat: u8,
    pub(super) send_frame: u32,
    pub(super) tag: u32,
    /// Events sent in all, these included.
    pub(super) command_count: u16,
}

/// A datagram, decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Packet {
    Data {
        /// `Some(id)` when it asks for an acknowledgement.
        ack_id: Option<u32>,
        info: FrameInfo,
        events: Vec<Event>,
    },
    Ack(u32),
    FrameSync(FrameInfo),
}

const DATA_ACK: u8 = 0;
const DATA: u8 = 1;
const ACK: u8 = 2;
const FRAMESYNC: u8 = 3;

const COMMAND: u8 = 0;
const PROCESS_TIME: u8 = 1;
const TIMING: u8 = 2;
const RESPONSE_TIME: u8 = 3;

/// Write a data packet into `out` (cleared first).
pub(super) fn data(out: &mut Vec<u8>, ack_id: Option<u32>, info: FrameInfo, events: &[Event]) {
    out.clear();
    match ack_id {
        Some(id) => {
            out.push(DATA_ACK);
            out.extend_from_slice(&id.to_le_bytes());
        }
        None => out.push(DATA),
    }
    frame_info(out, info, events.len());
    for event in events {
        match event {
            Event::Command(bytes) => {
                out.extend_from_slice(&[COMMAND, bytes.len().min(255) as u8]);
                out.extend_from_slice(&bytes[..bytes.len().min(255)]);
            }
            Event::ProcessTime(ticks) => {
                out.push(PROCESS_TIME);
                out.extend_from_slice(&ticks.to_le_bytes());
            }
            Event::Timing {
                fps,
                max_ahead,
                send_period,
            } => out.extend_from_slice(&[TIMING, *fps, *max_ahead, *send_period]),
            Event::ResponseTime(r) => out.extend_from_slice(&[RESPONSE_TIME, r.max_ahead, r.level]),
        }
    }
}

/// Write an acknowledgement of packet `id`.
pub(super) fn ack(out: &mut Vec<u8>, id: u32) {
    out.clear();
    out.push(ACK);
    out.extend_from_slice(&id.to_le_bytes());
}

/// Write a FRAMESYNC.
pub(super) fn frame_sync(out: &mut Vec<u8>, info: FrameInfo) {
    out.clear();
    out.push(FRAMESYNC);
    frame_info(out, info, 0);
}

fn frame_info(out: &mut Vec<u8>, info: FrameInfo, events: usize) {
    out.push(info.seat);
    out.extend_from_slice(&info.send_frame.to_le_bytes());
    out.extend_from_slice(&info.tag.to_le_bytes());
    out.extend_from_slice(&info.command_count.to_le_bytes());
    out.push(events.min(255) as u8);
}

/// Read a datagram; `None` for anything malformed.
pub(super) fn read(bytes: &[u8]) -> Option<Packet> {
    let mut r = Reader(bytes);
    match r.u8()? {
        ACK => Some(Packet::Ack(r.u32()?)).filter(|_| r.0.is_empty()),
        FRAMESYNC => {
            let (info, _) = r.frame_info()?;
            r.0.is_empty().then_some(Packet::FrameSync(info))
        }
        kind @ (DATA_ACK | DATA) => {
            let ack_id = if kind == DATA_ACK {
                Some(r.u32()?)
            } else {
                None
            };
            let (info, count) = r.frame_info()?;
            let events = (0..count).map(|_| r.event()).collect::<Option<Vec<_>>>()?;
            r.0.is_empty().then_some(Packet::Data {
                ack_id,
                info,
                events,
            })
        }
        _ => None,
    }
}

struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Option<&[u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(head)
    }

    fn u8(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }

    fn u16(&mut self) -> Option<u16> {
        Some(u16::from_le_bytes(self.take(2)?.try_into().ok()?))
    }

    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }

    fn frame_info(&mut self) -> Option<(FrameInfo, u8)> {
        let info = FrameInfo {
            seat: self.u8()?,
            send_frame: self.u32()?,
            tag: self.u32()?,
            command_count: self.u16()?,
        };
        Some((info, self.u8()?))
    }

    fn event(&mut self) -> Option<Event> {
        Some(match self.u8()? {
            COMMAND => {
                let len = usize::from(self.u8()?);
                Event::Command(self.take(len)?.to_vec())
            }
            PROCESS_TIME => Event::ProcessTime(self.u16()?),
            TIMING => Event::Timing {
                fps: self.u8()?,
                max_ahead: self.u8()?,
                send_period: self.u8()?,
            },
            RESPONSE_TIME => Event::ResponseTime(ResponseEvent {
                max_ahead: self.u8()?,
                level: self.u8()?,
            }),
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_packet_reads_back_and_nothing_malformed_does() {
        let info = FrameInfo {
            seat: 2,
            send_frame: 300,
            tag: 309,
            command_count: 7,
        };
        let events = vec![
            Event::Command(vec![2, 5, 0, 0, 0]),
            Event::ProcessTime(3),
            Event::Timing {
                fps: 60,
                max_ahead: 12,
                send_period: 3,
            },
            Event::ResponseTime(ResponseEvent {
                max_ahead: 10,
                level: 3,
            }),
        ];
        let mut out = Vec::new();
        for (written, packet) in [
            (
                Some(9),
                Packet::Data {
                    ack_id: Some(9),
                    info,
                    events: events.clone(),
                },
            ),
            (
                None,
                Packet::Data {
                    ack_id: None,
                    info,
                    events: Vec::new(),
                },
            ),
        ] {
            let evs = if written.is_some() {
                &events[..]
            } else {
                &[][..]
            };
            data(&mut out, written, info, evs);
            assert_eq!(read(&out), Some(packet));
            for cut in 0..out.len() {
                assert_eq!(read(&out[..cut]), None, "cut at {cut}");
            }
        }
        ack(&mut out, 77);
        assert_eq!(read(&out), Some(Packet::Ack(77)));
        frame_sync(&mut out, info);
        assert_eq!(read(&out), Some(Packet::FrameSync(info)));
        out.push(0);
        assert_eq!(read(&out), None, "trailing bytes");
        assert_eq!(read(&[9]), None);
    }
}
