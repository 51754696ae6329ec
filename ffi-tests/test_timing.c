/* The timing ladder (S2, S6) and rungs_timing_machine (S3-S6) through the C
 * API, including misuse: NULL handles and out-pointers, out-of-range enum
 * values, calls on a poisoned object, re-entry from a callback. */
#include <stdlib.h>

#include "harness.h"
#include "rungs.h"

static rungs_timing T(uint8_t sp, uint8_t la) {
    rungs_timing t;
    t.send_period = sp;
    t.look_ahead = la;
    return t;
}

static void test_ladder(void) {
    rungs_timing t = {0, 0};
    uint32_t owt = 0;
    int32_t cmp = 0;
    uint8_t tier = 99, pos = 0;
    char label[RUNGS_LABEL_CAPACITY];
    size_t len = 0;
    const char *name = NULL;
    rungs_timing a, b;

    CHECK_EQ(rungs_rung_timing(1, &t), RUNGS_OK);
    CHECK(t.send_period == 1 && t.look_ahead == 4);
    CHECK_EQ(rungs_rung_timing(7, &t), RUNGS_OK);
    CHECK(t.send_period == 7 && t.look_ahead == 21);
    CHECK_EQ(rungs_rung_timing(0, &t), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE("rungs_rung_timing: rung is 0; expected 1 to 10");
    CHECK_EQ(rungs_rung_timing(11, &t), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_EQ(rungs_rung_timing(1, NULL), RUNGS_ERR_NULL_POINTER);

    /* S2 worked examples at 30 fps. */
    CHECK_EQ(rungs_one_way_frames(200, 30, &owt), RUNGS_OK);
    CHECK_EQ(owt, 3);
    CHECK_EQ(rungs_one_way_frames_headroom(200, 30, &owt), RUNGS_OK);
    CHECK_EQ(owt, 4);
    CHECK_EQ(rungs_one_way_frames(1400, 30, &owt), RUNGS_OK);
    CHECK_EQ(owt, 21);
    CHECK_EQ(rungs_one_way_frames(200, 0, &owt), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_EQ(rungs_one_way_frames_headroom(200, 0, &owt), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_EQ(rungs_one_way_frames(200, 30, NULL), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_one_way_frames_headroom(200, 30, NULL), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_one_way_frames(0xFFFFFFFFu, 255, &owt), RUNGS_OK); /* no overflow */

    CHECK_EQ(rungs_required_timing(3, &t), RUNGS_OK);
    CHECK(t.send_period == 1 && t.look_ahead == 4);
    CHECK_EQ(rungs_required_timing(4, &t), RUNGS_OK);
    CHECK(t.send_period == 2 && t.look_ahead == 6);
    CHECK_EQ(rungs_required_timing(21, &t), RUNGS_OK);
    CHECK(t.send_period == 10 && t.look_ahead == 40);
    CHECK_EQ(rungs_required_timing(240, &t), RUNGS_OK);
    CHECK(t.send_period == 10 && t.look_ahead == 250);
    CHECK_EQ(rungs_required_timing(100000, &t), RUNGS_OK);
    CHECK(t.send_period == 10 && t.look_ahead == 250);
    CHECK_EQ(rungs_required_timing(5, NULL), RUNGS_ERR_NULL_POINTER);

    a = T(2, 6);
    b = T(1, 4);
    CHECK_EQ(rungs_timing_validate(&a), RUNGS_OK);
    b = T(3, 10);
    CHECK_EQ(rungs_timing_validate(&b), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE("rungs_timing_validate: timing is send_period 3, look_ahead 10; expected "
                  "send_period 1 to 10 and look_ahead a multiple of send_period from "
                  "send_period to 250");
    b = T(0, 0);
    CHECK_EQ(rungs_timing_validate(&b), RUNGS_ERR_INVALID_ARGUMENT);
    b = T(10, 255);
    CHECK_EQ(rungs_timing_validate(&b), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_EQ(rungs_timing_validate(NULL), RUNGS_ERR_NULL_POINTER);

    b = T(1, 4);
    CHECK_EQ(rungs_timing_compare(&a, &b, &cmp), RUNGS_OK);
    CHECK_EQ(cmp, 1);
    CHECK_EQ(rungs_timing_compare(&b, &a, &cmp), RUNGS_OK);
    CHECK_EQ(cmp, -1);
    CHECK_EQ(rungs_timing_compare(&a, &a, &cmp), RUNGS_OK);
    CHECK_EQ(cmp, 0);
    a = T(10, 40);
    b = T(10, 30);
    CHECK_EQ(rungs_timing_compare(&a, &b, &cmp), RUNGS_OK);
    CHECK_EQ(cmp, 1);
    b = T(4, 6);
    cmp = 42;
    CHECK_EQ(rungs_timing_compare(&a, &b, &cmp), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_EQ(cmp, 42); /* nothing written on error */
    CHECK_EQ(rungs_timing_compare(NULL, &a, &cmp), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_timing_compare(&a, NULL, &cmp), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_timing_compare(&a, &a, NULL), RUNGS_ERR_NULL_POINTER);

    a = T(2, 6);
    CHECK_EQ(rungs_timing_tier(&a, &tier), RUNGS_OK);
    CHECK_EQ(tier, RUNGS_TIER_FAST);
    a = T(5, 15);
    CHECK_EQ(rungs_timing_tier(&a, &tier), RUNGS_OK);
    CHECK_EQ(tier, RUNGS_TIER_NORMAL);
    a = T(8, 24);
    CHECK_EQ(rungs_timing_tier(&a, &tier), RUNGS_OK);
    CHECK_EQ(tier, RUNGS_TIER_POOR);
    a = T(9, 27);
    CHECK_EQ(rungs_timing_tier(&a, &tier), RUNGS_OK);
    CHECK_EQ(tier, RUNGS_TIER_BAD);
    a = T(3, 12); /* longer than the rung's look-ahead reads Bad */
    CHECK_EQ(rungs_timing_tier(&a, &tier), RUNGS_OK);
    CHECK_EQ(tier, RUNGS_TIER_BAD);
    CHECK_EQ(rungs_timing_tier(NULL, &tier), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_timing_tier(&a, NULL), RUNGS_ERR_NULL_POINTER);

    a = T(1, 4);
    CHECK_EQ(rungs_timing_slider_position(&a, &pos), RUNGS_OK);
    CHECK_EQ(pos, 10);
    a = T(10, 250);
    CHECK_EQ(rungs_timing_slider_position(&a, &pos), RUNGS_OK);
    CHECK_EQ(pos, 1);
    CHECK_EQ(rungs_timing_slider_position(&a, NULL), RUNGS_ERR_NULL_POINTER);
    b = T(7, 7 * 5 + 1);
    CHECK_EQ(rungs_timing_slider_position(&b, &pos), RUNGS_ERR_INVALID_ARGUMENT);

    a = T(2, 6);
    CHECK_EQ(rungs_timing_label(&a, label, sizeof label, &len), RUNGS_OK);
    CHECK_STR(label, "Fast (rung 2)");
    CHECK_EQ(len, 13);
    a = T(10, 30);
    CHECK_EQ(rungs_timing_label(&a, label, sizeof label, NULL), RUNGS_OK);
    CHECK_STR(label, "Bad (rung 10)");
    memcpy(label, "untouched", 10);
    CHECK_EQ(rungs_timing_label(&a, label, 5, &len), RUNGS_ERR_BUFFER_TOO_SMALL);
    CHECK_STR(label, "untouched");
    CHECK_EQ(len, 13);
    /* NULL with cap 0 is a size query: too small, but the length is given. */
    len = 0;
    CHECK_EQ(rungs_timing_label(&a, NULL, 0, &len), RUNGS_ERR_BUFFER_TOO_SMALL);
    CHECK_EQ(len, 13);
    CHECK_MESSAGE("rungs_timing_label: cap is 0; expected at least 14");
    CHECK_EQ(rungs_timing_label(&a, NULL, 5, &len), RUNGS_ERR_NULL_POINTER);
    CHECK_MESSAGE("rungs_timing_label: buf is NULL but its length is 5; "
                  "expected a valid pointer, or a length of 0");
    CHECK_EQ(rungs_timing_label(NULL, label, sizeof label, &len), RUNGS_ERR_NULL_POINTER);

    CHECK_EQ(rungs_tier_name(RUNGS_TIER_NORMAL, &name), RUNGS_OK);
    CHECK_STR(name, "Normal");
    CHECK_EQ(rungs_tier_name(RUNGS_TIER_BAD, &name), RUNGS_OK);
    CHECK_STR(name, "Bad");
    CHECK_EQ(rungs_tier_name(4, &name), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE("rungs_tier_name: tier is 4; expected 0 to 3");
    CHECK_EQ(rungs_tier_name(255, &name), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_EQ(rungs_tier_name(0, NULL), RUNGS_ERR_NULL_POINTER);
}

/* ---- the machine ---- */

typedef struct {
    int timing_changes, rate_changes, messages, master_changes;
    uint32_t last_frame;
    uint8_t last_sp, last_la, last_fps, last_tier, last_master;
    char last_text[64];
    rungs_timing_machine *self; /* for re-entry tests */
    rungs_result reentry_result, free_result;
} observed_t;

static void on_timing(void *user, uint32_t frame, uint8_t sp, uint8_t la) {
    observed_t *o = user;
    o->timing_changes++;
    o->last_frame = frame;
    o->last_sp = sp;
    o->last_la = la;
    if (o->self) {
        uint8_t fps;
        o->reentry_result = rungs_timing_machine_fps(o->self, &fps);
        o->free_result = rungs_timing_machine_free(o->self);
    }
}

static void on_rate(void *user, uint32_t frame, uint8_t fps) {
    observed_t *o = user;
    o->rate_changes++;
    o->last_frame = frame;
    o->last_fps = fps;
}

static void on_message(void *user, uint32_t frame, uint8_t tier, const char *text) {
    observed_t *o = user;
    o->messages++;
    o->last_frame = frame;
    o->last_tier = tier;
    snprintf(o->last_text, sizeof o->last_text, "%s", text);
}

static void on_master(void *user, uint32_t frame, uint8_t seat) {
    observed_t *o = user;
    o->master_changes++;
    o->last_frame = frame;
    o->last_master = seat;
}

static rungs_timing_machine_config config_for(observed_t *o, uint8_t local) {
    rungs_timing_machine_config c;
    memset(&c, 0, sizeof c);
    c.struct_size = sizeof c;
    c.speed_fps = 30;
    c.seat_count = 3;
    c.local_seat = local;
    c.human_seat_mask = 0x3; /* seats 0 and 1 human, seat 2 AI */
    c.callbacks.user = o;
    c.callbacks.timing_changed = on_timing;
    c.callbacks.frame_rate_changed = on_rate;
    c.callbacks.player_message = on_message;
    c.callbacks.master_changed = on_master;
    return c;
}

static void test_machine_config_validation(void) {
    observed_t o;
    rungs_timing_machine_config c;
    rungs_timing_machine *m = (rungs_timing_machine *)&o; /* must stay untouched on error */
    memset(&o, 0, sizeof o);

    char expected[256];
    c = config_for(&o, 0);
    CHECK_EQ(rungs_timing_machine_new(NULL, &m), RUNGS_ERR_NULL_POINTER);
    CHECK_MESSAGE("rungs_timing_machine_new: config is NULL");
    CHECK_EQ(rungs_timing_machine_new(&c, NULL), RUNGS_ERR_NULL_POINTER);
    CHECK_MESSAGE("rungs_timing_machine_new: out is NULL");
    c.struct_size = 4;
    CHECK_EQ(rungs_timing_machine_new(&c, &m), RUNGS_ERR_INVALID_ARGUMENT);
    snprintf(expected, sizeof expected,
             "rungs_timing_machine_new: config->struct_size is 4; expected at least "
             "sizeof(rungs_timing_machine_config) = %u in this library's rungs.h",
             (unsigned)sizeof c);
    CHECK_MESSAGE_STARTS(expected);
    c = config_for(&o, 0);
    c.speed_fps = 0;
    CHECK_EQ(rungs_timing_machine_new(&c, &m), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE("rungs_timing_machine_new: config->speed_fps is 0; expected 1 to 255");
    c = config_for(&o, 0);
    c.seat_count = 0;
    CHECK_EQ(rungs_timing_machine_new(&c, &m), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE("rungs_timing_machine_new: config->seat_count is 0; expected 1 to 16");
    c = config_for(&o, 0);
    c.seat_count = 17;
    CHECK_EQ(rungs_timing_machine_new(&c, &m), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE("rungs_timing_machine_new: config->seat_count is 17; expected 1 to 16");
    c = config_for(&o, 0);
    c.human_seat_mask = 0;
    CHECK_EQ(rungs_timing_machine_new(&c, &m), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE("rungs_timing_machine_new: config->human_seat_mask is 0; "
                  "expected at least one human seat");
    c = config_for(&o, 0);
    c.human_seat_mask = 0x9; /* bit beyond seat_count */
    CHECK_EQ(rungs_timing_machine_new(&c, &m), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE("rungs_timing_machine_new: config->human_seat_mask is 0x9; expected bits "
                  "only below bit 3, one per seat (config->seat_count is 3)");
    c = config_for(&o, 2); /* an AI seat cannot be local */
    CHECK_EQ(rungs_timing_machine_new(&c, &m), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE("rungs_timing_machine_new: config->local_seat is 2; expected a human seat "
                  "(set in config->human_seat_mask: 0, 1) or RUNGS_NO_SEAT");
    c = config_for(&o, 3); /* beyond seat_count */
    CHECK_EQ(rungs_timing_machine_new(&c, &m), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE_STARTS("rungs_timing_machine_new: config->local_seat is 3;");
    c = config_for(&o, 0);
    c.policy = 2;
    CHECK_EQ(rungs_timing_machine_new(&c, &m), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE("rungs_timing_machine_new: config->policy is 2; expected RUNGS_POLICY_ADAPTIVE (0) or RUNGS_POLICY_TRACKING (1)");
    CHECK(m == (rungs_timing_machine *)&o);
    CHECK_EQ(rungs_timing_machine_free(NULL), RUNGS_OK);

    /* Each policy's report frames: S3's under adaptive (as
     * rungs_is_report_frame), every 16 under tracking. */
    {
        uint8_t policy;
        for (policy = RUNGS_POLICY_ADAPTIVE; policy <= RUNGS_POLICY_TRACKING; policy++) {
            uint32_t frame;
            int32_t report = -1;
            unsigned count = 0, matches_s3 = 1;
            c = config_for(&o, 0);
            c.policy = policy;
            m = NULL;
            CHECK_EQ(rungs_timing_machine_new(&c, &m), RUNGS_OK);
            if (!m) continue;
            for (frame = 0; frame <= 320; frame++) {
                CHECK_EQ(rungs_timing_machine_is_report_frame(m, frame, &report), RUNGS_OK);
                count += (unsigned)report;
                if ((uint8_t)report != rungs_is_report_frame(frame)) matches_s3 = 0;
            }
            if (policy == RUNGS_POLICY_ADAPTIVE) {
                CHECK_EQ(count, 4); /* 32, 64, 192, 320 */
                CHECK_EQ(matches_s3, 1);
            } else {
                CHECK_EQ(count, 20); /* 16, 32, ..., 320 */
                CHECK_EQ(rungs_timing_machine_is_report_frame(m, 48, &report), RUNGS_OK);
                CHECK_EQ(report, 1);
                CHECK_EQ(rungs_timing_machine_is_report_frame(m, 0, &report), RUNGS_OK);
                CHECK_EQ(report, 0);
            }
            CHECK_EQ(rungs_timing_machine_is_report_frame(m, 16, NULL), RUNGS_ERR_NULL_POINTER);
            CHECK_EQ(rungs_timing_machine_free(m), RUNGS_OK);
        }
    }

    /* Reports due: the cadence, and under tracking also the first frame
     * after a stall, at most every 4 frames. */
    {
        uint8_t policy;
        for (policy = RUNGS_POLICY_ADAPTIVE; policy <= RUNGS_POLICY_TRACKING; policy++) {
            uint32_t frame, got[8];
            unsigned n = 0;
            int32_t due = -1;
            c = config_for(&o, 0);
            c.policy = policy;
            m = NULL;
            CHECK_EQ(rungs_timing_machine_new(&c, &m), RUNGS_OK);
            if (!m) continue;
            for (frame = 1; frame <= 40; frame++) {
                /* A stall measured and unreported on frames 5 to 9. */
                uint32_t stalls = (frame >= 5 && frame <= 9) ? 1u : 0u;
                CHECK_EQ(rungs_timing_machine_report_due(m, frame, stalls, &due), RUNGS_OK);
                if (due == 1 && n < 8) got[n++] = frame;
            }
            if (policy == RUNGS_POLICY_ADAPTIVE) {
                CHECK_EQ(n, 1);
                CHECK_EQ(got[0], 32);
            } else {
                CHECK_EQ(n, 4);
                CHECK_EQ(got[0], 5);
                CHECK_EQ(got[1], 9);
                CHECK_EQ(got[2], 16);
                CHECK_EQ(got[3], 32);
            }
            CHECK_EQ(rungs_timing_machine_report_due(m, 41, 1, NULL), RUNGS_ERR_NULL_POINTER);
            CHECK_EQ(rungs_timing_machine_free(m), RUNGS_OK);
        }
    }
}

static void test_machine_null_handles(void) {
    rungs_timing t;
    rungs_timing_event e = {2, 6, 30};
    rungs_report r = basic_report(8000, 0, 50, 1);
    rungs_timing_status s;
    int32_t flag;
    uint32_t u;
    uint8_t b;
    CHECK_EQ(rungs_timing_machine_frame_begin(NULL, 0, &flag), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_timing_machine_queue_command(NULL, 1, 0, 0), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_timing_machine_pop_due(NULL, &flag, NULL, NULL, NULL), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_timing_machine_execute_timing_event(NULL, 0, &e), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_timing_machine_execute_report(NULL, 0, &r), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_timing_machine_execute_removal(NULL, 0), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_timing_machine_frame_end(NULL, &flag, &e), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_timing_machine_is_send_frame(NULL, &flag), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_timing_machine_is_report_frame(NULL, 16, &flag), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_timing_machine_report_due(NULL, 16, 0, &flag), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_timing_machine_command_tag(NULL, &u), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_timing_machine_timing(NULL, &t), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_timing_machine_fps(NULL, &b), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_timing_machine_status(NULL, &s), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_timing_machine_set_speed(NULL, 30), RUNGS_ERR_NULL_POINTER);
}

static void test_machine_game(void) {
    observed_t o;
    rungs_timing_machine_config c;
    rungs_timing_machine *m = NULL;
    rungs_timing_status s;
    rungs_timing t;
    rungs_timing_event e;
    rungs_report r;
    int32_t executes = -1, has = -1, found = -1, send = -1;
    uint32_t tag = 0, frame;
    uint64_t item = 0;
    uint8_t seat = 0, fps = 0;
    char detail[128];

    memset(&o, 0, sizeof o);
    c = config_for(&o, 0);
    CHECK_EQ(rungs_timing_machine_new(&c, &m), RUNGS_OK);
    if (!m) return;

    /* Events outside a frame are refused. */
    rungs_report_init(&r);
    r.process_us = 8000;
    r.max_wait_ms = 0;
    r.worst_rtt_ms = 40;
    r.has_worst_rtt = 1;
    CHECK_EQ(rungs_timing_machine_execute_report(m, 0, &r), RUNGS_ERR_STATE);
    CHECK_EQ(rungs_timing_machine_frame_end(m, &has, &e), RUNGS_ERR_STATE);
    /* Frames start at 0. */
    CHECK_EQ(rungs_timing_machine_frame_begin(m, 1, &executes), RUNGS_ERR_STATE);
    CHECK_EQ(rungs_timing_machine_frame_begin(m, 0, &executes), RUNGS_OK);
    CHECK_EQ(executes, 1);
    CHECK_EQ(o.timing_changes, 1); /* frame 0 announces 2/6 at 30 */
    CHECK(o.last_sp == 2 && o.last_la == 6);
    CHECK_EQ(o.rate_changes, 1);
    CHECK_EQ(o.last_fps, 30);
    CHECK_EQ(rungs_timing_machine_frame_begin(m, 1, &executes), RUNGS_ERR_STATE); /* end it first */
    CHECK_MESSAGE("rungs_timing_machine_frame_begin: frame 0 is still open; "
                  "end it before beginning frame 1");
    CHECK_EQ(rungs_timing_machine_frame_end(m, &has, &e), RUNGS_OK);
    CHECK_EQ(has, 0);
    CHECK_EQ(rungs_timing_machine_frame_begin(m, 5, &executes), RUNGS_ERR_STATE); /* a gap */
    CHECK_MESSAGE("rungs_timing_machine_frame_begin: frame is 5; expected 1 "
                  "(frames run 0, 1, 2, ... without gaps)");

    /* Frames 1..64: every player reports 40 ms on frame 38; the master
     * calibrates on 64 and returns its event. Bad input changes nothing. */
    for (frame = 1; frame <= 64; frame++) {
        CHECK_EQ(rungs_timing_machine_frame_begin(m, frame, &executes), RUNGS_OK);
        if (frame == 38) {
            rungs_report bad = r;
            CHECK_EQ(rungs_timing_machine_execute_report(m, 2, &r), RUNGS_ERR_UNKNOWN_SEAT); /* AI */
            CHECK_EQ(rungs_timing_machine_execute_report(m, 9, &r), RUNGS_ERR_UNKNOWN_SEAT);
            CHECK_EQ(rungs_last_error_message(detail, sizeof detail, NULL), RUNGS_OK);
            CHECK_STR(detail, "rungs_timing_machine_execute_report: seat 9 never was a human seat of "
                              "this game; expected one of the human seats 0, 1");
            CHECK_EQ(rungs_timing_machine_execute_report(m, 0, NULL), RUNGS_ERR_NULL_POINTER);
            bad.has_worst_rtt = 2; /* neither 0 nor 1 */
            CHECK_EQ(rungs_timing_machine_execute_report(m, 0, &bad), RUNGS_ERR_INVALID_ARGUMENT);
            bad.has_worst_rtt = 0;
            CHECK_EQ(rungs_timing_machine_execute_report(m, 0, &bad), RUNGS_OK); /* replaced below */
            CHECK_EQ(rungs_timing_machine_execute_report(m, 0, &r), RUNGS_OK);
            CHECK_EQ(rungs_timing_machine_execute_report(m, 1, &r), RUNGS_OK);
        }
        CHECK_EQ(rungs_timing_machine_frame_end(m, &has, &e), RUNGS_OK);
        if (frame < 64) CHECK_EQ(has, 0);
    }
    CHECK_EQ(has, 1); /* 40 ms at 30 fps with headroom: owt 1 -> 1/4 */
    CHECK(e.send_period == 1 && e.look_ahead == 4 && e.fps == 30);
    CHECK_EQ(rungs_timing_machine_status(m, &s), RUNGS_OK);
    CHECK_EQ(s.frame, 64);
    CHECK(s.target_send_period == 1 && s.target_look_ahead == 4);
    CHECK(s.send_period == 2 && s.look_ahead == 6);
    CHECK_EQ(s.is_master, 1);
    CHECK_EQ(s.master_seat, 0);
    CHECK_EQ(s.calibrating, 0);
    CHECK_EQ(s.last_verdict, RUNGS_VERDICT_CALIBRATED);
    CHECK_EQ(s.tier, RUNGS_TIER_FAST);

    /* Send frame 64: the event goes out tagged 64 + 6 = 70. */
    CHECK_EQ(rungs_timing_machine_is_send_frame(m, &send), RUNGS_OK);
    CHECK_EQ(send, 1);
    CHECK_EQ(rungs_timing_machine_command_tag(m, &tag), RUNGS_OK);
    CHECK_EQ(tag, 70);
    CHECK_EQ(rungs_timing_machine_queue_command(m, tag, 0, 7), RUNGS_OK);
    CHECK_EQ(rungs_timing_machine_queue_command(m, 64, 0, 8), RUNGS_ERR_STATE); /* past */
    CHECK_MESSAGE("rungs_timing_machine_queue_command: tag is 64; expected 65 or later "
                  "(frame 64 already executed its commands)");
    CHECK_EQ(rungs_timing_machine_queue_command(m, 80, 3, 8), RUNGS_ERR_UNKNOWN_SEAT);
    CHECK_MESSAGE("rungs_timing_machine_queue_command: seat 3 is not a seat of this game, "
                  "or it was removed");

    for (frame = 65; frame <= 80; frame++) {
        CHECK_EQ(rungs_timing_machine_frame_begin(m, frame, &executes), RUNGS_OK);
        do {
            CHECK_EQ(rungs_timing_machine_pop_due(m, &found, &item, &tag, &seat), RUNGS_OK);
            if (found) {
                CHECK_EQ(frame, 70);
                CHECK_EQ(item, 7);
                CHECK_EQ(tag, 70);
                CHECK_EQ(seat, 0);
                /* Bad events are refused and change nothing. */
                e.fps = 0;
                CHECK_EQ(rungs_timing_machine_execute_timing_event(m, 0, &e), RUNGS_ERR_INVALID_ARGUMENT);
                e.fps = 30;
                e.look_ahead = 251;
                CHECK_EQ(rungs_timing_machine_execute_timing_event(m, 0, &e), RUNGS_ERR_INVALID_ARGUMENT);
                e.look_ahead = 4;
                CHECK_EQ(rungs_timing_machine_execute_timing_event(m, 2, &e), RUNGS_ERR_UNKNOWN_SEAT);
                CHECK_EQ(rungs_timing_machine_execute_timing_event(m, 0, NULL), RUNGS_ERR_NULL_POINTER);
                CHECK_EQ(rungs_timing_machine_status(m, &s), RUNGS_OK);
                CHECK(s.send_period == 2 && s.look_ahead == 6 && s.has_staged == 0);
                CHECK_EQ(rungs_timing_machine_execute_timing_event(m, 0, &e), RUNGS_OK);
                CHECK_EQ(rungs_timing_machine_status(m, &s), RUNGS_OK);
                CHECK(s.has_staged == 1 && s.staged_send_period == 1 && s.staged_look_ahead == 4);
            }
        } while (found);
        CHECK_EQ(rungs_timing_machine_frame_end(m, NULL, NULL), RUNGS_OK);
    }
    /* Staged decrease: W = 76, activates on 76 as 1/4 (lan_stable.vec). */
    CHECK_EQ(rungs_timing_machine_timing(m, &t), RUNGS_OK);
    CHECK(t.send_period == 1 && t.look_ahead == 4);
    CHECK_EQ(o.last_sp, 1);
    CHECK_EQ(o.messages, 0); /* Fast -> Fast: no message */
    CHECK_EQ(rungs_timing_machine_fps(m, &fps), RUNGS_OK);
    CHECK_EQ(fps, 30);
    CHECK_EQ(rungs_timing_machine_pop_due(m, NULL, NULL, NULL, NULL), RUNGS_ERR_NULL_POINTER);

    /* Frame 81: a slider speed change, a bad one, then master removal hands off. */
    CHECK_EQ(rungs_timing_machine_frame_begin(m, 81, NULL), RUNGS_OK);
    CHECK_EQ(rungs_timing_machine_set_speed(m, 0), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE("rungs_timing_machine_set_speed: speed_fps is 0; expected 1 to 255");
    CHECK_EQ(rungs_timing_machine_set_speed(m, 20), RUNGS_OK);
    CHECK_EQ(rungs_timing_machine_execute_removal(m, 2), RUNGS_ERR_UNKNOWN_SEAT); /* AI never seated */
    CHECK_EQ(rungs_timing_machine_execute_removal(m, 0), RUNGS_OK);
    CHECK_EQ(o.master_changes, 1);
    CHECK_EQ(o.last_master, 1);
    /* Late events are normal play (S3): the same removal issued by another
     * machine, and a report that was in flight, change nothing. */
    CHECK_EQ(rungs_timing_machine_execute_removal(m, 0), RUNGS_OK);
    CHECK_EQ(rungs_timing_machine_execute_report(m, 0, &r), RUNGS_OK);
    CHECK_EQ(o.master_changes, 1); /* no second handoff */
    CHECK_EQ(rungs_timing_machine_execute_removal(m, 2), RUNGS_ERR_UNKNOWN_SEAT); /* still never seated */
    CHECK_EQ(rungs_timing_machine_execute_report(m, 2, &r), RUNGS_ERR_UNKNOWN_SEAT);
    CHECK_EQ(rungs_timing_machine_status(m, &s), RUNGS_OK);
    CHECK_EQ(s.master_seat, 1);
    CHECK_EQ(s.is_master, 0);
    CHECK_EQ(rungs_timing_machine_execute_removal(m, 1), RUNGS_OK);
    CHECK_EQ(o.last_master, RUNGS_NO_SEAT);
    CHECK_EQ(rungs_timing_machine_frame_end(m, &has, NULL), RUNGS_OK);
    CHECK_EQ(has, 0);
    CHECK_EQ(rungs_timing_machine_free(m), RUNGS_OK);
}

static void test_machine_message_and_reentry(void) {
    observed_t o;
    rungs_timing_machine_config c;
    rungs_timing_machine *m = NULL;
    rungs_timing_event e = {3, 9, 30};
    memset(&o, 0, sizeof o);
    c = config_for(&o, 1);
    CHECK_EQ(rungs_timing_machine_new(&c, &m), RUNGS_OK);
    if (!m) return;
    CHECK_EQ(rungs_timing_machine_frame_begin(m, 0, NULL), RUNGS_OK);
    /* A timing event into another tier shows a message (S6). */
    o.self = m;
    CHECK_EQ(rungs_timing_machine_execute_timing_event(m, 0, &e), RUNGS_OK);
    CHECK_EQ(o.messages, 1);
    CHECK_EQ(o.last_tier, RUNGS_TIER_NORMAL);
    CHECK_STR(o.last_text, "Connection quality target: Normal");
    /* The timing_changed callback called back in, and tried to free. */
    CHECK_EQ(o.reentry_result, RUNGS_ERR_REENTRANT);
    CHECK_EQ(o.free_result, RUNGS_ERR_REENTRANT);
    o.self = NULL;
    CHECK_EQ(rungs_timing_machine_frame_end(m, NULL, NULL), RUNGS_OK);
    CHECK_EQ(rungs_timing_machine_free(m), RUNGS_OK);
}

static void test_machine_poisoned(void) {
    observed_t o;
    rungs_timing_machine_config c;
    rungs_timing_machine *m = NULL;
    rungs_timing t;
    memset(&o, 0, sizeof o);
    c = config_for(&o, 0);
    CHECK_EQ(rungs_timing_machine_new(&c, &m), RUNGS_OK);
    if (!m) return;
    rungs_testing_panic_next_call();
    CHECK_EQ(rungs_timing_machine_frame_begin(m, 0, NULL), RUNGS_ERR_PANIC);
    CHECK_EQ(rungs_timing_machine_frame_begin(m, 0, NULL), RUNGS_ERR_POISONED);
    CHECK_EQ(rungs_timing_machine_timing(m, &t), RUNGS_ERR_POISONED);
    CHECK_EQ(rungs_timing_machine_free(m), RUNGS_OK);
}

static void test_observer_never_sends(void) {
    observed_t o;
    rungs_timing_machine_config c;
    rungs_timing_machine *m = NULL;
    rungs_report r = basic_report(8000, 0, 40, 1);
    int32_t has = 0, sends = 0;
    uint32_t frame;
    memset(&o, 0, sizeof o);
    c = config_for(&o, RUNGS_NO_SEAT);
    CHECK_EQ(rungs_timing_machine_new(&c, &m), RUNGS_OK);
    if (!m) return;
    for (frame = 0; frame <= 200; frame++) {
        CHECK_EQ(rungs_timing_machine_frame_begin(m, frame, NULL), RUNGS_OK);
        if (frame == 38) {
            CHECK_EQ(rungs_timing_machine_execute_report(m, 0, &r), RUNGS_OK);
            CHECK_EQ(rungs_timing_machine_execute_report(m, 1, &r), RUNGS_OK);
        }
        CHECK_EQ(rungs_timing_machine_frame_end(m, &has, NULL), RUNGS_OK);
        sends += has;
    }
    CHECK_EQ(sends, 0);
    CHECK_EQ(rungs_timing_machine_free(m), RUNGS_OK);
}

int main(void) {
    test_ladder();
    test_machine_config_validation();
    test_machine_null_handles();
    test_machine_game();
    test_machine_message_and_reentry();
    test_machine_poisoned();
    test_observer_never_sends();
    return harness_report("timing");
}
