/* tsengine — a miniature Tiberian Sun-style lockstep engine using rungs.
 *
 *   ./tsengine [--verbose]      four players in one process over an in-memory
 *                               network; one player's link spikes and recovers
 *
 * The engine is what a source port or an injected DLL already has: its own
 * event enum with Tiberian Sun's IDs, its own event queue (TS's OutList and
 * DoList), its own packets and its own frame loop. rungs_session only adds
 * the adaptive timing: it says which frames execute events and send, which
 * frame rate to pace at, which events to queue (reports, the master's
 * TIMING) and what to show the player. Everything else stays the engine's.
 *
 * Each simulated machine runs at the frame rate in force and executes frame F
 * only when rungs_session_frame_ready says so: it holds, from every peer, the
 * packet of the last send frame tagged at or before F (a staged decrease can
 * give two consecutive send frames one tag, so "a packet tagged F or later"
 * is not enough). A machine that has to wait measures the wait for its reports.
 * At the end the program checks that every machine executed the same events
 * on the same frames, and exits 1 if not. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rungs.h"

/* ---- the engine's own event IDs: Tiberian Sun's, plus OpenTS's report ---- */
enum event_type {
    EV_ORDER = 1,           /* stands for the game's unit orders */
    EV_TIMING = 31,         /* TS TIMING: u16 fps, u16 MaxAhead, u8 FrameSendRate */
    EV_PROCESS_TIME = 32,   /* TS PROCESS_TIME: no longer sent with rungs */
    EV_REMOVEPLAYER = 34,   /* TS REMOVEPLAYER: data[0] = the house removed */
    EV_LATENCYFUDGE = 35,   /* kept for old recordings; rungs never sends it */
    EV_NETWORK_REPORT = 36, /* OpenTS NETWORK_REPORT */
};

#define PLAYERS 4
#define EVENT_DATA 36 /* TS's event union */

typedef struct {
    uint32_t frame; /* the frame the event executes on or after (the tag) */
    uint8_t house;  /* sender */
    uint8_t type;
    uint8_t len;
    uint32_t seq; /* the sender's issue order */
    uint8_t data[EVENT_DATA];
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
            fprintf(stderr, "tsengine: out of memory\n");
            exit(2);
        }
        list->items = grown;
        list->cap = cap;
    }
    list->items[list->len++] = *e;
}

/* A packet in flight: one machine's events of one send frame, to one peer. */
typedef struct packet {
    uint8_t from, to;
    uint32_t send_frame;
    uint64_t arrive_ms;
    event_list_t events;
    struct packet *next;
} packet_t;

typedef struct world world_t;

typedef struct {
    world_t *world;
    uint8_t house;
    rungs_session *session;
    uint32_t frame;
    uint64_t next_frame_ms;
    uint8_t fps;
    event_list_t out_list; /* issued since the previous send frame */
    event_list_t do_list;  /* queued for execution */
    event_list_t executed; /* every event executed, in order */
    uint32_t *exec_frames; /* the frame each of them executed on */
    size_t exec_frames_cap;
    uint32_t received_through[PLAYERS]; /* latest send frame held per house (RUNGS_NO_FRAME: none) */
    int removed[PLAYERS];
    int gone; /* this machine's own removal executed */
    int waiting;
    uint64_t wait_start_ms, waited_ms;
    uint32_t next_seq;
    uint8_t send_period, look_ahead;
} machine_t;

struct world {
    machine_t machines[PLAYERS];
    packet_t *in_flight;
    uint64_t now_ms;
    int viewer; /* whose screen the demo prints */
    int verbose;
    uint64_t stalled_frames;
};

/* One-way access delay of each house, ms: house 2's link spikes to 350 ms
 * from 30 s to 90 s, then recovers. */
static uint64_t delay_ms(int house, uint64_t now_ms) {
    static const uint64_t base[PLAYERS] = {25, 35, 45, 30};
    if (house == 2 && now_ms >= 30000 && now_ms < 90000) return 350;
    return base[house];
}

/* Processing time per frame of each house, µs. */
static const uint64_t process_us[PLAYERS] = {6000, 7000, 9000, 8000};

static int fail_rc(rungs_result rc, const char *what) {
    char detail[256];
    rungs_last_error_message(detail, sizeof detail, NULL);
    fprintf(stderr, "tsengine: %s: %s (%s)\n", what, rungs_result_str(rc), detail);
    exit(2);
}

