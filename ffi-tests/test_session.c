/* rungs_session through the C API: setup validation (IDs, seats, layouts),
 * the frame loop with callbacks, executed events, measurements, and misuse:
 * NULL handles and pointers, unregistered IDs, bad payloads, unknown seats,
 * re-entry from a callback, a poisoned object. */
#define _POSIX_C_SOURCE 200809L

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
        s->reentry = rungs_session_frame_begin(s->self, frame + 1, &e);
    }
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
    c.report_layout = 2;
    CHECK_EQ(rungs_session_new(&c, &s), RUNGS_ERR_INVALID_ARGUMENT);
    c = config_for(&seen, 0);
    c.struct_size = 8;
    CHECK_EQ(rungs_session_new(&c, &s), RUNGS_ERR_INVALID_ARGUMENT);
    c = config_for(&seen, 0);
    c.reserved = 7;
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
    int32_t e;
    uint32_t f;
    uint8_t p[5] = {0};
    rungs_timing_status st;
    CHECK_EQ(rungs_session_frame_begin(NULL, 0, &e), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_session_event_executed(NULL, 31, 0, 0, p, 5), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_session_player_removed(NULL, 0), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_session_frame_end(NULL), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_session_submit_command(NULL, &f), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_session_frame_work_begin(NULL, 0), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_session_frame_work_end(NULL, 0), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_session_add_frame_work_us(NULL, 0), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_session_wait_begin(NULL, 0), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_session_wait_end(NULL, 0), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_session_add_wait_us(NULL, 0), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_session_rtt_sample(NULL, 1, 50, 1), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_session_set_speed(NULL, 30), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_session_status(NULL, &st), RUNGS_ERR_NULL_POINTER);
}

/* Run one frame with no events; returns the executes flag. */
static int plain_frame(rungs_session *s, uint32_t frame) {
    int32_t executes = -1;
    CHECK_EQ(rungs_session_frame_begin(s, frame, &executes), RUNGS_OK);
    CHECK_EQ(rungs_session_add_frame_work_us(s, 8000), RUNGS_OK);
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
    CHECK_EQ(rungs_session_wait_begin(s, 1000), RUNGS_OK);
    CHECK_EQ(rungs_session_wait_begin(s, 1000), RUNGS_ERR_STATE);
    CHECK_EQ(rungs_session_wait_end(s, 500), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_EQ(rungs_session_wait_end(s, 41000), RUNGS_OK); /* 40 ms */
    CHECK_EQ(rungs_session_add_wait_us(s, 10000), RUNGS_OK);
    CHECK_EQ(rungs_session_frame_work_begin(s, 0), RUNGS_OK);
    CHECK_EQ(rungs_session_frame_work_end(s, 9000), RUNGS_OK);
    CHECK_EQ(rungs_session_frame_work_end(s, 9000), RUNGS_ERR_STATE);

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
    seen.self = NULL;
    rungs_testing_panic_next_call();
    CHECK_EQ(rungs_session_frame_begin(s, 33, NULL), RUNGS_ERR_PANIC);
    CHECK_EQ(rungs_session_frame_begin(s, 33, NULL), RUNGS_ERR_POISONED);
    CHECK_EQ(rungs_session_frame_end(s), RUNGS_ERR_POISONED);
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
    CHECK_EQ(rungs_endpoint_add_peer(a, 1, address), RUNGS_OK);
    snprintf(address, sizeof address, "127.0.0.1:%u", (unsigned)port_a);
    CHECK_EQ(rungs_endpoint_add_peer(b, 0, address), RUNGS_OK);

    CHECK_EQ(rungs_session_sample_links(NULL, a, now_us()), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_session_sample_links(s, NULL, now_us()), RUNGS_ERR_NULL_POINTER);
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

int main(void) {
    test_setup();
    test_null_handles();
    test_frame_loop();
    test_reentry_and_poison();
    test_late_events_are_no_ops();
    test_round_trips_from_the_transport();
    return harness_report("session");
}
