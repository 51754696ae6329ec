/* The detailed NETWORK_REPORT layout (version 2, what the tracking policy
 * reads) for a C engine that drives the pieces itself: a report with its
 * detail section taken from rungs_measurements, encoded, decoded and
 * executed on a rungs_timing_machine; the documented bytes; every refusal
 * (NULLs, flags, seats, each rule of the layout, short buffers, malformed
 * bytes), each changing nothing; and a whole game under
 * RUNGS_POLICY_TRACKING whose timing events are the Rust core's for the
 * same inputs (tests/c_detailed_report.rs plays the same game through the
 * core's types and pins the same events). */
#include <stdint.h>

#include "harness.h"
#include "report_examples.h"
#include "rungs.h"

/* docs/payloads.md's example: 5000 us, worst 180 ms, longest wait 40 ms,
 * median 120, p90 150, latest 125, 128 frames of which 2 stalled for 40 ms,
 * mostly waiting for seat 3. */
static const uint8_t EXAMPLE[RUNGS_REPORT_DETAILED_PAYLOAD_LEN] = {
    0x02, 0x88, 0x13, 0x00, 0x00, 0xB4, 0x00, 0x28, 0x00, 0x78, 0x00,
    0x96, 0x00, 0x7D, 0x00, 0x80, 0x00, 0x02, 0x00, 0x28, 0x00, 0x03};

static void test_documented_bytes(void) {
    rungs_report r = example_report(), got;
    rungs_report_detail d = example_detail(), got_detail;
    uint8_t buf[32];
    size_t len = 0;
    CHECK_EQ(RUNGS_REPORT_DETAILED_PAYLOAD_LEN, 22);
    CHECK_EQ(RUNGS_REPORT_LAYOUT_DETAILED, 2);
    memset(buf, FILL, sizeof buf);
    CHECK_EQ(rungs_report_payload_encode(with_sections(&r, &d, NULL), RUNGS_REPORT_LAYOUT_EXTENDED, buf, sizeof buf, &len), RUNGS_OK);
    CHECK_EQ(len, RUNGS_REPORT_DETAILED_PAYLOAD_LEN);
    CHECK(memcmp(buf, EXAMPLE, sizeof EXAMPLE) == 0);
    CHECK(all_bytes_are(buf + len, sizeof buf - len, FILL));
    memset(&got, 0xEE, sizeof got);
    memset(&got_detail, 0xEE, sizeof got_detail);
    CHECK_EQ(decode_sections(EXAMPLE, sizeof EXAMPLE, &got, &got_detail, NULL),
             RUNGS_OK);
    CHECK(same_report(&got, &r));
    CHECK(same_detail(&got_detail, &d));

    /* No round trip and no stall: FF FF everywhere and FF for the seat;
     * decoded, every round trip is absent and written as 0. */
    r.has_worst_rtt = 0;
    r.worst_rtt_ms = 0;
    memset(&d, 0, sizeof d);
    d.frames = 16;
    d.waited_for = RUNGS_NO_SEAT;
    CHECK_EQ(rungs_report_payload_encode(with_sections(&r, &d, NULL), RUNGS_REPORT_LAYOUT_EXTENDED, buf, sizeof buf, &len), RUNGS_OK);
    CHECK(buf[5] == 0xFF && buf[6] == 0xFF && buf[9] == 0xFF && buf[14] == 0xFF);
    CHECK_EQ(buf[21], 0xFF);
    memset(&got_detail, 0xEE, sizeof got_detail);
    CHECK_EQ(decode_sections(buf, len, &got, &got_detail, NULL), RUNGS_OK);
    CHECK_EQ(got.has_worst_rtt, 0);
    CHECK(same_detail(&got_detail, &d));

    /* Saturation keeps the rules: frames first, the stalled frames within
     * them; round trips at 65534 (65535 is none). */
    r = example_report();
    d = example_detail();
    r.worst_rtt_ms = 100000;
    d.median_rtt_ms = d.p90_rtt_ms = d.latest_rtt_ms = 90000;
    d.frames = 70000;
    d.stalled_frames = 70000;
    d.stall_ms = 1000000;
    CHECK_EQ(rungs_report_payload_encode(with_sections(&r, &d, NULL), RUNGS_REPORT_LAYOUT_EXTENDED, buf, sizeof buf, &len), RUNGS_OK);
    CHECK_EQ(decode_sections(buf, len, &got, &got_detail, NULL), RUNGS_OK);
    CHECK_EQ(got.worst_rtt_ms, 65534);
    CHECK_EQ(got_detail.median_rtt_ms, 65534);
    CHECK_EQ(got_detail.latest_rtt_ms, 65534);
    CHECK_EQ(got_detail.frames, 65535);
    CHECK_EQ(got_detail.stalled_frames, 65535);
    CHECK_EQ(got_detail.stall_ms, 65535);
}

