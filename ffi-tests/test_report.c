/* One report concept: a rungs_report with optional detail and needs
 * sections, taken with the sections asked for, encoded in the smallest
 * layout that carries them, decoded with the sections the bytes carry, and
 * executed whatever it holds; its struct_size rule (the library reads and
 * writes only what fits); and the refusals of the flags and sections. */
#include <stddef.h>
#include <stdint.h>

#include "harness.h"
#include "report_examples.h"
#include "rungs.h"

/* Measurements with one peer, some work, a need and a stall, so every
 * section of the report has something in it. */
static rungs_measurements *measured(void) {
    rungs_measurements *m = NULL;
    CHECK_EQ(rungs_measurements_new(&m), RUNGS_OK);
    if (!m) return NULL;
    CHECK_EQ(rungs_measurements_add_peer(m, 1), RUNGS_OK);
    CHECK_EQ(rungs_measurements_add_rtt_sample(m, 1, 70, 1), RUNGS_OK);
    CHECK_EQ(rungs_measurements_add_frame_work_us(m, 5000), RUNGS_OK);
    CHECK_EQ(rungs_measurements_add_frame_need(m, 6, 7), RUNGS_OK);
    CHECK_EQ(rungs_measurements_add_wait_for_us(m, 20000, 1), RUNGS_OK);
    return m;
}

static int same_whole_report(const rungs_report *a, const rungs_report *b) {
    return same_report(a, b) && a->has_detail == b->has_detail && a->has_needs == b->has_needs &&
           (!a->has_detail || same_detail(&a->detail, &b->detail)) &&
           (!a->has_needs ||
            (a->needs.reference == b->needs.reference && a->needs.most == b->needs.most &&
             memcmp(a->needs.above, b->needs.above, sizeof a->needs.above) == 0));
}

/* Each combination of sections: taken, encoded in its layout, decoded back
 * equal, and executed on a timing machine. */
static void test_each_section_combination_travels_whole(void) {
    static const struct {
        rungs_report_sections sections;
        size_t len;
        uint8_t version;
    } cases[] = {
        {0, RUNGS_REPORT_EXTENDED_PAYLOAD_LEN, 1},
        {RUNGS_REPORT_DETAIL, RUNGS_REPORT_DETAILED_PAYLOAD_LEN, 2},
        {RUNGS_REPORT_DETAIL | RUNGS_REPORT_NEEDS, RUNGS_REPORT_NEEDS_PAYLOAD_LEN, 3},
    };
    size_t i;
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        rungs_measurements *m = measured();
        rungs_timing_machine_config c = tracking_config();
        rungs_timing_machine *machine = NULL;
        rungs_report taken, got;
        uint8_t buf[RUNGS_REPORT_NEEDS_PAYLOAD_LEN];
        size_t len = 0;
        if (!m) return;
        rungs_report_init(&taken);
        CHECK_EQ(rungs_measurements_take_report(m, cases[i].sections, &taken), RUNGS_OK);
        CHECK_EQ(taken.struct_size, sizeof taken);
        CHECK_EQ(taken.has_detail, (cases[i].sections & RUNGS_REPORT_DETAIL) != 0);
        CHECK_EQ(taken.has_needs, (cases[i].sections & RUNGS_REPORT_NEEDS) != 0);
        CHECK_EQ(taken.process_us, 5000);
        CHECK_EQ(taken.max_wait_ms, 20);
        CHECK(taken.has_worst_rtt == 1 && taken.worst_rtt_ms == 70);
        if (taken.has_detail) {
            CHECK(taken.detail.stalled_frames == 1 && taken.detail.waited_for == 1);
        }
        if (taken.has_needs) {
            CHECK(taken.needs.reference == 6 && taken.needs.most == 7);
        }
        CHECK_EQ(rungs_report_payload_encode(&taken, RUNGS_REPORT_LAYOUT_EXTENDED, buf, sizeof buf,
                                             &len),
                 RUNGS_OK);
        CHECK_EQ(len, cases[i].len);
        CHECK_EQ(buf[0], cases[i].version);
        memset(&got, 0xEE, sizeof got);
        got.struct_size = sizeof got;
        CHECK_EQ(rungs_report_payload_decode(buf, len, &got), RUNGS_OK);
        CHECK(same_whole_report(&got, &taken));
        CHECK_EQ(rungs_timing_machine_new(&c, &machine), RUNGS_OK);
        if (machine) {
            CHECK_EQ(rungs_timing_machine_frame_begin(machine, 0, NULL), RUNGS_OK);
            CHECK_EQ(rungs_timing_machine_execute_report(machine, 1, &got), RUNGS_OK);
            CHECK_EQ(rungs_timing_machine_free(machine), RUNGS_OK);
        }
        CHECK_EQ(rungs_measurements_free(m), RUNGS_OK);
    }
}

