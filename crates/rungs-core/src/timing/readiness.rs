//! Frame readiness (S5): which packets an engine that keeps its own queue
//! must hold before a frame may execute.
//!
//! A command sent on send frame `s` is tagged `s + L(s)` and executes on the
//! first send frame at or after its tag. Tags never decrease from one send
//! frame to the next, but during a staged decrease they can repeat: the
//! look-ahead drops by one send period per send frame, so `s + L(s)` stays
//! put (e.g. `3/9` to `2/6`: send frame 4239 under `3/9` and 4242 under `2/6`
//! are both tagged 4248). "A packet tagged at or after F from every peer"
//! therefore does not mean every command due by F has arrived: the packet of
//! 4242 can still be on its way when the one of 4239 is in.
//!
//! **The rule.** Frame `F` may execute once the engine holds, from every
//! peer still in the game, the packet of the *last send frame whose tag is at
//! or before `F`* (and therefore, on an in-order link, every earlier one).
//! The send frames and their tags are the same on every machine (S5), so the
//! schedule answers for every peer at once; when no send frame has a tag at
//! or before `F` yet, nothing is needed.
//!
//! The history keeps the send frames of the last [`SendHistory::WINDOW`]
//! frames without allocating; questions about older frames are refused.
//!
//! **What the engine holds** (S7). "Holding the packet of send frame `s`"
//! means holding it *and every packet before it*: a transport that resends a
//! lost packet after later ones (Tiberian Sun's does) can deliver the packet
//! of a later send frame first, and "the latest send frame I hold" then
//! claims packets that are still missing. Send frames are not consecutive
//! numbers, so the engine cannot see the gap from them; its packet numbers
//! can. [`PeerStreams`] takes each packet as it arrives — the sending peer,
//! its packet number (0 for the packet of send frame 0, then one more per
//! send frame) and the send frame it carries — and keeps, per peer, the
//! contiguous watermark itself. Every send frame is the same on every machine
//! (S5), so packet `n` must carry the `n`-th send frame of the game: a packet
//! that does not — a tag passed for a send frame, a number skipped or
//! counted twice — is refused when it arrives, or, when it arrived before
//! this machine reached its send frame, reported by the next readiness
//! question. A wrong argument becomes an error, never a frame executed early.

use std::collections::VecDeque;

use crate::error::{Error, Result};
use crate::report::record::MAX_SEATS;

/// Recent send frames and their tags, in frame order.
#[derive(Debug, Clone)]
pub struct SendHistory {
    /// `(send_frame, tag)`, oldest first; tags are non-decreasing (S5).
    sends: VecDeque<(u32, u32)>,
    /// Every send frame before this one is final (its frame has ended).
    final_through: Option<u32>,
    /// How many send frames the game had before `sends.front()`: the index
    /// (packet number) of the front one.
    first_index: u32,
}

/// Where the `n`-th send frame of the game stands in a [`SendHistory`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendAt {
    /// It is send frame `frame`.
    Known(u32),
    /// This machine has not reached it yet; every send frame so far is
    /// before it, the last one being `after` (`None`: no send frame yet).
    NotYet {
        /// The last send frame so far; `None`: none yet.
        after: Option<u32>,
    },
    /// Older than the history keeps.
    Forgotten,
}

/// Why [`SendHistory::required_send_frame`] refused a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotAnswerable {
    /// The frame before `frame` has not ended, so a send frame whose tag
    /// could be at or before `frame` may still come; frames up to
    /// `latest_answerable` can be asked about now.
    Future {
        /// The latest frame that can be asked about now.
        latest_answerable: u32,
    },
    /// Older than the history keeps.
    TooOld {
        /// The oldest frame the history still answers for.
        oldest_answerable: u32,
    },
}

impl SendHistory {
    /// How many frames back the history answers. A tag is at most 250
    /// frames after its send frame (S1), so 256 frames of questions need
    /// 512 frames of send frames.
    pub const WINDOW: u32 = 256;
    const KEPT_FRAMES: u32 = 2 * Self::WINDOW;

