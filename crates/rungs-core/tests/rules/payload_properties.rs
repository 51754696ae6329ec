//! Properties of the event payload codecs (S7, `docs/payloads.md`): every valid value
//! round-trips, and every decoder fed arbitrary, truncated or oversized bytes
//! returns an error or a value it would encode back to the same bytes —
//! never a panic.

use proptest::prelude::*;
use rungs_core::report::{LookAheadNeeds, Report, ReportDetail};
use rungs_core::timing::{Timing, TimingEvent};
use rungs_core::wire::{
    ReportLayout, TimingLayout, REPORT_DETAILED_LEN, REPORT_DETAILED_VERSION, REPORT_NEEDS_LEN,
    REPORT_NEEDS_VERSION, RTT_NONE, TS_EVENT_DATA_LEN,
};
use rungs_core::Error;

/// Any timing event S1 allows: send period 1–10, look-ahead a multiple of it
/// up to 250, frame rate 1–255.
fn timing_event() -> impl Strategy<Value = TimingEvent> {
    (1u8..=10, 1u8..=255)
        .prop_flat_map(|(send_period, fps)| {
            let multiples = 1..=(250 / send_period);
            (Just(send_period), multiples, Just(fps))
        })
        .prop_map(|(send_period, multiple, fps)| TimingEvent {
            target: Timing::new(send_period, send_period * multiple).unwrap(),
            fps,
        })
}

fn timing_layout() -> impl Strategy<Value = TimingLayout> {
    prop_oneof![
        any::<u8>().prop_map(|fog_bias| TimingLayout::TiberianSun { fog_bias }),
        (1u8..=10).prop_map(|send_period| TimingLayout::RedAlert { send_period }),
    ]
}

/// Any look-ahead needs that keep [`LookAheadNeeds`]' invariants: counts
/// sorted, 0 exactly on the levels at or above the most.
fn needs() -> impl Strategy<Value = LookAheadNeeds> {
    (1u8..=250, 1u8..=250, any::<[u16; 4]>()).prop_map(|(reference, most, mut above)| {
        above.sort_unstable();
        for (k, count) in above.iter_mut().enumerate() {
            let level = i32::from(reference) - k as i32;
            *count = if i32::from(most) <= level {
                0
            } else {
                (*count).max(1)
            };
        }
        LookAheadNeeds {
            reference,
            most,
            above,
        }
    })
}

/// Any report, with a detail that keeps [`ReportDetail`]'s invariants.
fn report() -> impl Strategy<Value = Report> {
    (
        (any::<u32>(), any::<u32>(), any::<Option<u32>>()),
        (any::<[u64; 3]>(), any::<u32>(), any::<u64>(), any::<u32>()),
        proptest::option::of(0u8..16),
        proptest::option::of(needs()),
    )
        .prop_map(
            |(
                (process_us, max_wait_ms, worst_rtt_ms),
                (rtts, frames, stalled, stall_ms),
                seat,
                needs,
            )| {
                let below_worst = |r: u64| worst_rtt_ms.map(|w| (r % (u64::from(w) + 1)) as u32);
                let (median, p90) = (below_worst(rtts[0]), below_worst(rtts[1]));
                let stalled_frames = (stalled % (u64::from(frames) + 1)) as u32;
                Report {
                    process_us,
                    max_wait_ms,
                    worst_rtt_ms,
                    detail: Some(ReportDetail {
                        median_rtt_ms: median.min(p90),
                        p90_rtt_ms: median.max(p90),
                        latest_rtt_ms: below_worst(rtts[2]),
                        frames,
                        stalled_frames,
                        stall_ms: if stalled_frames == 0 { 0 } else { stall_ms },
                        waited_for: seat.filter(|_| stalled_frames > 0),
                        needs,
                    }),
                }
            },
        )
}

fn report_layout() -> impl Strategy<Value = ReportLayout> {
    prop_oneof![
        Just(ReportLayout::Compact),
        Just(ReportLayout::Extended),
        Just(ReportLayout::Detailed),
        Just(ReportLayout::Needs)
    ]
}

