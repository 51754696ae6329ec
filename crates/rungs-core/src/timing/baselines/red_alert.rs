//! Red Alert's timing rules (EA's GPL release of Red Alert, protocol 2,
//! `COMM_PROTOCOL_MULTI_E_COMP`), as pure functions: what the start,
//! the master's TIMING event, the frame rate, the resend delay and the
//! wait for the other players compute. The engine that applies them is
//! `sim::classic`; `docs/baselines.md` cites each fact.

use super::ticks_at;

/// FrameSendRate: a packet every this many frames (`DEFAULT_FRAME_SEND_RATE`).
pub const FRAME_SEND_RATE: u8 = 3;
/// Every machine sends its PROCESS_TIME, and the master its TIMING, on
/// frames that are multiples of this (`(Frame & 0x7f) == 0`).
pub const TIMING_PERIOD: u32 = 128;
/// The master sends no TIMING before it has sent this many events
/// (`my_sent < 5`: commands, PROCESS_TIME and TIMING events counted, not
/// the FRAMEINFO every packet carries).
pub const EVENTS_BEFORE_TIMING: u32 = 5;
/// The frame rate a game starts at, before any TIMING (`init.cpp`).
pub const START_FPS: u8 = 30;
/// Ticks added to the response time for the resend delay (`Set_Timing(resp_time + 10, ...)`).
pub const RETRY_MARGIN_TICKS: u32 = 10;
/// Ticks added to the lobby's response time for the resend delay at the
/// start of a game (`Set_Timing(Global_Response_Time() + 2, ...)`).
pub const START_RETRY_MARGIN_TICKS: u32 = 2;

/// The look-ahead a LAN game starts at (`Net_New_Dialog` before `NET_GO`):
/// the lobby's response time over 8 (2 for one way, 4 more for ticks to
/// frames at 15 fps), rounded up to the send period, at least two send
/// periods.
pub fn lan_start_max_ahead(global_response_ticks: u32, send_period: u8) -> u8 {
    let sp = u32::from(send_period.max(1));
    let rounded = (global_response_ticks / 8).div_ceil(sp) * sp;
    rounded.max(2 * sp).min(cap(sp)) as u8
}

/// The master's MaxAhead (`Generate_Real_Timing_Event`): the worst of its
/// own connections' response time, one way, in frames at the desired rate
/// (`resp * rate / 120`, integer division), rounded up to the send period,
/// at least three send periods.
pub fn max_ahead(response_ticks: u32, fps: u8, send_period: u8) -> u8 {
    let sp = u64::from(send_period.max(1));
    let one_way = u64::from(response_ticks) * u64::from(fps) / 120;
    let rounded = one_way.div_ceil(sp) * sp;
    rounded.max(3 * sp).min(u64::from(cap(sp as u32))) as u8
}

/// The largest look-ahead a send period allows under S1 (250 rounded down
/// to the period): where the original's 16-bit field would go beyond it.
fn cap(send_period: u32) -> u32 {
    250 - 250 % send_period.max(1)
}

/// DesiredFrameRate: 60 over the slowest machine's whole ticks per frame
/// (60 when a frame takes under a tick), at most the rate the game speed
/// allows.
pub fn desired_fps(slowest_ticks_per_frame: u32, speed_fps: u8) -> u8 {
    let own = 60u32.checked_div(slowest_ticks_per_frame).unwrap_or(60);
    own.clamp(1, u32::from(speed_fps.max(1))) as u8
}

/// A frame's pace at `fps`: the main loop waits `60 / fps` whole ticks.
pub fn frame_ticks(fps: u8) -> u64 {
    (60 / u64::from(fps.max(1))).max(1)
}

/// PROCESS_TIME's AverageTicks: the ticks the frames' logic took since the
/// last one, over their count. The ticks are the timer's: a frame's work
/// crosses a tick edge as often as its length is a share of a tick, so over
/// many frames the ticks counted are the work in ticks.
pub fn average_ticks(work_us: u64, frames: u32) -> u32 {
    if frames == 0 {
        return 0;
    }
    (ticks_at(work_us) / u64::from(frames)).min(u64::from(u32::MAX)) as u32
}

