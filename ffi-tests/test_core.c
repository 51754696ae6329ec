/* The library-wide C API: versions, result names, error messages and how long
 * they stay, the panic guard, and one handle used from two threads. */
#define _POSIX_C_SOURCE 200112L
#include <pthread.h>
#include <stdlib.h>

#include "harness.h"
#include "rungs.h"

static void test_versions(void) {
    CHECK_EQ(rungs_abi_version(), RUNGS_ABI_VERSION);
    CHECK_EQ(RUNGS_ABI_VERSION, 3);
    CHECK(rungs_version() != NULL);
    CHECK(strlen(rungs_version()) >= 5);
}

static void test_result_names(void) {
    CHECK_STR(rungs_result_str(RUNGS_OK), "RUNGS_OK");
    CHECK_STR(rungs_result_str(RUNGS_ERR_NULL_POINTER), "RUNGS_ERR_NULL_POINTER");
    CHECK_STR(rungs_result_str(RUNGS_ERR_INVALID_ARGUMENT), "RUNGS_ERR_INVALID_ARGUMENT");
    CHECK_STR(rungs_result_str(RUNGS_ERR_PANIC), "RUNGS_ERR_PANIC");
    CHECK_STR(rungs_result_str(RUNGS_ERR_POISONED), "RUNGS_ERR_POISONED");
    CHECK_STR(rungs_result_str(RUNGS_ERR_REENTRANT), "RUNGS_ERR_REENTRANT");
    CHECK_STR(rungs_result_str(RUNGS_ERR_UNKNOWN_SEAT), "RUNGS_ERR_UNKNOWN_SEAT");
    CHECK_STR(rungs_result_str(RUNGS_ERR_IO), "RUNGS_ERR_IO");
    CHECK_STR(rungs_result_str(RUNGS_ERR_BUSY), "RUNGS_ERR_BUSY");
    CHECK_EQ(RUNGS_ERR_BUSY, 13);
    CHECK_STR(rungs_result_str(-1), "RUNGS_ERR_UNKNOWN_CODE");
    CHECK_STR(rungs_result_str(100000), "RUNGS_ERR_UNKNOWN_CODE");
}

/* The message describes the latest call on this thread: an error's detail,
 * or nothing once a call succeeds. Reading it does not change it. */