/// Any length up to past the event union, weighted towards the payload
/// lengths (4–9, 22 with the detailed version byte) so the accepting path is
/// reached too.
fn arbitrary_bytes() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..48),
        proptest::collection::vec(any::<u8>(), 4..=9),
        proptest::collection::vec(any::<u8>(), REPORT_DETAILED_LEN).prop_map(|mut bytes| {
            bytes[0] = REPORT_DETAILED_VERSION;
            bytes
        }),
        // The needs layout: the detailed bytes, then needs that are valid
        // often enough (random counts rarely are).
        (
            proptest::collection::vec(any::<u8>(), REPORT_DETAILED_LEN),
            proptest::option::of(needs()),
        )
            .prop_map(|(mut bytes, needs)| {
                bytes[0] = REPORT_NEEDS_VERSION;
                match needs {
                    None => bytes.extend_from_slice(&[0; 10]),
                    Some(n) => {
                        bytes.extend_from_slice(&[n.reference, n.most]);
                        for count in n.above {
                            bytes.extend_from_slice(&count.to_le_bytes());
                        }
                    }
                }
                bytes
            }),
    ]
}

/// What the detailed layout (`needs_too`: the needs layout) can say about
/// `report` (saturation; the detailed one has no needs).
fn as_detailed_reads(report: Report, needs_too: bool) -> Report {
    let rtt = |ms: Option<u32>| ms.map(|ms| ms.min(u32::from(RTT_NONE) - 1));
    let detail = report.detail.map(|d| {
        let frames = d.frames.min(0xFFFF);
        ReportDetail {
            median_rtt_ms: rtt(d.median_rtt_ms),
            p90_rtt_ms: rtt(d.p90_rtt_ms),
            latest_rtt_ms: rtt(d.latest_rtt_ms),
            frames,
            stalled_frames: d.stalled_frames.min(frames),
            stall_ms: d.stall_ms.min(0xFFFF),
            waited_for: d.waited_for,
            needs: if needs_too { d.needs } else { None },
        }
    });
    Report {
        max_wait_ms: report.max_wait_ms.min(0xFFFF),
        worst_rtt_ms: rtt(report.worst_rtt_ms),
        detail,
        ..report
    }
}

/// What the compact layout can say about `report` (rounding up, saturation).
fn as_compact_reads(report: Report) -> Report {
    Report {
        process_us: report.process_us.div_ceil(1000).min(0xFFFF) * 1000,
        max_wait_ms: report.max_wait_ms.min(0xFFFF),
        worst_rtt_ms: report
            .worst_rtt_ms
            .map(|ms| ms.min(u32::from(RTT_NONE) - 1)),
        detail: None,
    }
}

