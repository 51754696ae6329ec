/* Clock synchronisation and frame pacing (S9) through the C API: offset
 * estimation with the outlier filter, slewing, the pacer's deadlines, and
 * misuse (NULL handles and out-pointers, bad configs, out-of-order calls,
 * poisoned objects). */
#include <stdint.h>

#include "harness.h"
#include "rungs.h"

static rungs_clock_config clock_config(void) {
    rungs_clock_config config;
    config.struct_size = sizeof config;
    config.sample_window = RUNGS_CLOCK_DEFAULT_SAMPLE_WINDOW;
    config.max_slew_ppm = RUNGS_CLOCK_DEFAULT_MAX_SLEW_PPM;
    return config;
}

static rungs_pacer_config pacer_config(uint8_t fps, int64_t start_us) {
    rungs_pacer_config config;
    memset(&config, 0, sizeof config);
    config.struct_size = sizeof config;
    config.reference_frame = 0;
    config.reference_start_us = start_us;
    config.max_nudge_permille = RUNGS_PACER_DEFAULT_MAX_NUDGE_PERMILLE;
    config.fps = fps;
    return config;
}

/* An exchange at local time `at` with the reference `offset` ahead, the
 * given one-way delays and 100 us of holding time. */
static rungs_clock_sample exchange(int64_t at, int64_t offset, int64_t there, int64_t back) {
    rungs_clock_sample s;
    s.t0 = at;
    s.t1 = at + there + offset;
    s.t2 = s.t1 + 100;
    s.t3 = s.t2 - offset + back;
    return s;
}

static void test_offset_filter_drops_a_retransmitted_sample(void) {
    rungs_clock_config config = clock_config();
    rungs_clock *clock = NULL;
    rungs_clock_sample s;
    rungs_offset_estimate estimate;
    int64_t reference = 0;
    CHECK_EQ(rungs_clock_new(&config, &clock), RUNGS_OK);

    s = exchange(0, 1500000, 20000, 20000);
    CHECK_EQ(rungs_clock_add_sample(clock, &s, s.t3), RUNGS_OK);
    s = exchange(500000, 1500000, 20400, 20000);
    CHECK_EQ(rungs_clock_add_sample(clock, &s, s.t3), RUNGS_OK);
    s = exchange(1000000, 1500000, 20000, 220000); /* 200 ms late one way */
    CHECK_EQ(rungs_clock_add_sample(clock, &s, s.t3), RUNGS_OK);
    s = exchange(1500000, 1500000, 20000, 20400);
    CHECK_EQ(rungs_clock_add_sample(clock, &s, s.t3), RUNGS_OK);

    CHECK_EQ(rungs_clock_estimate(clock, &estimate), RUNGS_OK);
    CHECK_EQ(estimate.samples_held, 4);
    CHECK_EQ(estimate.samples_kept, 3);
    CHECK_EQ(estimate.offset_us, 1500000);
    /* Not yet read: the estimate applied at once. */
    CHECK_EQ(rungs_clock_reference_time(clock, 2000000, &reference), RUNGS_OK);
    CHECK_EQ(reference, 3500000);
    CHECK_EQ(rungs_clock_free(clock), RUNGS_OK);
}

static void test_clock_slews_and_never_runs_backwards(void) {
    rungs_clock_config config = clock_config();
    rungs_clock *clock = NULL;
    rungs_clock_sample s;
    int64_t reference = 0;
    int64_t previous;
    int64_t local;
    int backwards = 0;
    int failures = 0;
    config.sample_window = 1; /* follow the latest sample only */
    CHECK_EQ(rungs_clock_new(&config, &clock), RUNGS_OK);
    s = exchange(0, 1000000, 10000, 10000);
    CHECK_EQ(rungs_clock_add_sample(clock, &s, s.t3), RUNGS_OK);
    CHECK_EQ(rungs_clock_reference_time(clock, 100000, &previous), RUNGS_OK);
    CHECK_EQ(previous, 1100000);
    /* The reference is suddenly 50 ms *behind* the estimate: slewed at 5 %. */
    s = exchange(100000, 950000, 10000, 10000);
    CHECK_EQ(rungs_clock_add_sample(clock, &s, 120100), RUNGS_OK);
    for (local = 120100; local <= 2120100; local += 1000) {
        failures += rungs_clock_reference_time(clock, local, &reference) != RUNGS_OK;
        backwards += reference < previous;
        previous = reference;
    }
    CHECK_EQ(failures, 0);
    CHECK_EQ(backwards, 0);
    /* 50 ms at 5 % takes 1 s of local time; after 2 s it is done. */
    CHECK_EQ(reference, 2120100 + 950000);
    CHECK_EQ(rungs_clock_free(clock), RUNGS_OK);
}

