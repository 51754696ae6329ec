/* engine_session — the engine-session path a mod takes, in one program.
 *
 *   ./engine_session [FRAMES]   two players in one process, real UDP sockets
 *                               on 127.0.0.1 (default 600 frames)
 *
 * Each player is an engine with its own event queue and its own packets,
 * as a Tiberian Sun-family game is: a rungs_session decides the timing and
 * a rungs_endpoint carries the engine's packets. The engine
 *
 *   - collects the events rungs queues (`queue_event`: the NETWORK_REPORTs,
 *     the master's TIMING) with its own in an outgoing list, and on the
 *     `send_frame` callback sends one packet: its packet number, the send
 *     frame, the tag and the events, every one stamped with that tag;
 *   - hands every packet's number and send frame to
 *     rungs_session_packet_received and keeps its events in its queue;
 *   - on a frame that executes, waits until rungs_session_peers_ready says
 *     so (timing the wait on the session's lent measurements), then runs
 *     every queued event tagged at or before the frame in (tag, seat, issue)
 *     order, passing rungs' events to rungs_session_event_executed; it
 *     decodes each NETWORK_REPORT with rungs_report_payload_decode too, to
 *     show what the players report;
 *   - times its frames' work on the lent measurements and takes the round
 *     trips from the endpoint (rungs_session_sample_links).
 *
 * At the end it checks that both machines executed the same events on the
 * same frames and moved through the same timings, and that each executed
 * reports from both players (exit 1 if not). */
#define _POSIX_C_SOURCE 200809L

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The engine-session tier (rungs_session_*, and through rungs/report.h the
 * measurements, the report and its codec) and the pieces tier for the
 * endpoint. */
#include "rungs/session.h"
#include "rungs/pieces.h"

#define PLAYERS 2
#define TIMING_ID 31          /* the game's own TIMING event */
#define NETWORK_REPORT_ID 40  /* an ID no part of the game uses */
#define LAYOUT RUNGS_REPORT_LAYOUT_EXTENDED
#define MAX_EVENTS 64
#define MAX_PAYLOAD 32
#define MAX_LOG 256
#define FRAME_US 2000         /* a frame every 2 ms (not the game's rate): the demo is short */

static uint64_t now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static void sleep_us(long us) {
    struct timespec ts;
    ts.tv_sec = us / 1000000;
    ts.tv_nsec = (us % 1000000) * 1000;
    nanosleep(&ts, NULL);
}

/* Stop on a refused call with the library's message. */
static void check(rungs_result rc, const char *what) {
    char message[256];
    if (rc == RUNGS_OK) return;
    rungs_last_error_message(message, sizeof message, NULL);
    fprintf(stderr, "%s: %s (%s)\n", what, rungs_result_str(rc), message);
    exit(1);
}

typedef struct {
    uint32_t tag;
    uint8_t seat;
    uint32_t issue; /* order of issue within the seat's stream */
    uint8_t type;
    uint8_t len;
    uint8_t payload[MAX_PAYLOAD];
    int executed;
} event;

/* What a machine did, compared across machines at the end. */
typedef struct {
    uint32_t frame;
    uint8_t seat;
    uint8_t type;
    uint8_t len;
    uint8_t payload[MAX_PAYLOAD];
} executed_event;

typedef struct {
    uint32_t frame;
    uint8_t send_period;
    uint8_t look_ahead;
} timing_change;

typedef struct {
    uint8_t seat;
    rungs_session *session;
    rungs_measurements *measurements; /* lent by the session */
    rungs_endpoint *endpoint;
    /* the outgoing list: events collected since the last send frame */
    event outlist[MAX_EVENTS];
    int outlist_len;
    uint32_t next_packet;
    uint32_t next_issue;
    /* the engine's event queue: its own events and its peer's */
    event queue[MAX_EVENTS];
    int queue_len;
    executed_event log[MAX_LOG];
    int log_len;
    timing_change timings[MAX_LOG];
    int timings_len;
    int reports_from[PLAYERS];
} machine;

static void RUNGS_CALL queue_into_outlist(void *user, uint32_t frame, uint8_t type,
                                          const uint8_t *payload, size_t len) {
    machine *me = user;
    event *e;
    (void)frame;
    if (me->outlist_len == MAX_EVENTS || len > MAX_PAYLOAD) {
        fprintf(stderr, "seat %u: outgoing list full\n", me->seat);
        exit(1);
    }
    e = &me->outlist[me->outlist_len++];
    memset(e, 0, sizeof *e);
    e->type = type;
    e->len = (uint8_t)len;
    memcpy(e->payload, payload, len);
}