    /// An empty history on the eve of frame 0.
    pub fn new() -> SendHistory {
        SendHistory {
            sends: VecDeque::with_capacity(Self::KEPT_FRAMES as usize + 1),
            final_through: None,
            first_index: 0,
        }
    }

    /// Frame `frame` ended; `send` is `Some(tag)` when it was a send frame.
    pub fn frame_ended(&mut self, frame: u32, send: Option<u32>) {
        if let Some(tag) = send {
            self.sends.push_back((frame, tag));
        }
        self.final_through = Some(frame);
        while self
            .sends
            .front()
            .is_some_and(|&(s, _)| s.saturating_add(Self::KEPT_FRAMES) <= frame)
        {
            self.sends.pop_front();
            self.first_index += 1;
        }
    }

    /// How many send frames the game has had so far (the frames that ended).
    pub fn send_count(&self) -> u32 {
        self.first_index + self.sends.len() as u32
    }

    /// The last frame that ended, if any.
    pub fn final_through(&self) -> Option<u32> {
        self.final_through
    }

    /// The `index`-th send frame of the game (0 is frame 0's).
    pub fn send_frame_at(&self, index: u32) -> SendAt {
        if index < self.first_index {
            return SendAt::Forgotten;
        }
        match self.sends.get((index - self.first_index) as usize) {
            Some(&(frame, _)) => SendAt::Known(frame),
            None => SendAt::NotYet {
                after: self.sends.back().map(|&(frame, _)| frame),
            },
        }
    }

    /// The tag of the `index`-th send frame, if the history holds it.
    pub fn tag_at(&self, index: u32) -> Option<u32> {
        let at = index.checked_sub(self.first_index)?;
        self.sends.get(at as usize).map(|&(_, tag)| tag)
    }

    /// The index (packet number) of send frame `frame`, if the history holds it.
    pub fn index_of(&self, frame: u32) -> Option<u32> {
        let at = self.sends.partition_point(|&(s, _)| s < frame);
        match self.sends.get(at) {
            Some(&(s, _)) if s == frame => Some(self.first_index + at as u32),
            _ => None,
        }
    }

    /// Whether `frame` can be a send frame as far as the history knows:
    /// `Some(false)` only for a frame that has ended, is still held, and
    /// was not a send frame; `None` when the history cannot tell (a frame
    /// not ended yet, or forgotten).
    pub fn is_send_frame(&self, frame: u32) -> Option<bool> {
        let ended = self.final_through.is_some_and(|last| frame <= last);
        let kept = self
            .final_through
            .is_some_and(|last| frame.saturating_add(Self::KEPT_FRAMES) > last);
        (ended && kept).then(|| self.index_of(frame).is_some())
    }

    /// The send frames around `frame` (the last before, the first after),
    /// for messages.
    fn neighbours(&self, frame: u32) -> (Option<u32>, Option<u32>) {
        let at = self.sends.partition_point(|&(s, _)| s < frame);
        let before = at.checked_sub(1).map(|i| self.sends[i].0);
        let after = self.sends.get(at).map(|&(s, _)| s);
        (before, after)
    }

    /// Refuse `held`, an entry of `rungs_session_frame_ready`'s array for
    /// `seat`, when it cannot be a send frame the peer's packet carried:
    /// a frame that ended here without being a send frame (a tag, or a
    /// frame counted from the wrong place).
    pub fn check_held(&self, seat: u8, held: u32) -> Result<()> {
        if self.is_send_frame(held) != Some(false) {
            return Ok(());
        }
        let (before, after) = self.neighbours(held);
        let shown = |f: Option<u32>| f.map_or("none".to_string(), |f| f.to_string());
        Err(Error::invalid_value(
            format!("seat {seat}'s held send frame"),
            held,
            format!(
                "a send frame of this game (those around it are {} and {}): the send frame the \
                 send_frame callback gave for that packet, not its tag",
                shown(before),
                shown(after)
            ),
        ))
    }

