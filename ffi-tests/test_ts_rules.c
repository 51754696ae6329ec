/* The C API for engines that keep Tiberian Sun's own rules (S7): a tick
 * timer (tick_hz), the send-before-execute order, the due tags an
 * exact-frame DoList restamps, readiness from numbered packets with the
 * refusals that keep a wrong argument from desyncing, the cut of a vanished
 * player's stream, measurements in ticks, and configs from an older header. */
#include <stdlib.h>

#include "harness.h"

typedef struct {
    uint32_t send_frame, tag;
    int sends;
    uint8_t fps;
    int rates;
    uint8_t bad_rate;
} seen_t;

static void RUNGS_CALL on_queue(void *user, uint32_t frame, uint8_t type, const uint8_t *payload, size_t len) {
    (void)user;
    (void)frame;
    (void)type;
    (void)payload;
    (void)len;
}
static void RUNGS_CALL on_send(void *user, uint32_t frame, uint32_t tag) {
    seen_t *s = user;
    s->send_frame = frame;
    s->tag = tag;
    s->sends++;
}
static void RUNGS_CALL on_rate(void *user, uint32_t frame, uint8_t fps) {
    seen_t *s = user;
    (void)frame;
    s->fps = fps;
    s->rates++;
    if (60 % fps != 0) s->bad_rate = fps;
}

static rungs_session_config ts_config(seen_t *seen, uint8_t local) {
    rungs_session_config c;
    memset(&c, 0, sizeof c);
    c.struct_size = sizeof c;
    c.speed_fps = 45; /* a speed a 60 Hz timer cannot hit */
    c.seat_count = 3;
    c.local_seat = local;
    c.human_seat_mask = 0x7;
    c.report_layout = RUNGS_REPORT_LAYOUT_COMPACT;
    c.timing_event_id = 31;
    c.network_report_event_id = 37;
    c.latency_fudge_event_id = 35;
    c.tick_hz = 60;
    c.send_order = RUNGS_SEND_BEFORE_EXECUTE;
    c.callbacks.user = seen;
    c.callbacks.queue_event = on_queue;
    c.callbacks.send_frame = on_send;
    c.callbacks.set_frame_rate = on_rate;
    return c;
}