proptest! {
    #[test]
    fn timing_round_trips_in_every_layout(
        event in timing_event(),
        fog_bias in any::<u8>(),
        ra_period_from_event in any::<bool>(),
    ) {
        let ts = TimingLayout::TiberianSun { fog_bias };
        let mut buf = [0u8; TS_EVENT_DATA_LEN];
        let len = ts.encode(&event, &mut buf).unwrap();
        prop_assert_eq!(ts.decode(&buf[..len]).unwrap(), event);

        // Red Alert: only a target on the session's send period is encodable.
        let ra = TimingLayout::RedAlert {
            send_period: if ra_period_from_event { event.target.send_period() } else { 3 },
        };
        match ra.encode(&event, &mut buf) {
            Ok(len) => prop_assert_eq!(ra.decode(&buf[..len]).unwrap(), event),
            Err(e) => {
                prop_assert!(matches!(e, Error::Invalid(_)));
                prop_assert_ne!(event.target.send_period(), 3);
            }
        }
    }

    #[test]
    fn report_round_trips_in_detailed_up_to_saturation(report in report()) {
        let mut buf = [0u8; TS_EVENT_DATA_LEN];
        let len = ReportLayout::Detailed.encode(&report, &mut buf).unwrap();
        prop_assert_eq!(len, REPORT_DETAILED_LEN);
        prop_assert_eq!(buf[0], REPORT_DETAILED_VERSION);
        let decoded = ReportLayout::Detailed.decode(&buf[..len]).unwrap();
        prop_assert_eq!(decoded, as_detailed_reads(report, false));
        // Without a detail, or with one that breaks an invariant, the
        // detailed layout refuses to encode and writes nothing.
        let mut untouched = [0xA5u8; REPORT_DETAILED_LEN];
        let bare = Report { detail: None, ..report };
        prop_assert!(matches!(
            ReportLayout::Detailed.encode(&bare, &mut untouched),
            Err(Error::Invalid(_))
        ));
        let mut broken = report.detail.unwrap();
        broken.stalled_frames = broken.frames.saturating_add(1);
        let broken = Report { detail: Some(broken), ..report };
        if report.detail.unwrap().frames < u32::MAX {
            prop_assert!(matches!(
                ReportLayout::Detailed.encode(&broken, &mut untouched),
                Err(Error::Invalid(_))
            ));
        }
        prop_assert!(untouched.iter().all(|&b| b == 0xA5));
    }

    #[test]
    fn report_round_trips_in_needs_up_to_saturation(report in report()) {
        let mut buf = [0u8; TS_EVENT_DATA_LEN];
        let len = ReportLayout::Needs.encode(&report, &mut buf).unwrap();
        prop_assert_eq!(len, REPORT_NEEDS_LEN);
        prop_assert_eq!(buf[0], REPORT_NEEDS_VERSION);
        let decoded = ReportLayout::Needs.decode(&buf[..len]).unwrap();
        prop_assert_eq!(decoded, as_detailed_reads(report, true));
        // The first 22 bytes are the detailed layout's but for the version.
        let mut detailed = [0u8; REPORT_DETAILED_LEN];
        ReportLayout::Detailed.encode(&report, &mut detailed).unwrap();
        prop_assert_eq!(&buf[1..REPORT_DETAILED_LEN], &detailed[1..]);
        // Needs that break a rule are refused, and nothing is written.
        if let Some(needs) = report.detail.and_then(|d| d.needs) {
            let mut broken = report.detail.unwrap();
            broken.needs = Some(LookAheadNeeds { most: 0, ..needs });
            let broken = Report { detail: Some(broken), ..report };
            let mut untouched = [0xA5u8; REPORT_NEEDS_LEN];
            prop_assert!(matches!(
                ReportLayout::Needs.encode(&broken, &mut untouched),
                Err(Error::Invalid(_))
            ));
            prop_assert!(untouched.iter().all(|&b| b == 0xA5));
        }
    }

    #[test]
    fn report_round_trips_exactly_in_extended_and_as_documented_in_compact(
        report in report(),
    ) {
        let mut buf = [0u8; TS_EVENT_DATA_LEN];
        let len = ReportLayout::Extended.encode(&report, &mut buf).unwrap();
        let expected_extended = Report {
            max_wait_ms: report.max_wait_ms.min(0xFFFF),
            worst_rtt_ms: report.worst_rtt_ms.map(|ms| ms.min(0xFFFE)),
            detail: None,
            ..report
        };
        prop_assert_eq!(ReportLayout::Extended.decode(&buf[..len]).unwrap(), expected_extended);

        let len = ReportLayout::Compact.encode(&report, &mut buf).unwrap();
        let decoded = ReportLayout::Compact.decode(&buf[..len]).unwrap();
        prop_assert_eq!(decoded, as_compact_reads(report));
        // S3/S7: rounding up never under-reports a slow machine.
        if report.process_us <= 65_535_000 {
            prop_assert!(decoded.process_us >= report.process_us);
        }
        // None and Some stay distinct whatever the value.
        prop_assert_eq!(decoded.worst_rtt_ms.is_some(), report.worst_rtt_ms.is_some());
    }

    #[test]
    fn timing_decoder_never_panics_and_accepts_only_canonical_bytes(
        layout in timing_layout(),
        bytes in arbitrary_bytes(),
    ) {
        match layout.decode(&bytes) {
            Ok(event) => {
                let mut again = [0u8; TS_EVENT_DATA_LEN];
                let len = layout.encode(&event, &mut again).unwrap();
                prop_assert_eq!(&again[..len], &bytes[..]);
            }
            Err(e) => prop_assert!(matches!(e, Error::Malformed(_))),
        }
    }

    #[test]
    fn report_decoder_never_panics_and_accepts_only_canonical_bytes(
        layout in report_layout(),
        bytes in arbitrary_bytes(),
    ) {
        match layout.decode(&bytes) {
            Ok(report) => {
                let mut again = [0u8; TS_EVENT_DATA_LEN];
                let len = layout.encode(&report, &mut again).unwrap();
                prop_assert_eq!(&again[..len], &bytes[..]);
            }
            Err(e) => prop_assert!(matches!(e, Error::Malformed(_))),
        }
    }

    /// Random bytes rarely reach the accepting path, so draw each field from
    /// a range around its valid one too.
    #[test]
    fn timing_decoder_checks_every_field_of_near_valid_bytes(
        layout in timing_layout(),
        fps in 0u16..=300,
        max_ahead in 0u16..=300,
        send_period in 0u8..=12,
    ) {
        let mut bytes = vec![];
        bytes.extend_from_slice(&fps.to_le_bytes());
        bytes.extend_from_slice(&max_ahead.to_le_bytes());
        let (bias, period) = match layout {
            TimingLayout::TiberianSun { fog_bias } => {
                bytes.push(send_period);
                (u16::from(fog_bias), send_period)
            }
            TimingLayout::RedAlert { send_period } => (0, send_period),
        };
        let look_ahead = i32::from(max_ahead) - i32::from(bias);
        let valid = (1..=255).contains(&fps)
            && (1..=10).contains(&period)
            && look_ahead >= i32::from(period)
            && look_ahead <= 250
            && look_ahead % i32::from(period) == 0;
        match layout.decode(&bytes) {
            Ok(event) => {
                prop_assert!(valid);
                prop_assert_eq!(u16::from(event.fps), fps);
                prop_assert_eq!(i32::from(event.target.look_ahead()), look_ahead);
                prop_assert_eq!(event.target.send_period(), period);
            }
            Err(e) => {
                prop_assert!(!valid);
                prop_assert!(matches!(e, Error::Malformed(_)));
            }
        }
    }

    #[test]
    fn truncated_or_oversized_payloads_are_malformed(
        event in timing_event(),
        fog_bias in any::<u8>(),
        report in report(),
        report_layout in report_layout(),
        cut in 0usize..REPORT_DETAILED_LEN,
        extra in proptest::collection::vec(any::<u8>(), 1..8),
    ) {
        let mut buf = [0u8; TS_EVENT_DATA_LEN];
        let ts = TimingLayout::TiberianSun { fog_bias };
        let len = ts.encode(&event, &mut buf).unwrap();
        let mut long = buf[..len].to_vec();
        long.extend_from_slice(&extra);
        prop_assert!(matches!(ts.decode(&buf[..cut.min(len - 1)]), Err(Error::Malformed(_))));
        prop_assert!(matches!(ts.decode(&long), Err(Error::Malformed(_))));

        let len = report_layout.encode(&report, &mut buf).unwrap();
        let mut long = buf[..len].to_vec();
        long.extend_from_slice(&extra);
        prop_assert!(matches!(
            report_layout.decode(&buf[..cut.min(len - 1)]),
            Err(Error::Malformed(_))
        ));
        prop_assert!(matches!(report_layout.decode(&long), Err(Error::Malformed(_))));
    }

    #[test]
    fn encoders_write_nothing_into_a_short_buffer(
        event in timing_event(),
        report in report(),
        report_layout in report_layout(),
        cap in 0usize..REPORT_DETAILED_LEN,
    ) {
        let mut buf = vec![0xA5u8; cap];
        let needed = TimingLayout::TIBERIAN_SUN.payload_len();
        if cap < needed {
            prop_assert_eq!(
                TimingLayout::TIBERIAN_SUN.encode(&event, &mut buf),
                Err(Error::BufferTooSmall { needed })
            );
            prop_assert!(buf.iter().all(|&b| b == 0xA5));
        }
        let needed = report_layout.payload_len();
        if cap < needed {
            prop_assert_eq!(
                report_layout.encode(&report, &mut buf),
                Err(Error::BufferTooSmall { needed })
            );
            prop_assert!(buf.iter().all(|&b| b == 0xA5));
        }
    }
}