    /// The send frame whose packet, from every peer, frame `frame` needs
    /// before it executes: the last send frame tagged at or before `frame`;
    /// `None` when no send frame so far is (nothing to wait for).
    /// Answerable for frames up to one past the last ended frame, and back
    /// [`Self::WINDOW`] frames from there.
    pub fn required_send_frame(
        &self,
        frame: u32,
    ) -> std::result::Result<Option<u32>, NotAnswerable> {
        let latest_answerable = self.final_through.map_or(0, |f| f.saturating_add(1));
        if frame > latest_answerable {
            return Err(NotAnswerable::Future { latest_answerable });
        }
        let oldest_answerable = latest_answerable.saturating_sub(Self::WINDOW);
        if frame < oldest_answerable {
            return Err(NotAnswerable::TooOld { oldest_answerable });
        }
        let due = self.sends.partition_point(|&(_, tag)| tag <= frame);
        Ok(due.checked_sub(1).map(|index| self.sends[index].0))
    }

    /// Whether frame `frame` may execute, given the latest send frame held
    /// from each peer (`None`: nothing yet). Peers are the other players
    /// still in the game; the local machine holds its own packets.
    pub fn frame_ready(
        &self,
        frame: u32,
        held: impl IntoIterator<Item = Option<u32>>,
    ) -> std::result::Result<bool, NotAnswerable> {
        Ok(match self.required_send_frame(frame)? {
            None => true,
            Some(needed) => held.into_iter().all(|h| h.is_some_and(|h| h >= needed)),
        })
    }
}

impl Default for SendHistory {
    fn default() -> Self {
        SendHistory::new()
    }
}

impl NotAnswerable {
    /// The error the sessions return for a question about `frame`: what was
    /// asked and which frames can be answered.
    pub fn into_error(self, frame: u32) -> Error {
        let (kind, latest) = match self {
            NotAnswerable::Future { latest_answerable } => (
                Error::State(
                    "frame readiness: the frame before it has not ended, so its send frames \
                     are not final",
                ),
                latest_answerable,
            ),
            NotAnswerable::TooOld { oldest_answerable } => (
                Error::State(
                    "frame readiness: the frame is more than 256 frames back; the history no \
                     longer holds it",
                ),
                oldest_answerable.saturating_add(SendHistory::WINDOW),
            ),
        };
        let oldest = latest.saturating_sub(SendHistory::WINDOW);
        kind.detailed(format!(
            "got frame {frame}; expected {oldest} to {latest} (a frame whose previous frame \
             has ended, at most {} frames back)",
            SendHistory::WINDOW
        ))
    }
}

/// Shorthand for the sessions: the answer for `frame`, or the error.
pub(crate) fn answer<T>(r: std::result::Result<T, NotAnswerable>, frame: u32) -> Result<T> {
    r.map_err(|e| e.into_error(frame))
}

/// Packets a peer may be ahead of what this machine has checked: a peer
/// cannot run further ahead than a look-ahead and a send period (S1: at most
/// 260 send frames), so 512 leaves room and bounds what a peer can make this
/// machine hold.
pub(crate) const PACKETS_AHEAD: u32 = 512;

/// One peer's packets as the engine received them.
#[derive(Debug, Clone)]
struct PeerStream {
    /// Packets `0 .. held` have all arrived: the watermark is `held - 1`.
    held: u32,
    /// Packets below this were checked against the schedule (or forgotten).
    checked: u32,
    /// Packets below this that are here (also past a gap) were checked.
    scanned: u32,
    /// The highest packet number stored.
    highest: Option<u32>,
    /// Send frames of packets `checked .. checked + PACKETS_AHEAD`, by
    /// packet number modulo the ring; `None` for a packet not here.
    ring: Vec<Option<u32>>,
    /// The agreed end of its stream (the engine's drop procedure): packets
    /// after this one are void. `Some(None)`: no packet counts.
    cut: Option<Option<u32>>,
    /// A packet that, once this machine reached its send frame, turned out
    /// not to carry it; every readiness question returns it.
    fault: Option<Error>,
}