/* take -> encode -> decode -> execute, as a C engine does it. */
static void test_round_trip_from_measurements_to_a_machine(void) {
    rungs_measurements *m = NULL;
    rungs_timing_machine *machine = NULL;
    rungs_timing_machine_config c;
    rungs_report r, got;
    rungs_report_detail d, got_detail;
    uint8_t buf[RUNGS_REPORT_DETAILED_PAYLOAD_LEN];
    size_t len = 0;
    uint32_t frame, stalls = 99;
    int32_t has = -1;
    rungs_timing_event e;

    CHECK_EQ(rungs_measurements_new(&m), RUNGS_OK);
    if (!m) return;
    CHECK_EQ(rungs_measurements_add_peer(m, 1), RUNGS_OK);
    for (frame = 0; frame < 20; frame++) {
        CHECK_EQ(rungs_measurements_add_frame_work_us(m, 4000), RUNGS_OK);
        CHECK_EQ(rungs_measurements_add_rtt_sample(m, 1, frame == 5 ? 400 : 50 + frame % 3, 1),
                 RUNGS_OK);
    }
    /* Two stalls for seat 1 (one bracketed, one a duration), one for nobody. */
    CHECK_EQ(rungs_measurements_wait_begin_for(m, 1000, 1), RUNGS_OK);
    CHECK_EQ(rungs_measurements_wait_end(m, 31000), RUNGS_OK);
    CHECK_EQ(rungs_measurements_add_wait_for_us(m, 20000, 1), RUNGS_OK);
    CHECK_EQ(rungs_measurements_add_wait_us(m, 35000), RUNGS_OK);
    CHECK_EQ(rungs_measurements_unreported_stalls(m, &stalls), RUNGS_OK);
    CHECK_EQ(stalls, 3);
    CHECK_EQ(take_sections(m, RUNGS_REPORT_DETAIL, &r, &d, NULL), RUNGS_OK);
    CHECK_EQ(r.process_us, 4000);
    CHECK_EQ(r.max_wait_ms, 35);
    CHECK_EQ(r.has_worst_rtt, 1);
    CHECK_EQ(r.worst_rtt_ms, 400);
    CHECK(d.has_median_rtt == 1 && d.has_p90_rtt == 1 && d.has_latest_rtt == 1);
    CHECK_EQ(d.median_rtt_ms, 51);
    CHECK_EQ(d.p90_rtt_ms, 52);
    CHECK_EQ(d.latest_rtt_ms, 51); /* frame 19: 50 + 19 % 3 */
    CHECK_EQ(d.frames, 20);
    CHECK_EQ(d.stalled_frames, 3);
    CHECK_EQ(d.stall_ms, 85);
    CHECK_EQ(d.waited_for, 1); /* 50 ms for seat 1 against 35 for nobody */
    CHECK_EQ(rungs_measurements_unreported_stalls(m, &stalls), RUNGS_OK);
    CHECK_EQ(stalls, 0);
    /* The same report as rungs_measurements_take_report gives: the next
     * interval has no frame (the average repeats) and no stall. */
    CHECK_EQ(take_sections(m, RUNGS_REPORT_DETAIL, &got, &got_detail, NULL), RUNGS_OK);
    CHECK_EQ(got.process_us, 4000);
    CHECK_EQ(got.max_wait_ms, 35); /* the longest wait covers two intervals */
    CHECK_EQ(got_detail.stalled_frames, 0);
    CHECK_EQ(got_detail.stall_ms, 0);
    CHECK_EQ(got_detail.waited_for, RUNGS_NO_SEAT);
    CHECK_EQ(rungs_measurements_free(m), RUNGS_OK);

    CHECK_EQ(rungs_report_payload_encode(with_sections(&r, &d, NULL), RUNGS_REPORT_LAYOUT_EXTENDED, buf, sizeof buf, &len), RUNGS_OK);
    CHECK_EQ(len, sizeof buf);
    CHECK_EQ(decode_sections(buf, len, &got, &got_detail, NULL), RUNGS_OK);
    CHECK(same_report(&got, &r));
    CHECK(same_detail(&got_detail, &d));

    c = tracking_config();
    CHECK_EQ(rungs_timing_machine_new(&c, &machine), RUNGS_OK);
    if (!machine) return;
    CHECK_EQ(rungs_timing_machine_execute_report(machine, 0, with_sections(&got, &got_detail, NULL)),
             RUNGS_ERR_STATE); /* no frame open */
    CHECK_EQ(rungs_timing_machine_frame_begin(machine, 0, NULL), RUNGS_OK);
    CHECK_EQ(rungs_timing_machine_execute_report(machine, 0, with_sections(&got, &got_detail, NULL)),
             RUNGS_OK);
    CHECK_EQ(rungs_timing_machine_execute_report(machine, 1, with_sections(&got, &got_detail, NULL)),
             RUNGS_OK);
    CHECK_EQ(rungs_timing_machine_frame_end(machine, &has, &e), RUNGS_OK);
    /* p90 52 plus its spread of 1 above the median: 53 ms needs one frame at
     * 30 fps (the worst sample, 400 ms, would need 6). The stalls, the
     * longest 35 ms while the look-ahead in force (1/9) already covered
     * every round trip, are unexplained: a frame of margin (decision 102)
     * on the game's prior one. */
    CHECK_EQ(has, 1);
    CHECK(e.send_period == 1 && e.look_ahead == 3 && e.fps == 30);
    CHECK_EQ(rungs_timing_machine_free(machine), RUNGS_OK);
}

