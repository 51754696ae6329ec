/* tsmod.dll — a mod that gives a lockstep game rungs' adaptive timing from
 * inside its process (examples-c/tsmod/tsmod.h; README, "Inside a
 * DLL-injection mod").
 *
 * rungs is linked statically (librungs.a, RUNGS_STATIC): the mod ships as
 * one DLL that imports only Windows' own DLLs. Nothing runs in DllMain (this
 * file defines none): the loader lock is held there, and rungs' first call
 * may allocate and create thread-local storage. The game calls tsmod_init
 * once, after LoadLibrary, then the hooks on its own thread. */
#define RUNGS_STATIC
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rungs.h"
#include "tsmod.h"

static tsmod_game game;
static uint32_t error_count;

typedef struct {
    rungs_session *session;
    uint8_t house;
    uint8_t fps;
} house_t;

static void say(const house_t *h, const char *fmt, unsigned a, unsigned b, unsigned c) {
    char line[160];
    snprintf(line, sizeof line, fmt, a, b, c);
    game.print(game.game, h->house, line);
}

/* Every rungs call goes through here: a failure is printed and counted, and
 * the game goes on (a mod must not take the game down). */
static void check(const house_t *h, rungs_result rc, const char *what) {
    char detail[200], line[300];
    if (rc == RUNGS_OK) return;
    error_count++;
    rungs_last_error_message(detail, sizeof detail, NULL);
    snprintf(line, sizeof line, "tsmod: %s: %s (%s)", what, rungs_result_str(rc), detail);
    game.print(game.game, h->house, line);
}

/* ---- rungs_session's callbacks: into the game ---- */

static void RUNGS_CALL on_queue_event(void *user, uint32_t frame, uint8_t type, const uint8_t *payload,
                                      size_t len) {
    house_t *h = user;
    (void)frame;
    game.queue_event(game.game, h->house, type, payload, (uint8_t)len);
}

static void RUNGS_CALL on_send_frame(void *user, uint32_t frame, uint32_t tag) {
    house_t *h = user;
    game.send_out_list(game.game, h->house, frame, tag);
}

static void RUNGS_CALL on_frame_rate(void *user, uint32_t frame, uint8_t fps) {
    house_t *h = user;
    if (fps != h->fps && frame > 0) say(h, "frame %4u  frame rate %u fps", frame, fps, 0);
    h->fps = fps;
}

static void RUNGS_CALL on_timing(void *user, uint32_t frame, uint8_t send_period, uint8_t look_ahead) {
    say(user, "frame %4u  timing %u/%u", frame, send_period, look_ahead);
}

static void RUNGS_CALL on_message(void *user, uint32_t frame, uint8_t tier, const char *text) {
    house_t *h = user;
    char line[160];
    (void)tier;
    snprintf(line, sizeof line, "frame %4u  message: \"%s\"", (unsigned)frame, text);
    game.print(game.game, h->house, line);
}

static void RUNGS_CALL on_master(void *user, uint32_t frame, uint8_t seat) {
    say(user, "frame %4u  master is now house %u", frame, seat, 0);
}

/* ---- the hooks: from the game ---- */

static void *TSMOD_CALL house_start(uint8_t house, uint8_t houses, uint8_t speed_fps) {
    rungs_session_config c;
    house_t *h = calloc(1, sizeof *h);
    rungs_result rc;
    if (!h) return NULL;
    h->house = house;
    h->fps = speed_fps;
    memset(&c, 0, sizeof c);
    c.struct_size = sizeof c;
    c.speed_fps = speed_fps;
    c.seat_count = houses;
    c.local_seat = house;
    c.human_seat_mask = (1u << houses) - 1;
    c.report_layout = RUNGS_REPORT_LAYOUT_COMPACT;
    c.timing_event_id = TS_EV_TIMING;
    c.network_report_event_id = TS_EV_NETWORK_REPORT;
    c.latency_fudge_event_id = TS_EV_LATENCYFUDGE;
    c.callbacks.user = h;
    c.callbacks.queue_event = on_queue_event;
    c.callbacks.send_frame = on_send_frame;
    c.callbacks.set_frame_rate = on_frame_rate;
    c.callbacks.player_message = on_message;
    c.callbacks.master_changed = on_master;
    c.callbacks.timing_changed = on_timing;
    rc = rungs_session_new(&c, &h->session);
    if (rc != RUNGS_OK) {
        check(h, rc, "rungs_session_new");
        free(h);
        return NULL;
    }
    return h;
}

static int TSMOD_CALL frame_begin(void *house, uint32_t frame) {
    house_t *h = house;
    int32_t executes = 0;
    check(h, rungs_session_frame_begin(h->session, frame, &executes), "rungs_session_frame_begin");
    return executes != 0;
}

static void TSMOD_CALL event_executed(void *house, uint8_t type, uint8_t from, uint32_t frame,
                                      const uint8_t *data, uint8_t len) {
    house_t *h = house;
    switch (type) {
    case TS_EV_TIMING:
    case TS_EV_NETWORK_REPORT:
    case TS_EV_LATENCYFUDGE:
        check(h, rungs_session_event_executed(h->session, type, from, frame, data, len),
              "rungs_session_event_executed");
        break;
    case TS_EV_REMOVEPLAYER:
        check(h, rungs_session_player_removed(h->session, data[0]), "rungs_session_player_removed");
        break;
    default: /* the game's own orders: not rungs' business */
        break;
    }
}

static void TSMOD_CALL frame_end(void *house, uint32_t work_us) {
    house_t *h = house;
    check(h, rungs_session_add_frame_work_us(h->session, work_us), "rungs_session_add_frame_work_us");
    check(h, rungs_session_frame_end(h->session), "rungs_session_frame_end");
}

static uint32_t TSMOD_CALL frame_period_us(void *house) {
    const house_t *h = house;
    return 1000000u / (h->fps ? h->fps : 30u);
}

static void TSMOD_CALL wait_for_peers(void *house, int begin, uint64_t now_us) {
    house_t *h = house;
    if (begin)
        check(h, rungs_session_wait_begin(h->session, now_us), "rungs_session_wait_begin");
    else
        check(h, rungs_session_wait_end(h->session, now_us), "rungs_session_wait_end");
}

static void TSMOD_CALL rtt_sample(void *house, uint8_t peer, uint32_t rtt_ms) {
    house_t *h = house;
    check(h, rungs_session_rtt_sample(h->session, peer, rtt_ms, 1), "rungs_session_rtt_sample");
}

static void TSMOD_CALL house_end(void *house) {
    house_t *h = house;
    if (!h) return;
    check(h, rungs_session_free(h->session), "rungs_session_free");
    free(h);
}

static uint32_t TSMOD_CALL errors(void) { return error_count; }

__declspec(dllexport) int TSMOD_CALL tsmod_init(const tsmod_game *g, tsmod_hooks *hooks) {
    if (!g || !hooks || g->struct_size < sizeof *g || hooks->struct_size < sizeof *hooks) return 0;
    if (rungs_abi_version() != RUNGS_ABI_VERSION) return 0;
    game = *g;
    hooks->house_start = house_start;
    hooks->frame_begin = frame_begin;
    hooks->event_executed = event_executed;
    hooks->frame_end = frame_end;
    hooks->frame_period_us = frame_period_us;
    hooks->wait = wait_for_peers;
    hooks->rtt_sample = rtt_sample;
    hooks->house_end = house_end;
    hooks->errors = errors;
    return 1;
}