impl PeerStream {
    fn new() -> PeerStream {
        PeerStream {
            held: 0,
            checked: 0,
            scanned: 0,
            highest: None,
            ring: Vec::new(),
            cut: None,
            fault: None,
        }
    }

    fn slot(&mut self, number: u32) -> &mut Option<u32> {
        if self.ring.is_empty() {
            self.ring = vec![None; PACKETS_AHEAD as usize];
        }
        &mut self.ring[(number % PACKETS_AHEAD) as usize]
    }

    /// Whether packet `number` of `seat`, if here, carries the send frame
    /// the schedule has for it (or the schedule cannot tell yet); a wrong
    /// one becomes the stream's fault. `false` once the stream has a fault.
    fn verify(&mut self, seat: u8, number: u32, history: &SendHistory) -> bool {
        if self.fault.is_some() {
            return false;
        }
        if let (Some(carried), SendAt::Known(frame)) =
            (self.stored(number), history.send_frame_at(number))
        {
            if carried != frame {
                self.fault = Some(wrong_packet(
                    history,
                    seat,
                    number,
                    carried,
                    &format!("send frame {frame}"),
                ));
                return false;
            }
        }
        true
    }

    fn stored(&self, number: u32) -> Option<u32> {
        if number < self.checked || number >= self.checked + PACKETS_AHEAD || self.ring.is_empty() {
            return None;
        }
        self.ring[(number % PACKETS_AHEAD) as usize]
    }
}

/// The packets each peer's engine sent, as this machine received them: a
/// contiguous watermark per peer, every packet checked against the schedule
/// (module docs). Bounded: at most [`PACKETS_AHEAD`] packets per peer.
#[derive(Debug, Clone)]
pub(crate) struct PeerStreams {
    peers: Vec<PeerStream>,
}

impl Default for PeerStreams {
    fn default() -> Self {
        PeerStreams::new()
    }
}

/// Why the `n`-th packet's send frame is wrong, for messages: what the
/// history says of the frame it carries points at the likely mistake.
fn wrong_packet(
    history: &SendHistory,
    seat: u8,
    number: u32,
    send_frame: u32,
    expected: &str,
) -> Error {
    let why = if history.tag_at(number) == Some(send_frame) {
        // Tags are often send frames themselves (a look-ahead is a multiple
        // of the send period), so this comes first.
        format!(
            "{send_frame} is packet {number}'s tag: pass its send frame (the sender's send_frame \
             callback's first argument, FRAMEINFO Frame - Delay), not the tag"
        )
    } else if let Some(index) = history.index_of(send_frame) {
        format!(
            "send frame {send_frame} is packet {index} of the game: number packets from 0 for \
             send frame 0's, one more per send frame"
        )
    } else if history.is_send_frame(send_frame) == Some(false) {
        format!(
            "frame {send_frame} was not a send frame here: pass the send frame the sender's \
             send_frame callback gave (FRAMEINFO Frame - Delay), not the tag"
        )
    } else {
        "packet n carries the game's n-th send frame, counting frame 0's as packet 0; pass the \
         send frame, not the tag"
            .to_string()
    };
    Error::invalid_value(
        format!("the send frame of packet {number} from seat {seat}"),
        send_frame,
        format!("{expected} ({why})"),
    )
}

impl PeerStreams {
    /// No packet from anyone yet.
    pub(crate) fn new() -> PeerStreams {
        PeerStreams {
            peers: (0..MAX_SEATS).map(|_| PeerStream::new()).collect(),
        }
    }

    fn stream(&mut self, seat: u8) -> Result<&mut PeerStream> {
        self.peers
            .get_mut(usize::from(seat))
            .ok_or(Error::UnknownSeat(seat))
    }

