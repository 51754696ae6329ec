/* rungs_session through the C API: setup validation (IDs, seats, layouts),
 * the frame loop with callbacks, executed events, measurements, and misuse:
 * NULL handles and pointers, unregistered IDs, bad payloads, unknown seats,
 * re-entry from a callback, a poisoned object; late events; every refused
 * configuration with its message; frame readiness through a staged decrease
 * where two consecutive send frames share a tag. */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>

#include "harness.h"
#include "rungs.h"

typedef struct {
    int queued, sends, rates, messages, masters, timings, logs;
    uint8_t last_type;
    uint8_t last_payload[36];
    size_t last_len;
    uint32_t last_tag, last_frame;
    uint8_t last_fps, last_master;
    char last_message[64];
    char last_log[200];
    rungs_session *self;
    rungs_result reentry;
    rungs_result status_inside; /* rungs_session_status from inside on_queue */
    rungs_measurements *lent;   /* the session's lent measurements, if set */
    rungs_result lent_inside;   /* a call on them from inside on_queue */
} seen_t;

static void on_queue(void *user, uint32_t frame, uint8_t type_id, const uint8_t *payload, size_t len) {
    seen_t *s = user;
    s->queued++;
    s->last_frame = frame;
    s->last_type = type_id;
    s->last_len = len;
    if (len <= sizeof s->last_payload) memcpy(s->last_payload, payload, len);
    if (s->self) {
        int32_t e;
        rungs_timing_status st;
        s->reentry = rungs_session_frame_begin(s->self, frame + 1, &e);
        s->status_inside = rungs_session_status(s->self, &st);
    }
    if (s->lent) s->lent_inside = rungs_measurements_add_wait_us(s->lent, 1000);
}
static void on_send(void *user, uint32_t frame, uint32_t tag) {
    seen_t *s = user;
    s->sends++;
    s->last_frame = frame;
    s->last_tag = tag;
}
static void on_rate(void *user, uint32_t frame, uint8_t fps) {
    seen_t *s = user;
    (void)frame;
    s->rates++;
    s->last_fps = fps;
}
static void on_message(void *user, uint32_t frame, uint8_t tier, const char *text) {
    seen_t *s = user;
    (void)frame;
    (void)tier;
    s->messages++;
    snprintf(s->last_message, sizeof s->last_message, "%s", text);
}
static void on_master(void *user, uint32_t frame, uint8_t seat) {
    seen_t *s = user;
    (void)frame;
    s->masters++;
    s->last_master = seat;
}
static void on_timing(void *user, uint32_t frame, uint8_t sp, uint8_t la) {
    seen_t *s = user;
    (void)frame;
    (void)sp;
    (void)la;
    s->timings++;
}
static void on_log(void *user, uint8_t level, const char *text) {
    seen_t *s = user;
    (void)level;
    s->logs++;
    snprintf(s->last_log, sizeof s->last_log, "%s", text);
}

static rungs_session_config config_for(seen_t *seen, uint8_t local) {
    rungs_session_config c;
    memset(&c, 0, sizeof c);
    c.struct_size = sizeof c;
    c.speed_fps = 30;
    c.seat_count = 3;
    c.local_seat = local;
    c.human_seat_mask = 0x3;
    c.report_layout = RUNGS_REPORT_LAYOUT_COMPACT;
    c.timing_event_id = 31;
    c.network_report_event_id = 36;
    c.latency_fudge_event_id = 35;
    c.callbacks.user = seen;
    c.callbacks.queue_event = on_queue;
    c.callbacks.send_frame = on_send;
    c.callbacks.set_frame_rate = on_rate;
    c.callbacks.player_message = on_message;
    c.callbacks.master_changed = on_master;
    c.callbacks.timing_changed = on_timing;
    c.callbacks.log = on_log;
    return c;
}