static void test_clock_misuse(void) {
    rungs_clock_config config = clock_config();
    rungs_clock *clock = NULL;
    rungs_clock_sample s = exchange(0, 0, 1000, 1000);
    rungs_clock_sample backwards = {100, 0, 0, 99};
    rungs_offset_estimate estimate;
    int64_t reference = 42;

    CHECK_EQ(rungs_clock_new(NULL, &clock), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_clock_new(&config, NULL), RUNGS_ERR_NULL_POINTER);
    config.struct_size = 4;
    CHECK_EQ(rungs_clock_new(&config, &clock), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE_STARTS("rungs_clock_new: config->struct_size is 4; expected at least ");
    config = clock_config();
    config.sample_window = RUNGS_CLOCK_MAX_SAMPLE_WINDOW + 1;
    CHECK_EQ(rungs_clock_new(&config, &clock), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE("rungs_clock_new: config->sample_window is 65; expected 0 to 64");
    config = clock_config();
    config.max_slew_ppm = RUNGS_CLOCK_MAX_SLEW_PPM + 1;
    CHECK_EQ(rungs_clock_new(&config, &clock), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE("rungs_clock_new: config->max_slew_ppm is 500001; expected 0 to 500000");
    CHECK(clock == NULL);

    config = clock_config();
    CHECK_EQ(rungs_clock_new(&config, &clock), RUNGS_OK);
    /* Before any sample. */
    CHECK_EQ(rungs_clock_estimate(clock, &estimate), RUNGS_ERR_STATE);
    CHECK_EQ(rungs_clock_reference_time(clock, 0, &reference), RUNGS_ERR_STATE);
    CHECK_EQ(reference, 42);
    /* NULL handle and out-pointers. */
    CHECK_EQ(rungs_clock_add_sample(NULL, &s, 0), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_clock_add_sample(clock, NULL, 0), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_clock_estimate(NULL, &estimate), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_clock_estimate(clock, NULL), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_clock_reference_time(NULL, 0, &reference), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_clock_reference_time(clock, 0, NULL), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_clock_free(NULL), RUNGS_OK);
    /* Contradictory timestamps, local time going backwards. */
    CHECK_EQ(rungs_clock_add_sample(clock, &backwards, 200), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_EQ(rungs_clock_add_sample(clock, &s, 5000), RUNGS_OK);
    CHECK_EQ(rungs_clock_add_sample(clock, &s, 4999), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_EQ(rungs_clock_estimate(clock, &estimate), RUNGS_OK);
    CHECK_EQ(estimate.samples_held, 1);
    CHECK_EQ(rungs_clock_reference_time(clock, 4000, &reference), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_EQ(reference, 42);

    /* A panic poisons the object; only free still works. */
    rungs_testing_panic_next_call();
    CHECK_EQ(rungs_clock_reference_time(clock, 6000, &reference), RUNGS_ERR_PANIC);
    CHECK_EQ(rungs_clock_reference_time(clock, 6000, &reference), RUNGS_ERR_POISONED);
    CHECK_EQ(rungs_clock_add_sample(clock, &s, 7000), RUNGS_ERR_POISONED);
    CHECK_EQ(rungs_clock_estimate(clock, &estimate), RUNGS_ERR_POISONED);
    CHECK_EQ(reference, 42);
    CHECK_EQ(rungs_clock_free(clock), RUNGS_OK);
}

static void test_pacer_deadlines(void) {
    rungs_pacer_config config = pacer_config(20, 1000000);
    rungs_pacer *pacer = NULL;
    uint32_t frame = 0;
    int64_t due = 0;
    int64_t ideal = 0;
    CHECK_EQ(rungs_pacer_new(&config, &pacer), RUNGS_OK);
    CHECK_EQ(rungs_pacer_next_frame_due(pacer, &frame, &due), RUNGS_OK);
    CHECK_EQ(frame, 0);
    CHECK_EQ(due, 1000000);
    /* Frame 0 starts 40 ms late: frame 1 comes 5 ms early (10 % of 50 ms). */
    CHECK_EQ(rungs_pacer_frame_started(pacer, 0, 1040000), RUNGS_OK);
    CHECK_EQ(rungs_pacer_next_frame_due(pacer, &frame, &due), RUNGS_OK);
    CHECK_EQ(frame, 1);
    CHECK_EQ(due, 1085000);
    /* A faster rate from the running frame keeps the deadline given. */
    CHECK_EQ(rungs_pacer_set_fps(pacer, 40, 0), RUNGS_OK);
    CHECK_EQ(rungs_pacer_next_frame_due(pacer, &frame, &due), RUNGS_OK);
    CHECK_EQ(due, 1085000);
    CHECK_EQ(rungs_pacer_ideal_start(pacer, 40, &ideal), RUNGS_OK);
    CHECK_EQ(ideal, 2000000); /* 40 frames at 40 fps */
    /* A reference point from the master moves the schedule. */
    CHECK_EQ(rungs_pacer_set_reference(pacer, 100, 5000000), RUNGS_OK);
    CHECK_EQ(rungs_pacer_ideal_start(pacer, 140, &ideal), RUNGS_OK);
    CHECK_EQ(ideal, 6000000);
    CHECK_EQ(rungs_pacer_free(pacer), RUNGS_OK);
}

static void test_pacer_misuse(void) {
    rungs_pacer_config config = pacer_config(30, 0);
    rungs_pacer *pacer = NULL;
    uint32_t frame = 77;
    int64_t due = 77;

    CHECK_EQ(rungs_pacer_new(NULL, &pacer), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_pacer_new(&config, NULL), RUNGS_ERR_NULL_POINTER);
    config.struct_size = sizeof config - 4; /* an older, smaller struct */
    CHECK_EQ(rungs_pacer_new(&config, &pacer), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE_STARTS("rungs_pacer_new: config->struct_size is ");
    config = pacer_config(0, 0);
    CHECK_EQ(rungs_pacer_new(&config, &pacer), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE("rungs_pacer_new: config->fps is 0; expected 1 to 255");
    config = pacer_config(30, 0);
    config.max_nudge_permille = RUNGS_PACER_MAX_NUDGE_PERMILLE + 1;
    CHECK_EQ(rungs_pacer_new(&config, &pacer), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE("rungs_pacer_new: config->max_nudge_permille is 501; expected 0 to 500");
    CHECK(pacer == NULL);

    config = pacer_config(30, 0);
    CHECK_EQ(rungs_pacer_new(&config, &pacer), RUNGS_OK);
    CHECK_EQ(rungs_pacer_next_frame_due(NULL, &frame, &due), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_pacer_next_frame_due(pacer, NULL, &due), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_pacer_next_frame_due(pacer, &frame, NULL), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(frame, 77);
    CHECK_EQ(due, 77);
    CHECK_EQ(rungs_pacer_frame_started(NULL, 0, 0), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_pacer_set_fps(NULL, 30, 0), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_pacer_set_reference(NULL, 0, 0), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_pacer_ideal_start(NULL, 0, &due), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_pacer_ideal_start(pacer, 0, NULL), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_pacer_free(NULL), RUNGS_OK);

    /* Out of order and out of range. */
    CHECK_EQ(rungs_pacer_frame_started(pacer, 0, 0), RUNGS_OK);
    CHECK_EQ(rungs_pacer_frame_started(pacer, 2, 1), RUNGS_ERR_STATE);
    CHECK_MESSAGE("rungs_pacer_frame_started: frame is 2; expected 1 (the frame after 0)");
    CHECK_EQ(rungs_pacer_frame_started(pacer, 0, 1), RUNGS_ERR_STATE);
    CHECK_EQ(rungs_pacer_set_fps(pacer, 0, 1), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE("rungs_pacer_set_fps: fps is 0; expected 1 to 255");
    CHECK_EQ(rungs_pacer_set_fps(pacer, 20, 2), RUNGS_ERR_STATE); /* ahead of time */
    CHECK_EQ(rungs_pacer_set_fps(pacer, 20, 1), RUNGS_OK);
    CHECK_EQ(rungs_pacer_set_fps(pacer, 25, 0), RUNGS_ERR_STATE); /* older than 1 */
    CHECK_EQ(rungs_pacer_set_reference(pacer, 0, 5), RUNGS_ERR_STATE);
    CHECK_EQ(rungs_pacer_next_frame_due(pacer, &frame, &due), RUNGS_OK);
    CHECK_EQ(frame, 1);
    CHECK_EQ(due, 33333);

    /* A panic poisons the object; only free still works. */
    rungs_testing_panic_next_call();
    CHECK_EQ(rungs_pacer_frame_started(pacer, 1, 33333), RUNGS_ERR_PANIC);
    CHECK_EQ(rungs_pacer_frame_started(pacer, 1, 33333), RUNGS_ERR_POISONED);
    CHECK_EQ(rungs_pacer_next_frame_due(pacer, &frame, &due), RUNGS_ERR_POISONED);
    CHECK_EQ(rungs_pacer_set_fps(pacer, 30, 1), RUNGS_ERR_POISONED);
    CHECK_EQ(rungs_pacer_set_reference(pacer, 1, 0), RUNGS_ERR_POISONED);
    CHECK_EQ(rungs_pacer_ideal_start(pacer, 1, &due), RUNGS_ERR_POISONED);
    CHECK_EQ(rungs_pacer_free(pacer), RUNGS_OK);
}

/* Every config has an _init that writes its real defaults; for the clock a
 * zeroed config means the same defaults, so both make the same clock. */
static void test_config_init_writes_the_defaults(void) {
    rungs_clock_config config, zeroed;
    rungs_pacer_config pacer;
    rungs_clock *clock = NULL;
    rungs_pacer *p = NULL;
    CHECK_EQ(rungs_clock_config_init(NULL), RUNGS_ERR_NULL_POINTER);
    memset(&config, 0xAB, sizeof config);
    CHECK_EQ(rungs_clock_config_init(&config), RUNGS_OK);
    CHECK_EQ(config.struct_size, sizeof config);
    CHECK_EQ(config.sample_window, RUNGS_CLOCK_DEFAULT_SAMPLE_WINDOW);
    CHECK_EQ(config.max_slew_ppm, RUNGS_CLOCK_DEFAULT_MAX_SLEW_PPM);
    CHECK_EQ(rungs_clock_new(&config, &clock), RUNGS_OK);
    CHECK_EQ(rungs_clock_free(clock), RUNGS_OK);
    memset(&zeroed, 0, sizeof zeroed);
    zeroed.struct_size = sizeof zeroed;
    clock = NULL;
    CHECK_EQ(rungs_clock_new(&zeroed, &clock), RUNGS_OK); /* 0: the defaults */
    CHECK_EQ(rungs_clock_free(clock), RUNGS_OK);

    memset(&pacer, 0xAB, sizeof pacer);
    CHECK_EQ(rungs_pacer_config_init(&pacer), RUNGS_OK);
    CHECK_EQ(pacer.struct_size, sizeof pacer);
    CHECK_EQ(pacer.max_nudge_permille, RUNGS_PACER_DEFAULT_MAX_NUDGE_PERMILLE);
    CHECK_EQ(pacer.reference_frame, 0);
    CHECK_EQ(pacer.reference_start_us, 0);
    CHECK_EQ(rungs_pacer_new(&pacer, &p), RUNGS_ERR_INVALID_ARGUMENT); /* fps is yours to set */
    CHECK_MESSAGE_HAS("config->fps is 0");
    pacer.fps = 30;
    CHECK_EQ(rungs_pacer_new(&pacer, &p), RUNGS_OK);
    CHECK_EQ(rungs_pacer_free(p), RUNGS_OK);
}

int main(void) {
    test_offset_filter_drops_a_retransmitted_sample();
    test_clock_slews_and_never_runs_backwards();
    test_clock_misuse();
    test_pacer_deadlines();
    test_pacer_misuse();
    test_config_init_writes_the_defaults();
    return harness_report("clock");
}