    /// Packet `number` from `seat` arrived, carrying `send_frame`. A copy of
    /// one already here is accepted if it says the same. Refused, changing
    /// nothing: a send frame that is not the game's `number`-th (when this
    /// machine has reached it, or it is not after every send frame this
    /// machine has had when it has not), a different send frame for a packet
    /// already here, a packet more than [`PACKETS_AHEAD`] past the ones
    /// checked, and a packet past the peer's cut.
    pub(crate) fn received(
        &mut self,
        history: &SendHistory,
        seat: u8,
        number: u32,
        send_frame: u32,
    ) -> Result<()> {
        let stream = self.stream(seat)?;
        if let Some(cut) = stream.cut {
            if cut.map_or(true, |last| number > last) {
                let last = cut.map_or("none".to_string(), |l| l.to_string());
                return Err(Error::State("packet past the peer's cut").detailed(format!(
                    "packet {number} from seat {seat} is past the end agreed for its stream \
                     (last packet {last}); packets after the cut are void"
                )));
            }
        }
        match history.send_frame_at(number) {
            SendAt::Known(frame) if frame != send_frame => {
                return Err(wrong_packet(
                    history,
                    seat,
                    number,
                    send_frame,
                    &format!("send frame {frame}"),
                ))
            }
            SendAt::NotYet { after: Some(last) } if send_frame <= last => {
                return Err(wrong_packet(
                    history,
                    seat,
                    number,
                    send_frame,
                    &format!(
                        "a send frame after {last} (this machine has had {} send frames)",
                        history.send_count()
                    ),
                ))
            }
            _ => {}
        }
        if number < stream.checked {
            // Checked long ago (or forgotten): a late copy.
            return Ok(());
        }
        if number >= stream.checked.saturating_add(PACKETS_AHEAD) {
            return Err(
                Error::Full("packets too far ahead of this machine").detailed(format!(
                "packet {number} from seat {seat} is more than {PACKETS_AHEAD} packets past the \
                 {} this machine has checked; nothing was recorded: keep the packet and hand it \
                 again once this machine has run further (an observer, which nobody waits for, \
                 can fall this far behind; a player cannot, so on a player's machine the packet \
                 numbers are wrong)",
                stream.checked
            )),
            );
        }
        if let Some(before) = stream.stored(number) {
            if before != send_frame {
                return Err(wrong_packet(
                    history,
                    seat,
                    number,
                    send_frame,
                    &format!("send frame {before}, as its first copy said"),
                ));
            }
            return Ok(());
        }
        // Neighbours already here bound it: send frames increase with numbers.
        let below = number.checked_sub(1).and_then(|n| stream.stored(n));
        let above = stream.stored(number + 1);
        if below.is_some_and(|b| b >= send_frame) || above.is_some_and(|a| a <= send_frame) {
            let shown = |f: Option<u32>| f.map_or("?".to_string(), |f| f.to_string());
            return Err(wrong_packet(
                history,
                seat,
                number,
                send_frame,
                &format!(
                    "a send frame between those of packets {} and {} ({} and {})",
                    number.saturating_sub(1),
                    number + 1,
                    shown(below),
                    shown(above)
                ),
            ));
        }
        *stream.slot(number) = Some(send_frame);
        stream.highest = stream.highest.max(Some(number));
        while stream.stored(stream.held).is_some() {
            stream.held += 1;
        }
        self.check(history);
        Ok(())
    }

    /// Check every stored packet whose send frame this machine has now
    /// reached; a wrong one becomes its peer's fault. Call as the history
    /// grows (the session does, every frame).
    pub(crate) fn check(&mut self, history: &SendHistory) {
        let known = history.send_count();
        for (seat, stream) in self.peers.iter_mut().enumerate() {
            while stream.checked < known && stream.fault.is_none() {
                let number = stream.checked;
                let here = stream.stored(number);
                if !stream.verify(seat as u8, number, history) {
                    break;
                }
                if here.is_none() && number >= stream.held {
                    // Not here yet: checked when it comes.
                    break;
                }
                if !stream.ring.is_empty() {
                    *stream.slot(number) = None;
                }
                stream.checked += 1;
            }
            // Packets past a gap, once each: a wrong one must not wait for
            // the gap to fill.
            let end = known.min(stream.highest.map_or(0, |h| h + 1));
            let mut number = stream.scanned.max(stream.checked);
            while number < end && stream.verify(seat as u8, number, history) {
                number += 1;
            }
            stream.scanned = stream.scanned.max(number);
        }
    }

