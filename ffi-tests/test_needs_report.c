/* The needs NETWORK_REPORT layout (version 3: the detailed layout plus how
 * much look-ahead the interval's frames needed) for a C engine that drives
 * the pieces itself: rungs_needed_look_ahead, the needs measured per frame
 * and taken with the report, encoded, decoded and executed on a
 * rungs_timing_machine; the documented bytes; every refusal, each changing
 * nothing; and a game under RUNGS_POLICY_TRACKING in which the needs let
 * the prior margin go after 512 frames of evidence, where the same reports
 * without them wait the 1024 calm frames of the calm shed. */
#include <stdint.h>

#include "harness.h"
#include "report_examples.h"
#include "rungs.h"

/* docs/payloads.md's needs example: the detailed example with version 3,
 * then reference 6, most 7, and 1, 2, 40, 300 frames above 6, 5, 4, 3. */
static const uint8_t EXAMPLE[RUNGS_REPORT_NEEDS_PAYLOAD_LEN] = {
    0x03, 0x88, 0x13, 0x00, 0x00, 0xB4, 0x00, 0x28, 0x00, 0x78, 0x00,
    0x96, 0x00, 0x7D, 0x00, 0x80, 0x00, 0x02, 0x00, 0x28, 0x00, 0x03,
    0x06, 0x07, 0x01, 0x00, 0x02, 0x00, 0x28, 0x00, 0x2C, 0x01};

static rungs_look_ahead_needs example_needs(void) {
    rungs_look_ahead_needs n;
    memset(&n, 0, sizeof n);
    n.reference = 6;
    n.most = 7;
    n.above[0] = 1;
    n.above[1] = 2;
    n.above[2] = 40;
    n.above[3] = 300;
    return n;
}

static int same_needs(const rungs_look_ahead_needs *a, const rungs_look_ahead_needs *b) {
    return a->reference == b->reference && a->most == b->most && a->above[0] == b->above[0] &&
           a->above[1] == b->above[1] && a->above[2] == b->above[2] && a->above[3] == b->above[3];
}

