/* tsgame.exe — a small lockstep game that loads the mod the way an injector
 * does (examples-c/tsmod/tsmod.h).
 *
 *   tsgame [MOD.dll] [FRAMES]     default tsmod.dll beside the exe, 400 frames
 *
 * Three houses play in one process over an in-memory network with one-way
 * delays of 15, 30 and 60 ms. The game knows nothing of rungs: it loads the
 * mod with LoadLibrary, finds tsmod_init with GetProcAddress, and calls the
 * mod's hooks where a loader would patch the game (frame sync, event
 * execution, end of frame, frame pacing, waits, pings). Frames are paced in
 * real time by the performance counter at the rate the mod gives. House 2
 * leaves late in the game (the game's REMOVEPLAYER event). At the end it
 * checks that every house executed the same events on the same frames and
 * exits 1 if not, or if any rungs call failed. */
#define WIN32_LEAN_AND_MEAN
#include <windows.h>
#include <mmsystem.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tsmod.h"

#define HOUSES 3
#define SPEED_FPS 60
#define EVENT_DATA 36
#define MAX_EVENTS 8192
#define MAX_SENDS 4096

typedef struct {
    uint32_t tag; /* executes on or after this frame */
    uint8_t house, type, len;
    uint32_t seq;
    uint8_t data[EVENT_DATA];
} event_t;

typedef struct packet {
    uint8_t from, to;
    uint32_t send_frame;
    uint64_t arrive_us;
    size_t count;
    event_t events[64];
    struct packet *next;
} packet_t;

typedef struct {
    void *mod; /* the mod's state for this house */
    uint32_t frame;
    uint64_t next_due_us;
    event_t out_list[64];
    size_t out_len;
    event_t do_list[1024];
    size_t do_len;
    event_t executed[MAX_EVENTS];
    uint32_t executed_on[MAX_EVENTS];
    size_t executed_len;
    uint32_t send_frames[MAX_SENDS], send_tags[MAX_SENDS];
    size_t sends;
    int64_t received_through[HOUSES];
    int removed[HOUSES];
    int gone, done, waiting;
    uint64_t wait_start_us, waited_us;
    uint32_t next_seq;
} house_t;

static house_t houses[HOUSES];
static packet_t *in_flight;
static const uint64_t one_way_us[HOUSES] = {15000, 30000, 60000};
static LARGE_INTEGER qpc_freq;
static const int viewer = 0;

static uint64_t now_us(void) {
    LARGE_INTEGER t;
    QueryPerformanceCounter(&t);
    return (uint64_t)(t.QuadPart / qpc_freq.QuadPart) * 1000000u +
           (uint64_t)(t.QuadPart % qpc_freq.QuadPart) * 1000000u / (uint64_t)qpc_freq.QuadPart;
}

static uint64_t start_us;

/* ---- what the game offers the mod ---- */

static void TSMOD_CALL game_queue_event(void *game, uint8_t house, uint8_t type, const uint8_t *data,
                                        uint8_t len) {
    house_t *h = &houses[house];
    event_t *e;
    (void)game;
    if (h->out_len == sizeof h->out_list / sizeof h->out_list[0] || len > EVENT_DATA) {
        printf("tsgame: OutList of house %u overflows\n", (unsigned)house);
        exit(2);
    }
    e = &h->out_list[h->out_len++];
    memset(e, 0, sizeof *e);
    e->house = house;
    e->type = type;
    e->len = len;
    memcpy(e->data, data, len);
}

static void TSMOD_CALL game_send_out_list(void *game, uint8_t house, uint32_t frame, uint32_t tag) {
    house_t *h = &houses[house];
    size_t i;
    int to;
    (void)game;
    if (h->sends == MAX_SENDS || h->do_len + h->out_len > sizeof h->do_list / sizeof h->do_list[0]) {
        printf("tsgame: house %u: too many sends\n", (unsigned)house);
        exit(2);
    }
    for (i = 0; i < h->out_len; i++) {
        h->out_list[i].tag = tag;
        h->out_list[i].seq = ++h->next_seq;
        h->do_list[h->do_len++] = h->out_list[i];
    }
    h->send_frames[h->sends] = frame;
    h->send_tags[h->sends] = tag;
    h->sends++;
    for (to = 0; to < HOUSES; to++) {
        packet_t *p, **tail;
        if (to == house || h->removed[to]) continue;
        p = calloc(1, sizeof *p);
        if (!p) exit(2);
        p->from = house;
        p->to = (uint8_t)to;
        p->send_frame = frame;
        p->arrive_us = now_us() + one_way_us[house] + one_way_us[to];
        p->count = h->out_len;
        memcpy(p->events, h->out_list, h->out_len * sizeof(event_t));
        for (tail = &in_flight; *tail; tail = &(*tail)->next) {
        }
        *tail = p; /* in send order; a link delivers in order */
    }
    h->out_len = 0;
}