static void test_encode_refusals(void) {
    rungs_report r = example_report(), bad_r;
    rungs_report_detail d = example_detail(), bad;
    uint8_t buf[RUNGS_REPORT_DETAILED_PAYLOAD_LEN];
    size_t len = 99;

#define REFUSED(report, detail, code)                                                        \
    do {                                                                                     \
        memset(buf, FILL, sizeof buf);                                                       \
        CHECK_EQ(rungs_report_payload_encode(with_sections((report), (detail), NULL), RUNGS_REPORT_LAYOUT_EXTENDED, buf, sizeof buf,   \
                                                      &len),                                 \
                 (code));                                                                    \
        CHECK(all_bytes_are(buf, sizeof buf, FILL));                                         \
        CHECK_EQ(len, 99);                                                                   \
    } while (0)

    REFUSED(NULL, &d, RUNGS_ERR_NULL_POINTER);
    CHECK_MESSAGE("rungs_report_payload_encode: report is NULL");
    CHECK_EQ(rungs_report_payload_encode(with_sections(&r, &d, NULL), RUNGS_REPORT_LAYOUT_EXTENDED, buf, sizeof buf, NULL),
             RUNGS_ERR_NULL_POINTER);
    CHECK_MESSAGE("rungs_report_payload_encode: out_len is NULL");
    CHECK_EQ(rungs_report_payload_encode(with_sections(&r, &d, NULL), RUNGS_REPORT_LAYOUT_EXTENDED, NULL, sizeof buf, &len),
             RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(len, 99);

    /* Flags and the seat. */
    bad_r = r;
    bad_r.has_worst_rtt = 2;
    REFUSED(&bad_r, &d, RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE("rungs_report_payload_encode: report->has_worst_rtt is 2; "
                  "expected 0 or 1");
    bad = d;
    bad.has_median_rtt = 7;
    REFUSED(&r, &bad, RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE("rungs_report_payload_encode: report->detail.has_median_rtt is 7; "
                  "expected 0 or 1");
    bad = d;
    bad.has_p90_rtt = 255;
    REFUSED(&r, &bad, RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE_HAS("report->detail.has_p90_rtt is 255");
    bad = d;
    bad.has_latest_rtt = 2;
    REFUSED(&r, &bad, RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE_HAS("report->detail.has_latest_rtt is 2");
    bad = d;
    bad.waited_for = 16;
    REFUSED(&r, &bad, RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE("rungs_report_payload_encode: report->detail.waited_for is 16; expected a "
                  "seat, 0 to 15, or RUNGS_NO_SEAT (255)");

    /* Each rule of the layout. */
    bad = d;
    bad.p90_rtt_ms = 119; /* below the median */
    REFUSED(&r, &bad, RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE("rungs_report_payload_encode: report->detail is report->worst_rtt_ms 180, "
                  "report->detail.median_rtt_ms 120, report->detail.p90_rtt_ms 119, "
                  "report->detail.latest_rtt_ms 125, report->detail.frames 128, "
                  "report->detail.stalled_frames 2, report->detail.stall_ms 40, "
                  "report->detail.waited_for 3; expected a detail section within its rules "
                  "(NETWORK_REPORT detail must have median <= p90 <= worst round trip)");
    bad = d;
    bad.p90_rtt_ms = 181; /* above the worst */
    REFUSED(&r, &bad, RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE_HAS("median <= p90 <= worst");
    bad = d;
    bad.latest_rtt_ms = 181;
    REFUSED(&r, &bad, RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE_HAS("latest <= worst");
    bad = d;
    bad.has_p90_rtt = 0; /* some round trips without the others */
    REFUSED(&r, &bad, RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE_HAS("lacks a round trip the worst one has");
    CHECK_MESSAGE_HAS("report->detail.p90_rtt_ms none");
    bad_r = r;
    bad_r.has_worst_rtt = 0; /* round trips without a worst one */
    REFUSED(&bad_r, &d, RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE_HAS("has round trips but no worst round trip");
    bad = d;
    bad.stalled_frames = 129;
    REFUSED(&r, &bad, RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE_HAS("more stalled frames than frames");
    bad = d;
    bad.stalled_frames = 0; /* stall time and a seat without a stall */
    REFUSED(&r, &bad, RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE_HAS("stall time or a seat waited for without a stall");
    bad.stall_ms = 0;
    REFUSED(&r, &bad, RUNGS_ERR_INVALID_ARGUMENT); /* the seat alone */
    bad.waited_for = RUNGS_NO_SEAT;
    CHECK_EQ(rungs_report_payload_encode(with_sections(&r, &bad, NULL), RUNGS_REPORT_LAYOUT_EXTENDED, buf, sizeof buf, &len), RUNGS_OK);
    len = 99;

    /* A short buffer: nothing written. */
    memset(buf, FILL, sizeof buf);
    CHECK_EQ(rungs_report_payload_encode(with_sections(&r, &d, NULL), RUNGS_REPORT_LAYOUT_EXTENDED, buf, sizeof buf - 1, &len),
             RUNGS_ERR_BUFFER_TOO_SMALL);
    CHECK_MESSAGE("rungs_report_payload_encode: cap is 21; expected at least 22");
    CHECK_EQ(rungs_report_payload_encode(with_sections(&r, &d, NULL), RUNGS_REPORT_LAYOUT_EXTENDED, NULL, 0, &len),
             RUNGS_ERR_BUFFER_TOO_SMALL);
    CHECK(all_bytes_are(buf, sizeof buf, FILL));
    CHECK_EQ(len, 99);
#undef REFUSED
}

static void test_decode_refusals(void) {
    rungs_report out;
    rungs_report_detail out_detail;
    uint8_t bytes[RUNGS_REPORT_DETAILED_PAYLOAD_LEN + 1];

#define MALFORMED(len_)                                                                       \
    do {                                                                                     \
        memset(&out, 0x77, sizeof out);                                                      \
        memset(&out_detail, 0x77, sizeof out_detail);                                        \
        CHECK_EQ(decode_sections(bytes, (len_), &out, &out_detail, NULL),                    \
                 RUNGS_ERR_MALFORMED);                                                       \
        CHECK_EQ(out.process_us, 0x77777777u);                                               \
        CHECK_EQ(out_detail.frames, 0x77777777u);                                            \
        CHECK_EQ(out_detail.waited_for, 0x77);                                               \
    } while (0)
#define BROKEN(offset, value)                                                                \
    do {                                                                                     \
        memcpy(bytes, EXAMPLE, sizeof EXAMPLE);                                              \
        bytes[(offset)] = (value);                                                           \
        MALFORMED(sizeof EXAMPLE);                                                           \
    } while (0)

    memcpy(bytes, EXAMPLE, sizeof EXAMPLE);
    bytes[22] = 0;
    CHECK_EQ(decode_sections(NULL, 22, &out, &out_detail, NULL),
             RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(decode_sections(bytes, 22, NULL, &out_detail, NULL),
             RUNGS_ERR_NULL_POINTER);
    CHECK_MESSAGE("rungs_report_payload_decode: out is NULL");

    MALFORMED(21);
    CHECK_MESSAGE("rungs_report_payload_decode: len is 21; expected 6, 9, 22 or 32 (the "
                  "compact, extended, detailed or needs NETWORK_REPORT layout)");
    MALFORMED(23);
    MALFORMED(0);
    MALFORMED(SIZE_MAX);
    CHECK_EQ(decode_sections(NULL, 0, &out, &out_detail, NULL),
             RUNGS_ERR_MALFORMED);
    /* A detailed payload's length with another version byte. */
    BROKEN(0, 1);
    CHECK_MESSAGE("rungs_report_payload_decode: malformed input: detailed "
                  "NETWORK_REPORT version must be 2, not 1");
    /* Each rule of the layout. */
    BROKEN(11, 0x77); /* p90 119 below the median 120 */
    CHECK_MESSAGE_HAS("median <= p90 <= worst");
    BROKEN(13, 0xB5); /* latest 181 above the worst 180 */
    CHECK_MESSAGE_HAS("latest <= worst");
    memcpy(bytes, EXAMPLE, sizeof EXAMPLE);
    bytes[11] = 0xFF; /* p90 none while the worst is 150 */
    bytes[12] = 0xFF;
    MALFORMED(sizeof EXAMPLE);
    CHECK_MESSAGE_HAS("lacks a round trip the worst one has");
    memcpy(bytes, EXAMPLE, sizeof EXAMPLE);
    bytes[5] = 0xFF; /* no worst, but the others */
    bytes[6] = 0xFF;
    MALFORMED(sizeof EXAMPLE);
    CHECK_MESSAGE_HAS("has round trips but no worst round trip");
    BROKEN(17, 0x81); /* 129 stalled of 128 frames */
    CHECK_MESSAGE_HAS("more stalled frames than frames");
    BROKEN(17, 0); /* no stall, but stall time and a seat */
    CHECK_MESSAGE_HAS("without a stall");
    BROKEN(21, 16); /* a seat that cannot be */
    CHECK_MESSAGE_HAS("seat waited for must be 0 to 15 or 0xFF");
#undef BROKEN
#undef MALFORMED
}

/* The encoder's basic layout is compact or extended: the sections choose
 * the detailed and needs layouts, so naming them there is refused, and
 * the detail goes out in its layout whichever basic layout is named. */
static void test_basic_layout_is_compact_or_extended(void) {
    rungs_report r = example_report();
    rungs_report_detail d = example_detail();
    uint8_t buf[RUNGS_REPORT_DETAILED_PAYLOAD_LEN];
    size_t len = 99;
    CHECK_EQ(rungs_report_payload_encode(&r, RUNGS_REPORT_LAYOUT_DETAILED, buf, sizeof buf, &len),
             RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE("rungs_report_payload_encode: basic_layout is 2; expected "
                  "RUNGS_REPORT_LAYOUT_COMPACT (0) or RUNGS_REPORT_LAYOUT_EXTENDED (1) (a "
                  "report's detail and needs sections choose the detailed and needs layouts "
                  "themselves)");
    CHECK_EQ(len, 99);
    CHECK_EQ(rungs_report_payload_encode(with_sections(&r, &d, NULL), RUNGS_REPORT_LAYOUT_COMPACT,
                                         buf, sizeof buf, &len),
             RUNGS_OK);
    CHECK_EQ(len, RUNGS_REPORT_DETAILED_PAYLOAD_LEN);
    CHECK(memcmp(buf, EXAMPLE, sizeof EXAMPLE) == 0);
}

static void test_measurement_refusals(void) {
    rungs_measurements *m = NULL;
    rungs_report r;
    rungs_report_detail d;
    uint32_t stalls = 99;
    CHECK_EQ(rungs_measurements_new(&m), RUNGS_OK);
    if (!m) return;
    CHECK_EQ(rungs_measurements_add_wait_for_us(NULL, 1000, 1), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(take_sections(NULL, RUNGS_REPORT_DETAIL, &r, &d, NULL), RUNGS_ERR_NULL_POINTER);
    /* A refused seat counts nothing. */
    CHECK_EQ(rungs_measurements_add_wait_for_us(m, 1000, 16), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE("rungs_measurements_add_wait_for_us: seat is 16; expected a seat, 0 to 15, "
                  "or RUNGS_NO_SEAT (255)");
    CHECK_EQ(rungs_measurements_unreported_stalls(m, &stalls), RUNGS_OK);
    CHECK_EQ(stalls, 0);
    CHECK_EQ(rungs_measurements_add_wait_for_us(m, 2500, 4), RUNGS_OK);
    CHECK_EQ(rungs_measurements_add_frame_work_us(m, 7000), RUNGS_OK);
    /* A NULL out-pointer ends no interval. */
    CHECK_EQ(take_sections(m, RUNGS_REPORT_DETAIL, NULL, &d, NULL), RUNGS_ERR_NULL_POINTER);
    CHECK_MESSAGE("rungs_measurements_take_report: out is NULL");
    CHECK_EQ(take_sections(m, RUNGS_REPORT_DETAIL, &r, &d, NULL), RUNGS_OK);
    CHECK_EQ(r.process_us, 7000);
    CHECK_EQ(r.max_wait_ms, 3);
    CHECK_EQ(r.has_worst_rtt, 1); /* alone: 0 ms */
    CHECK_EQ(r.worst_rtt_ms, 0);
    CHECK(d.has_median_rtt == 1 && d.median_rtt_ms == 0);
    CHECK_EQ(d.frames, 1);
    CHECK_EQ(d.stalled_frames, 1);
    CHECK_EQ(d.stall_ms, 3);
    CHECK_EQ(d.waited_for, 4);
    /* Poisoned: refused like every call. */
    rungs_testing_panic_next_call();
    CHECK_EQ(take_sections(m, RUNGS_REPORT_DETAIL, &r, &d, NULL), RUNGS_ERR_PANIC);
    CHECK_EQ(take_sections(m, RUNGS_REPORT_DETAIL, &r, &d, NULL), RUNGS_ERR_POISONED);
    CHECK_EQ(rungs_measurements_add_wait_for_us(m, 1, 1), RUNGS_ERR_POISONED);
    CHECK_EQ(rungs_measurements_free(m), RUNGS_OK);
}

static rungs_timing_machine *tracking_machine(void) {
    rungs_timing_machine_config c;
    rungs_timing_machine *machine = NULL;
    c = tracking_config();
    c.seat_count = 3; /* seat 2 is an AI */
    CHECK_EQ(rungs_timing_machine_new(&c, &machine), RUNGS_OK);
    return machine;
}

static void test_execute_refusals_change_nothing(void) {
    rungs_timing_machine *machine = tracking_machine();
    rungs_report r = example_report(), bad_r;
    rungs_report_detail d = example_detail(), bad;
    int32_t has = -1;
    rungs_timing_event e;
    if (!machine) return;
    CHECK_EQ(rungs_timing_machine_execute_report(NULL, 0, with_sections(&r, &d, NULL)),
             RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_timing_machine_frame_begin(machine, 0, NULL), RUNGS_OK);
    CHECK_EQ(rungs_timing_machine_execute_report(machine, 0, with_sections(NULL, &d, NULL)),
             RUNGS_ERR_NULL_POINTER);
    CHECK_MESSAGE("rungs_timing_machine_execute_report: report is NULL");
    bad_r = r;
    bad_r.has_worst_rtt = 3;
    CHECK_EQ(rungs_timing_machine_execute_report(machine, 0, with_sections(&bad_r, &d, NULL)),
             RUNGS_ERR_INVALID_ARGUMENT);
    bad = d;
    bad.has_latest_rtt = 2;
    CHECK_EQ(rungs_timing_machine_execute_report(machine, 0, with_sections(&r, &bad, NULL)),
             RUNGS_ERR_INVALID_ARGUMENT);
    bad = d;
    bad.waited_for = 200;
    CHECK_EQ(rungs_timing_machine_execute_report(machine, 0, with_sections(&r, &bad, NULL)),
             RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE("rungs_timing_machine_execute_report: report->detail.waited_for is 200; "
                  "expected a seat, 0 to 15, or RUNGS_NO_SEAT (255)");
    bad = d;
    bad.median_rtt_ms = 160; /* above the p90 */
    CHECK_EQ(rungs_timing_machine_execute_report(machine, 0, with_sections(&r, &bad, NULL)),
             RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE_STARTS("rungs_timing_machine_execute_report: report->detail is "
                         "report->worst_rtt_ms ");
    CHECK_MESSAGE_HAS("; expected a detail section within its rules (NETWORK_REPORT detail must "
                      "have median <= p90 <= worst round trip)");
    bad = d;
    bad.stalled_frames = 200;
    CHECK_EQ(rungs_timing_machine_execute_report(machine, 1, with_sections(&r, &bad, NULL)),
             RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_EQ(rungs_timing_machine_execute_report(machine, 2, with_sections(&r, &d, NULL)),
             RUNGS_ERR_UNKNOWN_SEAT);
    CHECK_MESSAGE("rungs_timing_machine_execute_report: seat 2 never was a human seat "
                  "of this game; expected one of the human seats 0, 1");
    /* None of it executed: with no report from either player the master
     * does not evaluate. */
    CHECK_EQ(rungs_timing_machine_frame_end(machine, &has, &e), RUNGS_OK);
    CHECK_EQ(has, 0);
    /* Only seat 0's valid report: still waiting for seat 1's. */
    CHECK_EQ(rungs_timing_machine_frame_begin(machine, 1, NULL), RUNGS_OK);
    CHECK_EQ(rungs_timing_machine_execute_report(machine, 0, with_sections(&r, &d, NULL)), RUNGS_OK);
    CHECK_EQ(rungs_timing_machine_frame_end(machine, &has, &e), RUNGS_OK);
    CHECK_EQ(has, 0);
    CHECK_EQ(rungs_timing_machine_frame_begin(machine, 2, NULL), RUNGS_OK);
    CHECK_EQ(rungs_timing_machine_execute_report(machine, 1, with_sections(&r, &d, NULL)), RUNGS_OK);
    CHECK_EQ(rungs_timing_machine_frame_end(machine, &has, &e), RUNGS_OK);
    /* p90 150 plus its spread of 30 (within latest 125 + 60 and the worst):
     * 180 ms, 3 frames; the two stalls for seat 3 (no player here, so not a
     * slow CPU), the longest 40 ms, are unexplained: a frame of margin
     * (decision 102) on the game's prior one. */
    CHECK_EQ(has, 1);
    CHECK(e.send_period == 1 && e.look_ahead == 5 && e.fps == 30);
    /* Poisoned. */
    CHECK_EQ(rungs_timing_machine_frame_begin(machine, 3, NULL), RUNGS_OK);
    rungs_testing_panic_next_call();
    CHECK_EQ(rungs_timing_machine_execute_report(machine, 0, with_sections(&r, &d, NULL)), RUNGS_ERR_PANIC);
    CHECK_EQ(rungs_timing_machine_execute_report(machine, 0, with_sections(&r, &d, NULL)),
             RUNGS_ERR_POISONED);
    CHECK_EQ(rungs_timing_machine_free(machine), RUNGS_OK);
}

/* ---- The game of tests/c_detailed_report.rs, from C. ---- */

#define GAME_SEATS 2
#define GAME_LAST_FRAME 144
#define MAX_SENT 16

typedef struct {
    uint32_t frame;
    uint8_t send_period, look_ahead, fps;
} sent_t;

/* Two players at 30 fps on a 60 ms link, reporting every 16 frames; seat
 * 0's frames take 31 ms (CPU-bound at 30 fps). A 600 ms sample on frame 20
 * (a spike over by the report on 32); on frames 66, 70, 74 seat 1 waits
 * 100 ms for seat 0; on 88-94 seat 0 waits 10 ms for seat 1, on 95 100 ms.
 * Each report goes through the payload codecs, detailed or extended, and
 * executes on the master's machine. Returns the number of events sent. */
static size_t play(int detailed, sent_t *sent) {
    rungs_measurements *m[GAME_SEATS] = {NULL, NULL};
    rungs_timing_machine *machine = tracking_machine();
    size_t count = 0;
    uint32_t frame;
    uint8_t seat;
    if (!machine) return 0;
    for (seat = 0; seat < GAME_SEATS; seat++) {
        CHECK_EQ(rungs_measurements_new(&m[seat]), RUNGS_OK);
        if (!m[seat]) return 0;
        CHECK_EQ(rungs_measurements_add_peer(m[seat], (uint8_t)(1 - seat)), RUNGS_OK);
    }
    for (frame = 0; frame <= GAME_LAST_FRAME; frame++) {
        int32_t report = 0, has = 0;
        rungs_timing_event e;
        CHECK_EQ(rungs_timing_machine_frame_begin(machine, frame, NULL), RUNGS_OK);
        if (frame > 0) {
            uint32_t rtt = frame == 20 ? 600 : 60;
            CHECK_EQ(rungs_measurements_add_frame_work_us(m[0], 31000), RUNGS_OK);
            CHECK_EQ(rungs_measurements_add_frame_work_us(m[1], 5000), RUNGS_OK);
            CHECK_EQ(rungs_measurements_add_rtt_sample(m[0], 1, rtt, 1), RUNGS_OK);
            CHECK_EQ(rungs_measurements_add_rtt_sample(m[1], 0, rtt, 1), RUNGS_OK);
        }
        if (frame == 66 || frame == 70 || frame == 74)
            CHECK_EQ(rungs_measurements_add_wait_for_us(m[1], 100000, 0), RUNGS_OK);
        if (frame >= 88 && frame < 95)
            CHECK_EQ(rungs_measurements_add_wait_for_us(m[0], 10000, 1), RUNGS_OK);
        if (frame == 95) CHECK_EQ(rungs_measurements_add_wait_for_us(m[0], 100000, 1), RUNGS_OK);
        CHECK_EQ(rungs_timing_machine_is_report_frame(machine, frame, &report), RUNGS_OK);
        for (seat = 0; report && seat < GAME_SEATS; seat++) {
            rungs_report r, got;
            rungs_report_detail d, got_detail;
            uint8_t buf[RUNGS_REPORT_DETAILED_PAYLOAD_LEN];
            size_t len = 0;
            if (detailed) {
                CHECK_EQ(take_sections(m[seat], RUNGS_REPORT_DETAIL, &r, &d, NULL), RUNGS_OK);
                CHECK_EQ(rungs_report_payload_encode(with_sections(&r, &d, NULL), RUNGS_REPORT_LAYOUT_EXTENDED, buf, sizeof buf, &len),
                         RUNGS_OK);
                CHECK_EQ(decode_sections(buf, len, &got, &got_detail, NULL),
                         RUNGS_OK);
                CHECK_EQ(rungs_timing_machine_execute_report(machine, seat, with_sections(&got, &got_detail, NULL)),
                         RUNGS_OK);
            } else {
                rungs_report_init(&r);
                CHECK_EQ(rungs_measurements_take_report(m[seat], 0, &r), RUNGS_OK);
                CHECK_EQ(rungs_report_payload_encode(&r, RUNGS_REPORT_LAYOUT_EXTENDED, buf,
                                                     sizeof buf, &len),
                         RUNGS_OK);
                rungs_report_init(&got);
                CHECK_EQ(rungs_report_payload_decode(buf, len, &got), RUNGS_OK);
                CHECK_EQ(got.has_detail, 0);
                CHECK_EQ(rungs_timing_machine_execute_report(machine, seat, &got), RUNGS_OK);
            }
        }
        CHECK_EQ(rungs_timing_machine_frame_end(machine, &has, &e), RUNGS_OK);
        if (has && count < MAX_SENT) {
            sent[count].frame = frame;
            sent[count].send_period = e.send_period;
            sent[count].look_ahead = e.look_ahead;
            sent[count].fps = e.fps;
            count++;
        }
    }
    for (seat = 0; seat < GAME_SEATS; seat++) CHECK_EQ(rungs_measurements_free(m[seat]), RUNGS_OK);
    CHECK_EQ(rungs_timing_machine_free(machine), RUNGS_OK);
    return count;
}

static void check_sent(const sent_t *sent, size_t count, const sent_t *expected,
                       size_t expected_count) {
    size_t i;
    CHECK_EQ(count, expected_count);
    for (i = 0; i < count && i < expected_count; i++) {
        CHECK_EQ(sent[i].frame, expected[i].frame);
        CHECK_EQ(sent[i].send_period, expected[i].send_period);
        CHECK_EQ(sent[i].look_ahead, expected[i].look_ahead);
        CHECK_EQ(sent[i].fps, expected[i].fps);
    }
}

static void test_tracking_reacts_to_the_detail_as_the_core_does(void) {
    /* The Rust core's events for the same game (tests/c_detailed_report.rs).
     * Every target carries the game's prior frame of margin.
     * With the detail: frame 16 needs one frame for 60 ms; the spike is one
     * sample of 16 and over; the waits for seat 0 are its slow CPU, which
     * the rate answers; of the stalls of 81-96 the longest waited 100 ms:
     * three frames lacking, and the margin rises by one of them on 96
     * (decision 102). */
    static const sent_t with_detail[] = {{16, 1, 2, 30}, {96, 1, 3, 30}};
    /* Without it: the 600 ms worst sample is answered on 32, with the phase
     * frame, held until 75; a 100 ms wait of nobody known buys a frame on
     * 80; the stalls of 81-96 waited under the 11 still in force and lacked
     * 3 frames: each report that still asks raises the margin a frame (96,
     * 112). */
    static const sent_t worst_only[] = {
        {16, 1, 2, 30}, {32, 1, 11, 30}, {80, 1, 3, 30}, {96, 1, 4, 30}, {112, 1, 5, 30}};
    sent_t sent[MAX_SENT];
    size_t count = play(1, sent);
    check_sent(sent, count, with_detail, sizeof with_detail / sizeof with_detail[0]);
    count = play(0, sent);
    check_sent(sent, count, worst_only, sizeof worst_only / sizeof worst_only[0]);
}

/* A master queues its raise for its own stall with its report: 120 ms round
 * trips at 30 fps run 1/3 (two frames and the prior margin's one); a spike's first stall waits 684 ms while the
 * round trips, half back, say 810 ms (tests/c_detailed_report.rs). */
static void test_master_raises_for_its_own_stall(void) {
    rungs_timing_machine *m = tracking_machine();
    rungs_report calm, onset;
    rungs_report_detail calm_detail, onset_detail;
    rungs_timing_event e, opening;
    int32_t has = -1;
    uint32_t f;
    rungs_report_init(&calm);
    calm.process_us = 5000;
    calm.worst_rtt_ms = 120;
    calm.has_worst_rtt = 1;
    memset(&calm_detail, 0, sizeof calm_detail);
    calm_detail.median_rtt_ms = calm_detail.p90_rtt_ms = calm_detail.latest_rtt_ms = 120;
    calm_detail.has_median_rtt = calm_detail.has_p90_rtt = calm_detail.has_latest_rtt = 1;
    calm_detail.frames = 16;
    calm_detail.waited_for = RUNGS_NO_SEAT;
    onset = calm;
    onset.max_wait_ms = 684;
    onset.worst_rtt_ms = 810;
    onset_detail = calm_detail;
    onset_detail.p90_rtt_ms = onset_detail.latest_rtt_ms = 810;
    onset_detail.frames = 6;
    onset_detail.stalled_frames = 2;
    onset_detail.stall_ms = 687;
    onset_detail.waited_for = 1;
    memset(&opening, 0, sizeof opening);

    /* No frame open yet. */
    CHECK_EQ(rungs_timing_machine_raise_for_own_stall(m, with_sections(&onset, &onset_detail, NULL), &has, &e),
             RUNGS_ERR_STATE);
    for (f = 0; f <= 59; f++) {
        CHECK_EQ(rungs_timing_machine_frame_begin(m, f, NULL), RUNGS_OK);
        if (f == 25) {
            CHECK_EQ(rungs_timing_machine_execute_report(m, 0, with_sections(&calm, &calm_detail, NULL)),
                     RUNGS_OK);
            CHECK_EQ(rungs_timing_machine_execute_report(m, 1, with_sections(&calm, &calm_detail, NULL)),
                     RUNGS_OK);
        }
        if (f == 35) {
            CHECK_EQ(rungs_timing_machine_execute_timing_event(m, 0, &opening), RUNGS_OK);
        }
        has = -1;
        CHECK_EQ(rungs_timing_machine_frame_end(m, &has, &e), RUNGS_OK);
        if (has == 1) {
            opening = e;
        }
    }
    CHECK(opening.send_period == 1 && opening.look_ahead == 3);
    CHECK_EQ(rungs_timing_machine_frame_begin(m, 60, NULL), RUNGS_OK);
    CHECK_EQ(rungs_timing_machine_raise_for_own_stall(m, NULL, &has, &e),
             RUNGS_ERR_NULL_POINTER);
    has = -1;
    /* A spike's first stall raises nothing until the frames after it say
     * it goes on (decision 75)... */
    CHECK_EQ(rungs_timing_machine_raise_for_own_stall(m, with_sections(&onset, &onset_detail, NULL), &has, &e),
             RUNGS_OK);
    CHECK(has == 0);
    CHECK_EQ(rungs_timing_machine_execute_report(m, 0, with_sections(&onset, &onset_detail, NULL)), RUNGS_OK);
    CHECK_EQ(rungs_timing_machine_execute_report(m, 1, with_sections(&onset, &onset_detail, NULL)), RUNGS_OK);
    has = -1;
    CHECK_EQ(rungs_timing_machine_frame_end(m, &has, &e), RUNGS_OK);
    CHECK(has == 0);
    /* ...as the master's next stall does: 3 in force, 21 lacking, up to
     * the margin's 9 over the 13 frames the half-back round trips need,
     * and the phase frame of a spike's rise (decision 59). */
    CHECK_EQ(rungs_timing_machine_frame_begin(m, 61, NULL), RUNGS_OK);
    CHECK_EQ(rungs_timing_machine_raise_for_own_stall(m, with_sections(&onset, &onset_detail, NULL), &has, &e),
             RUNGS_OK);
    CHECK(has == 1 && e.send_period == 1 && e.look_ahead == 23 && e.fps == 30);
    /* Once per raise; without the detail it asks no more either. */
    CHECK_EQ(rungs_timing_machine_raise_for_own_stall(m, with_sections(&onset, &onset_detail, NULL), &has, &e),
             RUNGS_OK);
    CHECK(has == 0);
    CHECK_EQ(rungs_timing_machine_raise_for_own_stall(m, &onset, &has, NULL), RUNGS_OK);
    CHECK(has == 0);
    CHECK_EQ(rungs_timing_machine_free(m), RUNGS_OK);
}

int main(void) {
    test_documented_bytes();
    test_round_trip_from_measurements_to_a_machine();
    test_encode_refusals();
    test_decode_refusals();
    test_basic_layout_is_compact_or_extended();
    test_measurement_refusals();
    test_execute_refusals_change_nothing();
    test_tracking_reacts_to_the_detail_as_the_core_does();
    test_master_raises_for_its_own_stall();
    return harness_report("detailed_report");
}
