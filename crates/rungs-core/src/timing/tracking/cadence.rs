//! When players report under `tracking` (rule 2 of docs/tracking.md): every
//! [`TRACKING_REPORT_PERIOD`] frames and on the frame after a stall. The one
//! rule the timing machine (both sessions), the relay's Welcome and a
//! relayed client follow.

/// Players report every this many frames under `tracking` (16, 32, 48, …),
/// instead of S3's 32, 64, then every 128: a reaction (to a spike, to its
/// end, to a stall) comes within a fraction of a second rather than 4 s
/// at 30 fps. A 32-byte item (the needs layout) every 16 frames per player.
pub(crate) const TRACKING_REPORT_PERIOD: u32 = 16;
/// Under `tracking` a player also reports on the first frame after a stall,
/// at most every this many frames: the stall is the first sign of a spike,
/// whose round trips come back only a spike's round trip later.
pub(crate) const STALL_REPORT_MIN_FRAMES: u32 = 4;
/// Whether `frame` is a report frame under `tracking`.
pub(crate) fn is_report_frame(frame: u32) -> bool {
    frame != 0 && frame % TRACKING_REPORT_PERIOD == 0
}

/// Whether players report on `frame` in a game whose policy reports on
/// `tracking`'s cadence (`frequent`) or on S3's frames: the one rule the
/// timing machine, the relay's Welcome and a relayed client all follow.
pub(crate) fn is_report_frame_of_game(frequent: bool, frame: u32) -> bool {
    if frequent {
        is_report_frame(frame)
    } else {
        crate::report::is_report_frame(frame)
    }
}

/// Whether a player reports at the end of `frame`, holding
/// `unreported_stalls` stalled frames since its last report: on the game's
/// report frames ([`is_report_frame_of_game`]), and in a game on
/// `tracking`'s cadence (`frequent`) also on the first frame after a stall,
/// at most every [`STALL_REPORT_MIN_FRAMES`] frames. `last_report` is the
/// last frame this answered yes to, and is updated: ask once per frame.
/// The one rule the timing machine (both sessions) and a relayed client
/// follow.
pub(crate) fn report_due(
    frequent: bool,
    frame: u32,
    unreported_stalls: u32,
    last_report: &mut Option<u32>,
) -> bool {
    let due = is_report_frame_of_game(frequent, frame)
        || (frequent
            && unreported_stalls > 0
            && last_report.map_or(true, |last| frame >= last + STALL_REPORT_MIN_FRAMES));
    if due {
        *last_report = Some(frame);
    }
    due
}