static void test_setup(void) {
    seen_t seen;
    rungs_session_config c;
    rungs_session *s = NULL;
    memset(&seen, 0, sizeof seen);
    c = config_for(&seen, 0);
    CHECK_EQ(rungs_session_new(NULL, &s), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_session_new(&c, NULL), RUNGS_ERR_NULL_POINTER);
    c.network_report_event_id = 31; /* two roles, one ID */
    CHECK_EQ(rungs_session_new(&c, &s), RUNGS_ERR_INVALID_ARGUMENT);
    c = config_for(&seen, 0);
    c.latency_fudge_event_id = 36;
    CHECK_EQ(rungs_session_new(&c, &s), RUNGS_ERR_INVALID_ARGUMENT);
    c = config_for(&seen, 0);
    c.timing_event_id = 256;
    CHECK_EQ(rungs_session_new(&c, &s), RUNGS_ERR_INVALID_ARGUMENT);
    c = config_for(&seen, 0);
    c.report_layout = 4;
    CHECK_EQ(rungs_session_new(&c, &s), RUNGS_ERR_INVALID_ARGUMENT);
    c = config_for(&seen, 0);
    c.struct_size = 8;
    CHECK_EQ(rungs_session_new(&c, &s), RUNGS_ERR_INVALID_ARGUMENT);
    c = config_for(&seen, 0);
    c.policy = 7;
    CHECK_EQ(rungs_session_new(&c, &s), RUNGS_ERR_INVALID_ARGUMENT);
    c = config_for(&seen, 2); /* AI seat */
    CHECK_EQ(rungs_session_new(&c, &s), RUNGS_ERR_INVALID_ARGUMENT);
    c = config_for(&seen, 0);
    c.speed_fps = 0;
    CHECK_EQ(rungs_session_new(&c, &s), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK(s == NULL);
    c = config_for(&seen, 0);
    c.latency_fudge_event_id = RUNGS_NO_EVENT_ID;
    CHECK_EQ(rungs_session_new(&c, &s), RUNGS_OK);
    CHECK_EQ(rungs_session_free(s), RUNGS_OK);
    CHECK_EQ(rungs_session_free(NULL), RUNGS_OK);
}

static void test_null_handles(void) {
    rungs_measurements *lent_m = NULL;
    int32_t e;
    uint32_t f;
    uint8_t p[5] = {0};
    rungs_timing_status st;
    CHECK_EQ(rungs_session_frame_begin(NULL, 0, &e), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_session_event_executed(NULL, 31, 0, 0, p, 5), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_session_player_removed(NULL, 0), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_session_frame_end(NULL), RUNGS_ERR_NULL_POINTER);
    CHECK_MESSAGE("rungs_session_frame_end: the handle (first argument) is NULL");
    CHECK_EQ(rungs_session_submit_command(NULL, &f), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_session_measurements(NULL, &lent_m), RUNGS_ERR_NULL_POINTER);
    CHECK(lent_m == NULL);
    CHECK_EQ(rungs_session_rtt_sample(NULL, 1, 50, 1), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_session_set_speed(NULL, 30), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_session_status(NULL, &st), RUNGS_ERR_NULL_POINTER);
}

/* The measurements the session lends (rungs_session_measurements), on
 * which the engine measures its frames and waits. */
static rungs_measurements *lent(rungs_session *s) {
    rungs_measurements *m = NULL;
    CHECK_EQ(rungs_session_measurements(s, &m), RUNGS_OK);
    return m;
}

/* Run one frame with no events; returns the executes flag. */
static int plain_frame(rungs_session *s, uint32_t frame) {
    int32_t executes = -1;
    CHECK_EQ(rungs_session_frame_begin(s, frame, &executes), RUNGS_OK);
    CHECK_EQ(rungs_measurements_add_frame_work_us(lent(s), 8000), RUNGS_OK);
    CHECK_EQ(rungs_session_frame_end(s), RUNGS_OK);
    return executes;
}

static void test_frame_loop(void) {
    seen_t seen;
    rungs_session_config c;
    rungs_session *s = NULL;
    rungs_timing_status st;
    uint32_t frame, tag = 0;
    uint8_t timing[5] = {3, 0, 9, 0, 30}; /* wrong order on purpose below */
    uint8_t good_timing[5] = {30, 0, 9, 0, 3}; /* fps 30, MaxAhead 9, FSR 3 */
    uint8_t report_payload[6];
    memset(&seen, 0, sizeof seen);
    c = config_for(&seen, 0);
    CHECK_EQ(rungs_session_new(&c, &s), RUNGS_OK);
    if (!s) return;

    CHECK_EQ(rungs_session_submit_command(s, &tag), RUNGS_OK);
    CHECK_EQ(tag, 6);
    CHECK_EQ(rungs_session_submit_command(s, NULL), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_session_frame_end(s), RUNGS_ERR_STATE);
    CHECK_EQ(plain_frame(s, 0), 1);
    CHECK_EQ(seen.rates, 1);
    CHECK_EQ(seen.last_fps, 30);
    CHECK_EQ(seen.timings, 1);
    CHECK_EQ(seen.sends, 1);
    CHECK_EQ(seen.last_tag, 6);
    CHECK_EQ(rungs_session_submit_command(s, &tag), RUNGS_OK);
    CHECK_EQ(tag, 8); /* after the send on 0, the next send frame is 2 */
    CHECK_EQ(rungs_session_frame_begin(s, 5, NULL), RUNGS_ERR_STATE); /* gap */

    /* Measurements: round trips to the other human (seat 1) only. */
    CHECK_EQ(rungs_session_rtt_sample(s, 1, 80, 1), RUNGS_OK);
    CHECK_EQ(rungs_session_rtt_sample(s, 1, 500, 0), RUNGS_OK); /* retransmitted: ignored */
    CHECK_EQ(rungs_session_rtt_sample(s, 0, 80, 1), RUNGS_ERR_UNKNOWN_SEAT);
    CHECK_EQ(rungs_session_rtt_sample(s, 2, 80, 1), RUNGS_ERR_UNKNOWN_SEAT);
    CHECK_EQ(rungs_session_rtt_sample(s, 1, 80, 2), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_EQ(rungs_measurements_wait_begin(lent(s), 1000), RUNGS_OK);
    CHECK_EQ(rungs_measurements_wait_begin(lent(s), 1000), RUNGS_ERR_STATE);
    CHECK_EQ(rungs_measurements_wait_end(lent(s), 500), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_EQ(rungs_measurements_wait_end(lent(s), 41000), RUNGS_OK); /* 40 ms */
    CHECK_EQ(rungs_measurements_add_wait_us(lent(s), 10000), RUNGS_OK);
    CHECK_EQ(rungs_measurements_frame_work_begin(lent(s), 0), RUNGS_OK);
    CHECK_EQ(rungs_measurements_frame_work_end(lent(s), 9000), RUNGS_OK);
    CHECK_EQ(rungs_measurements_frame_work_end(lent(s), 9000), RUNGS_ERR_STATE);

    for (frame = 1; frame <= 32; frame++) plain_frame(s, frame);
    /* Frame 32: this machine's report was queued as NETWORK_REPORT (ID 36). */
    CHECK_EQ(seen.queued, 1);
    CHECK_EQ(seen.last_type, 36);
    CHECK_EQ(seen.last_len, 6);
    CHECK_EQ(seen.last_payload[2] | (seen.last_payload[3] << 8), 80); /* worst RTT */
    CHECK_EQ(seen.last_payload[4] | (seen.last_payload[5] << 8), 40); /* longest wait */
    memcpy(report_payload, seen.last_payload, sizeof report_payload);

    /* Frame 33 executes no commands (2/6); an event executes anyway as the
     * engine says so - rungs checks frame and content only. */
    CHECK_EQ(rungs_session_frame_begin(s, 33, NULL), RUNGS_OK);
    CHECK_EQ(rungs_session_event_executed(s, 36, 0, 34, report_payload, 6), RUNGS_ERR_STATE);
    CHECK_EQ(rungs_session_event_executed(s, 99, 0, 33, report_payload, 6), RUNGS_ERR_UNREGISTERED_EVENT);
    CHECK(strstr(seen.last_log, "refused") != NULL);
    CHECK_EQ(rungs_session_event_executed(s, 36, 0, 33, report_payload, 5), RUNGS_ERR_MALFORMED);
    CHECK_EQ(rungs_session_event_executed(s, 36, 0, 33, report_payload, 7), RUNGS_ERR_MALFORMED);
    CHECK_EQ(rungs_session_event_executed(s, 36, 2, 33, report_payload, 6), RUNGS_ERR_UNKNOWN_SEAT);
    CHECK_EQ(rungs_session_event_executed(s, 36, 0, 33, NULL, 6), RUNGS_ERR_NULL_POINTER);
    CHECK_MESSAGE("rungs_session_event_executed: payload is NULL but its length is 6; expected a "
                  "valid pointer, or a length of 0");
    /* NULL with length 0 is an empty payload: no report is that short. */
    CHECK_EQ(rungs_session_event_executed(s, 36, 0, 33, NULL, 0), RUNGS_ERR_MALFORMED);
    CHECK_MESSAGE_STARTS("rungs_session_event_executed: NETWORK_REPORT payload of 0 bytes from seat 0 "
                         "is malformed");
    CHECK_EQ(rungs_session_event_executed(s, 31, 0, 33, timing, 5), RUNGS_ERR_MALFORMED);
    CHECK_EQ(rungs_session_status(s, &st), RUNGS_OK);
    CHECK(st.send_period == 2 && st.look_ahead == 6);
    CHECK_EQ(rungs_session_event_executed(s, 35, 0, 33, report_payload, 3), RUNGS_OK); /* LATENCYFUDGE ignored */
    CHECK_EQ(rungs_session_event_executed(s, 36, 0, 33, report_payload, 6), RUNGS_OK);
    CHECK_EQ(rungs_session_event_executed(s, 36, 1, 33, report_payload, 6), RUNGS_OK);
    /* A TIMING event into Normal: immediate increase, message. */
    CHECK_EQ(rungs_session_event_executed(s, 31, 0, 33, good_timing, 5), RUNGS_OK);
    CHECK_EQ(seen.messages, 1);
    CHECK_STR(seen.last_message, "Connection quality target: Normal");
    CHECK_EQ(rungs_session_status(s, &st), RUNGS_OK);
    CHECK(st.send_period == 3 && st.look_ahead == 9 && st.tier == RUNGS_TIER_NORMAL);
    CHECK_EQ(rungs_session_frame_end(s), RUNGS_OK);

    /* Calibration on 64: both players reported 80 ms -> 1/4 with headroom
     * (owt 2); the master queues a TIMING event with its 5-byte layout. */
    seen.queued = 0;
    for (frame = 34; frame <= 64; frame++) plain_frame(s, frame);
    CHECK_EQ(seen.queued, 2); /* report on 64, then the timing event */
    CHECK_EQ(seen.last_type, 31);
    CHECK_EQ(seen.last_len, 5);
    CHECK_EQ(seen.last_payload[0], 30); /* fps */
    CHECK_EQ(seen.last_payload[2], 4);  /* MaxAhead */
    CHECK_EQ(seen.last_payload[4], 1);  /* FrameSendRate */
    CHECK_EQ(rungs_session_status(s, &st), RUNGS_OK);
    CHECK_EQ(st.is_master, 1);
    CHECK_EQ(st.last_verdict, RUNGS_VERDICT_CALIBRATED);

    /* Removal of the master hands over to seat 1. */
    CHECK_EQ(rungs_session_player_removed(s, 0), RUNGS_ERR_STATE); /* between frames */
    CHECK_EQ(rungs_session_frame_begin(s, 65, NULL), RUNGS_OK);
    CHECK_EQ(rungs_session_set_speed(s, 0), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_EQ(rungs_session_set_speed(s, 20), RUNGS_OK);
    CHECK_EQ(rungs_session_player_removed(s, 2), RUNGS_ERR_UNKNOWN_SEAT); /* AI: never human */
    CHECK_EQ(rungs_session_player_removed(s, 0), RUNGS_OK);
    CHECK_EQ(seen.masters, 1);
    CHECK_EQ(seen.last_master, 1);
    CHECK(seen.logs > 0);
    CHECK_EQ(rungs_session_frame_end(s), RUNGS_OK);
    CHECK_EQ(rungs_session_status(NULL, &st), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_session_status(s, NULL), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_session_free(s), RUNGS_OK);
}

static void test_reentry_and_poison(void) {
    seen_t seen;
    rungs_session_config c;
    rungs_session *s = NULL;
    uint32_t frame;
    memset(&seen, 0, sizeof seen);
    c = config_for(&seen, 0);
    CHECK_EQ(rungs_session_new(&c, &s), RUNGS_OK);
    if (!s) return;
    seen.self = s;
    for (frame = 0; frame <= 32; frame++) plain_frame(s, frame);
    CHECK_EQ(seen.queued, 1);
    CHECK_EQ(seen.reentry, RUNGS_ERR_REENTRANT);
    CHECK_EQ(seen.status_inside, RUNGS_OK); /* the status never enters the session */
    seen.self = NULL;
    rungs_testing_panic_next_call();
    CHECK_EQ(rungs_session_frame_begin(s, 33, NULL), RUNGS_ERR_PANIC);
    CHECK_EQ(rungs_session_frame_begin(s, 33, NULL), RUNGS_ERR_POISONED);
    CHECK_EQ(rungs_session_frame_end(s), RUNGS_ERR_POISONED);
    CHECK_EQ(rungs_session_status(s, NULL), RUNGS_ERR_NULL_POINTER);
    {
        rungs_timing_status st;
        CHECK_EQ(rungs_session_status(s, &st), RUNGS_ERR_POISONED);
    }
    CHECK_EQ(rungs_session_free(s), RUNGS_OK);
}

/* The session lends its measurements instead of forwarding their verbs:
 * one handle for the session's life; the engine's frames and waits on it
 * reach the session's reports; what the session does itself (the peers,
 * their round trips, taking the report) and freeing it are refused and
 * change nothing; calls on it go through the session's guard, so they are
 * re-entrant from its callbacks and a panic in one poisons the session. */
static void test_lent_measurements(void) {
    seen_t seen;
    rungs_session_config c;
    rungs_session *s = NULL;
    rungs_measurements *m = NULL, *again = NULL;
    rungs_report r;
    uint32_t frame;
    memset(&seen, 0, sizeof seen);
    c = config_for(&seen, 0);
    c.report_layout = RUNGS_REPORT_LAYOUT_EXTENDED;
    CHECK_EQ(rungs_session_new(&c, &s), RUNGS_OK);
    if (!s) return;
    CHECK_EQ(rungs_session_measurements(s, NULL), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_session_measurements(s, &m), RUNGS_OK);
    CHECK_EQ(rungs_session_measurements(s, &again), RUNGS_OK);
    CHECK(m != NULL && m == again);
    CHECK_EQ(rungs_session_rtt_sample(s, 1, 80, 1), RUNGS_OK);

    /* Refused, changing nothing: the handle stays usable. */
    CHECK_EQ(rungs_measurements_free(m), RUNGS_ERR_STATE);
    CHECK_MESSAGE("rungs_measurements_free: these measurements are lent by a rungs_session and "
                  "are released with it (rungs_session_free); nothing was freed");
    CHECK_EQ(rungs_measurements_add_peer(m, 3), RUNGS_ERR_STATE);
    CHECK_MESSAGE("rungs_measurements_add_peer: these measurements are lent by a rungs_session, "
                  "which adds and removes the peers itself");
    CHECK_EQ(rungs_measurements_remove_peer(m, 1), RUNGS_ERR_STATE);
    CHECK_EQ(rungs_measurements_add_rtt_sample(m, 1, 5000, 1), RUNGS_ERR_STATE);
    CHECK_EQ(rungs_measurements_add_rtt_ticks(m, 1, 300, 60, 0), RUNGS_ERR_STATE);
    rungs_report_init(&r);
    CHECK_EQ(rungs_measurements_take_report(m, 0, &r), RUNGS_ERR_STATE);
    CHECK_MESSAGE_HAS("which takes the reports itself");

    /* The frames' work and a 40 ms wait through the lent handle are in the
     * session's first report (frame 32): 6 ms a frame, 40 ms, and the
     * round trip the session took, not the refused 5000. */
    CHECK_EQ(rungs_measurements_wait_begin_for(m, 1000, 1), RUNGS_OK);
    CHECK_EQ(rungs_measurements_wait_end(m, 41000), RUNGS_OK);
    for (frame = 0; frame <= 32; frame++) {
        CHECK_EQ(rungs_session_frame_begin(s, frame, NULL), RUNGS_OK);
        CHECK_EQ(rungs_measurements_frame_work_begin(m, frame * 10000u), RUNGS_OK);
        CHECK_EQ(rungs_measurements_frame_work_end(m, frame * 10000u + 6000), RUNGS_OK);
        CHECK_EQ(rungs_session_frame_end(s), RUNGS_OK);
    }
    CHECK_EQ(seen.queued, 1);
    CHECK_EQ(seen.last_len, RUNGS_REPORT_EXTENDED_PAYLOAD_LEN);
    rungs_report_init(&r);
    CHECK_EQ(rungs_report_payload_decode(seen.last_payload, seen.last_len, &r), RUNGS_OK);
    CHECK_EQ(r.process_us, 6000);
    CHECK_EQ(r.max_wait_ms, 40);
    CHECK(r.has_worst_rtt == 1 && r.worst_rtt_ms == 80);

    /* From inside a callback of its session: re-entrant, like the session. */
    seen.lent = m;
    seen.lent_inside = -1;
    for (; frame <= 64; frame++) plain_frame(s, frame);
    CHECK_EQ(seen.queued, 2);
    CHECK_EQ(seen.lent_inside, RUNGS_ERR_REENTRANT);
    seen.lent = NULL;

    /* A panic inside a call on the lent handle poisons the session. */
    rungs_testing_panic_next_call();
    CHECK_EQ(rungs_measurements_add_wait_us(m, 1000), RUNGS_ERR_PANIC);
    CHECK_EQ(rungs_measurements_add_wait_us(m, 1000), RUNGS_ERR_POISONED);
    CHECK_EQ(rungs_session_frame_begin(s, frame, NULL), RUNGS_ERR_POISONED);
    CHECK_EQ(rungs_session_free(s), RUNGS_OK);
}

/* A callback reaches its own handle through a user pointer set after
 * rungs_session_new: the config's user was NULL (nothing to point at yet). */
static void test_callbacks_reach_their_handle(void) {
    seen_t seen;
    rungs_session_config c;
    rungs_session *s = NULL;
    uint32_t frame;
    memset(&seen, 0, sizeof seen);
    c = config_for(&seen, 0);
    c.callbacks.user = NULL;
    CHECK_EQ(rungs_session_new(&c, &s), RUNGS_OK);
    if (!s) return;
    CHECK_EQ(rungs_session_set_user(NULL, &seen), RUNGS_ERR_NULL_POINTER);
    seen.self = s;
    seen.status_inside = -1;
    CHECK_EQ(rungs_session_set_user(s, &seen), RUNGS_OK);
    for (frame = 0; frame <= 32; frame++) plain_frame(s, frame);
    CHECK_EQ(seen.queued, 1); /* the callback got &seen, not the config's NULL */
    CHECK_EQ(seen.status_inside, RUNGS_OK);
    CHECK_EQ(seen.reentry, RUNGS_ERR_REENTRANT);
    CHECK_EQ(rungs_session_free(s), RUNGS_OK);
}

/* A UI thread polls the status as fast as it can while the game thread runs
 * its frames: the game thread's calls are never refused (before, they met
 * the poller inside the session and got RUNGS_ERR_BUSY, thousands of times
 * in 200,000 frames), and the poller sees the frames advance. */
typedef struct {
    rungs_session *s;
    pthread_mutex_t lock;
    int done;
    long reads, failures;
    uint32_t last_frame;
} poller_t;

static void *poll_status(void *arg) {
    poller_t *p = arg;
    for (;;) {
        rungs_timing_status st;
        int done;
        pthread_mutex_lock(&p->lock);
        done = p->done;
        pthread_mutex_unlock(&p->lock);
        if (done) break;
        if (rungs_session_status(p->s, &st) == RUNGS_OK) {
            pthread_mutex_lock(&p->lock);
            p->reads++;
            if (st.frame > p->last_frame) p->last_frame = st.frame;
            pthread_mutex_unlock(&p->lock);
        } else {
            p->failures++;
        }
    }
    return NULL;
}

static void test_a_polling_thread_never_makes_the_game_busy(void) {
    seen_t seen;
    rungs_session_config c;
    rungs_session *s = NULL;
    poller_t p;
    pthread_t reader;
    const char *env = getenv("RUNGS_POLL_FRAMES");
    uint32_t frames = env ? (uint32_t)strtoul(env, NULL, 10) : 20000;
    uint32_t frame;
    long busy = 0, other = 0;
    memset(&seen, 0, sizeof seen);
    memset(&p, 0, sizeof p);
    c = config_for(&seen, 0);
    CHECK_EQ(rungs_session_new(&c, &s), RUNGS_OK);
    if (!s) return;
    p.s = s;
    pthread_mutex_init(&p.lock, NULL);
    CHECK_EQ(pthread_create(&reader, NULL, poll_status, &p), 0);
    /* The frames asked for, then more (yielding) until the poller has seen
     * one advance: under valgrind, which runs one thread at a time, the
     * poller may not have been scheduled at all by the end of the first
     * part. The bound only stops a broken poller from hanging the test. */
    for (frame = 0; frame < frames + 1000000; frame++) {
        rungs_result r[3];
        int i, seen_advance;
        if (frame >= frames) {
            pthread_mutex_lock(&p.lock);
            seen_advance = p.reads > 0 && p.last_frame > 0;
            pthread_mutex_unlock(&p.lock);
            if (seen_advance || frames < 2) break;
            sched_yield();
        }
        r[0] = rungs_session_frame_begin(s, frame, NULL);
        r[1] = rungs_measurements_add_frame_work_us(lent(s), 8000);
        r[2] = rungs_session_frame_end(s);
        for (i = 0; i < 3; i++) {
            if (r[i] == RUNGS_ERR_BUSY) busy++;
            else if (r[i] != RUNGS_OK) other++;
        }
    }
    pthread_mutex_lock(&p.lock);
    p.done = 1;
    pthread_mutex_unlock(&p.lock);
    pthread_join(reader, NULL);
    pthread_mutex_destroy(&p.lock);
    CHECK_EQ(busy, 0);
    CHECK_EQ(other, 0);
    CHECK_EQ(p.failures, 0);
    CHECK(p.reads > 0);
    CHECK(frames < 2 || p.last_frame > 0); /* it saw the frames advance */
    if (env) printf("polled status %ld times over %u frames: %ld BUSY\n", p.reads, frames, busy);
    CHECK_EQ(rungs_session_free(s), RUNGS_OK);
}

/* Round trips from rungs' own transport: two endpoints on 127.0.0.1; the
 * session's report says "none" until the link has a clean measurement, then
 * carries the measured round trip. */
static void test_round_trips_from_the_transport(void) {
    static const uint8_t key[16] = {'s', 'e', 's', 's', 'i', 'o', 'n', '-', 'l', 'i', 'n', 'k', 's', '!', '!', '!'};
    seen_t seen;
    rungs_session_config c;
    rungs_session *s = NULL;
    rungs_endpoint_config ec;
    rungs_endpoint *a = NULL, *b = NULL;
    rungs_link_stats stats;
    rungs_timing_status st;
    uint16_t port_a = 0, port_b = 0;
    char address[32];
    uint32_t frame;
    uint64_t start;
    memset(&seen, 0, sizeof seen);
    c = config_for(&seen, 0);
    c.seat_count = 2;
    CHECK_EQ(rungs_session_new(&c, &s), RUNGS_OK);
    rungs_endpoint_config_init(&ec);
    ec.session_id = 7;
    memcpy(ec.key, key, sizeof key);
    ec.bind_address = "127.0.0.1:0";
    ec.local_seat = 0;
    CHECK_EQ(rungs_endpoint_new(&ec, &a), RUNGS_OK);
    ec.local_seat = 1;
    CHECK_EQ(rungs_endpoint_new(&ec, &b), RUNGS_OK);
    if (!s || !a || !b) return;
    rungs_endpoint_local_port(a, &port_a);
    rungs_endpoint_local_port(b, &port_b);
    snprintf(address, sizeof address, "127.0.0.1:%u", (unsigned)port_b);
    CHECK_EQ(rungs_endpoint_add_peer(a, 1, address, now_us()), RUNGS_OK);
    snprintf(address, sizeof address, "127.0.0.1:%u", (unsigned)port_a);
    CHECK_EQ(rungs_endpoint_add_peer(b, 0, address, now_us()), RUNGS_OK);

    CHECK_EQ(rungs_session_sample_links(NULL, a, now_us()), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_session_sample_links(s, NULL, now_us()), RUNGS_ERR_NULL_POINTER);
    CHECK_MESSAGE("rungs_session_sample_links: endpoint is NULL");
    /* No measurement yet: the report on frame 32 says none (0xFFFF). */
    CHECK_EQ(rungs_session_sample_links(s, a, now_us()), RUNGS_OK);
    for (frame = 0; frame <= 32; frame++) plain_frame(s, frame);
    CHECK_EQ(seen.last_type, 36);
    CHECK_EQ(seen.last_payload[2] | (seen.last_payload[3] << 8), 0xFFFF);

    /* One message each way, acknowledged: a clean round trip. */
    CHECK_EQ(rungs_endpoint_send(a, 1, (const uint8_t *)"hello", 5), RUNGS_OK);
    stats.struct_size = sizeof stats;
    stats.rtt_samples = 0;
    start = now_us();
    while (now_us() - start < 3000000u &&
           (rungs_endpoint_link_stats(a, 1, now_us(), &stats) != RUNGS_OK || stats.rtt_samples == 0)) {
        rungs_endpoint_poll(a, now_us());
        rungs_endpoint_poll(b, now_us());
        sleep_ms(1);
    }
    CHECK(stats.rtt_samples > 0);
    CHECK_EQ(rungs_session_sample_links(s, a, now_us()), RUNGS_OK);
    for (frame = 33; frame <= 64; frame++) plain_frame(s, frame);
    /* Frame 64's report carries the measured round trip (loopback: a few ms). */
    CHECK_EQ(seen.last_type, 36);
    CHECK((seen.last_payload[2] | (seen.last_payload[3] << 8)) < 1000);
    /* The endpoint's refusal is this call's, naming the function and the argument. */
    rungs_testing_panic_next_call();
    CHECK_EQ(rungs_endpoint_local_port(a, &port_a), RUNGS_ERR_PANIC);
    CHECK_EQ(rungs_session_sample_links(s, a, now_us()), RUNGS_ERR_POISONED);
    CHECK_MESSAGE_STARTS("rungs_session_sample_links: endpoint: the object was poisoned");
    CHECK_EQ(rungs_session_status(s, &st), RUNGS_OK); /* the session is not poisoned */
    CHECK_EQ(rungs_session_free(s), RUNGS_OK);
    CHECK_EQ(rungs_endpoint_free(a), RUNGS_OK);
    CHECK_EQ(rungs_endpoint_free(b), RUNGS_OK);
}

/* Late events are normal play (S3): a report that executes after its
 * sender's removal and a second removal of the same seat are accepted and
 * change nothing; only a seat that never was a human seat is an error. */
static void test_late_events_are_no_ops(void) {
    seen_t seen;
    rungs_session_config c;
    rungs_session *s = NULL;
    rungs_timing_status before, after;
    uint8_t report_payload[6];
    uint32_t frame;
    memset(&seen, 0, sizeof seen);
    c = config_for(&seen, 1); /* seats 0 and 1 human, 2 AI; we are seat 1 */
    CHECK_EQ(rungs_session_new(&c, &s), RUNGS_OK);
    if (!s) return;
    for (frame = 0; frame <= 32; frame++) plain_frame(s, frame);
    CHECK_EQ(seen.last_type, 36); /* our report of frame 32 */
    memcpy(report_payload, seen.last_payload, sizeof report_payload);

    CHECK_EQ(rungs_session_frame_begin(s, 33, NULL), RUNGS_OK);
    CHECK_EQ(rungs_session_player_removed(s, 0), RUNGS_OK); /* the master leaves */
    CHECK_EQ(seen.masters, 1);
    CHECK_EQ(seen.last_master, 1);
    CHECK_EQ(rungs_session_status(s, &before), RUNGS_OK);

    /* The same removal, issued by another machine: accepted, nothing happens. */
    CHECK_EQ(rungs_session_player_removed(s, 0), RUNGS_OK);
    CHECK_EQ(seen.masters, 1);
    CHECK(strstr(seen.last_log, "already removed") != NULL);
    /* Seat 0's report was in flight when the removal was issued: accepted, ignored. */
    CHECK_EQ(rungs_session_event_executed(s, 36, 0, 33, report_payload, 6), RUNGS_OK);
    CHECK(strstr(seen.last_log, "ignored") != NULL);
    CHECK_EQ(rungs_session_status(s, &after), RUNGS_OK);
    CHECK_EQ(after.master_seat, before.master_seat);
    CHECK_EQ(after.send_period, before.send_period);
    CHECK_EQ(after.look_ahead, before.look_ahead);
    CHECK_EQ(after.qualifying_in_a_row, before.qualifying_in_a_row);

    /* Seat 2 is an AI seat and seat 9 does not exist: never human, an error. */
    CHECK_EQ(rungs_session_player_removed(s, 2), RUNGS_ERR_UNKNOWN_SEAT);
    CHECK_EQ(rungs_session_event_executed(s, 36, 2, 33, report_payload, 6), RUNGS_ERR_UNKNOWN_SEAT);
    CHECK_EQ(rungs_session_player_removed(s, 9), RUNGS_ERR_UNKNOWN_SEAT);
    CHECK_EQ(rungs_session_frame_end(s), RUNGS_OK);

    /* Later frames: still no-ops, and the game goes on. */
    CHECK_EQ(rungs_session_frame_begin(s, 34, NULL), RUNGS_OK);
    CHECK_EQ(rungs_session_player_removed(s, 0), RUNGS_OK);
    CHECK_EQ(rungs_session_event_executed(s, 36, 0, 34, report_payload, 6), RUNGS_OK);
    CHECK_EQ(rungs_session_frame_end(s), RUNGS_OK);
    CHECK_EQ(seen.masters, 1);
    CHECK_EQ(rungs_session_free(s), RUNGS_OK);
}

/* Every configuration that can never work is refused at rungs_session_new,
 * with a message naming the field, what it got and what was expected. */
static void test_refused_configurations(void) {
    seen_t seen;
    rungs_session_config c;
    rungs_session *s = NULL;
    memset(&seen, 0, sizeof seen);

    c = config_for(&seen, 0);
    c.callbacks.queue_event = NULL;
    CHECK_EQ(rungs_session_new(&c, &s), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE_HAS("rungs_session_new: config->callbacks.queue_event is NULL; expected a callback: the session cannot queue reports");
    c = config_for(&seen, 0);
    c.callbacks.send_frame = NULL;
    CHECK_EQ(rungs_session_new(&c, &s), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE_HAS("rungs_session_new: config->callbacks.send_frame is NULL; expected a callback: "
                      "the session cannot send reports or timing events without it");
    c = config_for(&seen, 0);
    c.seat_count = 0;
    CHECK_EQ(rungs_session_new(&c, &s), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE_HAS("rungs_session_new: config->seat_count is 0; expected 1 to 16");
    c = config_for(&seen, 0);
    c.seat_count = 17;
    CHECK_EQ(rungs_session_new(&c, &s), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE_HAS("config->seat_count is 17; expected 1 to 16");
    c = config_for(&seen, 0);
    c.human_seat_mask = 0x9; /* seat 3 of 3 */
    CHECK_EQ(rungs_session_new(&c, &s), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE_HAS("config->human_seat_mask is 0x9; expected bits only below bit 3, one per seat (config->seat_count is 3)");
    c = config_for(&seen, 0);
    c.human_seat_mask = 0;
    c.local_seat = RUNGS_NO_SEAT;
    CHECK_EQ(rungs_session_new(&c, &s), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE_HAS("config->human_seat_mask is 0; expected at least one human seat");
    c = config_for(&seen, 2); /* an AI seat */
    CHECK_EQ(rungs_session_new(&c, &s), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE_HAS("rungs_session_new: config->local_seat is 2; expected a human seat (set in "
                      "config->human_seat_mask: 0, 1) or RUNGS_NO_SEAT");
    c = config_for(&seen, 0);
    c.speed_fps = 0;
    CHECK_EQ(rungs_session_new(&c, &s), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE_HAS("config->speed_fps is 0; expected 1 to 255");
    c = config_for(&seen, 0);
    c.report_layout = 4;
    CHECK_EQ(rungs_session_new(&c, &s), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE_HAS("config->report_layout is 4; expected RUNGS_REPORT_LAYOUT_COMPACT (0), "
                      "RUNGS_REPORT_LAYOUT_EXTENDED (1), RUNGS_REPORT_LAYOUT_DETAILED (2) or "
                      "RUNGS_REPORT_LAYOUT_NEEDS (3)");
    c = config_for(&seen, 0);
    c.timing_event_id = 300;
    CHECK_EQ(rungs_session_new(&c, &s), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE_HAS("config->timing_event_id is 300; expected 0 to 255");
    c = config_for(&seen, 0);
    c.network_report_event_id = 256;
    CHECK_EQ(rungs_session_new(&c, &s), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE_HAS("config->network_report_event_id is 256; expected 0 to 255");
    c = config_for(&seen, 0);
    c.latency_fudge_event_id = 1000;
    CHECK_EQ(rungs_session_new(&c, &s), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE_HAS("config->latency_fudge_event_id is 1000; expected 0 to 255 or RUNGS_NO_EVENT_ID");
    c = config_for(&seen, 0);
    c.network_report_event_id = 31;
    CHECK_EQ(rungs_session_new(&c, &s), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE_HAS("config->network_report_event_id is 31; expected an ID other than config->timing_event_id's");
    c = config_for(&seen, 0);
    c.latency_fudge_event_id = 36;
    CHECK_EQ(rungs_session_new(&c, &s), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE_HAS("config->latency_fudge_event_id is 36; expected an ID other than config->network_report_event_id's");
    c = config_for(&seen, 0);
    c.policy = 2;
    CHECK_EQ(rungs_session_new(&c, &s), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE_HAS("config->policy is 2; expected RUNGS_POLICY_ADAPTIVE (0) or RUNGS_POLICY_TRACKING (1)");
    c = config_for(&seen, 0);
    c.policy = RUNGS_POLICY_TRACKING;
    CHECK_EQ(rungs_session_new(&c, &s), RUNGS_OK);
    CHECK_EQ(rungs_session_free(s), RUNGS_OK);
    s = NULL;
    c = config_for(&seen, 0);
    c.struct_size = 8;
    CHECK_EQ(rungs_session_new(&c, &s), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE_HAS("config->struct_size is 8; expected at least sizeof(rungs_session_config)");
    CHECK_EQ(rungs_session_new(NULL, &s), RUNGS_ERR_NULL_POINTER);
    CHECK_MESSAGE_HAS("rungs_session_new: config is NULL");
    c = config_for(&seen, 0);
    CHECK_EQ(rungs_session_new(&c, NULL), RUNGS_ERR_NULL_POINTER);
    CHECK_MESSAGE_HAS("rungs_session_new: out is NULL");
    CHECK(s == NULL);

    /* An observer follows a recording: it never queues or sends, so it may
     * go without those two callbacks. */
    c = config_for(&seen, 0);
    c.local_seat = RUNGS_NO_SEAT;
    c.callbacks.queue_event = NULL;
    c.callbacks.send_frame = NULL;
    CHECK_EQ(rungs_session_new(&c, &s), RUNGS_OK);
    CHECK_EQ(rungs_session_free(s), RUNGS_OK);
}

/* Refusals after setup name the C function and say what was got and
 * what was expected. */
static void test_messages_name_c_functions(void) {
    seen_t seen;
    rungs_session_config c;
    rungs_session *s = NULL;
    uint8_t payload[6] = {0};
    uint32_t f = 0;
    memset(&seen, 0, sizeof seen);
    c = config_for(&seen, 0);
    CHECK_EQ(rungs_session_new(&c, &s), RUNGS_OK);
    if (!s) return;
    CHECK_EQ(rungs_session_frame_end(s), RUNGS_ERR_STATE);
    CHECK_MESSAGE("rungs_session_frame_end: no frame is running (a frame ends after it begins); "
                  "begin frame 0 first");
    CHECK_EQ(rungs_session_frame_begin(s, 3, NULL), RUNGS_ERR_STATE);
    CHECK_MESSAGE("rungs_session_frame_begin: frame is 3; expected 0 (frames run 0, 1, 2, ... "
                  "without gaps)");
    CHECK_EQ(rungs_session_frame_begin(s, 0, NULL), RUNGS_OK);
    CHECK_EQ(rungs_session_frame_begin(s, 1, NULL), RUNGS_ERR_STATE);
    CHECK_MESSAGE("rungs_session_frame_begin: frame 0 is still open; end it before beginning frame 1");
    CHECK_EQ(rungs_session_event_executed(s, 36, 0, 7, payload, 6), RUNGS_ERR_STATE);
    CHECK_MESSAGE_HAS("rungs_session_event_executed: got frame 7; expected the current frame 0");
    CHECK_EQ(rungs_session_event_executed(s, 99, 0, 0, payload, 6), RUNGS_ERR_UNREGISTERED_EVENT);
    CHECK_MESSAGE("rungs_session_event_executed: type_id 99 is not one of the session's event IDs; "
                  "expected TIMING 31, NETWORK_REPORT 36 or LATENCYFUDGE 35");
    CHECK_EQ(rungs_session_event_executed(s, 36, 0, 0, payload, 4), RUNGS_ERR_MALFORMED);
    CHECK_MESSAGE_HAS("NETWORK_REPORT payload of 4 bytes from seat 0 is malformed");
    CHECK_MESSAGE_HAS("expected 6 bytes");
    CHECK_EQ(rungs_session_event_executed(s, 36, 2, 0, payload, 6), RUNGS_ERR_UNKNOWN_SEAT);
    CHECK_MESSAGE("rungs_session_event_executed: seat 2 never was a human seat of this game; expected "
                  "one of the human seats 0, 1");
    CHECK_EQ(rungs_session_player_removed(s, 5), RUNGS_ERR_UNKNOWN_SEAT);
    CHECK_MESSAGE_HAS("rungs_session_player_removed: seat 5 never was a human seat");
    CHECK_EQ(rungs_session_rtt_sample(s, 0, 10, 1), RUNGS_ERR_UNKNOWN_SEAT);
    CHECK_MESSAGE_HAS("rungs_session_rtt_sample: peer 0 is not measured; expected another human player still in the "
                  "game: 1");
    CHECK_EQ(rungs_session_rtt_sample(s, 1, 10, 7), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE_HAS("clean is 7; expected 0 or 1");
    CHECK_EQ(rungs_measurements_wait_end(lent(s), 10), RUNGS_ERR_STATE);
    CHECK_MESSAGE("rungs_measurements_wait_end: not valid now: no wait is open (begin it first)");
    CHECK_EQ(rungs_measurements_frame_work_begin(lent(s), 10), RUNGS_OK);
    CHECK_EQ(rungs_measurements_frame_work_begin(lent(s), 10), RUNGS_ERR_STATE);
    CHECK_MESSAGE("rungs_measurements_frame_work_begin: not valid now: a frame's work is already open "
                  "(begun, not yet ended)");
    CHECK_EQ(rungs_measurements_frame_work_end(lent(s), 5), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE_HAS("now_us is 5; expected 10 (the frame's begin) or later");
    CHECK_EQ(rungs_session_set_speed(s, 0), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE_HAS("rungs_session_set_speed: speed_fps is 0; expected 1 to 255");
    CHECK_EQ(rungs_session_submit_command(s, NULL), RUNGS_ERR_NULL_POINTER);
    CHECK_MESSAGE_HAS("rungs_session_submit_command: ");
    CHECK_EQ(rungs_session_required_send_frame(s, 5, &f), RUNGS_ERR_STATE);
    CHECK_MESSAGE_HAS("rungs_session_required_send_frame: got frame 5; expected 0 to 0");
    CHECK_EQ(rungs_session_frame_end(s), RUNGS_OK);
    CHECK_EQ(rungs_session_free(s), RUNGS_OK);
}

/* ---- frame readiness: a staged decrease gives two send frames one tag ----
 *
 * Three engines with their own queues and packets run rungs_session. Seat
 * 0's engine drives the timing to 3/9 (frame 10) and then to 2/6 (frame 30):
 * 2/6 executes on 39 under 3/9, W = 48 = A, and send frames 45 (3/9) and 48
 * (2/6) are both tagged 54. Seat 0's order of frame 47 rides in send frame
 * 48's packet, which reaches seat 1 late. With "a packet tagged >= F from
 * every peer", seat 1 runs frame 54 without it and executes the order on 56
 * while the others do on 54; with rungs_session_frame_ready every machine
 * executes it on 54. */

#define RP 3
#define R_FRAMES 100u
#define R_ORDER 1
#define R_MARK 0xAA

typedef struct {
    uint32_t tag, seq;
    uint8_t seat, type, len, data[8];
} r_event_t;

typedef struct {
    uint8_t from, to;
    uint32_t send_frame, tag;
    uint64_t arrives;
    int n;
    r_event_t ev[16];
} r_packet_t;

typedef struct r_world r_world_t;

typedef struct {
    r_world_t *w;
    uint8_t seat;
    rungs_session *s;
    uint32_t next_frame, seq;
    r_event_t out[16], todo[256];
    int n_out, n_todo;
    uint32_t held_sf[RP], held_tag[RP];
    uint32_t sent_frames[128], sent_tags[128];
    int n_sends;
    uint32_t log[512][5]; /* frame, seat, seq, type, mark */
    int n_log;
} r_machine_t;

struct r_world {
    r_machine_t m[RP];
    r_packet_t net[256];
    int n_net;
    uint64_t tick;
};

static void r_issue(r_machine_t *m, uint8_t type, const uint8_t *data, uint8_t len) {
    r_event_t *e = &m->out[m->n_out++];
    memset(e, 0, sizeof *e);
    e->seat = m->seat;
    e->seq = ++m->seq;
    e->type = type;
    e->len = len;
    memcpy(e->data, data, len);
}

static void r_on_queue(void *user, uint32_t frame, uint8_t type_id, const uint8_t *payload, size_t len) {
    (void)frame;
    r_issue(user, type_id, payload, (uint8_t)len);
}

static void r_on_send(void *user, uint32_t send_frame, uint32_t tag) {
    r_machine_t *m = user;
    r_world_t *w = m->w;
    int i, to;
    for (i = 0; i < m->n_out; i++) {
        m->out[i].tag = tag;
        m->todo[m->n_todo++] = m->out[i];
    }
    m->sent_frames[m->n_sends] = send_frame;
    m->sent_tags[m->n_sends++] = tag;
    for (to = 0; to < RP; to++) {
        r_packet_t *p;
        uint64_t behind = 0;
        int k;
        if (to == m->seat) continue;
        for (k = 0; k < w->n_net; k++)
            if (w->net[k].from == m->seat && w->net[k].to == to && w->net[k].arrives > behind)
                behind = w->net[k].arrives; /* links deliver in order */
        p = &w->net[w->n_net++];
        p->from = m->seat;
        p->to = (uint8_t)to;
        p->send_frame = send_frame;
        p->tag = tag;
        p->arrives = w->tick + (m->seat == 0 && to == 1 && send_frame == 48 ? 20 : 1);
        if (p->arrives < behind) p->arrives = behind;
        p->n = m->n_out;
        memcpy(p->ev, m->out, sizeof(r_event_t) * (size_t)m->n_out);
    }
    m->n_out = 0;
}

static int r_ready(r_machine_t *m, int session_rule, uint32_t frame) {
    int p;
    if (session_rule) {
        int32_t ready = -1;
        CHECK_EQ(rungs_session_frame_ready(m->s, frame, m->held_sf, RP, &ready), RUNGS_OK);
        return ready == 1;
    }
    if (frame < 6) return 1; /* the first packet is tagged 6 */
    for (p = 0; p < RP; p++)
        if (p != m->seat && (m->held_tag[p] == RUNGS_NO_FRAME || m->held_tag[p] < frame)) return 0;
    return 1;
}

static void r_step(r_machine_t *m, int session_rule) {
    static const uint8_t to_3_9[5] = {30, 0, 9, 0, 3}, to_2_6[5] = {30, 0, 6, 0, 2}, mark = R_MARK;
    uint32_t frame = m->next_frame;
    int32_t executes = 0;
    if (frame > R_FRAMES || !r_ready(m, session_rule, frame)) return;
    CHECK_EQ(rungs_session_frame_begin(m->s, frame, &executes), RUNGS_OK);
    while (executes) { /* due events in (tag, seat, issue order) */
        int i, best = -1;
        for (i = 0; i < m->n_todo; i++) {
            const r_event_t *e = &m->todo[i], *b = best < 0 ? NULL : &m->todo[best];
            if (e->tag > frame) continue;
            if (!b || e->tag < b->tag || (e->tag == b->tag && (e->seat < b->seat || (e->seat == b->seat && e->seq < b->seq))))
                best = i;
        }
        if (best < 0) break;
        {
            r_event_t e = m->todo[best];
            uint32_t *row = m->log[m->n_log++];
            m->todo[best] = m->todo[--m->n_todo];
            if (e.type != R_ORDER)
                CHECK_EQ(rungs_session_event_executed(m->s, e.type, e.seat, frame, e.data, e.len), RUNGS_OK);
            row[0] = frame;
            row[1] = e.seat;
            row[2] = e.seq;
            row[3] = e.type;
            row[4] = e.data[0];
        }
    }
    if (m->seat == 0 && frame == 10) r_issue(m, 31, to_3_9, 5);
    if (m->seat == 0 && frame == 30) r_issue(m, 31, to_2_6, 5);
    if (m->seat == 0 && frame == 47) r_issue(m, R_ORDER, &mark, 1);
    if (frame % 5 == m->seat) r_issue(m, R_ORDER, &m->seat, 1);
    CHECK_EQ(rungs_session_frame_end(m->s), RUNGS_OK);
    m->next_frame++;
}

/* Play the game; returns 0 when every machine reached R_FRAMES. */
static int r_play(r_world_t *w, int session_rule) {
    int i;
    memset(w, 0, sizeof *w);
    for (i = 0; i < RP; i++) {
        r_machine_t *m = &w->m[i];
        rungs_session_config c;
        int p;
        m->w = w;
        m->seat = (uint8_t)i;
        for (p = 0; p < RP; p++) m->held_sf[p] = m->held_tag[p] = RUNGS_NO_FRAME;
        memset(&c, 0, sizeof c);
        c.struct_size = sizeof c;
        c.speed_fps = 30;
        c.seat_count = RP;
        c.local_seat = (uint8_t)i;
        c.human_seat_mask = (1u << RP) - 1;
        c.report_layout = RUNGS_REPORT_LAYOUT_COMPACT;
        c.timing_event_id = 31;
        c.network_report_event_id = 36;
        c.latency_fudge_event_id = RUNGS_NO_EVENT_ID;
        c.callbacks.user = m;
        c.callbacks.queue_event = r_on_queue;
        c.callbacks.send_frame = r_on_send;
        CHECK_EQ(rungs_session_new(&c, &m->s), RUNGS_OK);
        if (!m->s) return -1;
    }
    for (w->tick = 0; w->tick < 2000; w->tick++) {
        int k = 0, done = 1;
        while (k < w->n_net) {
            r_packet_t *p = &w->net[k];
            if (p->arrives <= w->tick) {
                r_machine_t *to = &w->m[p->to];
                int e;
                for (e = 0; e < p->n; e++) to->todo[to->n_todo++] = p->ev[e];
                to->held_sf[p->from] = p->send_frame;
                to->held_tag[p->from] = p->tag;
                w->net[k] = w->net[--w->n_net];
            } else {
                k++;
            }
        }
        for (i = 0; i < RP; i++) r_step(&w->m[i], session_rule);
        for (i = 0; i < RP; i++) done &= w->m[i].next_frame > R_FRAMES;
        if (done) break;
    }
    for (i = 0; i < RP; i++) rungs_session_free(w->m[i].s);
    return w->tick < 2000 ? 0 : -1;
}

static uint32_t r_marked_order_frame(const r_machine_t *m) {
    int i;
    for (i = 0; i < m->n_log; i++)
        if (m->log[i][1] == 0 && m->log[i][3] == R_ORDER && m->log[i][4] == R_MARK) return m->log[i][0];
    return RUNGS_NO_FRAME;
}

static int r_same_log(const r_machine_t *a, const r_machine_t *b) {
    return a->n_log == b->n_log && memcmp(a->log, b->log, sizeof a->log[0] * (size_t)a->n_log) == 0;
}

static void test_frame_readiness_through_a_staged_decrease(void) {
    static r_world_t w;
    int i, k, shared = 0;
    uint32_t needed = 0;

    /* The naive rule: seat 1 runs the marked order two frames late. */
    CHECK_EQ(r_play(&w, 0), 0);
    for (k = 1; k < w.m[0].n_sends; k++)
        if (w.m[0].sent_frames[k - 1] == 45 && w.m[0].sent_frames[k] == 48)
            shared = w.m[0].sent_tags[k - 1] == 54 && w.m[0].sent_tags[k] == 54;
    CHECK(shared); /* two consecutive send frames, one tag */
    CHECK_EQ(r_marked_order_frame(&w.m[0]), 54);
    CHECK_EQ(r_marked_order_frame(&w.m[2]), 54);
    CHECK_EQ(r_marked_order_frame(&w.m[1]), 56);
    CHECK(!r_same_log(&w.m[0], &w.m[1])); /* a desync */

    /* The session's rule: everyone runs it on 54, and every log matches. */
    CHECK_EQ(r_play(&w, 1), 0);
    for (i = 0; i < RP; i++) CHECK_EQ(r_marked_order_frame(&w.m[i]), 54);
    CHECK(r_same_log(&w.m[0], &w.m[1]));
    CHECK(r_same_log(&w.m[0], &w.m[2]));
    CHECK(w.m[0].n_log > 40);

    /* The call answers the frame directly too: frame 54 needs send frame 48. */
    {
        seen_t seen;
        rungs_session_config c;
        rungs_session *s = NULL;
        static const uint8_t to_3_9[5] = {30, 0, 9, 0, 3}, to_2_6[5] = {30, 0, 6, 0, 2};
        uint32_t frame;
        memset(&seen, 0, sizeof seen);
        c = config_for(&seen, 1);
        CHECK_EQ(rungs_session_new(&c, &s), RUNGS_OK);
        if (!s) return;
        CHECK_EQ(rungs_session_required_send_frame(s, 0, &needed), RUNGS_OK);
        CHECK_EQ(needed, RUNGS_NO_FRAME);
        CHECK_EQ(rungs_session_required_send_frame(s, 0, NULL), RUNGS_ERR_NULL_POINTER);
        for (frame = 0; frame <= 53; frame++) {
            CHECK_EQ(rungs_session_frame_begin(s, frame, NULL), RUNGS_OK);
            if (frame == 16) CHECK_EQ(rungs_session_event_executed(s, 31, 0, frame, to_3_9, 5), RUNGS_OK);
            if (frame == 39) CHECK_EQ(rungs_session_event_executed(s, 31, 0, frame, to_2_6, 5), RUNGS_OK);
            CHECK_EQ(rungs_session_frame_end(s), RUNGS_OK);
        }
        CHECK_EQ(rungs_session_required_send_frame(s, 53, &needed), RUNGS_OK);
        CHECK_EQ(needed, 42); /* 42 + 9 = 51 <= 53 < 45 + 9 */
        CHECK_EQ(rungs_session_required_send_frame(s, 54, &needed), RUNGS_OK);
        CHECK_EQ(needed, 48); /* not 45: 45 and 48 are both tagged 54 */
        {
            uint32_t held[3] = {RUNGS_NO_FRAME, RUNGS_NO_FRAME, 45};
            int32_t ready = -1;
            held[0] = 45; /* seat 0 (a peer) sent 45's packet; 48's is missing */
            CHECK_EQ(rungs_session_frame_ready(s, 54, held, 3, &ready), RUNGS_OK);
            CHECK_EQ(ready, 0);
            held[0] = 48; /* seat 2 is an AI seat: ignored */
            CHECK_EQ(rungs_session_frame_ready(s, 54, held, 3, &ready), RUNGS_OK);
            CHECK_EQ(ready, 1);
            CHECK_EQ(rungs_session_frame_ready(s, 54, held, 2, &ready), RUNGS_ERR_INVALID_ARGUMENT);
            CHECK_MESSAGE_HAS("rungs_session_frame_ready: count is 2; expected config->seat_count 3");
            CHECK_EQ(rungs_session_frame_ready(s, 55, held, 3, &ready), RUNGS_ERR_STATE);
            CHECK_MESSAGE_HAS("got frame 55; expected 0 to 54");
            CHECK_EQ(rungs_session_frame_ready(s, 54, NULL, 3, &ready), RUNGS_ERR_NULL_POINTER);
        }
        CHECK_EQ(rungs_session_free(s), RUNGS_OK);
    }
}

/* Tracking with the detailed layout: reports every 16 frames, 22 bytes,
 * version 2, carrying the stall the engine measured (one wait of 40 ms for
 * seat 1, which the session names when the engine does not: nobody); and a
 * stall is reported on the next frame, at most every 4 frames. */
static void test_tracking_reports_in_the_detailed_layout(void) {
    seen_t seen;
    rungs_session_config c;
    rungs_session *s = NULL;
    uint32_t frame;
    rungs_report decoded;
    rungs_report_detail detail;
    memset(&seen, 0, sizeof seen);
    c = config_for(&seen, 0);
    c.policy = RUNGS_POLICY_TRACKING;
    c.report_layout = RUNGS_REPORT_LAYOUT_DETAILED;
    CHECK_EQ(rungs_session_new(&c, &s), RUNGS_OK);
    if (!s) return;
    CHECK_EQ(rungs_session_rtt_sample(s, 1, 80, 1), RUNGS_OK);
    for (frame = 0; frame <= 15; frame++) plain_frame(s, frame);
    CHECK_EQ(seen.queued, 0);
    CHECK_EQ(rungs_measurements_wait_begin(lent(s), 1000), RUNGS_OK);
    CHECK_EQ(rungs_measurements_wait_end(lent(s), 41000), RUNGS_OK);
    plain_frame(s, 16);
    CHECK_EQ(seen.queued, 1);
    CHECK_EQ(seen.last_type, 36);
    CHECK_EQ(seen.last_len, RUNGS_REPORT_DETAILED_PAYLOAD_LEN);
    CHECK_EQ(seen.last_payload[0], 2);               /* version */
    CHECK_EQ(seen.last_payload[5], 80);              /* worst round trip, ms */
    CHECK_EQ(seen.last_payload[9], 80);              /* median */
    CHECK_EQ(seen.last_payload[15], 17);             /* frames 0..16 */
    CHECK_EQ(seen.last_payload[17], 1);              /* one stalled frame */
    CHECK_EQ(seen.last_payload[19], 40);             /* 40 ms of stall */
    CHECK_EQ(seen.last_payload[21], 0xFF);           /* for nobody named */
    /* Named waits: 10 ms for seat 2, then 30 ms for seat 1: the report
     * names the seat waited for longest in all. They are reported on frame
     * 20, not 17: four frames after the last report at least. */
    CHECK_EQ(rungs_measurements_wait_begin_for(lent(s), 50000, 2), RUNGS_OK);
    CHECK_EQ(rungs_measurements_wait_begin_for(lent(s), 50001, 1), RUNGS_ERR_STATE); /* one is open */
    CHECK_EQ(rungs_measurements_wait_end(lent(s), 60000), RUNGS_OK);
    CHECK_EQ(rungs_measurements_wait_begin_for(lent(s), 70000, 16), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE_HAS("rungs_measurements_wait_begin_for: seat is 16; expected a seat, 0 to 15, or RUNGS_NO_SEAT (255)");
    CHECK_EQ(rungs_measurements_wait_begin_for(lent(s), 70000, 1), RUNGS_OK);
    CHECK_EQ(rungs_measurements_wait_end(lent(s), 100000), RUNGS_OK);
    for (frame = 17; frame <= 19; frame++) plain_frame(s, frame);
    CHECK_EQ(seen.queued, 1);
    plain_frame(s, 20);
    CHECK_EQ(seen.queued, 2);
    CHECK_EQ(seen.last_payload[15], 4);              /* frames 17..20 */
    CHECK_EQ(seen.last_payload[17], 2);              /* two stalled frames */
    CHECK_EQ(seen.last_payload[19], 40);             /* 10 + 30 ms */
    CHECK_EQ(seen.last_payload[21], 1);              /* seat 1, waited for longest */
    for (frame = 21; frame <= 32; frame++) plain_frame(s, frame);
    CHECK_EQ(seen.queued, 3);                        /* the cadence: 32 */
    CHECK_EQ(seen.last_payload[17], 0);              /* the stalls were reported once */
    CHECK_EQ(rungs_measurements_wait_begin_for(lent(s), 110000, RUNGS_NO_SEAT), RUNGS_OK);
    CHECK_EQ(rungs_measurements_wait_end(lent(s), 115000), RUNGS_OK);
    for (frame = 33; frame <= 36; frame++) plain_frame(s, frame);
    CHECK_EQ(seen.queued, 4);
    CHECK_EQ(seen.last_payload[17], 1);
    CHECK_EQ(seen.last_payload[21], 0xFF);           /* RUNGS_NO_SEAT: nobody named */
    for (frame = 37; frame <= 48; frame++) plain_frame(s, frame);
    CHECK_EQ(seen.queued, 5);
    CHECK_EQ(rungs_session_free(s), RUNGS_OK);

    /* The session's bytes decode with the one decoder into a report with
     * its detail section, as the engine of a peer that drives the pieces
     * itself reads them. */
    rungs_report_init(&decoded);
    CHECK_EQ(rungs_report_payload_decode(seen.last_payload, seen.last_len, &decoded), RUNGS_OK);
    CHECK_EQ(decoded.has_detail, 1);
    CHECK_EQ(decoded.has_needs, 0);
    detail = decoded.detail;
    CHECK_EQ(decoded.worst_rtt_ms, seen.last_payload[5] | (seen.last_payload[6] << 8));
    CHECK_EQ(detail.median_rtt_ms, seen.last_payload[9] | (seen.last_payload[10] << 8));
    CHECK_EQ(detail.frames, seen.last_payload[15] | (seen.last_payload[16] << 8));
    CHECK_EQ(detail.stalled_frames, seen.last_payload[17] | (seen.last_payload[18] << 8));
    CHECK_EQ(detail.waited_for, seen.last_payload[21]);
}

/* Tracking with the needs layout: the engine passes each frame's need
 * (rungs_measurements_add_frame_need on the measurements the session lends) and every report carries the interval's:
 * 32 bytes, version 3, the reference the counts are below, the most any
 * frame needed and the four counts; an interval without a need carries
 * reference 0 and zeros. */
static void test_tracking_reports_in_the_needs_layout(void) {
    seen_t seen;
    rungs_session_config c;
    rungs_session *s = NULL;
    uint32_t frame;
    rungs_report decoded;
    rungs_report_detail detail;
    rungs_look_ahead_needs needs;
    uint8_t needed = 0;
    memset(&seen, 0, sizeof seen);
    c = config_for(&seen, 0);
    c.policy = RUNGS_POLICY_TRACKING;
    c.report_layout = RUNGS_REPORT_LAYOUT_NEEDS;
    CHECK_EQ(rungs_session_new(&c, &s), RUNGS_OK);
    if (!s) return;
    CHECK_EQ(rungs_session_rtt_sample(s, 1, 80, 1), RUNGS_OK);
    CHECK_EQ(rungs_measurements_add_frame_need(lent(s), 0, 3), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE_HAS("rungs_measurements_add_frame_need: look_ahead is 0; expected 1 to 250");
    CHECK_EQ(rungs_measurements_add_frame_need(lent(s), 5, 251), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_EQ(rungs_measurements_add_frame_need(NULL, 5, 3), RUNGS_ERR_NULL_POINTER);
    for (frame = 0; frame <= 16; frame++) {
        /* Under 5: ready 2.5 frames early needs 3; frame 10 came 10 ms late. */
        uint64_t deadline = 1000000 + (uint64_t)frame * 33333;
        uint64_t ready = frame == 10 ? deadline + 10000 : deadline - 83333;
        CHECK_EQ(rungs_needed_look_ahead(5, deadline, ready, 33333, &needed), RUNGS_OK);
        CHECK_EQ(needed, frame == 10 ? 6 : 3);
        CHECK_EQ(rungs_measurements_add_frame_need(lent(s), 5, needed), RUNGS_OK);
        plain_frame(s, frame);
    }
    CHECK_EQ(seen.queued, 1);
    CHECK_EQ(seen.last_len, RUNGS_REPORT_NEEDS_PAYLOAD_LEN);
    CHECK_EQ(seen.last_payload[0], 3);               /* version */
    CHECK_EQ(seen.last_payload[5], 80);              /* worst round trip, as detailed */
    CHECK_EQ(seen.last_payload[22], 5);              /* the reference */
    CHECK_EQ(seen.last_payload[23], 6);              /* the most: frame 10's */
    CHECK_EQ(seen.last_payload[24], 1);              /* above 5: frame 10 */
    CHECK_EQ(seen.last_payload[26], 1);              /* above 4 */
    CHECK_EQ(seen.last_payload[28], 1);              /* above 3 */
    CHECK_EQ(seen.last_payload[30], 17);             /* above 2: every frame, 0..16 */
    rungs_report_init(&decoded);
    CHECK_EQ(rungs_report_payload_decode(seen.last_payload, seen.last_len, &decoded), RUNGS_OK);
    CHECK(decoded.has_detail == 1 && decoded.has_needs == 1);
    detail = decoded.detail;
    needs = decoded.needs;
    CHECK_EQ(needs.reference, 5);
    CHECK_EQ(needs.most, 6);
    CHECK_EQ(needs.above[3], 17);
    CHECK_EQ(detail.frames, 17);
    /* No need passed in the next interval: reference 0, zeros. */
    for (frame = 17; frame <= 32; frame++) plain_frame(s, frame);
    CHECK_EQ(seen.queued, 2);
    CHECK_EQ(seen.last_len, RUNGS_REPORT_NEEDS_PAYLOAD_LEN);
    CHECK_EQ(seen.last_payload[22], 0);
    CHECK_EQ(seen.last_payload[31], 0);
    rungs_report_init(&decoded);
    CHECK_EQ(rungs_report_payload_decode(seen.last_payload, seen.last_len, &decoded), RUNGS_OK);
    CHECK(decoded.has_detail == 1 && decoded.has_needs == 1);
    detail = decoded.detail;
    needs = decoded.needs;
    CHECK_EQ(needs.reference, 0);
    CHECK_EQ(rungs_session_free(s), RUNGS_OK);
}

int main(void) {

    test_setup();
    test_null_handles();
    test_frame_loop();
    test_reentry_and_poison();
    test_callbacks_reach_their_handle();
    test_lent_measurements();
    test_a_polling_thread_never_makes_the_game_busy();
    test_late_events_are_no_ops();
    test_refused_configurations();
    test_messages_name_c_functions();
    test_frame_readiness_through_a_staged_decrease();
    test_round_trips_from_the_transport();
    test_tracking_reports_in_the_detailed_layout();
    test_tracking_reports_in_the_needs_layout();
    return harness_report("session");
}