static void TSMOD_CALL game_print(void *game, uint8_t house, const char *text) {
    (void)game;
    if (house == viewer || strncmp(text, "tsmod:", 6) == 0)
        printf("%6.2fs  house %u  %s\n", (double)(now_us() - start_us) / 1e6, (unsigned)house, text);
}

/* ---- the game ---- */

/* May frame `frame` run? Every packet sent on a send frame whose tag is at
 * or before it may hold events due now (the same on every machine). */
static int ready(const house_t *h, int self, uint32_t frame) {
    size_t i = h->sends;
    int other;
    while (i > 0 && h->send_tags[i - 1] > frame) i--;
    if (i == 0) return 1;
    for (other = 0; other < HOUSES; other++) {
        if (other == self || h->removed[other]) continue;
        if (h->received_through[other] < (int64_t)h->send_frames[i - 1]) return 0;
    }
    return 1;
}

static int by_tag_house_seq(const void *a, const void *b) {
    const event_t *x = a, *y = b;
    if (x->tag != y->tag) return x->tag < y->tag ? -1 : 1;
    if (x->house != y->house) return x->house < y->house ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static void deliver(const tsmod_hooks *hooks) {
    packet_t **link = &in_flight;
    uint64_t now = now_us();
    while (*link) {
        packet_t *p = *link;
        if (p->arrive_us <= now) {
            house_t *h = &houses[p->to];
            if (h->do_len + p->count > sizeof h->do_list / sizeof h->do_list[0]) exit(2);
            memcpy(&h->do_list[h->do_len], p->events, p->count * sizeof(event_t));
            h->do_len += p->count;
            h->received_through[p->from] = p->send_frame;
            if (!h->gone && !h->done && !h->removed[p->from])
                hooks->rtt_sample(h->mod, p->from, (uint32_t)(2 * (one_way_us[p->from] + one_way_us[p->to]) / 1000));
            *link = p->next;
            free(p);
        } else {
            link = &p->next;
        }
    }
}

static void execute_due(const tsmod_hooks *hooks, house_t *h, int self, uint32_t frame) {
    size_t i, kept = 0;
    qsort(h->do_list, h->do_len, sizeof(event_t), by_tag_house_seq);
    for (i = 0; i < h->do_len; i++) {
        event_t e = h->do_list[i];
        if (e.tag > frame) {
            h->do_list[kept++] = e;
            continue;
        }
        hooks->event_executed(h->mod, e.type, e.house, frame, e.data, e.len);
        if (e.type == TS_EV_REMOVEPLAYER) {
            h->removed[e.data[0]] = 1;
            if (e.data[0] == self) h->gone = 1;
        }
        if (h->executed_len == MAX_EVENTS) exit(2);
        h->executed_on[h->executed_len] = frame;
        h->executed[h->executed_len++] = e;
    }
    h->do_len = kept;
}

/* Run the house's next frame if it is due and its packets are here. */
static void step(const tsmod_hooks *hooks, int self, uint32_t frames, uint32_t quit_frame) {
    house_t *h = &houses[self];
    uint64_t now = now_us(), work_start;
    if (h->gone || h->done || now < h->next_due_us) return;
    if (!ready(h, self, h->frame)) {
        if (!h->waiting) {
            h->waiting = 1;
            h->wait_start_us = now;
            hooks->wait(h->mod, 1, now);
        }
        return;
    }
    if (h->waiting) {
        h->waiting = 0;
        h->waited_us += now - h->wait_start_us;
        hooks->wait(h->mod, 0, now);
    }
    work_start = now;
    if (hooks->frame_begin(h->mod, h->frame)) execute_due(hooks, h, self, h->frame);
    if ((h->frame * 7u + (uint32_t)self * 13u) % 19u == 0) { /* a player's order now and then */
        uint8_t order[2];
        order[0] = (uint8_t)self;
        order[1] = (uint8_t)h->frame;
        game_queue_event(NULL, (uint8_t)self, TS_EV_ORDER, order, 2);
    }
    if (h->frame == quit_frame && self == HOUSES - 1) { /* the last house leaves */
        uint8_t who = (uint8_t)self;
        game_queue_event(NULL, (uint8_t)self, TS_EV_REMOVEPLAYER, &who, 1);
    }
    hooks->frame_end(h->mod, (uint32_t)(now_us() - work_start));
    h->frame++;
    /* Pace by the mod's frame period; after a stall, start afresh from now. */
    h->next_due_us += hooks->frame_period_us(h->mod);
    if (h->next_due_us + 100000u < now) h->next_due_us = now;
    if (h->frame >= frames) h->done = 1;
}

static int same_events(void) {
    int a;
    const house_t *ref = &houses[0];
    for (a = 1; a < HOUSES; a++) {
        const house_t *h = &houses[a];
        size_t n = h->executed_len < ref->executed_len ? h->executed_len : ref->executed_len, i;
        if (!h->gone && h->executed_len != ref->executed_len) return 0;
        for (i = 0; i < n; i++) {
            const event_t *x = &h->executed[i], *y = &ref->executed[i];
            if (h->executed_on[i] != ref->executed_on[i] || x->house != y->house || x->seq != y->seq ||
                x->type != y->type || x->tag != y->tag || memcmp(x->data, y->data, EVENT_DATA) != 0) {
                printf("house %d's event %lu differs from house 0's\n", a, (unsigned long)i);
                return 0;
            }
        }
    }
    return 1;
}

int main(int argc, char **argv) {
    const char *mod_path = argc > 1 ? argv[1] : "tsmod.dll";
    uint32_t frames = argc > 2 ? (uint32_t)strtoul(argv[2], NULL, 10) : 400;
    uint32_t quit_frame = frames * 3 / 4;
    tsmod_game game;
    tsmod_hooks hooks;
    tsmod_init_fn init;
    HMODULE mod;
    int i, ok;
    uint32_t mod_errors;

    QueryPerformanceFrequency(&qpc_freq);
    timeBeginPeriod(1); /* 1 ms Sleep granularity, as games do */
    start_us = now_us();

    /* What an injector does: load the DLL, find its entry point, call it. */
    mod = LoadLibraryA(mod_path);
    if (!mod) {
        printf("tsgame: LoadLibrary(%s) failed: error %lu\n", mod_path, (unsigned long)GetLastError());
        return 2;
    }
    init = (tsmod_init_fn)(void (*)(void))GetProcAddress(mod, "tsmod_init");
    if (!init) {
        printf("tsgame: %s has no tsmod_init\n", mod_path);
        return 2;
    }
    memset(&game, 0, sizeof game);
    game.struct_size = sizeof game;
    game.queue_event = game_queue_event;
    game.send_out_list = game_send_out_list;
    game.print = game_print;
    memset(&hooks, 0, sizeof hooks);
    hooks.struct_size = sizeof hooks;
    if (!init(&game, &hooks)) {
        printf("tsgame: tsmod_init refused\n");
        return 2;
    }
    printf("tsgame: loaded %s with LoadLibrary, tsmod_init found with GetProcAddress\n", mod_path);
    printf("tsgame: %d houses at %d fps, one-way delays 15/30/60 ms, %u frames paced by "
           "QueryPerformanceCounter; house %d leaves on frame %u. House %d's screen:\n",
           HOUSES, SPEED_FPS, (unsigned)frames, HOUSES - 1, (unsigned)quit_frame, viewer);

    for (i = 0; i < HOUSES; i++) {
        int j;
        memset(&houses[i], 0, sizeof houses[i]);
        for (j = 0; j < HOUSES; j++) houses[i].received_through[j] = -1;
        houses[i].next_due_us = now_us();
        houses[i].mod = hooks.house_start((uint8_t)i, HOUSES, SPEED_FPS);
        if (!houses[i].mod) {
            printf("tsgame: the mod could not start house %d\n", i);
            return 2;
        }
    }
    for (;;) {
        int running = 0;
        deliver(&hooks);
        for (i = 0; i < HOUSES; i++) {
            if (houses[i].gone || houses[i].done) continue;
            running = 1;
            step(&hooks, i, frames, quit_frame);
        }
        if (!running) break;
        if (now_us() - start_us > 120u * 1000000u) {
            printf("tsgame: the game stalled\n");
            return 1;
        }
        Sleep(1);
    }

    printf("tsgame: %.2f s of play\n", (double)(now_us() - start_us) / 1e6);
    for (i = 0; i < HOUSES; i++) {
        printf("house %d: %lu events executed up to frame %u, waited %.2f s%s\n", i,
               (unsigned long)houses[i].executed_len, (unsigned)houses[i].frame,
               (double)houses[i].waited_us / 1e6, houses[i].gone ? " (left the game)" : "");
        hooks.house_end(houses[i].mod);
    }
    {
        size_t n, reports = 0, timings = 0, orders = 0;
        for (n = 0; n < houses[viewer].executed_len; n++) {
            uint8_t type = houses[viewer].executed[n].type;
            reports += type == TS_EV_NETWORK_REPORT;
            timings += type == TS_EV_TIMING;
            orders += type == TS_EV_ORDER;
        }
        printf("house %d executed %lu NETWORK_REPORT (%d), %lu TIMING (%d) and %lu order events\n", viewer,
               (unsigned long)reports, TS_EV_NETWORK_REPORT, (unsigned long)timings, TS_EV_TIMING,
               (unsigned long)orders);
    }
    mod_errors = hooks.errors();
    ok = same_events() && mod_errors == 0;
    printf(ok ? "every house executed the same events on the same frames; no rungs call failed\n"
              : "FAILED: houses diverged or %u rungs call(s) failed\n",
           (unsigned)mod_errors);
    while (in_flight) {
        packet_t *p = in_flight;
        in_flight = p->next;
        free(p);
    }
    FreeLibrary(mod);
    timeEndPeriod(1);
    return ok ? 0 : 1;
}
