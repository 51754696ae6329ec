//! The C report (S3, S7): one `rungs_report` for every NETWORK_REPORT
//! layout, as the core has one [`Report`] whose detail and needs are
//! optional. The struct is `struct_size`-versioned like the configs, and
//! its optional parts are *sections* with a `has_` flag each: the detail
//! (what the detailed layout adds) and the needs (what the needs layout adds
//! to the detail). One take (`rungs_measurements_take_report`, the caller
//! names the sections), one encode and one decode (`payload.rs`) and one
//! execute (`rungs_timing_machine_execute_report`) serve every layout.
//!
//! The library reads and writes only the `struct_size` bytes the caller
//! declares: a section that does not fit in them is absent (and refused if
//! its flag says present), so a later ABI can append sections and a caller
//! built against this one keeps working.

use super::args::{field_offset, flag, require, write_to};
use super::guard::call;
use super::result::Result;

use super::types::{seat_or_none, RUNGS_NO_SEAT};
use crate::error::Error;
use crate::report::{LookAheadNeeds, Report, ReportDetail};
use crate::wire::{check_detail, ReportLayout};

/// Which sections of a `rungs_report` a call asks for: a bitwise OR of
/// `RUNGS_REPORT_DETAIL` and `RUNGS_REPORT_NEEDS` (0 for the basic report).
pub type rungs_report_sections = u8;

/// Section bit: the detail (`rungs_report.detail`), what the detailed and
/// needs NETWORK_REPORT layouts carry.
pub const RUNGS_REPORT_DETAIL: rungs_report_sections = 1;
/// Section bit: the needs (`rungs_report.needs`), what the needs
/// NETWORK_REPORT layout adds to the detail; asked for with
/// `RUNGS_REPORT_DETAIL` (the layout carries both).
pub const RUNGS_REPORT_NEEDS: rungs_report_sections = 2;

/// One player's report (S3) with the sections its NETWORK_REPORT layout
/// carries: what `rungs_measurements_take_report` and
/// `rungs_report_payload_decode` write and `rungs_report_payload_encode` and
/// `rungs_timing_machine_execute_report` read.
///
/// Set `struct_size` to `sizeof(rungs_report)` (`rungs_report_init` does,
/// and empties the rest). The library reads and writes only the first
/// `struct_size` bytes: at least up to `detail` (the basic fields and the
/// flags); a section past them is there only when the struct holds all of
/// it. Later versions append fields, so a program built against this header
/// keeps working with a later library.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct rungs_report {
    /// `sizeof(rungs_report)` as the caller's header declares it.
    pub struct_size: u32,
    /// Average processing time per frame since the previous report, µs.
    pub process_us: u32,
    /// Longest single wait for the other players over the last two report
    /// intervals, ms.
    pub max_wait_ms: u32,
    /// Worst round trip to any other player, ms; meaningful only when
    /// `has_worst_rtt` is 1 (0 is written when it is not).
    pub worst_rtt_ms: u32,
    /// 1 when the report carries a round trip, 0 for none (a link lacks a
    /// clean measurement, S3). Any other value is refused.
    pub has_worst_rtt: u8,
    /// 1 when `detail` is present, 0 when not (its fields are then ignored
    /// on input and written as `rungs_report_init` leaves them).
    pub has_detail: u8,
    /// 1 when `needs` is present (it needs `has_detail` 1), 0 when not.
    pub has_needs: u8,
    /// The detail section (`RUNGS_REPORT_DETAIL`).
    pub detail: rungs_report_detail,
    /// The needs section (`RUNGS_REPORT_NEEDS`).
    pub needs: rungs_look_ahead_needs,
}

/// The sections a report has, or a call asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Sections {
    pub detail: bool,
    pub needs: bool,
}

impl Sections {
    /// The sections of `layout`'s payloads.
    pub(crate) fn of_layout(layout: ReportLayout) -> Sections {
        Sections {
            detail: layout.has_detail(),
            needs: layout == ReportLayout::Needs,
        }
    }