static void test_config(void) {
    seen_t seen;
    rungs_session_config c;
    rungs_session *s = NULL;
    memset(&seen, 0, sizeof seen);
    c = ts_config(&seen, 0);
    c.send_order = 2;
    CHECK_EQ(rungs_session_new(&c, &s), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE_HAS("config->send_order is 2");
    /* A caller built against the header before tick_hz and send_order: its
     * struct ends at the callbacks; the new fields read as 0. */
    c = ts_config(&seen, 0);
    c.struct_size = (uint32_t)offsetof(rungs_session_config, tick_hz);
    CHECK_EQ(rungs_session_new(&c, &s), RUNGS_OK);
    CHECK_EQ(rungs_session_frame_begin(s, 0, NULL), RUNGS_OK);
    CHECK_EQ(seen.fps, 45); /* no tick timer: the speed's rate */
    CHECK_EQ(seen.sends, 0); /* sends after executing, from frame_end */
    CHECK_EQ(rungs_session_frame_end(s), RUNGS_OK);
    CHECK_EQ(seen.sends, 1);
    CHECK_EQ(rungs_session_rtt_sample_ticks(s, 1, 6, 0), RUNGS_ERR_STATE);
    CHECK_MESSAGE_HAS("no tick timer");
    rungs_session_free(s);
    s = NULL;
    c.struct_size = (uint32_t)offsetof(rungs_session_config, tick_hz) - 1;
    CHECK_EQ(rungs_session_new(&c, &s), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE_HAS("from an older one");
}

static void test_tick_timer_and_send_order(void) {
    seen_t seen;
    rungs_session_config c;
    rungs_session *s = NULL;
    uint32_t frame, first = 0, last = 0;
    int32_t executes = 0;
    memset(&seen, 0, sizeof seen);
    c = ts_config(&seen, 0);
    CHECK_EQ(rungs_session_new(&c, &s), RUNGS_OK);
    /* Frame 0: the timer hits 30, not 45; the send comes with frame_begin. */
    CHECK_EQ(rungs_session_frame_begin(s, 0, &executes), RUNGS_OK);
    CHECK_EQ(seen.fps, 30);
    CHECK_EQ(executes, 1);
    CHECK_EQ(seen.sends, 1);
    CHECK_EQ(seen.send_frame, 0);
    CHECK_EQ(seen.tag, 6); /* 2/6 */
    CHECK_EQ(rungs_session_due_tags(s, &first, &last), RUNGS_OK);
    CHECK_EQ(first, 0);
    CHECK_EQ(last, 0);
    CHECK_EQ(rungs_session_frame_end(s), RUNGS_OK);
    CHECK_EQ(seen.sends, 1);
    CHECK_EQ(rungs_session_due_tags(s, &first, &last), RUNGS_ERR_STATE);
    CHECK_EQ(rungs_session_frame_begin(s, 1, &executes), RUNGS_OK);
    CHECK_EQ(executes, 0);
    CHECK_EQ(rungs_session_due_tags(s, &first, &last), RUNGS_OK);
    CHECK_EQ(first, RUNGS_NO_FRAME);
    CHECK_EQ(last, RUNGS_NO_FRAME);
    CHECK_EQ(rungs_session_due_tags(s, NULL, &last), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_session_frame_end(s), RUNGS_OK);
    CHECK_EQ(rungs_session_frame_begin(s, 2, &executes), RUNGS_OK);
    CHECK_EQ(rungs_session_due_tags(s, &first, &last), RUNGS_OK);
    CHECK_EQ(first, 1); /* tags after the last executing frame (0) */
    CHECK_EQ(last, 2);
    CHECK_EQ(rungs_session_frame_end(s), RUNGS_OK);
    for (frame = 3; frame < 200; frame++) {
        CHECK_EQ(rungs_session_frame_begin(s, frame, NULL), RUNGS_OK);
        CHECK_EQ(rungs_session_frame_end(s), RUNGS_OK);
    }
    CHECK_EQ(seen.bad_rate, 0);
    CHECK_EQ(rungs_session_free(s), RUNGS_OK);
}

static void test_packets_and_readiness(void) {
    seen_t seen;
    rungs_session_config c;
    rungs_session *s = NULL;
    uint32_t frame, mark = 0, tag = 0;
    int32_t ready = 7;
    uint8_t waiting_for = 0;
    uint32_t held[3] = {RUNGS_NO_FRAME, RUNGS_NO_FRAME, RUNGS_NO_FRAME};
    memset(&seen, 0, sizeof seen);
    c = ts_config(&seen, 1);
    CHECK_EQ(rungs_session_new(&c, &s), RUNGS_OK);
    for (frame = 0; frame < 20; frame++) {
        CHECK_EQ(rungs_session_frame_begin(s, frame, NULL), RUNGS_OK);
        CHECK_EQ(rungs_session_frame_end(s), RUNGS_OK);
    }
    CHECK_EQ(rungs_session_peers_ready(s, &ready, NULL), RUNGS_ERR_STATE); /* between frames */
    /* Under 2/6 packet n carries send frame 2n. Seat 0's packet 1 comes last. */
    CHECK_EQ(rungs_session_packet_received(s, 0, 0, 0), RUNGS_OK);
    CHECK_EQ(rungs_session_packet_received(s, 0, 2, 4), RUNGS_OK);
    CHECK_EQ(rungs_session_packet_received(s, 0, 3, 6), RUNGS_OK);
    CHECK_EQ(rungs_session_packet_received(s, 2, 0, 0), RUNGS_OK);
    CHECK_EQ(rungs_session_packet_received(s, 2, 1, 2), RUNGS_OK);
    CHECK_EQ(rungs_session_packet_received(s, 2, 2, 4), RUNGS_OK);
    CHECK_EQ(rungs_session_packet_received(s, 2, 3, 6), RUNGS_OK);
    /* Frame 20 needs send frame 14's packets (tag 20): not yet. */
    CHECK_EQ(rungs_session_frame_begin(s, 20, NULL), RUNGS_OK);
    CHECK_EQ(rungs_session_peers_ready(s, &ready, &waiting_for), RUNGS_OK);
    CHECK_EQ(ready, 0);
    CHECK_EQ(waiting_for, 0);
    CHECK_EQ(rungs_session_packet_watermark(s, 0, &mark), RUNGS_OK);
    CHECK_EQ(mark, 0); /* packet 1 missing: 2 and 3 do not count yet */
    CHECK_EQ(rungs_session_packet_received(s, 0, 1, 2), RUNGS_OK);
    CHECK_EQ(rungs_session_packet_watermark(s, 0, &mark), RUNGS_OK);
    CHECK_EQ(mark, 3);
    /* The tag (8) given for send frame 2: refused, nothing changes. */
    CHECK_EQ(rungs_session_packet_received(s, 0, 4, 14), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE_HAS("the send frame of packet 4 from seat 0 is 14; expected send frame 8");
    /* Numbered from 1: send frame 4 is packet 2 of the game, and the message says so. */
    CHECK_EQ(rungs_session_packet_received(s, 2, 3, 4), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE_HAS("send frame 4 is packet 2 of the game: number packets from 0");
    /* Each message names the function once. */
    CHECK_EQ(rungs_session_packet_received(s, 1, 0, 0), RUNGS_ERR_INVALID_ARGUMENT); /* own seat */
    CHECK_MESSAGE("rungs_session_packet_received: seat is 1; expected a peer's seat, not this "
                  "machine's own (your own packets need no readiness)");
    CHECK_EQ(rungs_session_packet_received(s, 9, 0, 0), RUNGS_ERR_UNKNOWN_SEAT);
    CHECK_EQ(rungs_session_packet_watermark(s, 1, &mark), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE_STARTS("rungs_session_packet_watermark: seat is 1; expected a peer's seat, not "
                         "this machine's own");
    /* Far ahead: nothing recorded, and the message says what to do. */
    CHECK_EQ(rungs_session_packet_received(s, 0, 100000, 200000), RUNGS_ERR_FULL);
    CHECK_MESSAGE_HAS("nothing was recorded: keep the packet and hand it again");
    for (frame = 4; frame <= 7; frame++) {
        CHECK_EQ(rungs_session_packet_received(s, 0, frame, 2 * frame), RUNGS_OK);
        CHECK_EQ(rungs_session_packet_received(s, 2, frame, 2 * frame), RUNGS_OK);
    }
    CHECK_EQ(rungs_session_peers_ready(s, &ready, &waiting_for), RUNGS_OK);
    CHECK_EQ(ready, 1);
    CHECK_EQ(waiting_for, RUNGS_NO_SEAT);
    /* The old call refuses a held value that was never a send frame. */
    held[0] = 7;
    held[2] = 14;
    CHECK_EQ(rungs_session_frame_ready(s, 20, held, 3, &ready), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE_HAS("seat 0's held send frame is 7; expected a send frame of this game");
    CHECK_EQ(rungs_session_frame_end(s), RUNGS_OK);
    /* Seat 2 vanished after packet 9 (send frame 18, tag 24); the engine's
     * drop procedure agreed on that cut. */
    CHECK_EQ(rungs_session_packet_received(s, 2, 8, 16), RUNGS_OK);
    CHECK_EQ(rungs_session_packet_received(s, 2, 9, 18), RUNGS_OK);
    CHECK_EQ(rungs_session_peer_cut(s, 2, 8), RUNGS_ERR_INVALID_ARGUMENT); /* below what is held */
    CHECK_EQ(rungs_session_peer_cut(s, 2, 9), RUNGS_OK);
    CHECK_EQ(rungs_session_cut_tag(s, 9, &tag), RUNGS_OK);
    CHECK_EQ(tag, 26); /* send frame 20's */
    CHECK_EQ(rungs_session_cut_tag(s, 200, &tag), RUNGS_OK);
    CHECK_EQ(tag, RUNGS_NO_FRAME);
    CHECK_EQ(rungs_session_packet_received(s, 2, 10, 20), RUNGS_ERR_STATE);
    CHECK_EQ(rungs_session_peer_cut(s, 1, RUNGS_NO_PACKET), RUNGS_ERR_INVALID_ARGUMENT); /* own seat */
    CHECK_EQ(rungs_session_free(s), RUNGS_OK);
}

static void test_ticks(void) {
    seen_t seen;
    rungs_session_config c;
    rungs_session *s = NULL;
    rungs_measurements *m = NULL;
    rungs_report r;
    uint32_t first = 0, last = 0;
    memset(&seen, 0, sizeof seen);
    c = ts_config(&seen, 0);
    CHECK_EQ(rungs_session_new(&c, &s), RUNGS_OK);
    CHECK_EQ(rungs_session_rtt_sample_ticks(s, 1, 6, 0), RUNGS_OK);
    CHECK_EQ(rungs_session_rtt_sample_ticks(s, 1, 6, 2), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_EQ(rungs_session_rtt_sample_ticks(s, 0, 6, 0), RUNGS_ERR_UNKNOWN_SEAT);
    /* An acknowledgement still on its way when its sender's removal ran is a
     * late event of normal play: accepted, nothing changes. */
    CHECK_EQ(rungs_session_frame_begin(s, 0, NULL), RUNGS_OK);
    CHECK_EQ(rungs_session_player_removed(s, 1), RUNGS_OK);
    CHECK_EQ(rungs_session_rtt_sample_ticks(s, 1, 6, 0), RUNGS_OK);
    CHECK_EQ(rungs_session_rtt_sample(s, 1, 100, 1), RUNGS_OK);
    CHECK_EQ(rungs_session_rtt_sample_ticks(s, 0, 6, 0), RUNGS_ERR_UNKNOWN_SEAT); /* still: own seat */
    CHECK_EQ(rungs_session_free(s), RUNGS_OK);
    /* Without a tick timer the message names the function once. */
    c.tick_hz = 0;
    CHECK_EQ(rungs_session_new(&c, &s), RUNGS_OK);
    CHECK_EQ(rungs_session_rtt_sample_ticks(s, 1, 6, 0), RUNGS_ERR_STATE);
    CHECK_MESSAGE_STARTS("rungs_session_rtt_sample_ticks: the session has no tick timer");
    CHECK_EQ(rungs_session_due_tags(s, &first, &last), RUNGS_ERR_STATE);
    CHECK_MESSAGE_HAS("begin frame 0 first");
    CHECK_EQ(rungs_session_free(s), RUNGS_OK);

    CHECK_EQ(rungs_measurements_new(&m), RUNGS_OK);
    CHECK_EQ(rungs_measurements_add_peer(m, 1), RUNGS_OK);
    CHECK_EQ(rungs_measurements_add_rtt_ticks(m, 1, 6, 60, 0), RUNGS_OK);
    CHECK_EQ(rungs_measurements_add_rtt_ticks(m, 1, 30, 60, 1), RUNGS_OK); /* resent: not clean */
    CHECK_EQ(rungs_measurements_add_rtt_ticks(m, 1, 6, 0, 0), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE_HAS("tick_hz is 0");
    CHECK_EQ(rungs_measurements_add_frame_ticks(m, 3, 60), RUNGS_OK);
    CHECK_EQ(rungs_measurements_add_frame_ticks(m, 3, 0), RUNGS_ERR_INVALID_ARGUMENT);
    rungs_report_init(&r);
    CHECK_EQ(rungs_measurements_take_report(m, 0, &r), RUNGS_OK);
    CHECK_EQ(r.worst_rtt_ms, 100);
    CHECK_EQ(r.has_worst_rtt, 1);
    CHECK_EQ(r.process_us, 50000);
    rungs_measurements_free(m);
}

static void test_timing_machine_tick_hz(void) {
    seen_t seen;
    rungs_timing_machine_config c;
    rungs_timing_machine *tm = NULL;
    uint8_t fps = 0;
    memset(&seen, 0, sizeof seen);
    memset(&c, 0, sizeof c);
    c.struct_size = sizeof c;
    c.speed_fps = 45;
    c.seat_count = 2;
    c.local_seat = 0;
    c.human_seat_mask = 0x3;
    c.tick_hz = 60;
    CHECK_EQ(rungs_timing_machine_new(&c, &tm), RUNGS_OK);
    CHECK_EQ(rungs_timing_machine_fps(tm, &fps), RUNGS_OK);
    CHECK_EQ(fps, 30);
    rungs_timing_machine_free(tm);
    tm = NULL;
    /* An older caller's struct (without tick_hz): any rate. */
    c.struct_size = (uint32_t)offsetof(rungs_timing_machine_config, tick_hz);
    CHECK_EQ(rungs_timing_machine_new(&c, &tm), RUNGS_OK);
    CHECK_EQ(rungs_timing_machine_fps(tm, &fps), RUNGS_OK);
    CHECK_EQ(fps, 45);
    rungs_timing_machine_free(tm);
}

int main(void) {
    test_config();
    test_tick_timer_and_send_order();
    test_packets_and_readiness();
    test_ticks();
    test_timing_machine_tick_hz();
    return harness_report("test_ts_rules");
}
