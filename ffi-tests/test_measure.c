/* Report measurements (S3) through the C API: the report schedule, each
 * measurement rule, and misuse (NULL handles and out-pointers, bad flags,
 * unknown peers, brackets out of order, a poisoned object). */
#include <stdint.h>

#include "harness.h"
#include "rungs.h"

static rungs_measurements *make(void) {
    rungs_measurements *m = NULL;
    CHECK_EQ(rungs_measurements_new(&m), RUNGS_OK);
    CHECK(m != NULL);
    return m;
}

static void test_report_schedule(void) {
    uint32_t frame;
    uint32_t count = 0;
    for (frame = 0; frame <= 1000; frame++) {
        count += rungs_is_report_frame(frame);
    }
    CHECK_EQ(count, 9); /* 32, 64, 192, 320, 448, 576, 704, 832, 960 */
    CHECK_EQ(rungs_is_report_frame(32), 1);
    CHECK_EQ(rungs_is_report_frame(64), 1);
    CHECK_EQ(rungs_is_report_frame(128), 0);
    CHECK_EQ(rungs_is_report_frame(192), 1);
    CHECK_EQ(rungs_is_report_frame(320), 1);
    CHECK_EQ(rungs_is_report_frame(UINT32_MAX), 0);
}

static void test_processing_time(void) {
    rungs_measurements *m = make();
    rungs_report report;
    rungs_report_init(&report);
    CHECK_EQ(rungs_measurements_add_frame_work_us(m, 10000), RUNGS_OK);
    CHECK_EQ(rungs_measurements_frame_work_begin(m, 1000), RUNGS_OK);
    CHECK_EQ(rungs_measurements_frame_work_end(m, 21001), RUNGS_OK);
    CHECK_EQ(rungs_measurements_take_report(m, 0, &report), RUNGS_OK);
    CHECK_EQ(report.process_us, 15001); /* 15000.5 rounded up */
    /* The next report averages only its own interval. */
    CHECK_EQ(rungs_measurements_add_frame_work_us(m, 4000), RUNGS_OK);
    CHECK_EQ(rungs_measurements_take_report(m, 0, &report), RUNGS_OK);
    CHECK_EQ(report.process_us, 4000);
    CHECK_EQ(rungs_measurements_free(m), RUNGS_OK);
}

static void test_waits_cover_two_intervals(void) {
    rungs_measurements *m = make();
    rungs_report report;
    uint32_t stalls = 99;
    rungs_report_init(&report);
    CHECK_EQ(rungs_measurements_unreported_stalls(m, &stalls), RUNGS_OK);
    CHECK_EQ(stalls, 0);
    CHECK_EQ(rungs_measurements_wait_begin(m, 0), RUNGS_OK);
    CHECK_EQ(rungs_measurements_wait_end(m, 120000), RUNGS_OK);
    CHECK_EQ(rungs_measurements_add_wait_us(m, 50000), RUNGS_OK);
    CHECK_EQ(rungs_measurements_unreported_stalls(m, &stalls), RUNGS_OK);
    CHECK_EQ(stalls, 2);
    CHECK_EQ(rungs_measurements_unreported_stalls(m, NULL), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_measurements_take_report(m, 0, &report), RUNGS_OK);
    CHECK_EQ(rungs_measurements_unreported_stalls(m, &stalls), RUNGS_OK);
    CHECK_EQ(stalls, 0);
    CHECK_EQ(report.max_wait_ms, 120);
    CHECK_EQ(rungs_measurements_take_report(m, 0, &report), RUNGS_OK);
    CHECK_EQ(report.max_wait_ms, 120);
    CHECK_EQ(rungs_measurements_take_report(m, 0, &report), RUNGS_OK);
    CHECK_EQ(report.max_wait_ms, 0);
    CHECK_EQ(rungs_measurements_free(m), RUNGS_OK);
}

