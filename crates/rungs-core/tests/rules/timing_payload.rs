//! The bytes of a TIMING event in Tiberian Sun's layout, for tests whose
//! engine queues its own timing events.

use rungs_core::timing::{Timing, TimingEvent};
use rungs_core::wire::TimingLayout;

/// TIMING for `send_period/look_ahead` at 30 fps, no fog bias.
pub fn timing_payload(send_period: u8, look_ahead: u8) -> Vec<u8> {
    let mut buf = [0u8; 5];
    let event = TimingEvent {
        target: Timing::new(send_period, look_ahead).unwrap(),
        fps: 30,
    };
    let len = TimingLayout::TIBERIAN_SUN.encode(&event, &mut buf).unwrap();
    buf[..len].to_vec()
}