static void test_message_lifetime(void) {
    size_t len = 99;
    char small[4];
    rungs_timing t;
    const char *rung = "rungs_rung_timing: rung is 11; expected 1 to 10";

    CHECK_EQ(rungs_rung_timing(11, &t), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE(rung);
    /* Reading twice gives the same message: reading does not clear it. */
    CHECK_MESSAGE(rung);
    CHECK_EQ(rungs_last_error_message(NULL, 0, &len), RUNGS_OK);
    CHECK_EQ(len, strlen(rung));
    /* A NULL buffer with a capacity is refused and keeps the message. */
    CHECK_EQ(rungs_last_error_message(NULL, 8, NULL), RUNGS_ERR_NULL_POINTER);
    CHECK_MESSAGE(rung);
    /* Truncation keeps the terminator inside the buffer; len is the full length. */
    memset(small, 'x', sizeof small);
    CHECK_EQ(rungs_last_error_message(small, sizeof small, &len), RUNGS_OK);
    CHECK_STR(small, "run");
    CHECK_EQ(len, strlen(rung));
    /* rungs_result_str and functions without a rungs_result keep it too. */
    CHECK(rungs_result_str(RUNGS_OK) != NULL);
    CHECK(rungs_abi_version() > 0);
    CHECK_MESSAGE(rung);

    /* The next call that succeeds clears it. */
    CHECK_EQ(rungs_rung_timing(3, &t), RUNGS_OK);
    CHECK_MESSAGE("");
    CHECK_EQ(rungs_last_error_message(NULL, 0, &len), RUNGS_OK);
    CHECK_EQ(len, 0);
}

/* A few representative messages: function name, argument or field, what was
 * got and what was expected. */
static void test_message_content(void) {
    rungs_clock_config clock_config;
    rungs_clock *clock = NULL;
    rungs_offset_estimate estimate;
    rungs_timing_event event = {3, 9, 30};
    uint8_t buf[8] = {0};
    size_t len = 0;
    char expected[200];
    rungs_report report;

    memset(&clock_config, 0, sizeof clock_config);
    clock_config.struct_size = 8;
    CHECK_EQ(rungs_clock_new(&clock_config, &clock), RUNGS_ERR_INVALID_ARGUMENT);
    snprintf(expected, sizeof expected,
             "rungs_clock_new: config->struct_size is 8; expected at least "
             "sizeof(rungs_clock_config) = %u in this library's rungs.h (set it to sizeof the struct)",
             (unsigned)sizeof clock_config);
    CHECK_MESSAGE(expected);

    CHECK_EQ(rungs_clock_estimate(NULL, &estimate), RUNGS_ERR_NULL_POINTER);
    CHECK_MESSAGE("rungs_clock_estimate: the handle (first argument) is NULL");

    CHECK_EQ(rungs_timing_payload_encode(&event, 0, buf, 3, &len), RUNGS_ERR_BUFFER_TOO_SMALL);
    CHECK_MESSAGE("rungs_timing_payload_encode: cap is 3; expected at least 5");

    CHECK_EQ(rungs_timing_payload_decode(NULL, 5, 0, &event), RUNGS_ERR_NULL_POINTER);
    CHECK_MESSAGE("rungs_timing_payload_decode: bytes is NULL but its length is 5; expected a "
                  "valid pointer, or a length of 0");

    event.fps = 0;
    CHECK_EQ(rungs_timing_payload_encode(&event, 0, buf, sizeof buf, &len),
             RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE("rungs_timing_payload_encode: event->fps is 0; expected 1 to 255");

    rungs_report_init(&report);
    report.struct_size = 8;
    CHECK_EQ(rungs_report_payload_decode(buf, 6, &report), RUNGS_ERR_INVALID_ARGUMENT);
    snprintf(expected, sizeof expected,
             "rungs_report_payload_decode: out->struct_size is 8; expected "
             "sizeof(rungs_report) = %u in this library's rungs.h, at least 20 (set it with "
             "rungs_report_init)",
             (unsigned)sizeof report);
    CHECK_MESSAGE(expected);
    CHECK_EQ(rungs_report_payload_decode(buf, 6, NULL), RUNGS_ERR_NULL_POINTER);
    CHECK_MESSAGE("rungs_report_payload_decode: out is NULL");
}

/* ---- one handle, two threads ---- */

typedef struct {
    pthread_mutex_t lock;
    pthread_cond_t changed;
    int inside;       /* the holder is inside a call on the machine */
    int tried;        /* the other thread has made its call */
    rungs_timing_machine *m;
    rungs_result holder_result;
} handoff_t;

/* timing_changed runs inside rungs_timing_machine_frame_begin(0): the holder
 * thread stays inside the call until the other thread has tried its own. */
static void hold_inside_call(void *user, uint32_t frame, uint8_t sp, uint8_t la) {
    handoff_t *h = user;
    (void)frame;
    (void)sp;
    (void)la;
    pthread_mutex_lock(&h->lock);
    h->inside = 1;
    pthread_cond_broadcast(&h->changed);
    while (!h->tried) pthread_cond_wait(&h->changed, &h->lock);
    pthread_mutex_unlock(&h->lock);
}

static void *holder_thread(void *arg) {
    handoff_t *h = arg;
    h->holder_result = rungs_timing_machine_frame_begin(h->m, 0, NULL);
    return NULL;
}

static rungs_timing_machine_config machine_config(void *user) {
    rungs_timing_machine_config c;
    memset(&c, 0, sizeof c);
    c.struct_size = sizeof c;
    c.speed_fps = 30;
    c.seat_count = 2;
    c.local_seat = 0;
    c.human_seat_mask = 0x3;
    c.callbacks.user = user;
    return c;
}

/* A second thread calling while the first is inside gets RUNGS_ERR_BUSY,
 * changes nothing, and the first call finishes normally. */
static void test_second_thread_gets_busy(void) {
    handoff_t h;
    pthread_t holder;
    rungs_timing_machine_config c = machine_config(&h);
    uint8_t fps = 0;
    memset(&h, 0, sizeof h);
    pthread_mutex_init(&h.lock, NULL);
    pthread_cond_init(&h.changed, NULL);
    c.callbacks.timing_changed = hold_inside_call;
    CHECK_EQ(rungs_timing_machine_new(&c, &h.m), RUNGS_OK);
    if (!h.m) return;
    CHECK_EQ(pthread_create(&holder, NULL, holder_thread, &h), 0);

    pthread_mutex_lock(&h.lock);
    while (!h.inside) pthread_cond_wait(&h.changed, &h.lock);
    pthread_mutex_unlock(&h.lock);
    CHECK_EQ(rungs_timing_machine_fps(h.m, &fps), RUNGS_ERR_BUSY);
    CHECK_EQ(fps, 0);
    CHECK_MESSAGE("rungs_timing_machine_fps: another thread is inside a call on the same "
                  "object; use a handle from one thread at a time");
    CHECK_EQ(rungs_timing_machine_free(h.m), RUNGS_ERR_BUSY);
    CHECK_MESSAGE("rungs_timing_machine_free: another thread is inside a call on the same "
                  "object; use a handle from one thread at a time");
    pthread_mutex_lock(&h.lock);
    h.tried = 1;
    pthread_cond_broadcast(&h.changed);
    pthread_mutex_unlock(&h.lock);
    pthread_join(holder, NULL);

    CHECK_EQ(h.holder_result, RUNGS_OK);
    CHECK_EQ(rungs_timing_machine_fps(h.m, &fps), RUNGS_OK);
    CHECK_EQ(fps, 30);
    CHECK_EQ(rungs_timing_machine_free(h.m), RUNGS_OK);
    pthread_cond_destroy(&h.changed);
    pthread_mutex_destroy(&h.lock);
}

/* Two threads racing on one handle with no coordination: every call either
 * runs (RUNGS_OK) or is refused whole (RUNGS_ERR_BUSY), and the measurements
 * hold exactly the calls that ran. Each racer tries again after a refusal
 * until RACE_CALLS of its calls have run, as a caller would: a refusal
 * returns at once, so a racer that only counted attempts could spend all of
 * them while the other held the handle (it did under Wine once: 0 of
 * 100000 ran), which says nothing about the guard. A refused racer always
 * gets through once the other has finished, so the loop ends. */
#define RACE_CALLS 100000

typedef struct {
    pthread_mutex_t lock;
    pthread_cond_t changed;
    int ready, go;
} gate_t;

typedef struct {
    rungs_measurements *m;
    gate_t *gate;
    uint64_t work_us;
    int ok, busy, other;
} racer_t;

static void *racer(void *arg) {
    racer_t *r = arg;
    /* Both racers start together, so their calls overlap. */
    pthread_mutex_lock(&r->gate->lock);
    r->gate->ready++;
    pthread_cond_broadcast(&r->gate->changed);
    while (!r->gate->go) pthread_cond_wait(&r->gate->changed, &r->gate->lock);
    pthread_mutex_unlock(&r->gate->lock);
    while (r->ok < RACE_CALLS && r->other == 0) {
        rungs_result res = rungs_measurements_add_frame_work_us(r->m, r->work_us);
        if (res == RUNGS_OK) {
            r->ok++;
        } else if (res == RUNGS_ERR_BUSY) {
            r->busy++;
        } else {
            r->other++;
        }
    }
    return NULL;
}

static void test_threads_racing_on_one_handle(void) {
    rungs_measurements *m = NULL;
    racer_t a, b;
    gate_t gate;
    pthread_t ta, tb;
    rungs_report report;
    uint64_t expected_avg;
    CHECK_EQ(rungs_measurements_new(&m), RUNGS_OK);
    if (!m) return;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    memset(&gate, 0, sizeof gate);
    pthread_mutex_init(&gate.lock, NULL);
    pthread_cond_init(&gate.changed, NULL);
    a.m = b.m = m;
    a.gate = b.gate = &gate;
    a.work_us = 1000;
    b.work_us = 3000;
    CHECK_EQ(pthread_create(&ta, NULL, racer, &a), 0);
    CHECK_EQ(pthread_create(&tb, NULL, racer, &b), 0);
    pthread_mutex_lock(&gate.lock);
    while (gate.ready < 2) pthread_cond_wait(&gate.changed, &gate.lock);
    gate.go = 1;
    pthread_cond_broadcast(&gate.changed);
    pthread_mutex_unlock(&gate.lock);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    CHECK_EQ(a.other + b.other, 0);
    CHECK_EQ(a.ok, RACE_CALLS);
    CHECK_EQ(b.ok, RACE_CALLS);
    fprintf(stderr, "race: a ok %d busy %d, b ok %d busy %d\n", a.ok, a.busy, b.ok, b.busy);
    /* The report's average is the exact mean of the calls that ran: no
     * update was lost or torn by the race. */
    rungs_report_init(&report);
    CHECK_EQ(rungs_measurements_take_report(m, 0, &report), RUNGS_OK);
    expected_avg = ((uint64_t)a.ok * 1000 + (uint64_t)b.ok * 3000) / (uint64_t)(a.ok + b.ok);
    CHECK(report.process_us + 1 >= expected_avg && report.process_us <= expected_avg + 1);
    CHECK_EQ(rungs_measurements_free(m), RUNGS_OK);
    pthread_cond_destroy(&gate.changed);
    pthread_mutex_destroy(&gate.lock);
}

static void on_queue_nothing(void *user, uint32_t frame, uint8_t type_id, const uint8_t *payload,
                             size_t len) {
    (void)user;
    (void)frame;
    (void)type_id;
    (void)payload;
    (void)len;
}
static void on_send_nothing(void *user, uint32_t frame, uint32_t tag) {
    (void)user;
    (void)frame;
    (void)tag;
}

/* Every config struct has an _init that writes struct_size and the real
 * defaults over whatever the struct held; what only the game knows is left
 * for it to set, and the _new call says so. */
static void test_every_config_has_an_init(void) {
    rungs_timing_machine_config tm;
    rungs_session_config sc;
    rungs_lockstep_config lc;
    rungs_relay_host_config hc;
    rungs_endpoint_config ec;
    rungs_timing_machine *machine = NULL;
    rungs_session *session = NULL;
    rungs_lockstep *game = NULL;
    rungs_relay_host *host = NULL;
    static const uint8_t key[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};

    CHECK_EQ(rungs_timing_machine_config_init(NULL), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_session_config_init(NULL), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_lockstep_config_init(NULL), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_relay_host_config_init(NULL), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_endpoint_config_init(NULL), RUNGS_ERR_NULL_POINTER);

    memset(&tm, 0xAB, sizeof tm);
    CHECK_EQ(rungs_timing_machine_config_init(&tm), RUNGS_OK);
    CHECK_EQ(tm.struct_size, sizeof tm);
    CHECK_EQ(tm.policy, RUNGS_POLICY_ADAPTIVE);
    CHECK_EQ(tm.tick_hz, 0);
    CHECK(tm.callbacks.user == NULL && tm.callbacks.timing_changed == NULL);
    CHECK_EQ(rungs_timing_machine_new(&tm, &machine), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE_HAS("speed_fps");
    tm.speed_fps = 30;
    tm.seat_count = 2;
    tm.human_seat_mask = 0x3;
    CHECK_EQ(rungs_timing_machine_new(&tm, &machine), RUNGS_OK);
    CHECK_EQ(rungs_timing_machine_free(machine), RUNGS_OK);

    memset(&sc, 0xAB, sizeof sc);
    CHECK_EQ(rungs_session_config_init(&sc), RUNGS_OK);
    CHECK_EQ(sc.struct_size, sizeof sc);
    CHECK_EQ(sc.policy, RUNGS_POLICY_ADAPTIVE);
    CHECK_EQ(sc.report_layout, RUNGS_REPORT_LAYOUT_COMPACT);
    CHECK_EQ(sc.send_order, RUNGS_SEND_AFTER_EXECUTE);
    CHECK_EQ(sc.timing_fog_bias, 0);
    CHECK_EQ(sc.tick_hz, 0);
    CHECK_EQ(sc.latency_fudge_event_id, RUNGS_NO_EVENT_ID);
    CHECK_EQ(sc.timing_event_id, RUNGS_NO_EVENT_ID);
    CHECK_EQ(sc.network_report_event_id, RUNGS_NO_EVENT_ID);
    CHECK(sc.callbacks.user == NULL && sc.callbacks.log == NULL);
    sc.speed_fps = 30;
    sc.seat_count = 2;
    sc.human_seat_mask = 0x3;
    sc.callbacks.queue_event = on_queue_nothing;
    sc.callbacks.send_frame = on_send_nothing;
    /* The event IDs are the game's: the init leaves none that could collide. */
    CHECK_EQ(rungs_session_new(&sc, &session), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE_HAS("timing_event_id is 65535");
    sc.timing_event_id = 31;
    sc.network_report_event_id = 36;
    CHECK_EQ(rungs_session_new(&sc, &session), RUNGS_OK);
    CHECK_EQ(rungs_session_free(session), RUNGS_OK);

    memset(&lc, 0xAB, sizeof lc);
    CHECK_EQ(rungs_lockstep_config_init(&lc), RUNGS_OK);
    CHECK_EQ(lc.struct_size, sizeof lc);
    CHECK_EQ(lc.policy, RUNGS_POLICY_ADAPTIVE);
    CHECK_EQ(lc.topology, RUNGS_TOPOLOGY_PEER_TO_PEER);
    CHECK_EQ(lc.relay_jitter_ticks, RUNGS_RELAY_DEFAULT_JITTER_TICKS);
    CHECK_EQ(lc.checksum_interval, 0);
    CHECK_EQ(lc.manual_drops, 0);
    CHECK(lc.bind_address == NULL && lc.link_keys == NULL && lc.callbacks.command == NULL);
    lc.speed_fps = 30;
    lc.seat_count = 2;
    lc.human_seat_mask = 0x3;
    CHECK_EQ(rungs_lockstep_new(&lc, 0, &game), RUNGS_ERR_INVALID_ARGUMENT); /* the key is the game's */
    CHECK_MESSAGE_HAS("config->key");
    memcpy(lc.key, key, sizeof key);
    lc.bind_address = "127.0.0.1:0";
    CHECK_EQ(rungs_lockstep_new(&lc, 0, &game), RUNGS_OK);
    CHECK_EQ(rungs_lockstep_free(game), RUNGS_OK);

    memset(&hc, 0xAB, sizeof hc);
    CHECK_EQ(rungs_relay_host_config_init(&hc), RUNGS_OK);
    CHECK_EQ(hc.struct_size, sizeof hc);
    CHECK_EQ(hc.tick_rate_millihz, RUNGS_RELAY_HOST_DEFAULT_TICK_RATE_MILLIHZ);
    CHECK_EQ(hc.load_wait_seconds, RUNGS_RELAY_HOST_DEFAULT_SECONDS);
    CHECK_EQ(hc.grace_seconds, RUNGS_RELAY_HOST_DEFAULT_SECONDS);
    CHECK_EQ(hc.reserved, 0);
    CHECK_EQ(hc.reserved2, 0);
    CHECK(hc.listen_address == NULL);
    hc.seat_count = 2;
    hc.human_seat_mask = 0x3;
    hc.match_id = 7;
    hc.listen_address = "127.0.0.1:0";
    CHECK_EQ(rungs_relay_host_new(&hc, &host), RUNGS_OK);
    CHECK_EQ(rungs_relay_host_free(host), RUNGS_OK);

    memset(&ec, 0xAB, sizeof ec);
    CHECK_EQ(rungs_endpoint_config_init(&ec), RUNGS_OK);
    CHECK_EQ(ec.struct_size, sizeof ec);
}

int main(void) {
    test_versions();
    test_result_names();
    test_message_lifetime();
    test_message_content();
    test_second_thread_gets_busy();
    test_threads_racing_on_one_handle();
    test_every_config_has_an_init();
    return harness_report("core");
}