/// How many events a send frame's packet may carry on a LAN game
/// (`Send_Packets`), given the most packets any connection still has
/// queued: none at 4 or more (the FRAMEINFO goes alone, the events wait),
/// 5 at 2 or more, otherwise all.
pub fn events_per_packet(queued: usize, waiting_events: usize) -> usize {
    match queued {
        4.. => 0,
        2..=3 => waiting_events.min(5),
        _ => waiting_events,
    }
}

/// Whether frame `frame` may run (`Can_Advance`): every peer's latest
/// announced frame (its send frame, `Frame - Delay` of its FRAMEINFO) is
/// within `max_ahead` of it, `frame < their_frame + max_ahead`, and every
/// event the peers announced has arrived. `their` yields each peer's
/// latest frame (`None` before any) and whether its events are all in.
pub fn can_advance(
    frame: u32,
    max_ahead: u8,
    their: impl IntoIterator<Item = (Option<u32>, bool)>,
) -> bool {
    their.into_iter().all(|(their_frame, all_in)| {
        all_in
            && their_frame.is_some_and(|f| u64::from(frame) < u64::from(f) + u64::from(max_ahead))
    })
}

/// The wait's FRAMESYNC resend interval, ticks (`Session.MaxAhead << 3`):
/// a waiting machine re-announces its frame this often, in case a peer
/// missed its last FRAMEINFO.
pub fn framesync_resend_ticks(max_ahead: u8) -> u64 {
    u64::from(max_ahead) << 3
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lan_game_starts_at_two_send_periods_unless_the_lobby_is_slow() {
        assert_eq!(lan_start_max_ahead(0, 3), 6);
        assert_eq!(lan_start_max_ahead(9, 3), 6); // 150 ms
        assert_eq!(lan_start_max_ahead(48, 3), 6); // 800 ms: 6 frames
        assert_eq!(lan_start_max_ahead(56, 3), 9); // 7 -> 9
        assert_eq!(lan_start_max_ahead(10_000, 3), 249);
    }

    #[test]
    fn the_masters_max_ahead_is_the_one_way_response_in_frames_rounded_up() {
        assert_eq!(max_ahead(9, 30, 3), 9); // 2 frames -> 3, at least 9
        assert_eq!(max_ahead(42, 30, 3), 12); // 10 -> 12
        assert_eq!(max_ahead(42, 60, 3), 21);
        assert_eq!(max_ahead(300, 30, 3), 75);
        assert_eq!(max_ahead(60_000, 30, 3), 249);
    }

    #[test]
    fn the_frame_rate_is_sixty_over_whole_ticks_capped_by_the_speed() {
        assert_eq!(desired_fps(0, 30), 30);
        assert_eq!(desired_fps(0, 60), 60);
        assert_eq!(desired_fps(1, 60), 60);
        assert_eq!(desired_fps(2, 60), 30);
        assert_eq!(desired_fps(3, 30), 20);
        assert_eq!(frame_ticks(30), 2);
        assert_eq!(frame_ticks(45), 1, "45 fps paces as 60: one whole tick");
        assert_eq!(frame_ticks(20), 3);
        assert_eq!(average_ticks(128 * 5_000, 128), 0);
        assert_eq!(average_ticks(128 * 40_000, 128), 2);
        assert_eq!(average_ticks(0, 0), 0);
    }

    #[test]
    fn a_lan_packet_holds_its_events_back_when_the_queue_fills() {
        assert_eq!(events_per_packet(0, 9), 9);
        assert_eq!(events_per_packet(1, 9), 9);
        assert_eq!(events_per_packet(2, 9), 5);
        assert_eq!(events_per_packet(3, 2), 2);
        assert_eq!(events_per_packet(4, 9), 0);
    }

    #[test]
    fn a_frame_needs_each_peer_within_max_ahead_and_all_its_events() {
        // 3/9: frame 30 needs their frame 22 or later, i.e. send frame 24
        // (30 - 9 + 3): one send period more than the commands due on 30.
        assert!(!can_advance(30, 9, [(Some(21), true)]));
        assert!(can_advance(30, 9, [(Some(24), true)]));
        assert!(!can_advance(30, 9, [(Some(24), false)]));
        assert!(!can_advance(30, 9, [(None, true)]));
        assert!(can_advance(30, 9, [(Some(27), true), (Some(24), true)]));
        assert!(!can_advance(30, 9, [(Some(27), true), (Some(21), true)]));
        assert_eq!(framesync_resend_ticks(9), 72);
    }
}