/* A struct from an older (shorter) header: the library reads and writes
 * only its struct_size bytes, a section that does not fit is absent, and
 * what cannot fit is refused before anything changes. */
static void test_a_short_struct_size_is_read_and_written_only_as_far_as_it_goes(void) {
    const uint32_t basic = (uint32_t)offsetof(rungs_report, detail);
    const uint32_t to_needs = (uint32_t)offsetof(rungs_report, needs);
    rungs_measurements *m = measured();
    rungs_report r = example_report(), out;
    rungs_report_detail d = example_detail();
    uint8_t buf[RUNGS_REPORT_NEEDS_PAYLOAD_LEN];
    size_t len = 0;
    uint32_t stalls = 0;
    if (!m) return;

    CHECK_EQ(basic, 20);
    /* Encoding: a basic report whose struct ends at the flags. */
    r.struct_size = basic;
    r.detail.frames = 77; /* beyond struct_size: never read */
    CHECK_EQ(rungs_report_payload_encode(&r, RUNGS_REPORT_LAYOUT_EXTENDED, buf, sizeof buf, &len),
             RUNGS_OK);
    CHECK_EQ(len, RUNGS_REPORT_EXTENDED_PAYLOAD_LEN);
    /* ...but one that says it has a section it cannot hold is refused. */
    r = *with_sections(&r, &d, NULL);
    r.struct_size = basic;
    CHECK_EQ(rungs_report_payload_encode(&r, RUNGS_REPORT_LAYOUT_EXTENDED, buf, sizeof buf, &len),
             RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE_HAS("report->struct_size is 20; expected at least 48, the end of the section "
                      "report->has_detail says is there");
    r.struct_size = to_needs; /* holds the detail: the detailed layout */
    CHECK_EQ(rungs_report_payload_encode(&r, RUNGS_REPORT_LAYOUT_EXTENDED, buf, sizeof buf, &len),
             RUNGS_OK);
    CHECK_EQ(len, RUNGS_REPORT_DETAILED_PAYLOAD_LEN);
    r.struct_size = 8; /* not even the basic fields */
    CHECK_EQ(rungs_timing_machine_execute_report(NULL, 0, &r), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_report_payload_encode(&r, RUNGS_REPORT_LAYOUT_EXTENDED, buf, sizeof buf, &len),
             RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE_HAS("report->struct_size is 8; expected sizeof(rungs_report)");

    /* Decoding a needs payload into a struct that ends at the flags: the
     * basic fields, no section, and not a byte past struct_size. */
    r = *with_sections(&r, &d, NULL);
    r.struct_size = sizeof r;
    r.has_needs = 1;
    memset(&r.needs, 0, sizeof r.needs);
    CHECK_EQ(rungs_report_payload_encode(&r, RUNGS_REPORT_LAYOUT_EXTENDED, buf, sizeof buf, &len),
             RUNGS_OK);
    CHECK_EQ(len, RUNGS_REPORT_NEEDS_PAYLOAD_LEN);
    memset(&out, 0xEE, sizeof out);
    out.struct_size = basic;
    CHECK_EQ(rungs_report_payload_decode(buf, len, &out), RUNGS_OK);
    CHECK_EQ(out.struct_size, basic);
    CHECK(out.process_us == 5000 && out.worst_rtt_ms == 180 && out.has_worst_rtt == 1);
    CHECK(out.has_detail == 0 && out.has_needs == 0);
    CHECK(all_bytes_are((const uint8_t *)&out + basic, sizeof out - basic, 0xEE));
    /* One that holds the detail but not the needs gets the detail. */
    memset(&out, 0xEE, sizeof out);
    out.struct_size = to_needs;
    CHECK_EQ(rungs_report_payload_decode(buf, len, &out), RUNGS_OK);
    CHECK(out.has_detail == 1 && out.has_needs == 0);
    CHECK(same_detail(&out.detail, &d));
    CHECK(all_bytes_are((const uint8_t *)&out + to_needs, sizeof out - to_needs, 0xEE));

    /* Taking sections a short struct cannot hold is refused, and the
     * interval goes on (its stall is still unreported). */
    rungs_report_init(&out);
    out.struct_size = to_needs;
    CHECK_EQ(rungs_measurements_take_report(m, RUNGS_REPORT_DETAIL | RUNGS_REPORT_NEEDS, &out),
             RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE_HAS("out->struct_size is 48; expected at least 58 for the sections asked for");
    CHECK_EQ(rungs_measurements_unreported_stalls(m, &stalls), RUNGS_OK);
    CHECK_EQ(stalls, 1);
    CHECK_EQ(rungs_measurements_take_report(m, RUNGS_REPORT_DETAIL, &out), RUNGS_OK);
    CHECK(out.has_detail == 1 && out.detail.stalled_frames == 1);
    CHECK_EQ(rungs_measurements_free(m), RUNGS_OK);
}

static void test_flags_and_sections_are_checked(void) {
    rungs_measurements *m = measured();
    rungs_report r = example_report(), out;
    rungs_report_detail d = example_detail();
    uint8_t buf[RUNGS_REPORT_NEEDS_PAYLOAD_LEN];
    size_t len = 99;
    uint32_t stalls = 0;
    if (!m) return;
    /* rungs_report_init: the size, no sections, nobody waited for. */
    memset(&out, 0x55, sizeof out);
    CHECK_EQ(rungs_report_init(&out), RUNGS_OK);
    CHECK_EQ(out.struct_size, sizeof out);
    CHECK(out.has_worst_rtt == 0 && out.has_detail == 0 && out.has_needs == 0);
    CHECK(out.process_us == 0 && out.detail.frames == 0 && out.needs.reference == 0);
    CHECK_EQ(out.detail.waited_for, RUNGS_NO_SEAT);
    CHECK_EQ(rungs_report_init(NULL), RUNGS_ERR_NULL_POINTER);

    r.has_detail = 2;
    CHECK_EQ(rungs_report_payload_encode(&r, RUNGS_REPORT_LAYOUT_EXTENDED, buf, sizeof buf, &len),
             RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE("rungs_report_payload_encode: report->has_detail is 2; expected 0 or 1");
    r = *with_sections(&r, &d, NULL);
    r.has_detail = 0;
    r.has_needs = 1;
    CHECK_EQ(rungs_timing_machine_execute_report(NULL, 0, &r), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_report_payload_encode(&r, RUNGS_REPORT_LAYOUT_EXTENDED, buf, sizeof buf, &len),
             RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE("rungs_report_payload_encode: report->has_detail is 0; expected 1 when "
                  "report->has_needs is 1: the needs layout carries both");
    CHECK_EQ(len, 99);

    /* The take's sections: known bits, and the needs only with the detail;
     * a refused take ends no interval. */
    rungs_report_init(&out);
    CHECK_EQ(rungs_measurements_take_report(m, RUNGS_REPORT_NEEDS, &out),
             RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE_HAS("sections is 0x2, the needs without the detail; expected the detail too");
    CHECK_EQ(rungs_measurements_take_report(m, 4, &out), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE("rungs_measurements_take_report: sections is 0x4; expected RUNGS_REPORT_DETAIL "
                  "(1), RUNGS_REPORT_NEEDS (2), both, or 0");
    out.struct_size = 0;
    CHECK_EQ(rungs_measurements_take_report(m, 0, &out), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_EQ(rungs_measurements_unreported_stalls(m, &stalls), RUNGS_OK);
    CHECK_EQ(stalls, 1);
    CHECK_EQ(rungs_measurements_free(m), RUNGS_OK);
}

int main(void) {
    test_each_section_combination_travels_whole();
    test_a_short_struct_size_is_read_and_written_only_as_far_as_it_goes();
    test_flags_and_sections_are_checked();
    return harness_report("report");
}