static void test_constants_and_the_needed_look_ahead(void) {
    uint8_t out = 0;
    CHECK_EQ(RUNGS_REPORT_LAYOUT_NEEDS, 3);
    CHECK_EQ(RUNGS_REPORT_NEEDS_PAYLOAD_LEN, 32);
    CHECK_EQ(RUNGS_NEED_LEVELS, 4);
    CHECK_EQ(sizeof(rungs_look_ahead_needs), 10);
    /* Under 6, ready 2.5 frames before the deadline: 4 would have done;
     * on time: 6; a microsecond late: 7; never below 1 nor above 250. */
    CHECK_EQ(rungs_needed_look_ahead(6, 1000000, 1000000 - 83333, 33333, &out), RUNGS_OK);
    CHECK_EQ(out, 4);
    CHECK_EQ(rungs_needed_look_ahead(6, 1000000, 1000000, 33333, &out), RUNGS_OK);
    CHECK_EQ(out, 6);
    CHECK_EQ(rungs_needed_look_ahead(6, 1000000, 1000001, 33333, &out), RUNGS_OK);
    CHECK_EQ(out, 7);
    CHECK_EQ(rungs_needed_look_ahead(2, 1000000, 0, 33333, &out), RUNGS_OK);
    CHECK_EQ(out, 1);
    CHECK_EQ(rungs_needed_look_ahead(250, 0, 1000000, 33333, &out), RUNGS_OK);
    CHECK_EQ(out, 250);
    out = 77;
    CHECK_EQ(rungs_needed_look_ahead(0, 0, 0, 33333, &out), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE_HAS("rungs_needed_look_ahead: look_ahead is 0; expected 1 to 250");
    CHECK_EQ(rungs_needed_look_ahead(251, 0, 0, 33333, &out), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_EQ(rungs_needed_look_ahead(6, 0, 0, 0, &out), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE_HAS("frame_us is 0; expected at least 1");
    CHECK_EQ(out, 77);
    CHECK_EQ(rungs_needed_look_ahead(6, 0, 0, 33333, NULL), RUNGS_ERR_NULL_POINTER);
}

static void test_documented_bytes_and_refusals(void) {
    rungs_report r = example_report(), got;
    rungs_report_detail d = example_detail(), got_detail;
    rungs_look_ahead_needs n = example_needs(), got_needs, broken;
    uint8_t buf[40], bad[RUNGS_REPORT_NEEDS_PAYLOAD_LEN];
    size_t len = 0;
    memset(buf, FILL, sizeof buf);
    CHECK_EQ(rungs_report_payload_encode(with_sections(&r, &d, &n), RUNGS_REPORT_LAYOUT_EXTENDED, buf, sizeof buf, &len), RUNGS_OK);
    CHECK_EQ(len, RUNGS_REPORT_NEEDS_PAYLOAD_LEN);
    CHECK(memcmp(buf, EXAMPLE, sizeof EXAMPLE) == 0);
    CHECK(all_bytes_are(buf + len, sizeof buf - len, FILL));
    memset(&got_needs, 0xEE, sizeof got_needs);
    CHECK_EQ(decode_sections(EXAMPLE, sizeof EXAMPLE, &got, &got_detail,
                                               &got_needs),
             RUNGS_OK);
    CHECK_EQ(got.worst_rtt_ms, 180);
    CHECK_EQ(got_detail.frames, 128);
    CHECK_EQ(got_detail.waited_for, 3);
    CHECK(same_needs(&got_needs, &n));

    /* The needs section with reference 0: no needs measured, zeros. */
    memset(buf, FILL, sizeof buf);
    memset(&broken, 0, sizeof broken);
    CHECK_EQ(rungs_report_payload_encode(with_sections(&r, &d, &broken),
                                         RUNGS_REPORT_LAYOUT_EXTENDED, buf, sizeof buf, &len),
             RUNGS_OK);
    CHECK_EQ(len, RUNGS_REPORT_NEEDS_PAYLOAD_LEN);
    CHECK(all_bytes_are(buf + 22, 10, 0));
    CHECK_EQ(decode_sections(buf, len, &got, &got_detail, &got_needs),
             RUNGS_OK);
    CHECK_EQ(got_needs.reference, 0);
    CHECK_EQ(got_needs.most, 0);
    CHECK_EQ(got_needs.above[3], 0);

    /* Each broken rule refused with the fields named, nothing written. */
    memset(buf, FILL, sizeof buf);
    broken = n;
    broken.reference = 251;
    CHECK_EQ(rungs_report_payload_encode(with_sections(&r, &d, &broken), RUNGS_REPORT_LAYOUT_EXTENDED, buf, sizeof buf, &len),
             RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE_HAS("report->needs is report->needs.reference 251, report->needs.most 7, "
                      "report->needs.above {1, 2, 40, 300}; expected needs within their rules "
                      "(look-ahead needs: reference and most must be 1 to 250)");
    broken = n;
    broken.above[1] = 50;
    CHECK_EQ(rungs_report_payload_encode(with_sections(&r, &d, &broken), RUNGS_REPORT_LAYOUT_EXTENDED, buf, sizeof buf, &len),
             RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE_HAS("the counts must not decrease");
    broken = n;
    broken.above[0] = 0; /* nothing above 6 although the most is 7 */
    CHECK_EQ(rungs_report_payload_encode(with_sections(&r, &d, &broken), RUNGS_REPORT_LAYOUT_EXTENDED, buf, sizeof buf, &len),
             RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE_HAS("is 0 exactly when no frame needed more");
    memset(&broken, 0, sizeof broken);
    broken.most = 3; /* reference 0 (none) with a most */
    CHECK_EQ(rungs_report_payload_encode(with_sections(&r, &d, &broken), RUNGS_REPORT_LAYOUT_EXTENDED, buf, sizeof buf, &len),
             RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE_HAS("report->needs is report->needs.reference 0, report->needs.most 3, "
                      "report->needs.above {0, 0, 0, 0}; expected every other field 0 when "
                      "report->needs.reference is 0 (no needs)");
    d.stalled_frames = 200; /* the detail's rules hold too */
    CHECK_EQ(rungs_report_payload_encode(with_sections(&r, &d, &n), RUNGS_REPORT_LAYOUT_EXTENDED, buf, sizeof buf, &len),
             RUNGS_ERR_INVALID_ARGUMENT);
    d = example_detail();
    CHECK_EQ(rungs_report_payload_encode(with_sections(&r, &d, &n), RUNGS_REPORT_LAYOUT_EXTENDED, buf, 31, &len),
             RUNGS_ERR_BUFFER_TOO_SMALL);
    CHECK(all_bytes_are(buf, sizeof buf, FILL));
    CHECK_EQ(rungs_report_payload_encode(with_sections(NULL, &d, &n), RUNGS_REPORT_LAYOUT_EXTENDED, buf, sizeof buf, &len),
             RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_report_payload_encode(with_sections(&r, &d, &n), RUNGS_REPORT_LAYOUT_EXTENDED, buf, sizeof buf, NULL),
             RUNGS_ERR_NULL_POINTER);

    /* Malformed bytes: each broken field, a wrong length, version 2. */
    memset(&got_needs, 0xEE, sizeof got_needs);
    memcpy(bad, EXAMPLE, sizeof bad);
    bad[0] = 2;
    CHECK_EQ(decode_sections(bad, sizeof bad, &got, &got_detail, &got_needs),
             RUNGS_ERR_MALFORMED);
    CHECK_MESSAGE_HAS("needs NETWORK_REPORT version must be 3");
    memcpy(bad, EXAMPLE, sizeof bad);
    bad[23] = 6; /* the most at the reference, yet a frame above it */
    CHECK_EQ(decode_sections(bad, sizeof bad, &got, &got_detail, &got_needs),
             RUNGS_ERR_MALFORMED);
    memcpy(bad, EXAMPLE, sizeof bad);
    bad[22] = 0; /* no needs, but the rest is not zero */
    CHECK_EQ(decode_sections(bad, sizeof bad, &got, &got_detail, &got_needs),
             RUNGS_ERR_MALFORMED);
    CHECK_EQ(decode_sections(EXAMPLE, 31, &got, &got_detail, &got_needs),
             RUNGS_ERR_MALFORMED);
    CHECK_MESSAGE_HAS("len is 31; expected 6, 9, 22 or 32");
    CHECK_EQ(got_needs.reference, 0xEE); /* untouched */
    /* The needs layout is the sections' choice, never the basic layout. */
    CHECK_EQ(rungs_report_payload_encode(&r, RUNGS_REPORT_LAYOUT_NEEDS, buf, sizeof buf, &len),
             RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE_HAS("basic_layout is 3; expected RUNGS_REPORT_LAYOUT_COMPACT (0)");
}

/* measure -> take -> encode -> decode -> execute, as a C engine does it. */
static void test_measured_needs_travel_whole(void) {
    rungs_measurements *m = NULL;
    rungs_report r, got;
    rungs_report_detail d, got_detail;
    rungs_look_ahead_needs n, got_needs;
    uint8_t buf[RUNGS_REPORT_NEEDS_PAYLOAD_LEN];
    size_t len = 0;
    uint8_t needed[] = {3, 4, 4, 5, 6, 7, 2};
    size_t i;
    CHECK_EQ(rungs_measurements_new(&m), RUNGS_OK);
    if (!m) return;
    CHECK_EQ(rungs_measurements_add_peer(m, 1), RUNGS_OK);
    CHECK_EQ(rungs_measurements_add_rtt_sample(m, 1, 90, 1), RUNGS_OK);
    for (i = 0; i < sizeof needed; i++) {
        CHECK_EQ(rungs_measurements_add_frame_work_us(m, 4000), RUNGS_OK);
        CHECK_EQ(rungs_measurements_add_frame_need(m, 6, needed[i]), RUNGS_OK);
    }
    CHECK_EQ(rungs_measurements_add_frame_need(m, 0, 3), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_EQ(rungs_measurements_add_frame_need(m, 6, 251), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_EQ(rungs_measurements_add_frame_need(NULL, 6, 3), RUNGS_ERR_NULL_POINTER);
    /* A NULL out refuses the call and the interval goes on. */
    CHECK_EQ(take_sections(m, RUNGS_REPORT_DETAIL | RUNGS_REPORT_NEEDS, NULL, NULL, NULL),
             RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(take_sections(m, RUNGS_REPORT_DETAIL | RUNGS_REPORT_NEEDS, &r, &d, &n), RUNGS_OK);
    CHECK_EQ(n.reference, 6);
    CHECK_EQ(n.most, 7);
    CHECK_EQ(n.above[0], 1); /* the 7 */
    CHECK_EQ(n.above[1], 2); /* 6 and 7 */
    CHECK_EQ(n.above[2], 3); /* 5, 6 and 7 */
    CHECK_EQ(n.above[3], 5); /* all but the 3 and the 2 */
    CHECK_EQ(d.frames, 7);
    CHECK_EQ(r.worst_rtt_ms, 90);
    CHECK_EQ(rungs_report_payload_encode(with_sections(&r, &d, &n), RUNGS_REPORT_LAYOUT_EXTENDED, buf, sizeof buf, &len), RUNGS_OK);
    CHECK_EQ(decode_sections(buf, len, &got, &got_detail, &got_needs),
             RUNGS_OK);
    CHECK(same_needs(&got_needs, &n));
    /* The next interval measured no need: reference 0. */
    CHECK_EQ(take_sections(m, RUNGS_REPORT_DETAIL | RUNGS_REPORT_NEEDS, &r, &d, &n), RUNGS_OK);
    CHECK_EQ(n.reference, 0);
    CHECK_EQ(rungs_measurements_free(m), RUNGS_OK);
}

/* A tracking game of two seats on a clean 100 ms path: the round trips
 * need 2 frames and the game starts with a frame of margin (1/3). Every
 * report says the frames needed 2 at most: after 512 frames of that the
 * margin goes. Executed without the needs, the same reports wait for the
 * calm shed, 1024 frames. Returns the frame the target fell to 1/2. */
static uint32_t frame_the_margin_went(int with_needs) {
    rungs_timing_machine *machine = NULL;
    rungs_timing_machine_config c;
    rungs_report r = example_report();
    rungs_report_detail d = example_detail();
    rungs_look_ahead_needs n;
    uint32_t frame, went = 0;
    int32_t has = 0;
    rungs_timing_event e;
    r.worst_rtt_ms = 100;
    r.max_wait_ms = 0;
    d.median_rtt_ms = d.p90_rtt_ms = d.latest_rtt_ms = 100;
    d.frames = 16;
    d.stalled_frames = 0;
    d.stall_ms = 0;
    d.waited_for = RUNGS_NO_SEAT;
    memset(&n, 0, sizeof n);
    n.reference = 3;
    n.most = 2;
    n.above[2] = 16; /* all 16 needed more than 1 (and 0), none more than 2 */
    n.above[3] = 16;
    c = tracking_config();
    CHECK_EQ(rungs_timing_machine_new(&c, &machine), RUNGS_OK);
    if (!machine) return 0;
    for (frame = 0; frame < 1200 && !went; frame++) {
        CHECK_EQ(rungs_timing_machine_frame_begin(machine, frame, NULL), RUNGS_OK);
        if (frame > 0 && frame % 16 == 0) {
            uint8_t seat;
            for (seat = 0; seat < 2; seat++) {
                if (with_needs) {
                    CHECK_EQ(rungs_timing_machine_execute_report(machine, seat, with_sections(&r, &d, &n)),
                             RUNGS_OK);
                } else {
                    CHECK_EQ(rungs_timing_machine_execute_report(machine, seat, with_sections(&r, &d, NULL)),
                             RUNGS_OK);
                }
            }
        }
        CHECK_EQ(rungs_timing_machine_frame_end(machine, &has, &e), RUNGS_OK);
        if (has && e.send_period == 1 && e.look_ahead == 2) went = frame;
    }
    /* Broken needs are refused and change nothing. */
    n.most = 0;
    CHECK_EQ(rungs_timing_machine_frame_begin(machine, frame, NULL), RUNGS_OK);
    CHECK_EQ(rungs_timing_machine_execute_report(machine, 0, with_sections(&r, &d, &n)),
             RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_EQ(rungs_timing_machine_free(machine), RUNGS_OK);
    return went;
}

static void test_needs_let_the_margin_go_sooner(void) {
    uint32_t with_needs = frame_the_margin_went(1);
    uint32_t without = frame_the_margin_went(0);
    CHECK(with_needs >= 512 && with_needs < 560);
    CHECK(without >= 1024 && without < 1072);
    if (!(with_needs >= 512 && with_needs < 560) || !(without >= 1024 && without < 1072)) {
        fprintf(stderr, "margin went on frame %u with needs, %u without\n", with_needs, without);
    }
}

int main(void) {
    test_constants_and_the_needed_look_ahead();
    test_documented_bytes_and_refusals();
    test_measured_needs_travel_whole();
    test_needs_let_the_margin_go_sooner();
    return harness_report("needs report");
}
