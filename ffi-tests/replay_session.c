/* Vector replay through engine sessions (rungs_session_*).
 *
 *   replay_session DIR      replays every *.vec file in DIR
 *
 * The second C replay of the timing vectors (tests/vectors/README.md); the
 * first, replay.c, drives rungs_timing_machine directly. Here every player
 * is a rungs_session inside a minimal engine that keeps its own queue (as
 * examples-c/tsmodel's game does): the vector's reports enter as
 * NETWORK_REPORT payloads executed on the vector's frames, removals through
 * rungs_session_player_removed, and the master's TIMING events travel
 * through the engine's queue, stamped with the send frame's tag and
 * executed when due.
 *
 * Prints one line per failing vector with its first difference, then
 * "vectors through sessions: N passed, M failed". Exits 1 if any failed (or
 * none was found). */
#include "rungs.h"
#include "vector_file.h"

/* The engine's event IDs: Tiberian Sun's, and its own choice for the
 * report (the first past the game's table and the spawner's event). */
enum { EV_TIMING = 31, EV_LATENCYFUDGE = 35, EV_NETWORK_REPORT = 37 };

typedef struct {
    uint32_t frame; /* the tag */
    uint8_t house, type, len;
    uint32_t seq;
    uint8_t data[36];
} event_t;

typedef struct {
    event_t *items;
    size_t len, cap;
} event_list_t;

static void list_push(event_list_t *list, const event_t *e) {
    if (list->len == list->cap) {
        size_t cap = list->cap ? list->cap * 2 : 64;
        event_t *grown = realloc(list->items, cap * sizeof *grown);
        if (!grown) {
            fprintf(stderr, "replay_session: out of memory\n");
            exit(2);
        }
        list->items = grown;
        list->cap = cap;
    }
    list->items[list->len++] = *e;
}

/* Stop the vector at the first call that fails, naming it and rungs' message. */
#define TRY(call)                                                                          \
    do {                                                                                   \
        rungs_result try_rc = (call);                                                      \
        if (try_rc != RUNGS_OK) {                                                          \
            char try_detail[200];                                                          \
            rungs_last_error_message(try_detail, sizeof try_detail, NULL);                 \
            snprintf(err, errcap, "frame %u: %s returned %s (%s)", (unsigned)frame, #call, \
                     rungs_result_str(try_rc), try_detail);                                \
            goto done;                                                                     \
        }                                                                                  \
    } while (0)