static void test_round_trips(void) {
    rungs_measurements *m = make();
    rungs_report report;
    rungs_report_init(&report);
    /* Alone: 0. */
    CHECK_EQ(rungs_measurements_take_report(m, 0, &report), RUNGS_OK);
    CHECK_EQ(report.has_worst_rtt, 1);
    CHECK_EQ(report.worst_rtt_ms, 0);
    /* A peer without a clean sample: none. */
    CHECK_EQ(rungs_measurements_add_peer(m, 1), RUNGS_OK);
    CHECK_EQ(rungs_measurements_add_peer(m, 2), RUNGS_OK);
    CHECK_EQ(rungs_measurements_add_rtt_sample(m, 1, 80, 1), RUNGS_OK);
    CHECK_EQ(rungs_measurements_add_rtt_sample(m, 2, 90, 0), RUNGS_OK);
    CHECK_EQ(rungs_measurements_take_report(m, 0, &report), RUNGS_OK);
    CHECK_EQ(report.has_worst_rtt, 0);
    CHECK_EQ(report.worst_rtt_ms, 0);
    /* Both clean: the worst. */
    CHECK_EQ(rungs_measurements_add_rtt_sample(m, 2, 140, 1), RUNGS_OK);
    CHECK_EQ(rungs_measurements_take_report(m, 0, &report), RUNGS_OK);
    CHECK_EQ(report.has_worst_rtt, 1);
    CHECK_EQ(report.worst_rtt_ms, 140);
    /* Retransmitting (only unclean samples): the last measured value stays. */
    CHECK_EQ(rungs_measurements_add_rtt_sample(m, 2, 1500, 0), RUNGS_OK);
    CHECK_EQ(rungs_measurements_take_report(m, 0, &report), RUNGS_OK);
    CHECK_EQ(report.worst_rtt_ms, 140);
    /* A peer leaves. */
    CHECK_EQ(rungs_measurements_remove_peer(m, 2), RUNGS_OK);
    CHECK_EQ(rungs_measurements_take_report(m, 0, &report), RUNGS_OK);
    CHECK_EQ(report.worst_rtt_ms, 80);
    CHECK_EQ(rungs_measurements_free(m), RUNGS_OK);
}