    /// The sections a C bit set asks for; unknown bits, and needs without
    /// the detail, are refused naming `name`.
    pub(crate) fn from_bits(bits: rungs_report_sections, name: &str) -> Result<Sections> {
        let known = RUNGS_REPORT_DETAIL | RUNGS_REPORT_NEEDS;
        if bits & !known != 0 {
            return Err(Error::invalid_value(
                name.to_string(),
                format!("{bits:#x}"),
                "RUNGS_REPORT_DETAIL (1), RUNGS_REPORT_NEEDS (2), both, or 0",
            )
            .into());
        }
        let (detail, needs) = (
            bits & RUNGS_REPORT_DETAIL != 0,
            bits & RUNGS_REPORT_NEEDS != 0,
        );
        // Needs without the detail are refused: the needs layout carries
        // both, and the core keeps the needs inside the detail.
        if needs && !detail {
            return Err(Error::invalid_value(
                name.to_string(),
                format!("{bits:#x}, the needs without the detail"),
                "the detail too (RUNGS_REPORT_DETAIL | RUNGS_REPORT_NEEDS): the needs layout \
                 carries both",
            )
            .into());
        }
        Ok(Sections { detail, needs })
    }

    /// The sections a struct of `struct_size` bytes holds whole.
    fn fitting(self, struct_size: usize) -> Sections {
        Sections {
            detail: self.detail && struct_size >= detail_end(),
            needs: self.needs && struct_size >= needs_end(),
        }
    }

    /// The layout that carries these sections: the needs layout for the
    /// needs, the detailed one for the detail alone, else `basic`.
    pub(crate) fn layout(self, basic: ReportLayout) -> ReportLayout {
        match (self.detail, self.needs) {
            (_, true) => ReportLayout::Needs,
            (true, false) => ReportLayout::Detailed,
            (false, false) => basic,
        }
    }
}

/// Bytes of the basic fields and the flags: the least `struct_size` a
/// report may declare.
fn basic_end() -> usize {
    field_offset!(rungs_report, detail)
}

/// Where the detail section ends.
fn detail_end() -> usize {
    field_offset!(rungs_report, detail) + std::mem::size_of::<rungs_report_detail>()
}

/// Where the needs section ends.
fn needs_end() -> usize {
    field_offset!(rungs_report, needs) + std::mem::size_of::<rungs_look_ahead_needs>()
}

impl Default for rungs_report {
    /// What `rungs_report_init` writes: `struct_size` set, no round trip,
    /// no sections (the detail as `rungs_report_detail`'s default, the needs
    /// all 0).
    fn default() -> Self {
        rungs_report {
            struct_size: std::mem::size_of::<rungs_report>() as u32,
            process_us: 0,
            max_wait_ms: 0,
            worst_rtt_ms: 0,
            has_worst_rtt: 0,
            has_detail: 0,
            has_needs: 0,
            detail: rungs_report_detail::default(),
            needs: rungs_look_ahead_needs::default(),
        }
    }
}

impl rungs_report {
    /// `report` as C sees it with `sections` present: the detail of a
    /// report that has none reads as its worst round trip alone
    /// ([`ReportDetail::from_worst`]); needs a report lacks read as
    /// reference 0 (none measured).
    pub(crate) fn from_rust(report: &Report, sections: Sections) -> rungs_report {
        let detail = report
            .detail
            .unwrap_or_else(|| ReportDetail::from_worst(report.worst_rtt_ms));
        let mut c = rungs_report {
            process_us: report.process_us,
            max_wait_ms: report.max_wait_ms,
            worst_rtt_ms: report.worst_rtt_ms.unwrap_or(0),
            has_worst_rtt: u8::from(report.worst_rtt_ms.is_some()),
            ..rungs_report::default()
        };
        if sections.detail {
            c.has_detail = 1;
            c.detail = rungs_report_detail::from(detail);
        }
        if sections.needs {
            c.has_needs = 1;
            c.needs = rungs_look_ahead_needs::from(detail.needs);
        }
        c
    }
}

/// The `struct_size` of the report behind `ptr` (non-NULL), refused below
/// the basic fields.
///
/// # Safety
/// `ptr` is valid for reads of its first four bytes.
unsafe fn struct_size(ptr: *const rungs_report, name: &str) -> Result<usize> {
    // SAFETY: the struct starts with a u32 struct_size; readable by contract.
    let size = unsafe { ptr.cast::<u32>().read_unaligned() } as usize;
    if size < basic_end() {
        return Err(Error::invalid_value(
            format!("{name}->struct_size"),
            size,
            format!(
                "sizeof(rungs_report) = {} in this library's rungs.h, at least {} (set it with \
                 rungs_report_init)",
                std::mem::size_of::<rungs_report>(),
                basic_end()
            ),
        )
        .into());
    }
    Ok(size)
}