static void keep_in_queue(machine *m, const event *e) {
    if (m->queue_len == MAX_EVENTS) {
        fprintf(stderr, "seat %u: event queue full\n", m->seat);
        exit(1);
    }
    m->queue[m->queue_len++] = *e;
}

static void put_u32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); p[2] = (uint8_t)(v >> 16); p[3] = (uint8_t)(v >> 24);
}

static uint32_t get_u32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Send frame: one packet to every peer, [packet number, send frame, tag,
 * event count, then each event's type, length and payload], every event
 * stamped with `tag`; the machine keeps its own events in its queue too. */
static void RUNGS_CALL flush_packet(void *user, uint32_t send_frame, uint32_t tag) {
    machine *me = user;
    uint8_t packet[RUNGS_MAX_MESSAGE_BYTES];
    size_t at = 13;
    int i;
    uint8_t peer;
    put_u32(packet, me->next_packet++);
    put_u32(packet + 4, send_frame);
    put_u32(packet + 8, tag);
    packet[12] = (uint8_t)me->outlist_len;
    for (i = 0; i < me->outlist_len; i++) {
        event *e = &me->outlist[i];
        e->tag = tag;
        e->seat = me->seat;
        e->issue = me->next_issue++;
        packet[at++] = e->type;
        packet[at++] = e->len;
        memcpy(packet + at, e->payload, e->len);
        at += e->len;
        keep_in_queue(me, e);
    }
    me->outlist_len = 0;
    for (peer = 0; peer < PLAYERS; peer++)
        if (peer != me->seat) check(rungs_endpoint_send(me->endpoint, peer, packet, at), "rungs_endpoint_send");
}

static void RUNGS_CALL timing_changed(void *user, uint32_t frame, uint8_t send_period, uint8_t look_ahead) {
    machine *me = user;
    if (me->timings_len < MAX_LOG) {
        timing_change *t = &me->timings[me->timings_len++];
        t->frame = frame;
        t->send_period = send_period;
        t->look_ahead = look_ahead;
    }
}

static void RUNGS_CALL show_message(void *user, uint32_t frame, rungs_tier tier, const char *text) {
    machine *me = user;
    (void)tier;
    if (me->seat == 0) printf("  frame %4u: %s\n", frame, text);
}

static void malformed(uint8_t seat) {
    fprintf(stderr, "a malformed packet from seat %u\n", seat);
    exit(1);
}

/* A packet from `seat`: its number and send frame to the session, its
 * events to the queue. The endpoint authenticated it; its framing is still
 * checked before anything is copied. */
static void receive_packet(machine *m, uint8_t seat, const uint8_t *packet, uint32_t length) {
    uint32_t packet_number, send_frame, tag;
    size_t at = 13;
    int i, count;
    if (length < 13) malformed(seat);
    packet_number = get_u32(packet);
    send_frame = get_u32(packet + 4);
    tag = get_u32(packet + 8);
    count = packet[12];
    check(rungs_session_packet_received(m->session, seat, packet_number, send_frame),
          "rungs_session_packet_received");
    for (i = 0; i < count; i++) {
        event e;
        memset(&e, 0, sizeof e);
        e.tag = tag;
        e.seat = seat;
        e.issue = m->next_issue++;
        if (at + 2 > length || packet[at + 1] > MAX_PAYLOAD || at + 2 + packet[at + 1] > length) malformed(seat);
        e.type = packet[at++];
        e.len = packet[at++];
        memcpy(e.payload, packet + at, e.len);
        at += e.len;
        keep_in_queue(m, &e);
    }
}

/* Drive every endpoint and hand what arrived to its machine. */
static void pump(machine *machines) {
    uint8_t buf[RUNGS_MAX_MESSAGE_BYTES];
    int i;
    for (i = 0; i < PLAYERS; i++) {
        rungs_received got;
        check(rungs_endpoint_poll(machines[i].endpoint, now_us()), "rungs_endpoint_poll");
        for (;;) {
            check(rungs_endpoint_recv(machines[i].endpoint, buf, sizeof buf, &got), "rungs_endpoint_recv");
            if (!got.received) break;
            receive_packet(&machines[i], got.seat, buf, got.length);
        }
    }
}

/* The next event due (tag at or before `last`) in (tag, seat, issue) order, or NULL. */
static event *next_due(machine *m, uint32_t last) {
    event *best = NULL;
    int i;
    for (i = 0; i < m->queue_len; i++) {
        event *e = &m->queue[i];
        if (e->executed || e->tag > last) continue;
        if (!best || e->tag < best->tag || (e->tag == best->tag && e->seat < best->seat) ||
            (e->tag == best->tag && e->seat == best->seat && e->issue < best->issue))
            best = e;
    }
    return best;
}

static void execute_due_events(machine *m, uint32_t frame) {
    uint32_t first, last;
    event *e;
    int i, kept = 0;
    check(rungs_session_due_tags(m->session, &first, &last), "rungs_session_due_tags");
    while ((e = next_due(m, last)) != NULL) {
        executed_event *logged;
        e->executed = 1;
        check(rungs_session_event_executed(m->session, e->type, e->seat, frame, e->payload, e->len),
              "rungs_session_event_executed");
        if (e->type == NETWORK_REPORT_ID) {
            rungs_report report;
            rungs_report_init(&report);
            check(rungs_report_payload_decode(e->payload, e->len, &report), "rungs_report_payload_decode");
            m->reports_from[e->seat]++;
            if (m->seat == 0)
                printf("  frame %4u: report of seat %u: %u us per frame, longest wait %u ms, worst round trip %s%u ms\n",
                       frame, e->seat, report.process_us, report.max_wait_ms,
                       report.has_worst_rtt ? "" : "(none) ", report.worst_rtt_ms);
        }
        if (m->log_len < MAX_LOG) {
            logged = &m->log[m->log_len++];
            logged->frame = frame;
            logged->seat = e->seat;
            logged->type = e->type;
            logged->len = e->len;
            memcpy(logged->payload, e->payload, e->len);
        }
    }
    /* forget what ran */
    for (i = 0; i < m->queue_len; i++)
        if (!m->queue[i].executed) m->queue[kept++] = m->queue[i];
    m->queue_len = kept;
}

static void run_frame(machine *machines, machine *m, uint32_t frame) {
    int32_t executes = 0, ready = 0;
    uint8_t waiting_for = RUNGS_NO_SEAT;
    check(rungs_session_frame_begin(m->session, frame, &executes), "rungs_session_frame_begin");
    if (executes) {
        check(rungs_session_peers_ready(m->session, &ready, &waiting_for), "rungs_session_peers_ready");
        if (!ready) {
            check(rungs_measurements_wait_begin_for(m->measurements, now_us(), waiting_for),
                  "rungs_measurements_wait_begin_for");
            while (!ready) {
                sleep_us(100);
                pump(machines);
                check(rungs_session_peers_ready(m->session, &ready, &waiting_for), "rungs_session_peers_ready");
            }
            check(rungs_measurements_wait_end(m->measurements, now_us()), "rungs_measurements_wait_end");
        }
        execute_due_events(m, frame);
    }
    /* the simulation runs here (a 300 µs stand-in): its time is the frame's work */
    check(rungs_measurements_frame_work_begin(m->measurements, now_us()), "rungs_measurements_frame_work_begin");
    sleep_us(300);
    check(rungs_measurements_frame_work_end(m->measurements, now_us()), "rungs_measurements_frame_work_end");
    check(rungs_session_sample_links(m->session, m->endpoint, now_us()), "rungs_session_sample_links");
    check(rungs_session_frame_end(m->session), "rungs_session_frame_end");
}

static void open_machine(machine *m, uint8_t seat) {
    rungs_session_config cfg;
    rungs_endpoint_config ep;
    memset(m, 0, sizeof *m);
    m->seat = seat;

    check(rungs_session_config_init(&cfg), "rungs_session_config_init");
    cfg.speed_fps = 30;
    cfg.seat_count = PLAYERS;
    cfg.human_seat_mask = (1u << PLAYERS) - 1;
    cfg.local_seat = seat;
    cfg.timing_event_id = TIMING_ID;
    cfg.network_report_event_id = NETWORK_REPORT_ID;
    cfg.report_layout = LAYOUT;
    cfg.callbacks.user = m;
    cfg.callbacks.queue_event = queue_into_outlist;
    cfg.callbacks.send_frame = flush_packet;
    cfg.callbacks.timing_changed = timing_changed;
    cfg.callbacks.player_message = show_message;
    check(rungs_session_new(&cfg, &m->session), "rungs_session_new");
    check(rungs_session_measurements(m->session, &m->measurements), "rungs_session_measurements");

    check(rungs_endpoint_config_init(&ep), "rungs_endpoint_config_init");
    ep.session_id = 0x5eed;
    memset(ep.key, 0x42, sizeof ep.key); /* the game's secret, from its setup */
    ep.local_seat = seat;
    ep.bind_address = "127.0.0.1:0";
    check(rungs_endpoint_new(&ep, &m->endpoint), "rungs_endpoint_new");
}

static int same_events(const machine *a, const machine *b) {
    int i;
    if (a->log_len != b->log_len) return 0;
    for (i = 0; i < a->log_len; i++) {
        const executed_event *x = &a->log[i], *y = &b->log[i];
        if (x->frame != y->frame || x->seat != y->seat || x->type != y->type || x->len != y->len ||
            memcmp(x->payload, y->payload, x->len) != 0)
            return 0;
    }
    return 1;
}

static int same_timings(const machine *a, const machine *b) {
    int i;
    if (a->timings_len != b->timings_len) return 0;
    for (i = 0; i < a->timings_len; i++)
        if (a->timings[i].frame != b->timings[i].frame || a->timings[i].send_period != b->timings[i].send_period ||
            a->timings[i].look_ahead != b->timings[i].look_ahead)
            return 0;
    return 1;
}

int main(int argc, char **argv) {
    static machine machines[PLAYERS];
    uint32_t frames = argc > 1 ? (uint32_t)strtoul(argv[1], NULL, 10) : 600, frame;
    rungs_timing_status status[PLAYERS];
    int i, ok = 1;

    for (i = 0; i < PLAYERS; i++) open_machine(&machines[i], (uint8_t)i);
    for (i = 0; i < PLAYERS; i++) {
        int j;
        for (j = 0; j < PLAYERS; j++) {
            uint16_t port;
            char address[32];
            if (i == j) continue;
            check(rungs_endpoint_local_port(machines[j].endpoint, &port), "rungs_endpoint_local_port");
            snprintf(address, sizeof address, "127.0.0.1:%u", port);
            check(rungs_endpoint_add_peer(machines[i].endpoint, (uint8_t)j, address, now_us()),
                  "rungs_endpoint_add_peer");
        }
    }

    printf("engine_session: %u frames, two engines with their own queues and packets\n", frames);
    for (frame = 0; frame < frames; frame++) {
        uint64_t started = now_us();
        for (i = 0; i < PLAYERS; i++) run_frame(machines, &machines[i], frame);
        pump(machines);
        while (now_us() - started < FRAME_US) sleep_us(200);
    }

    printf("timings in force (seat 0):");
    for (i = 0; i < machines[0].timings_len; i++)
        printf(" %u/%u from frame %u", machines[0].timings[i].send_period, machines[0].timings[i].look_ahead,
               machines[0].timings[i].frame);
    printf("\n");
    for (i = 0; i < PLAYERS; i++) {
        check(rungs_session_status(machines[i].session, &status[i]), "rungs_session_status");
        printf("seat %d: timing %u/%u at %u fps, master seat %u, %d events executed, reports from seat 0: %d, seat 1: %d\n",
               i, status[i].send_period, status[i].look_ahead, status[i].fps, status[i].master_seat,
               machines[i].log_len, machines[i].reports_from[0], machines[i].reports_from[1]);
        if (machines[i].reports_from[0] == 0 || machines[i].reports_from[1] == 0) {
            printf("seat %d executed no report of a player\n", i);
            ok = 0;
        }
    }
    if (!same_events(&machines[0], &machines[1])) {
        printf("the machines executed different events\n");
        ok = 0;
    }
    if (!same_timings(&machines[0], &machines[1])) {
        printf("the machines moved through different timings\n");
        ok = 0;
    }
    if (status[0].send_period != status[1].send_period || status[0].look_ahead != status[1].look_ahead ||
        status[0].fps != status[1].fps) {
        printf("the machines ended on different timings\n");
        ok = 0;
    }

    for (i = 0; i < PLAYERS; i++) {
        rungs_session_free(machines[i].session); /* releases the lent measurements too */
        rungs_endpoint_free(machines[i].endpoint);
    }
    printf("%s\n", ok ? "both machines executed the same events and agree on the timing" : "FAILED");
    return ok ? 0 : 1;
}