static void test_misuse(void) {
    rungs_measurements *m = make();
    rungs_report report = basic_report(7, 7, 7, 7);

    /* NULL handle on every method, NULL out-pointers. */
    CHECK_EQ(rungs_measurements_new(NULL), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_measurements_frame_work_begin(NULL, 0), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_measurements_frame_work_end(NULL, 0), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_measurements_add_frame_work_us(NULL, 0), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_measurements_wait_begin(NULL, 0), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_measurements_wait_begin_for(NULL, 0, 1), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_measurements_wait_end(NULL, 0), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_measurements_add_wait_us(NULL, 0), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_measurements_add_peer(NULL, 1), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_measurements_remove_peer(NULL, 1), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_measurements_add_rtt_sample(NULL, 1, 1, 1), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_measurements_take_report(NULL, 0, &report), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_measurements_take_report(m, 0, NULL), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_measurements_free(NULL), RUNGS_OK);

    /* Brackets out of order; a failed end leaves the bracket open. */
    CHECK_EQ(rungs_measurements_frame_work_end(m, 5), RUNGS_ERR_STATE);
    CHECK_EQ(rungs_measurements_frame_work_begin(m, 100), RUNGS_OK);
    CHECK_EQ(rungs_measurements_frame_work_begin(m, 150), RUNGS_ERR_STATE);
    CHECK_EQ(rungs_measurements_frame_work_end(m, 99), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_EQ(rungs_measurements_frame_work_end(m, 400), RUNGS_OK);
    CHECK_EQ(rungs_measurements_wait_end(m, 5), RUNGS_ERR_STATE);
    CHECK_MESSAGE("rungs_measurements_wait_end: not valid now: no wait is open (begin it first)");
    CHECK_EQ(rungs_measurements_wait_begin(m, 10), RUNGS_OK);
    CHECK_EQ(rungs_measurements_wait_begin(m, 11), RUNGS_ERR_STATE);
    CHECK_EQ(rungs_measurements_wait_end(m, 9), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE("rungs_measurements_wait_end: now_us is 9; expected 10 (the wait's begin) or "
                  "later");
    CHECK_EQ(rungs_measurements_wait_end(m, 2010), RUNGS_OK);
    /* A wait for a named seat: a seat or RUNGS_NO_SEAT, nothing else; a
     * refused begin opens nothing. */
    CHECK_EQ(rungs_measurements_wait_begin_for(m, 3000, 200), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE("rungs_measurements_wait_begin_for: seat is 200; expected a seat, 0 to 15, "
                  "or RUNGS_NO_SEAT (255)");
    CHECK_EQ(rungs_measurements_wait_end(m, 3001), RUNGS_ERR_STATE);
    CHECK_EQ(rungs_measurements_wait_begin_for(m, 3000, 4), RUNGS_OK);
    CHECK_EQ(rungs_measurements_wait_begin_for(m, 3001, RUNGS_NO_SEAT), RUNGS_ERR_STATE);
    CHECK_EQ(rungs_measurements_wait_end(m, 3500), RUNGS_OK);

    /* Peers and flags. */
    CHECK_EQ(rungs_measurements_add_peer(m, 4), RUNGS_OK);
    CHECK_EQ(rungs_measurements_add_peer(m, 4), RUNGS_ERR_STATE);
    CHECK_MESSAGE("rungs_measurements_add_peer: not valid now: peer is already measured");
    CHECK_EQ(rungs_measurements_add_peer(m, 16), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE("rungs_measurements_add_peer: peer is 16; expected 0 to 15");
    CHECK_EQ(rungs_measurements_add_peer(m, RUNGS_NO_SEAT), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_EQ(rungs_measurements_remove_peer(m, 5), RUNGS_ERR_UNKNOWN_SEAT);
    CHECK_EQ(rungs_measurements_add_rtt_sample(m, 5, 10, 1), RUNGS_ERR_UNKNOWN_SEAT);
    CHECK_EQ(rungs_measurements_add_rtt_sample(m, 4, 10, 2), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE("rungs_measurements_add_rtt_sample: clean is 2; expected 0 or 1");
    CHECK_EQ(rungs_measurements_add_rtt_sample(m, 4, 30, 1), RUNGS_OK);

    /* Nothing of the misuse leaked into the report. */
    CHECK_EQ(rungs_measurements_take_report(m, 0, &report), RUNGS_OK);
    CHECK_EQ(report.process_us, 300);
    CHECK_EQ(report.max_wait_ms, 2);
    CHECK_EQ(report.worst_rtt_ms, 30);
    CHECK_EQ(rungs_measurements_free(m), RUNGS_OK);
}

static void test_poisoned_object(void) {
    rungs_measurements *m = make();
    rungs_report report;
    rungs_report_init(&report);
    rungs_testing_panic_next_call();
    CHECK_EQ(rungs_measurements_add_frame_work_us(m, 1), RUNGS_ERR_PANIC);
    CHECK_EQ(rungs_measurements_add_frame_work_us(m, 1), RUNGS_ERR_POISONED);
    CHECK_EQ(rungs_measurements_take_report(m, 0, &report), RUNGS_ERR_POISONED);
    CHECK_EQ(rungs_measurements_add_peer(m, 1), RUNGS_ERR_POISONED);
    CHECK_EQ(rungs_measurements_free(m), RUNGS_OK);
}

int main(void) {
    test_report_schedule();
    test_processing_time();
    test_waits_cover_two_intervals();
    test_round_trips();
    test_misuse();
    test_poisoned_object();
    return harness_report("measure");
}