/// The report behind `ptr` (named `name` in messages) with the sections it
/// says it has, every field checked; only its first `struct_size` bytes are
/// read.
///
/// # Safety
/// `ptr` is NULL or valid for reads of `struct_size` bytes.
pub(crate) unsafe fn read_report(
    ptr: *const rungs_report,
    name: &'static str,
) -> Result<(Report, Sections)> {
    require(ptr, name)?;
    // SAFETY: non-NULL, readable by contract.
    let size = unsafe { struct_size(ptr, name) }?;
    let mut c = rungs_report::default();
    // SAFETY: `size` bytes are readable (contract); at most the struct's
    // size is copied into a whole, valid `rungs_report` (every bit pattern
    // of its integer fields is valid).
    unsafe {
        std::ptr::copy_nonoverlapping(
            ptr.cast::<u8>(),
            (&mut c as *mut rungs_report).cast::<u8>(),
            size.min(std::mem::size_of::<rungs_report>()),
        )
    };
    let has_detail = flag(c.has_detail, "report->has_detail")?;
    let has_needs = flag(c.has_needs, "report->has_needs")?;
    if has_needs && !has_detail {
        return Err(Error::invalid_value(
            "report->has_detail",
            0u8,
            "1 when report->has_needs is 1: the needs layout carries both",
        )
        .into());
    }
    let sections = Sections {
        detail: has_detail,
        needs: has_needs,
    };
    for (present, end, field) in [
        (sections.detail, detail_end(), "has_detail"),
        (sections.needs, needs_end(), "has_needs"),
    ] {
        if present && size < end {
            return Err(Error::invalid_value(
                "report->struct_size",
                size,
                format!("at least {end}, the end of the section report->{field} says is there"),
            )
            .into());
        }
    }
    let has_worst_rtt = flag(c.has_worst_rtt, "report->has_worst_rtt")?;
    let mut report = Report {
        process_us: c.process_us,
        max_wait_ms: c.max_wait_ms,
        worst_rtt_ms: has_worst_rtt.then_some(c.worst_rtt_ms),
        detail: None,
    };
    if sections.detail {
        let mut detail = report_detail(&report, c.detail)?;
        if sections.needs {
            detail.needs = look_ahead_needs(c.needs)?;
        }
        report.detail = Some(detail);
    }
    Ok((report, sections))
}

/// Check that the report behind `out` (named `name`) can hold `sections`,
/// before anything changes (a take must not end the interval for nothing).
///
/// # Safety
/// `out` is NULL or valid for reads of its first four bytes.
pub(crate) unsafe fn check_room(
    out: *mut rungs_report,
    name: &'static str,
    sections: Sections,
) -> Result<()> {
    require(out, name)?;
    // SAFETY: non-NULL, readable by contract.
    let size = unsafe { struct_size(out, name) }?;
    if sections.fitting(size) != sections {
        let end = if sections.needs {
            needs_end()
        } else {
            detail_end()
        };
        return Err(Error::invalid_value(
            format!("{name}->struct_size"),
            size,
            format!(
                "at least {end} for the sections asked for (sizeof(rungs_report) is {})",
                std::mem::size_of::<rungs_report>()
            ),
        )
        .into());
    }
    Ok(())
}

/// Write `report` with `sections` through `out`: only its first
/// `struct_size` bytes, and a section only if they hold it whole (else it
/// is left out, its flag 0). `struct_size` itself is kept.
///
/// # Safety
/// `out` is NULL or valid for reads and writes of `struct_size` bytes.
pub(crate) unsafe fn write_report(
    out: *mut rungs_report,
    name: &'static str,
    report: &Report,
    sections: Sections,
) -> Result<()> {
    require(out, name)?;
    // SAFETY: non-NULL, readable by contract.
    let size = unsafe { struct_size(out, name) }?;
    let mut c = rungs_report::from_rust(report, sections.fitting(size));
    c.struct_size = size as u32;
    // SAFETY: `size` bytes are writable (contract); no more than the struct
    // is copied from the whole value `c`.
    unsafe {
        std::ptr::copy_nonoverlapping(
            (&c as *const rungs_report).cast::<u8>(),
            out.cast::<u8>(),
            size.min(std::mem::size_of::<rungs_report>()),
        )
    };
    Ok(())
}