    /// The agreed end of `seat`'s stream: packets through `last` count
    /// (`None`: none does); frames that would need a later one do not wait
    /// for it, and later packets are refused. Refused when this machine
    /// already holds, contiguously, a packet past it (its own vote was
    /// wrong), or a different cut was set.
    pub(crate) fn cut(&mut self, seat: u8, last: Option<u32>) -> Result<()> {
        let stream = self.stream(seat)?;
        let holds_past = match last {
            None => stream.held > 0,
            Some(last) => stream.held > last.saturating_add(1),
        };
        if holds_past {
            return Err(Error::invalid_value(
                format!("the cut for seat {seat}"),
                last.map_or("no packet".to_string(), |l| format!("packet {l}")),
                format!(
                    "packet {} or later (packets 0 to {0} are held here; a cut is at least \
                     every survivor's watermark)",
                    stream.held - 1
                ),
            ));
        }
        if stream.cut.is_some_and(|c| c != last) {
            return Err(Error::State("the peer's stream was already cut elsewhere"));
        }
        stream.cut = Some(last);
        Ok(())
    }

    /// The contiguous watermark of `seat`: the last packet number it holds
    /// with every one before it (`None`: not packet 0 yet).
    pub(crate) fn watermark(&self, seat: u8) -> Option<u32> {
        let stream = self.peers.get(usize::from(seat))?;
        stream.held.checked_sub(1)
    }

    /// The fault of `seat`'s stream: a packet that, once this machine
    /// reached its send frame, turned out not to carry it.
    pub(crate) fn fault(&self, seat: u8) -> Option<&Error> {
        self.peers.get(usize::from(seat))?.fault.as_ref()
    }