static int by_tag_house_seq(const void *a, const void *b) {
    const event_t *x = a, *y = b;
    if (x->frame != y->frame) return x->frame < y->frame ? -1 : 1;
    if (x->house != y->house) return x->house < y->house ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

typedef struct {
    lines_t *messages;
    event_list_t *out_list;
    uint8_t house;
    uint32_t tag;
    int sent;
} vector_engine_t;

static void vec_queue(void *user, uint32_t frame, uint8_t type_id, const uint8_t *payload, size_t len) {
    vector_engine_t *v = user;
    event_t e;
    (void)frame;
    if (type_id != EV_TIMING) return; /* vectors give every report as executed */
    memset(&e, 0, sizeof e);
    e.house = v->house;
    e.type = type_id;
    e.len = (uint8_t)len;
    memcpy(e.data, payload, len);
    list_push(v->out_list, &e);
}

static void vec_send(void *user, uint32_t frame, uint32_t tag) {
    vector_engine_t *v = user;
    (void)frame;
    v->tag = tag;
    v->sent = 1;
}

static void vec_message(void *user, uint32_t frame, uint8_t tier, const char *text) {
    vector_engine_t *v = user;
    line_t l;
    (void)tier;
    if (!v->messages) return;
    memset(&l, 0, sizeof l);
    l.kind = 'm';
    l.frame = frame;
    snprintf(l.text, sizeof l.text, "%s", text);
    push_line(v->messages, &l);
}

/* One session per player; the vector's reports enter as NETWORK_REPORT
 * payloads executed on the vector's frames; the master's TIMING events go
 * through the engine's queue, stamped with the send frame's tag. */
static int run_vector_through_sessions(const vector_t *v, lines_t *sends, lines_t *forces, lines_t *messages,
                                       char *err, size_t errcap) {
    rungs_session *sessions[16] = {0};
    vector_engine_t engines[16];
    event_list_t queue = {0}, out_list = {0};
    uint32_t mask = 0, seat_count = 0, frame = 0, seq = 0;
    uint8_t last_sp = 0, last_la = 0, last_fps = 0;
    int i, status = -1;
    for (i = 0; i < v->player_count; i++) {
        mask |= 1u << v->players[i];
        if (v->players[i] + 1u > seat_count) seat_count = v->players[i] + 1u;
    }
    for (i = 0; i < v->player_count; i++) {
        rungs_session_config c;
        memset(&c, 0, sizeof c);
        memset(&engines[i], 0, sizeof engines[i]);
        engines[i].messages = i == 0 ? messages : NULL;
        engines[i].out_list = &out_list;
        engines[i].house = v->players[i];
        c.struct_size = sizeof c;
        c.speed_fps = (uint8_t)v->speed;
        c.seat_count = (uint8_t)seat_count;
        c.local_seat = v->players[i];
        c.human_seat_mask = mask;
        c.report_layout = RUNGS_REPORT_LAYOUT_EXTENDED;
        c.timing_event_id = EV_TIMING;
        c.network_report_event_id = EV_NETWORK_REPORT;
        c.latency_fudge_event_id = EV_LATENCYFUDGE;
        c.callbacks.user = &engines[i];
        c.callbacks.queue_event = vec_queue;
        c.callbacks.send_frame = vec_send;
        c.callbacks.player_message = vec_message;
        TRY(rungs_session_new(&c, &sessions[i]));
    }
    for (frame = 0; frame <= v->until; frame++) {
        int32_t executes = 0;
        size_t k, kept = 0, n;
        rungs_timing_status st;
        for (i = 0; i < v->player_count; i++) {
            engines[i].sent = 0;
            TRY(rungs_session_frame_begin(sessions[i], frame, &executes));
        }
        if (executes) {
            if (queue.len > 1) /* qsort must not see the NULL of an empty list */
                qsort(queue.items, queue.len, sizeof(event_t), by_tag_house_seq);
            for (k = 0; k < queue.len; k++) {
                if (queue.items[k].frame > frame) {
                    queue.items[kept++] = queue.items[k];
                    continue;
                }
                for (i = 0; i < v->player_count; i++)
                    TRY(rungs_session_event_executed(sessions[i], queue.items[k].type, queue.items[k].house, frame,
                                                     queue.items[k].data, queue.items[k].len));
            }
            queue.len = kept;
        }
        for (n = 0; n < v->input_count; n++) {
            const input_t *in = &v->inputs[n];
            if (in->frame != frame) continue;
            for (i = 0; i < v->player_count; i++) {
                if (in->kind == 'r') {
                    uint8_t payload[RUNGS_REPORT_EXTENDED_PAYLOAD_LEN];
                    size_t len = 0;
                    TRY(rungs_report_payload_encode(&in->report, RUNGS_REPORT_LAYOUT_EXTENDED, payload,
                                                    sizeof payload, &len));
                    TRY(rungs_session_event_executed(sessions[i], EV_NETWORK_REPORT, in->seat, frame, payload,
                                                     len));
                } else {
                    /* A late removal (the seat is already gone) is accepted (S3). */
                    TRY(rungs_session_player_removed(sessions[i], in->seat));
                }
            }
        }
        TRY(rungs_session_status(sessions[0], &st));
        if (frame == 0 || st.send_period != last_sp || st.look_ahead != last_la || st.fps != last_fps) {
            line_t l;
            memset(&l, 0, sizeof l);
            l.kind = 'f';
            l.frame = frame;
            l.send_period = last_sp = st.send_period;
            l.look_ahead = last_la = st.look_ahead;
            l.fps = last_fps = st.fps;
            push_line(forces, &l);
        }
        for (i = 0; i < v->player_count; i++) {
            size_t before = out_list.len;
            TRY(rungs_session_frame_end(sessions[i]));
            for (k = before; k < out_list.len; k++) {
                line_t l;
                memset(&l, 0, sizeof l);
                l.kind = 's';
                l.frame = frame;
                l.fps = out_list.items[k].data[0] | (out_list.items[k].data[1] << 8);
                l.look_ahead = out_list.items[k].data[2] | (out_list.items[k].data[3] << 8);
                l.send_period = out_list.items[k].data[4];
                push_line(sends, &l);
            }
        }
        /* Everything issued up to a send frame goes out on it, stamped with its tag. */
        if (engines[0].sent) {
            for (k = 0; k < out_list.len; k++) {
                out_list.items[k].frame = engines[0].tag;
                out_list.items[k].seq = ++seq;
                list_push(&queue, &out_list.items[k]);
            }
            out_list.len = 0;
        }
    }
    status = 0;
done:
    for (i = 0; i < v->player_count; i++) rungs_session_free(sessions[i]);
    free(queue.items);
    free(out_list.items);
    return status;
}

int main(int argc, char **argv) {
    return replay_directory(argc > 1 ? argv[1] : "../tests/vectors", "vectors through sessions",
                            run_vector_through_sessions);
}