/// Fill `report` with an empty report: `struct_size` set to this header's
/// `sizeof(rungs_report)`, no round trip, no sections (`detail` as no
/// round trips, nothing counted, `waited_for` `RUNGS_NO_SEAT`; `needs` all
/// 0). Call it before handing a report to any call.
///
/// Returns: RUNGS_OK; RUNGS_ERR_NULL_POINTER if report is NULL; RUNGS_ERR_PANIC.
#[no_mangle]
pub unsafe extern "C" fn rungs_report_init(
    report: *mut rungs_report,
) -> super::result::rungs_result {
    call("rungs_report_init", || unsafe {
        write_to(report, "report", rungs_report::default())
    })
}

/// The detail section of a `rungs_report` (`has_detail`), what the
/// detailed and needs NETWORK_REPORT layouts carry: the report interval's
/// round-trip distribution and the stalls the reporter suffered, what the
/// `RUNGS_POLICY_TRACKING` policy reads (docs/tracking.md).
///
/// Rules (a report that breaks one is refused, by the encoder and the timing
/// machine with RUNGS_ERR_INVALID_ARGUMENT, in bytes by the decoder with
/// RUNGS_ERR_MALFORMED): the three round trips are all present exactly when
/// the report's `has_worst_rtt` is 1, and then `median <= p90 <= worst` and
/// `latest <= worst` (compared as the layout carries them, saturated at
/// 65534); `stalled_frames <= frames`; with no stalled frame, `stall_ms` is 0
/// and `waited_for` is `RUNGS_NO_SEAT`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct rungs_report_detail {
    /// Median round trip of the interval's clean samples, per peer, the
    /// largest over peers, ms; meaningful only when `has_median_rtt` is 1.
    pub median_rtt_ms: u32,
    /// 90th percentile, the same way, ms; meaningful only when `has_p90_rtt` is 1.
    pub p90_rtt_ms: u32,
    /// The latest clean sample when the report was taken, the largest over
    /// peers, ms; meaningful only when `has_latest_rtt` is 1.
    pub latest_rtt_ms: u32,
    /// Frames the machine ran in the interval.
    pub frames: u32,
    /// Of those, the frames it had to wait for (a stall each).
    pub stalled_frames: u32,
    /// Total time it waited in the interval, ms rounded up.
    pub stall_ms: u32,
    /// 1 when `median_rtt_ms` is present, 0 for none (0 is written then).
    pub has_median_rtt: u8,
    /// 1 when `p90_rtt_ms` is present, 0 for none (0 is written then).
    pub has_p90_rtt: u8,
    /// 1 when `latest_rtt_ms` is present, 0 for none (0 is written then).
    pub has_latest_rtt: u8,
    /// The seat (0 to 15) whose turns the machine waited for longest, or
    /// `RUNGS_NO_SEAT` when it did not wait or waited for no known seat.
    pub waited_for: u8,
}

impl Default for rungs_report_detail {
    /// No round trips, nothing counted, nobody waited for.
    fn default() -> Self {
        rungs_report_detail::from(ReportDetail::default())
    }
}

impl From<ReportDetail> for rungs_report_detail {
    fn from(d: ReportDetail) -> rungs_report_detail {
        rungs_report_detail {
            median_rtt_ms: d.median_rtt_ms.unwrap_or(0),
            p90_rtt_ms: d.p90_rtt_ms.unwrap_or(0),
            latest_rtt_ms: d.latest_rtt_ms.unwrap_or(0),
            frames: d.frames,
            stalled_frames: d.stalled_frames,
            stall_ms: d.stall_ms,
            has_median_rtt: u8::from(d.median_rtt_ms.is_some()),
            has_p90_rtt: u8::from(d.p90_rtt_ms.is_some()),
            has_latest_rtt: u8::from(d.latest_rtt_ms.is_some()),
            waited_for: d.waited_for.unwrap_or(RUNGS_NO_SEAT),
        }
    }
}