    /// Whether `seat`'s packets through the one of `send_frame` are all
    /// here (or its cut ends its stream before that packet); its fault, if
    /// one of its packets turned out wrong.
    pub(crate) fn holds(&self, history: &SendHistory, seat: u8, send_frame: u32) -> Result<bool> {
        let Some(stream) = self.peers.get(usize::from(seat)) else {
            return Err(Error::UnknownSeat(seat));
        };
        if let Some(fault) = &stream.fault {
            return Err(fault.clone());
        }
        let Some(index) = history.index_of(send_frame) else {
            return Err(Error::State(
                "frame readiness: the send frame needed is no longer in the history",
            ));
        };
        if let Some(cut) = stream.cut {
            if cut.map_or(true, |last| index > last) {
                return Ok(true);
            }
        }
        Ok(stream.held > index)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timing::{MachineConfig, TimingMachine};
    use crate::timing::{Timing, TimingEvent};

    #[test]
    fn the_last_send_frame_tagged_at_or_before_the_frame_is_required() {
        let mut h = SendHistory::new();
        assert_eq!(h.required_send_frame(0), Ok(None));
        assert_eq!(
            h.required_send_frame(1),
            Err(NotAnswerable::Future {
                latest_answerable: 0
            })
        );
        // 3/9 send frames 4236, 4239; then 2/6 from 4242 (a staged decrease).
        for (frame, send) in [(4236, Some(4245)), (4239, Some(4248)), (4242, Some(4248))] {
            h.frame_ended(frame, send);
        }
        h.frame_ended(4243, None);
        h.frame_ended(4244, Some(4250));
        assert_eq!(h.required_send_frame(4245), Ok(Some(4236)));
        assert_eq!(
            h.required_send_frame(4246),
            Err(NotAnswerable::Future {
                latest_answerable: 4245
            })
        );
        for (frame, send) in [(4245, None), (4246, Some(4252)), (4247, None)] {
            h.frame_ended(frame, send);
        }
        assert_eq!(h.required_send_frame(4247), Ok(Some(4236)));
        // Two packets carry tag 4248: frame 4248 needs the later one.
        assert_eq!(h.required_send_frame(4248), Ok(Some(4242)));
        assert_eq!(h.frame_ready(4248, [Some(4239), Some(4242)]), Ok(false));
        assert_eq!(h.frame_ready(4248, [Some(4242), Some(4244)]), Ok(true));
        assert_eq!(h.frame_ready(4244, [None]), Ok(true));
        assert_eq!(h.frame_ready(4245, [None]), Ok(false));
    }

    #[test]
    fn old_frames_are_refused_and_the_history_stays_bounded() {
        let mut h = SendHistory::new();
        for frame in 0..10_000 {
            h.frame_ended(frame, Some(frame + 6));
        }
        assert!(h.sends.len() <= SendHistory::KEPT_FRAMES as usize);
        assert_eq!(h.required_send_frame(10_000), Ok(Some(9_994)));
        assert_eq!(h.required_send_frame(10_000 - 256), Ok(Some(9_738)));
        assert!(matches!(
            h.required_send_frame(10_000 - 257),
            Err(NotAnswerable::TooOld { .. })
        ));
    }

    /// The machine records its own send frames: during the worked example
    /// `10/250` to `9/27` every send frame of the step-down carries one tag.
    #[test]
    fn a_machine_answers_from_its_schedule_during_a_step_down() {
        let mut m = TimingMachine::new(&MachineConfig::adaptive(30, vec![true], Some(0))).unwrap();
        let mut tags = Vec::new();
        for frame in 0..=1300 {
            m.begin_frame(frame).unwrap();
            let event = match frame {
                990 => Some(Timing::new(10, 250).unwrap()),
                1000 => Some(Timing::new(9, 27).unwrap()),
                _ => None,
            };
            if let Some(target) = event {
                m.execute_timing_event(0, TimingEvent { target, fps: 30 })
                    .unwrap();
            }
            m.end_frame().unwrap();
            if m.is_send_frame() {
                tags.push((frame, m.command_tag()));
            }
        }
        // 1260: 9/243 -> 1503; 1269: 9/234 -> 1503; 1278 -> 1503 ...
        assert!(tags.contains(&(1260, 1503)) && tags.contains(&(1269, 1503)));
        // Frame 1300's question: the last send frame tagged <= 1300.
        let expected = tags.iter().rev().find(|(_, t)| *t <= 1300).unwrap().0;
        assert_eq!(m.required_send_frame(1300), Ok(Some(expected)));
        assert_eq!(m.required_send_frame(1301), Ok(Some(expected)));
    }

    proptest::proptest! {
        /// Whatever order a peer's packets arrive in, and with copies, the
        /// watermark is the contiguous prefix and a send frame counts as
        /// held exactly when every packet through it is here.
        #[test]
        fn the_watermark_is_the_contiguous_prefix_in_any_arrival_order(
            send_period in 1u32..=5,
            order in proptest::collection::vec(0usize..40, 60..120),
        ) {
            let mut history = SendHistory::new();
            let mut sends = Vec::new();
            for frame in 0..200u32 {
                let send = (frame % send_period == 0).then_some(frame + 3 * send_period);
                if send.is_some() {
                    sends.push(frame);
                }
                history.frame_ended(frame, send);
            }
            let mut streams = PeerStreams::new();
            let mut here = [false; 40];
            for &number in &order {
                streams
                    .received(&history, 1, number as u32, sends[number])
                    .unwrap();
                here[number] = true;
                let prefix = here.iter().take_while(|h| **h).count();
                proptest::prop_assert_eq!(
                    streams.watermark(1),
                    prefix.checked_sub(1).map(|p| p as u32)
                );
                for (index, &frame) in sends.iter().take(40).enumerate() {
                    proptest::prop_assert_eq!(
                        streams.holds(&history, 1, frame).unwrap(),
                        index < prefix
                    );
                }
            }
        }
    }
}