#define CALL(expr)                                                                         \
    do {                                                                                   \
        rungs_result call_rc = (expr);                                                     \
        if (call_rc != RUNGS_OK) fail_rc(call_rc, #expr);                                  \
    } while (0)

static void log_executed(machine_t *m, const event_t *e, uint32_t frame) {
    size_t n = m->executed.len;
    list_push(&m->executed, e);
    if (m->exec_frames_cap != m->executed.cap) {
        m->exec_frames_cap = m->executed.cap;
        m->exec_frames = realloc(m->exec_frames, m->exec_frames_cap * sizeof *m->exec_frames);
        if (!m->exec_frames) exit(2);
    }
    m->exec_frames[n] = frame;
}

/* ---- session callbacks ---- */

static void on_queue_event(void *user, uint32_t frame, uint8_t type_id, const uint8_t *payload, size_t len) {
    machine_t *m = user;
    event_t e;
    (void)frame;
    memset(&e, 0, sizeof e);
    e.house = m->house;
    e.type = type_id;
    e.len = (uint8_t)len;
    memcpy(e.data, payload, len);
    list_push(&m->out_list, &e);
}

/* Send frame: stamp the OutList with the tag, keep our own copy, and send one
 * packet, numbered with its send frame, to every other player still in the game. */
static void on_send_frame(void *user, uint32_t frame, uint32_t tag) {
    machine_t *m = user;
    world_t *w = m->world;
    size_t i;
    int to;
    for (i = 0; i < m->out_list.len; i++) {
        m->out_list.items[i].frame = tag;
        m->out_list.items[i].seq = ++m->next_seq;
        list_push(&m->do_list, &m->out_list.items[i]);
    }
    for (to = 0; to < PLAYERS; to++) {
        packet_t *p, **tail;
        uint64_t arrive, last = 0;
        if (to == m->house || m->removed[to]) continue;
        p = calloc(1, sizeof *p);
        if (!p) exit(2);
        p->from = m->house;
        p->to = (uint8_t)to;
        p->send_frame = frame;
        arrive = w->now_ms + delay_ms(m->house, w->now_ms) + delay_ms(to, w->now_ms);
        for (tail = &w->in_flight; *tail; tail = &(*tail)->next)
            if ((*tail)->from == p->from && (*tail)->to == p->to && (*tail)->arrive_ms > last)
                last = (*tail)->arrive_ms; /* links deliver in order */
        p->arrive_ms = arrive > last ? arrive : last;
        for (i = 0; i < m->out_list.len; i++) list_push(&p->events, &m->out_list.items[i]);
        *tail = p;
    }
    m->out_list.len = 0;
}

static void on_frame_rate(void *user, uint32_t frame, uint8_t fps) {
    machine_t *m = user;
    if (m->house == m->world->viewer && frame > 0 && fps != m->fps)
        printf("%7.1fs  frame %5u  frame rate %u fps\n", m->world->now_ms / 1000.0, (unsigned)frame, (unsigned)fps);
    m->fps = fps;
}

static void on_timing(void *user, uint32_t frame, uint8_t send_period, uint8_t look_ahead) {
    machine_t *m = user;
    m->send_period = send_period;
    m->look_ahead = look_ahead;
    if (m->house == m->world->viewer) {
        rungs_timing t;
        char label[RUNGS_LABEL_CAPACITY];
        t.send_period = send_period;
        t.look_ahead = look_ahead;
        CALL(rungs_timing_label(&t, label, sizeof label, NULL));
        printf("%7.1fs  frame %5u  timing %2u/%-3u %-16s  (%u ms ahead at %u fps)\n", m->world->now_ms / 1000.0,
               (unsigned)frame, (unsigned)send_period, (unsigned)look_ahead, label,
               (unsigned)(look_ahead * 1000u / (m->fps ? m->fps : 30)), (unsigned)(m->fps ? m->fps : 30));
    }
}

static void on_message(void *user, uint32_t frame, uint8_t tier, const char *text) {
    machine_t *m = user;
    (void)tier;
    if (m->house == m->world->viewer)
        printf("%7.1fs  frame %5u  message: \"%s\"\n", m->world->now_ms / 1000.0, (unsigned)frame, text);
}

static void on_master(void *user, uint32_t frame, uint8_t seat) {
    machine_t *m = user;
    if (m->house == m->world->viewer)
        printf("%7.1fs  frame %5u  master is now house %u\n", m->world->now_ms / 1000.0, (unsigned)frame,
               (unsigned)seat);
}

static void on_log(void *user, uint8_t level, const char *text) {
    machine_t *m = user;
    if (m->world->verbose && m->house == m->world->viewer && level <= RUNGS_LOG_INFO)
        printf("          log: %s\n", text);
}

/* ---- the engine ---- */

static void machine_init(world_t *w, machine_t *m, uint8_t house) {
    rungs_session_config c;
    int i;
    memset(m, 0, sizeof *m);
    m->world = w;
    m->house = house;
    m->fps = 30;
    for (i = 0; i < PLAYERS; i++) m->received_through[i] = RUNGS_NO_FRAME;
    memset(&c, 0, sizeof c);
    c.struct_size = sizeof c;
    c.speed_fps = 30;
    c.seat_count = PLAYERS;
    c.local_seat = house;
    c.human_seat_mask = (1u << PLAYERS) - 1;
    c.report_layout = RUNGS_REPORT_LAYOUT_COMPACT;
    c.timing_event_id = EV_TIMING;
    c.network_report_event_id = EV_NETWORK_REPORT;
    c.latency_fudge_event_id = EV_LATENCYFUDGE;
    c.timing_fog_bias = 0;
    c.callbacks.user = m;
    c.callbacks.queue_event = on_queue_event;
    c.callbacks.send_frame = on_send_frame;
    c.callbacks.set_frame_rate = on_frame_rate;
    c.callbacks.player_message = on_message;
    c.callbacks.master_changed = on_master;
    c.callbacks.timing_changed = on_timing;
    c.callbacks.log = on_log;
    CALL(rungs_session_new(&c, &m->session));
}

/* Lockstep: may frame F run? rungs knows which send frame's packet every
 * peer must have delivered (the same on every machine); we say which we hold. */
static int ready(const machine_t *m, uint32_t frame) {
    int32_t ready = 0;
    CALL(rungs_session_frame_ready(m->session, frame, m->received_through, PLAYERS, &ready));
    return ready;
}

static int by_tag_house_seq(const void *a, const void *b) {
    const event_t *x = a, *y = b;
    if (x->frame != y->frame) return x->frame < y->frame ? -1 : 1;
    if (x->house != y->house) return x->house < y->house ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Execute every queued event due by `frame`, in (tag, house, issue order). */
static void execute_due(machine_t *m, uint32_t frame) {
    size_t i, kept = 0;
    if (m->do_list.len > 1) /* qsort must not see the NULL of an empty list */
        qsort(m->do_list.items, m->do_list.len, sizeof(event_t), by_tag_house_seq);
    for (i = 0; i < m->do_list.len; i++) {
        event_t e = m->do_list.items[i];
        if (e.frame > frame) {
            m->do_list.items[kept++] = e;
            continue;
        }
        switch (e.type) {
        case EV_TIMING:
        case EV_NETWORK_REPORT:
        case EV_LATENCYFUDGE:
            CALL(rungs_session_event_executed(m->session, e.type, e.house, frame, e.data, e.len));
            break;
        case EV_REMOVEPLAYER:
            CALL(rungs_session_player_removed(m->session, e.data[0]));
            m->removed[e.data[0]] = 1;
            if (e.data[0] == m->house) m->gone = 1;
            break;
        default: /* a unit order: the simulation would apply it here */
            break;
        }
        log_executed(m, &e, frame);
    }
    m->do_list.len = kept;
}

static void issue(machine_t *m, uint8_t type, uint8_t a, uint8_t b) {
    event_t e;
    memset(&e, 0, sizeof e);
    e.house = m->house;
    e.type = type;
    e.len = 2;
    e.data[0] = a;
    e.data[1] = b;
    list_push(&m->out_list, &e);
}

/* Run one frame if it is due and every needed packet is here. */
static void step(machine_t *m, uint32_t quit_frame, int quitter) {
    world_t *w = m->world;
    uint32_t frame = m->frame;
    int32_t executes = 0;
    if (m->gone || w->now_ms < m->next_frame_ms) return;
    if (!ready(m, frame)) {
        if (!m->waiting) {
            m->waiting = 1;
            m->wait_start_ms = w->now_ms;
            CALL(rungs_session_wait_begin(m->session, w->now_ms * 1000));
        }
        return;
    }
    if (m->waiting) {
        m->waiting = 0;
        m->waited_ms += w->now_ms - m->wait_start_ms;
        if (w->now_ms - m->wait_start_ms > 1000 / m->fps) w->stalled_frames++;
        CALL(rungs_session_wait_end(m->session, w->now_ms * 1000));
    }
    CALL(rungs_session_frame_begin(m->session, frame, &executes));
    if (executes) execute_due(m, frame);
    /* The players' input: an order now and then. */
    if ((frame * 7u + m->house * 13u) % 19u == 0) issue(m, EV_ORDER, m->house, (uint8_t)frame);
    /* A player who leaves announces it; its machine runs until the removal executes. */
    if (frame == quit_frame && m->house == quitter) issue(m, EV_REMOVEPLAYER, (uint8_t)quitter, 0);
    CALL(rungs_session_add_frame_work_us(m->session, process_us[m->house]));
    CALL(rungs_session_frame_end(m->session));
    m->frame++;
    m->next_frame_ms = w->now_ms + 1000u / m->fps;
}

static void deliver(world_t *w) {
    packet_t **link = &w->in_flight;
    while (*link) {
        packet_t *p = *link;
        if (p->arrive_ms <= w->now_ms) {
            machine_t *m = &w->machines[p->to];
            size_t i;
            for (i = 0; i < p->events.len; i++) list_push(&m->do_list, &p->events.items[i]);
            m->received_through[p->from] = p->send_frame;
            if (!m->gone) {
                /* The engine's own ping: the round trip of this link right now. */
                uint32_t rtt = (uint32_t)(2 * (delay_ms(p->from, w->now_ms) + delay_ms(p->to, w->now_ms)));
                if (!m->removed[p->from]) CALL(rungs_session_rtt_sample(m->session, p->from, rtt, 1));
            }
            *link = p->next;
            free(p->events.items);
            free(p);
        } else {
            link = &p->next;
        }
    }
}

static void machine_free(machine_t *m) {
    rungs_session_free(m->session);
    free(m->out_list.items);
    free(m->do_list.items);
    free(m->executed.items);
    free(m->exec_frames);
}

/* Every machine executed the same events on the same frames (up to where
 * the shortest log ends, for a machine that left). */
static int check_same_events(world_t *w) {
    int a, ok = 1;
    const machine_t *ref = &w->machines[1];
    for (a = 0; a < PLAYERS; a++) {
        const machine_t *m = &w->machines[a];
        size_t n = m->executed.len < ref->executed.len ? m->executed.len : ref->executed.len, i;
        for (i = 0; i < n; i++) {
            const event_t *x = &m->executed.items[i], *y = &ref->executed.items[i];
            if (m->exec_frames[i] != ref->exec_frames[i] || x->house != y->house || x->seq != y->seq ||
                x->type != y->type || x->frame != y->frame || memcmp(x->data, y->data, EVENT_DATA) != 0) {
                printf("MISMATCH: house %d event %lu differs from house %d\n", a, (unsigned long)i, ref->house);
                ok = 0;
                break;
            }
        }
        if (!m->gone && m->executed.len != ref->executed.len && a != 0) {
            printf("MISMATCH: house %d executed %lu events, house %d %lu\n", a, (unsigned long)m->executed.len,
                   ref->house, (unsigned long)ref->executed.len);
            ok = 0;
        }
    }
    return ok;
}

static int run_demo(int verbose) {
    static world_t w;
    const uint32_t frames = 6000, quit_frame = 4500;
    const int quitter = 0; /* the master leaves late in the game */
    int i, ok;
    memset(&w, 0, sizeof w);
    w.viewer = 1;
    w.verbose = verbose;
    printf("tsengine: %d players, one-way delays 25/35/45/30 ms; house 2 spikes to 350 ms from 30 s to 90 s;\n"
           "house 0 (the master) leaves on frame %u. Timing as house 1 sees it:\n\n",
           PLAYERS, (unsigned)quit_frame);
    for (i = 0; i < PLAYERS; i++) machine_init(&w, &w.machines[i], (uint8_t)i);
    for (;;) {
        int running = 0;
        deliver(&w);
        for (i = 0; i < PLAYERS; i++) {
            machine_t *m = &w.machines[i];
            if (m->gone || m->frame >= frames) continue;
            running = 1;
            step(m, quit_frame, quitter);
        }
        if (!running) break;
        w.now_ms++;
        if (w.now_ms > 3600u * 1000u) {
            printf("tsengine: the game stalled\n");
            return 1;
        }
    }
    printf("\n%.1f s of play, %u frames.\n", w.now_ms / 1000.0, (unsigned)frames);
    for (i = 0; i < PLAYERS; i++) {
        const machine_t *m = &w.machines[i];
        printf("house %d: %lu events executed up to frame %u, waited %.1f s in all%s\n", i,
               (unsigned long)m->executed.len, (unsigned)m->frame, m->waited_ms / 1000.0,
               m->gone ? " (left the game)" : "");
    }
    ok = check_same_events(&w);
    printf(ok ? "every machine executed the same events on the same frames\n" : "MACHINES DIVERGED\n");
    for (i = 0; i < PLAYERS; i++) machine_free(&w.machines[i]);
    while (w.in_flight) {
        packet_t *p = w.in_flight;
        w.in_flight = p->next;
        free(p->events.items);
        free(p);
    }
    return ok ? 0 : 1;
}

int main(int argc, char **argv) {
    if (argc == 1) return run_demo(0);
    if (argc == 2 && strcmp(argv[1], "--verbose") == 0) return run_demo(1);
    fprintf(stderr, "usage: %s [--verbose]\n", argv[0]);
    return 2;
}