/// Look-aheads `rungs_look_ahead_needs` counts frames above: the one in
/// force and the three below it.
pub const RUNGS_NEED_LEVELS: usize = 4;
const _: () = assert!(RUNGS_NEED_LEVELS == crate::report::NEED_LEVELS);

/// The needs section of a `rungs_report` (`has_needs`): how much
/// look-ahead one report interval's frames needed, what the needs
/// NETWORK_REPORT layout (`RUNGS_REPORT_LAYOUT_NEEDS`) adds to the detail,
/// and what the `RUNGS_POLICY_TRACKING` policy sheds its margin and checks
/// its decreases by (docs/tracking.md, rule 10). A frame *needed* the look-ahead under which its last turn would
/// still have come before it was due (`rungs_needed_look_ahead`); the
/// engine passes each frame's with `rungs_measurements_add_frame_need`.
///
/// `reference` 0 means no needs (an interval without a measured frame, or
/// an engine that does not measure them); every other field is 0 then.
/// Otherwise (a struct that breaks one is refused, by the encoder and the
/// timing machine with RUNGS_ERR_INVALID_ARGUMENT, in bytes by the decoder
/// with RUNGS_ERR_MALFORMED): `reference` and `most` are 1–250; `above`
/// never decreases from one element to the next; and `above[k]` is 0
/// exactly when `most <= reference - k`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct rungs_look_ahead_needs {
    /// `above[k]`: the interval's frames that needed more than
    /// `reference - k` frames of look-ahead (that would have stalled under
    /// it).
    pub above: [u16; RUNGS_NEED_LEVELS],
    /// The look-ahead the counts are relative to (the one the interval's
    /// last measured frame ran under), 1–250; 0 for no needs.
    pub reference: u8,
    /// The most look-ahead any frame of the interval needed, 1–250 (0 with
    /// no needs).
    pub most: u8,
}

impl From<Option<LookAheadNeeds>> for rungs_look_ahead_needs {
    fn from(needs: Option<LookAheadNeeds>) -> rungs_look_ahead_needs {
        needs.map_or_else(rungs_look_ahead_needs::default, |n| {
            rungs_look_ahead_needs {
                above: n.above,
                reference: n.reference,
                most: n.most,
            }
        })
    }
}

/// Needs from C: `None` for reference 0 (with every other field 0), else
/// needs within their rules. Refusals name the fields.
fn look_ahead_needs(needs: rungs_look_ahead_needs) -> Result<Option<LookAheadNeeds>> {
    let shown = |n: &rungs_look_ahead_needs| {
        format!(
            "report->needs.reference {}, report->needs.most {}, report->needs.above {{{}, {}, {}, {}}}",
            n.reference, n.most, n.above[0], n.above[1], n.above[2], n.above[3]
        )
    };
    if needs.reference == 0 {
        if needs.most != 0 || needs.above.iter().any(|&c| c != 0) {
            return Err(Error::invalid_value(
                "report->needs",
                shown(&needs),
                "every other field 0 when report->needs.reference is 0 (no needs)",
            )
            .into());
        }
        return Ok(None);
    }
    let rust = LookAheadNeeds {
        reference: needs.reference,
        most: needs.most,
        above: needs.above,
    };
    rust.check().map_err(|rule| {
        Error::invalid_value(
            "report->needs",
            shown(&needs),
            format!("needs within their rules ({rule})"),
        )
    })?;
    Ok(Some(rust))
}

/// The detail section from C: every flag 0 or 1, `waited_for` a seat or
/// `RUNGS_NO_SEAT`, and within the detailed layout's rules with the
/// report's worst round trip (the core's, `wire::check_detail`).
/// Refusals name the fields of `report` and say what was got.
fn report_detail(rust: &Report, detail: rungs_report_detail) -> Result<ReportDetail> {
    let present = |value: u32, has: u8, name: &'static str| -> Result<Option<u32>> {
        Ok(flag(has, name)?.then_some(value))
    };
    let d = ReportDetail {
        median_rtt_ms: present(
            detail.median_rtt_ms,
            detail.has_median_rtt,
            "report->detail.has_median_rtt",
        )?,
        p90_rtt_ms: present(
            detail.p90_rtt_ms,
            detail.has_p90_rtt,
            "report->detail.has_p90_rtt",
        )?,
        latest_rtt_ms: present(
            detail.latest_rtt_ms,
            detail.has_latest_rtt,
            "report->detail.has_latest_rtt",
        )?,
        frames: detail.frames,
        stalled_frames: detail.stalled_frames,
        stall_ms: detail.stall_ms,
        waited_for: seat_or_none(detail.waited_for, "report->detail.waited_for")?,
        needs: None,
    };
    check_detail(rust.worst_rtt_ms, &d).map_err(|rule| {
        let rtt = |value: Option<u32>| value.map_or("none".to_string(), |ms| ms.to_string());
        let got = format!(
            "report->worst_rtt_ms {}, report->detail.median_rtt_ms {}, \
             report->detail.p90_rtt_ms {}, report->detail.latest_rtt_ms {}, \
             report->detail.frames {}, report->detail.stalled_frames {}, \
             report->detail.stall_ms {}, report->detail.waited_for {}",
            rtt(rust.worst_rtt_ms),
            rtt(d.median_rtt_ms),
            rtt(d.p90_rtt_ms),
            rtt(d.latest_rtt_ms),
            d.frames,
            d.stalled_frames,
            d.stall_ms,
            detail.waited_for,
        );
        Error::invalid_value(
            "report->detail",
            got,
            format!("a detail section within its rules ({rule})"),
        )
    })?;
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ffi::result::CallError;

    fn example() -> Report {
        Report {
            process_us: 5000,
            max_wait_ms: 40,
            worst_rtt_ms: Some(180),
            detail: Some(ReportDetail {
                median_rtt_ms: Some(120),
                p90_rtt_ms: Some(150),
                latest_rtt_ms: Some(125),
                frames: 128,
                stalled_frames: 2,
                stall_ms: 40,
                waited_for: Some(3),
                needs: Some(LookAheadNeeds {
                    reference: 6,
                    most: 7,
                    above: [1, 2, 40, 300],
                }),
            }),
        }
    }

    fn read(c: &rungs_report) -> Result<(Report, Sections)> {
        // SAFETY: a whole struct, readable.
        unsafe { read_report(c, "report") }
    }

    const ALL: Sections = Sections {
        detail: true,
        needs: true,
    };

    #[test]
    fn a_report_converts_both_ways_with_each_set_of_sections() {
        let full = example();
        let detail_only = Sections {
            detail: true,
            needs: false,
        };
        for sections in [Sections::default(), detail_only, ALL] {
            let c = rungs_report::from_rust(&full, sections);
            assert_eq!(c.struct_size as usize, std::mem::size_of::<rungs_report>());
            let (back, got) = read(&c).unwrap();
            assert_eq!(got, sections);
            let mut expected = full;
            match (sections.detail, sections.needs) {
                (false, _) => expected.detail = None,
                (true, false) => expected.detail.as_mut().unwrap().needs = None,
                (true, true) => {}
            }
            assert_eq!(back, expected);
        }
        // No needs measured: the section is there with reference 0.
        let mut none = full;
        none.detail.as_mut().unwrap().needs = None;
        let c = rungs_report::from_rust(&none, ALL);
        assert_eq!(
            (c.has_needs, c.needs),
            (1, rungs_look_ahead_needs::default())
        );
        assert_eq!(read(&c).unwrap(), (none, ALL));
    }

    #[test]
    fn sections_pick_the_smallest_layout_that_carries_them() {
        let detail = Sections {
            detail: true,
            needs: false,
        };
        assert_eq!(
            Sections::default().layout(ReportLayout::Compact),
            ReportLayout::Compact
        );
        assert_eq!(detail.layout(ReportLayout::Compact), ReportLayout::Detailed);
        assert_eq!(ALL.layout(ReportLayout::Extended), ReportLayout::Needs);
        for layout in [
            ReportLayout::Compact,
            ReportLayout::Extended,
            ReportLayout::Detailed,
            ReportLayout::Needs,
        ] {
            let basic = if layout.has_detail() {
                ReportLayout::Extended
            } else {
                layout
            };
            assert_eq!(Sections::of_layout(layout).layout(basic), layout);
        }
        assert_eq!(
            Sections::from_bits(RUNGS_REPORT_NEEDS, "sections")
                .unwrap_err()
                .to_string(),
            "sections is 0x2, the needs without the detail; expected the detail too \
             (RUNGS_REPORT_DETAIL | RUNGS_REPORT_NEEDS): the needs layout carries both"
        );
        assert!(Sections::from_bits(8, "sections").is_err());
    }

    #[test]
    fn every_broken_field_is_refused_naming_it() {
        let c = rungs_report::from_rust(&example(), ALL);
        let refused = |c: rungs_report| read(&c).unwrap_err().to_string();
        assert_eq!(
            refused(rungs_report {
                has_worst_rtt: 2,
                ..c
            }),
            "report->has_worst_rtt is 2; expected 0 or 1"
        );
        assert_eq!(
            refused(rungs_report { has_detail: 0, ..c }),
            "report->has_detail is 0; expected 1 when report->has_needs is 1: the needs layout \
             carries both"
        );
        let detail = |d: rungs_report_detail| rungs_report { detail: d, ..c };
        assert_eq!(
            refused(detail(rungs_report_detail {
                has_median_rtt: 2,
                ..c.detail
            })),
            "report->detail.has_median_rtt is 2; expected 0 or 1"
        );
        assert_eq!(
            refused(detail(rungs_report_detail {
                waited_for: 16,
                ..c.detail
            })),
            "report->detail.waited_for is 16; expected a seat, 0 to 15, or RUNGS_NO_SEAT (255)"
        );
        assert_eq!(
            refused(detail(rungs_report_detail {
                p90_rtt_ms: 119,
                ..c.detail
            })),
            "report->detail is report->worst_rtt_ms 180, report->detail.median_rtt_ms 120, \
             report->detail.p90_rtt_ms 119, report->detail.latest_rtt_ms 125, \
             report->detail.frames 128, report->detail.stalled_frames 2, \
             report->detail.stall_ms 40, report->detail.waited_for 3; expected a detail \
             section within its rules (NETWORK_REPORT detail must have median <= p90 <= \
             worst round trip)"
        );
        for broken in [
            rungs_report_detail {
                has_latest_rtt: 0,
                ..c.detail
            },
            rungs_report_detail {
                stalled_frames: 129,
                ..c.detail
            },
            rungs_report_detail {
                stalled_frames: 0,
                ..c.detail
            },
        ] {
            let e = read(&detail(broken)).unwrap_err();
            assert!(matches!(e.kind(), Some(Error::Invalid(_))), "{e}");
        }
        let needs = rungs_look_ahead_needs { most: 0, ..c.needs };
        assert!(matches!(
            read(&rungs_report { needs, ..c }),
            Err(CallError::Core(Error::Invalid(..)))
        ));
        // The sections absent: their fields are not read at all.
        let basic = rungs_report {
            has_detail: 0,
            has_needs: 0,
            detail: rungs_report_detail {
                has_median_rtt: 9,
                ..c.detail
            },
            ..c
        };
        assert_eq!(read(&basic).unwrap().1, Sections::default());
    }

    #[test]
    fn only_struct_size_bytes_are_written_and_a_section_only_whole() {
        let full = example();
        let mut out = [0xEEu8; std::mem::size_of::<rungs_report>()];
        let at = detail_end();
        out[..4].copy_from_slice(&(at as u32).to_ne_bytes());
        let ptr = out.as_mut_ptr().cast::<rungs_report>();
        // SAFETY: `out` is a buffer of the struct's size; written unaligned
        // only through the byte copies of `write_report`.
        unsafe { write_report(ptr, "out", &full, ALL) }.unwrap();
        assert!(
            out[at..].iter().all(|&b| b == 0xEE),
            "nothing past struct_size"
        );
        // SAFETY: the buffer holds a whole struct's bytes.
        let got = unsafe { ptr.read_unaligned() };
        assert_eq!((got.has_detail, got.has_needs), (1, 0));
        assert_eq!(got.detail.frames, 128);
        assert_eq!(got.struct_size as usize, at);
        // SAFETY: as above.
        let refused = unsafe { check_room(ptr, "out", ALL) };
        assert!(refused.unwrap_err().to_string().starts_with(
            "out->struct_size is 48; expected at least 58 for the sections asked for"
        ));
    }
}
