/* The transport's C API (S8): every rungs_endpoint_* export, used as a game
 * would and misused (NULLs, bad config, bad enum values, re-entry from a
 * callback, a poisoned object), over real UDP sockets on 127.0.0.1. */
#define _POSIX_C_SOURCE 200809L

#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "harness.h"
#include "rungs.h"

static const uint8_t KEY[16] = {'c', '-', 'a', 'b', 'i', ' ', 't', 'e',
                                's', 't', ' ', 'k', 'e', 'y', '!', '!'};

static rungs_endpoint_config config_for(uint8_t seat) {
    rungs_endpoint_config c;
    rungs_endpoint_config_init(&c);
    c.session_id = 4242;
    memcpy(c.key, KEY, sizeof KEY);
    c.local_seat = seat;
    c.bind_address = "127.0.0.1:0";
    return c;
}

static rungs_endpoint *make(uint8_t seat) {
    rungs_endpoint *e = NULL;
    rungs_endpoint_config c = config_for(seat);
    CHECK_EQ(rungs_endpoint_new(&c, &e), RUNGS_OK);
    return e;
}

static void address_of(rungs_endpoint *e, char *text, size_t cap) {
    uint16_t port = 0;
    CHECK_EQ(rungs_endpoint_local_port(e, &port), RUNGS_OK);
    CHECK(port != 0);
    snprintf(text, cap, "127.0.0.1:%u", (unsigned)port);
}

/* Two endpoints, seats 0 and 1, each the other's peer. */
static void make_pair(rungs_endpoint **a, rungs_endpoint **b) {
    char text[64];
    *a = make(0);
    *b = make(1);
    address_of(*b, text, sizeof text);
    CHECK_EQ(rungs_endpoint_add_peer(*a, 1, text, now_us()), RUNGS_OK);
    address_of(*a, text, sizeof text);
    CHECK_EQ(rungs_endpoint_add_peer(*b, 0, text, now_us()), RUNGS_OK);
}

static void test_config_and_new(void) {
    rungs_endpoint_config c;
    rungs_endpoint *e = NULL;
    CHECK_EQ(rungs_endpoint_config_init(NULL), RUNGS_ERR_NULL_POINTER);
    CHECK_MESSAGE("rungs_endpoint_config_init: config is NULL");
    CHECK_EQ(rungs_endpoint_config_init(&c), RUNGS_OK);
    CHECK_EQ(c.struct_size, sizeof(rungs_endpoint_config));
    CHECK(c.bind_address == NULL);

    CHECK_EQ(rungs_endpoint_new(NULL, &e), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_endpoint_new(&c, NULL), RUNGS_ERR_NULL_POINTER);

    c = config_for(0);
    c.struct_size = 8;
    CHECK_EQ(rungs_endpoint_new(&c, &e), RUNGS_ERR_INVALID_ARGUMENT);
    c = config_for(0);
    c.reserved[1] = 1;
    CHECK_EQ(rungs_endpoint_new(&c, &e), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE("rungs_endpoint_new: config->reserved[1] is 1; expected 0");
    c = config_for(0);
    c.max_in_flight = 9000;
    CHECK_EQ(rungs_endpoint_new(&c, &e), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE("rungs_endpoint_new: config->max_in_flight is 9000; expected 1 to 8192");
    c = config_for(0);
    c.bind_address = "not an address";
    CHECK_EQ(rungs_endpoint_new(&c, &e), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE_STARTS("rungs_endpoint_new: config->bind_address is \"not an address\"; "
                         "expected \"ip:port\"");
    c = config_for(0);
    c.bind_address = "192.0.2.1:9"; /* not an address of this machine */
    if (NOT_UNDER_WINE("binding to another machine's address: Wine 8's bind() accepts it, "
                       "where Windows and Linux refuse it")) {
        CHECK_EQ(rungs_endpoint_new(&c, &e), RUNGS_ERR_IO);
        CHECK(e == NULL); /* out-pointers are written only on success */
    }

    /* Defaults (NULL bind address), keep-alives off: the default key is
     * all zero and refused (S8); with a key set it works. */
    rungs_endpoint_config_init(&c);
    c.keepalive_interval_ms = RUNGS_KEEPALIVE_OFF;
    CHECK_EQ(rungs_endpoint_new(&c, &e), RUNGS_ERR_INVALID_ARGUMENT);
    memcpy(c.key, KEY, sizeof KEY);
    CHECK_EQ(rungs_endpoint_new(&c, &e), RUNGS_OK);
    CHECK(e != NULL);
    CHECK_EQ(rungs_endpoint_free(e), RUNGS_OK);
    CHECK_EQ(rungs_endpoint_free(NULL), RUNGS_OK);
}

static void test_null_handles(void) {
    uint16_t port;
    uint8_t seat, buf[4];
    uint32_t event;
    uint64_t count;
    rungs_received got;
    rungs_link_stats stats;
    stats.struct_size = sizeof stats;
    CHECK_EQ(rungs_endpoint_local_port(NULL, &port), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_endpoint_add_peer(NULL, 1, "127.0.0.1:1", now_us()), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_endpoint_remove_peer(NULL, 1), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_endpoint_send(NULL, 1, buf, 1), RUNGS_ERR_NULL_POINTER);
    CHECK_MESSAGE("rungs_endpoint_send: the handle (first argument) is NULL");
    CHECK_EQ(rungs_endpoint_poll(NULL, 0), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_endpoint_poll_event(NULL, &seat, &event), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_endpoint_recv(NULL, buf, sizeof buf, &got), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_endpoint_link_stats(NULL, 1, 0, &stats), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_endpoint_dropped(NULL, RUNGS_DROP_BAD_TAG, &count), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_endpoint_start_worker(NULL, 1000), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_endpoint_stop_worker(NULL), RUNGS_ERR_NULL_POINTER);
    CHECK_MESSAGE("rungs_endpoint_stop_worker: the handle (first argument) is NULL");
}

static void test_peers_and_argument_checks(void) {
    rungs_endpoint *e = make(0);
    uint8_t seat, buf[8];
    uint32_t event;
    uint64_t count;
    rungs_received got;
    rungs_link_stats stats;

    CHECK_EQ(rungs_endpoint_local_port(e, NULL), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_endpoint_add_peer(e, 1, NULL, now_us()), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_endpoint_add_peer(e, 1, "127.0.0.1", now_us()), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_EQ(rungs_endpoint_add_peer(e, 0, "127.0.0.1:9", now_us()), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_EQ(rungs_endpoint_add_peer(e, 1, "127.0.0.1:9", now_us()), RUNGS_OK);
    CHECK_EQ(rungs_endpoint_add_peer(e, 1, "127.0.0.1:10", now_us()), RUNGS_ERR_STATE);
    CHECK_EQ(rungs_endpoint_add_peer(e, 2, "[::1]:9", now_us()), RUNGS_OK);
    CHECK_EQ(rungs_endpoint_remove_peer(e, 2), RUNGS_OK);
    CHECK_EQ(rungs_endpoint_remove_peer(e, 2), RUNGS_ERR_UNKNOWN_SEAT);

    CHECK_EQ(rungs_endpoint_send(e, 7, buf, 1), RUNGS_ERR_UNKNOWN_SEAT);
    CHECK_EQ(rungs_endpoint_send(e, 1, NULL, 1), RUNGS_ERR_NULL_POINTER);
    CHECK_MESSAGE("rungs_endpoint_send: data is NULL but its length is 1; "
                  "expected a valid pointer, or a length of 0");
    CHECK_EQ(rungs_endpoint_send(e, 1, NULL, 0), RUNGS_OK); /* empty message */
    CHECK_EQ(rungs_endpoint_send(e, 1, buf, RUNGS_MAX_MESSAGE_BYTES + 1),
             RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE("rungs_endpoint_send: len is 1025; expected at most "
                  "RUNGS_MAX_MESSAGE_BYTES (1024)");

    CHECK_EQ(rungs_endpoint_recv(e, buf, sizeof buf, NULL), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_endpoint_recv(e, NULL, 4, &got), RUNGS_ERR_NULL_POINTER);
    CHECK_MESSAGE("rungs_endpoint_recv: buf is NULL but its length is 4; "
                  "expected a valid pointer, or a length of 0");
    CHECK_EQ(rungs_endpoint_recv(e, NULL, 0, &got), RUNGS_OK);
    CHECK_EQ(got.received, 0);

    CHECK_EQ(rungs_endpoint_poll_event(e, NULL, &event), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_endpoint_poll_event(e, &seat, NULL), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_endpoint_poll_event(e, &seat, &event), RUNGS_OK);
    CHECK_EQ(event, RUNGS_LINK_EVENT_NONE);

    CHECK_EQ(rungs_endpoint_link_stats(e, 1, 0, NULL), RUNGS_ERR_NULL_POINTER);
    stats.struct_size = 4;
    CHECK_EQ(rungs_endpoint_link_stats(e, 1, 0, &stats), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE_STARTS("rungs_endpoint_link_stats: out->struct_size is 4; "
                         "expected sizeof(rungs_link_stats) = ");
    stats.struct_size = sizeof stats;
    CHECK_EQ(rungs_endpoint_link_stats(e, 9, 0, &stats), RUNGS_ERR_UNKNOWN_SEAT);
    CHECK_EQ(rungs_endpoint_link_stats(e, 1, 0, &stats), RUNGS_OK);
    CHECK_EQ(stats.flags & RUNGS_LINK_CLEAN_MEASUREMENT, 0);
    CHECK_EQ(stats.srtt_us, RUNGS_RTT_NONE);
    CHECK_EQ(stats.last_heard_ms_ago, RUNGS_NEVER_HEARD);
    CHECK_EQ(stats.messages_sent, 1);

    /* Enum-like input out of range. */
    CHECK_EQ(rungs_endpoint_dropped(e, RUNGS_DROP_REASON_COUNT, &count), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE("rungs_endpoint_dropped: reason is 13; expected a RUNGS_DROP_* value, 0 to 12");
    CHECK_EQ(rungs_endpoint_dropped(e, 0xFFFFFFFFu, &count), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_EQ(rungs_endpoint_dropped(e, RUNGS_DROP_BAD_TAG, NULL), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_endpoint_dropped(e, RUNGS_DROP_BAD_TAG, &count), RUNGS_OK);
    CHECK_EQ(count, 0);

    CHECK_EQ(rungs_endpoint_start_worker(e, 0), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE("rungs_endpoint_start_worker: tick_us is 0; expected 1000 to 1000000");
    CHECK_EQ(rungs_endpoint_start_worker(e, 2000000), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_EQ(rungs_endpoint_stop_worker(e), RUNGS_ERR_STATE);
    CHECK_EQ(rungs_endpoint_free(e), RUNGS_OK);
}

static void test_drop_reason_names(void) {
    CHECK_STR(rungs_drop_reason_str(RUNGS_DROP_TOO_SHORT), "too_short");
    CHECK_STR(rungs_drop_reason_str(RUNGS_DROP_SPOOFED_ADDRESS), "spoofed_address");
    CHECK_STR(rungs_drop_reason_str(RUNGS_DROP_BAD_TAG), "bad_tag");
    CHECK_STR(rungs_drop_reason_str(RUNGS_DROP_RECEIVER_FULL), "receiver_full");
    CHECK_STR(rungs_drop_reason_str(RUNGS_DROP_REASON_COUNT), "unknown");
}

/* Poll both until `b` has `want` messages waiting or 5 s pass. */
static int exchange(rungs_endpoint *a, rungs_endpoint *b, uint32_t want_in_flight_zero) {
    uint64_t start = now_us();
    rungs_link_stats s;
    s.struct_size = sizeof s;
    while (now_us() - start < 5000000u) {
        rungs_endpoint_poll(a, now_us());
        rungs_endpoint_poll(b, now_us());
        if (want_in_flight_zero) {
            if (rungs_endpoint_link_stats(a, 1, now_us(), &s) == RUNGS_OK &&
                s.messages_in_flight == 0 && s.rtt_samples > 0)
                return 1;
        }
        sleep_ms(1);
    }
    return 0;
}

static void test_messages_and_stats(void) {
    rungs_endpoint *a, *b;
    uint8_t buf[RUNGS_MAX_MESSAGE_BYTES];
    uint8_t small[2];
    rungs_received got;
    rungs_link_stats s;
    int i;
    make_pair(&a, &b);
    for (i = 0; i < 20; i++) {
        uint8_t msg[3] = {'m', (uint8_t)i, 0};
        CHECK_EQ(rungs_endpoint_send(a, 1, msg, sizeof msg), RUNGS_OK);
    }
    CHECK(exchange(a, b, 1));

    /* Too small a buffer leaves the message queued. */
    CHECK_EQ(rungs_endpoint_recv(b, small, sizeof small, &got), RUNGS_ERR_BUFFER_TOO_SMALL);
    CHECK_EQ(rungs_endpoint_recv(b, NULL, 0, &got), RUNGS_ERR_BUFFER_TOO_SMALL);
    for (i = 0; i < 20; i++) {
        memset(&got, 0xAB, sizeof got);
        CHECK_EQ(rungs_endpoint_recv(b, buf, sizeof buf, &got), RUNGS_OK);
        CHECK_EQ(got.received, 1);
        CHECK_EQ(got.seat, 0);
        CHECK_EQ(got.length, 3);
        CHECK_EQ(buf[1], i);
    }
    CHECK_EQ(rungs_endpoint_recv(b, buf, sizeof buf, &got), RUNGS_OK);
    CHECK_EQ(got.received, 0);

    s.struct_size = sizeof s;
    CHECK_EQ(rungs_endpoint_link_stats(a, 1, now_us(), &s), RUNGS_OK);
    CHECK(s.flags & RUNGS_LINK_CLEAN_MEASUREMENT);
    CHECK_EQ(s.flags & RUNGS_LINK_LOST, 0);
    CHECK(s.srtt_us != RUNGS_RTT_NONE && s.srtt_us < 500000);
    CHECK(s.worst_recent_rtt_us >= s.min_rtt_us);
    CHECK(s.rto_us >= 100000 && s.rto_us <= 2000000);
    CHECK_EQ(s.messages_sent, 20);
    CHECK_EQ(s.messages_in_flight, 0);
    CHECK(s.packets_sent > 0 && s.bytes_sent > 0);
    CHECK(s.last_heard_ms_ago < 5000);
    CHECK_EQ(s.struct_size, sizeof s);
    CHECK_EQ(rungs_endpoint_link_stats(b, 0, now_us(), &s), RUNGS_OK);
    CHECK_EQ(s.messages_delivered, 20);
    CHECK(s.packets_received > 0);

    CHECK_EQ(rungs_endpoint_free(a), RUNGS_OK);
    CHECK_EQ(rungs_endpoint_free(b), RUNGS_OK);
}

static void test_spoofed_sender_is_counted(void) {
    rungs_endpoint *a, *b, *impostor;
    char text[64];
    uint64_t count = 0;
    uint8_t msg[1] = {'x'};
    rungs_received got;
    uint64_t start;
    static const uint8_t pair_key[16] = {'s', 'e', 'a', 't', 's', ' ', '0', '+', '1', ' ', 'o', 'n', 'l', 'y', '!', '!'};
    make_pair(&a, &b);
    /* Seats 0 and 1 share a per-pair key (S8). The impostor has the game
     * key and session, claims seat 0 from another port: with only the game
     * key it would be taken for seat 0 moving; the pair key stops it. */
    CHECK_EQ(rungs_endpoint_set_link_key(a, 1, &pair_key), RUNGS_OK);
    CHECK_EQ(rungs_endpoint_set_link_key(b, 0, &pair_key), RUNGS_OK);
    impostor = make(0);
    address_of(b, text, sizeof text);
    CHECK_EQ(rungs_endpoint_add_peer(impostor, 1, text, now_us()), RUNGS_OK);
    CHECK_EQ(rungs_endpoint_send(impostor, 1, msg, 1), RUNGS_OK);
    CHECK_EQ(rungs_endpoint_poll(impostor, now_us()), RUNGS_OK);
    start = now_us();
    while (count == 0 && now_us() - start < 2000000u) {
        sleep_ms(1);
        CHECK_EQ(rungs_endpoint_poll(b, now_us()), RUNGS_OK);
        CHECK_EQ(rungs_endpoint_dropped(b, RUNGS_DROP_SPOOFED_ADDRESS, &count), RUNGS_OK);
    }
    CHECK_EQ(count, 1);
    CHECK_EQ(rungs_endpoint_recv(b, msg, sizeof msg, &got), RUNGS_OK);
    CHECK_EQ(got.received, 0);
    rungs_endpoint_free(impostor);
    rungs_endpoint_free(a);
    rungs_endpoint_free(b);
}

/* Callback state for the liveness and re-entry tests. */
struct events {
    rungs_endpoint *self;
    int lost, recovered;
    uint8_t last_seat;
    rungs_result reentrant_send, reentrant_poll, reentrant_free;
};

static void on_event(void *user, uint8_t seat, uint32_t event) {
    struct events *ev = (struct events *)user;
    uint8_t byte = 1;
    ev->last_seat = seat;
    if (event == RUNGS_LINK_EVENT_LOST) ev->lost++;
    if (event == RUNGS_LINK_EVENT_RECOVERED) ev->recovered++;
    ev->reentrant_send = rungs_endpoint_send(ev->self, seat, &byte, 1);
    ev->reentrant_poll = rungs_endpoint_poll(ev->self, 0);
    ev->reentrant_free = rungs_endpoint_free(ev->self);
}

static void test_liveness_callback_and_reentry(void) {
    struct events ev;
    rungs_endpoint *e = NULL;
    rungs_endpoint_config c = config_for(0);
    rungs_link_stats s;
    memset(&ev, 0, sizeof ev);
    c.liveness_timeout_ms = 100;
    c.on_link_event = on_event;
    c.user = &ev;
    CHECK_EQ(rungs_endpoint_new(&c, &e), RUNGS_OK);
    ev.self = e;
    /* A peer that never answers (the discard port). */
    CHECK_EQ(rungs_endpoint_add_peer(e, 3, "127.0.0.1:9", 0), RUNGS_OK);
    CHECK_EQ(rungs_endpoint_poll(e, 50000), RUNGS_OK);
    CHECK_EQ(ev.lost, 0);
    CHECK_EQ(rungs_endpoint_poll(e, 100000), RUNGS_OK);
    CHECK_EQ(ev.lost, 1);
    CHECK_EQ(ev.last_seat, 3);
    CHECK_EQ(ev.reentrant_send, RUNGS_ERR_REENTRANT);
    CHECK_EQ(ev.reentrant_poll, RUNGS_ERR_REENTRANT);
    CHECK_EQ(ev.reentrant_free, RUNGS_ERR_REENTRANT);
    CHECK_EQ(rungs_endpoint_poll(e, 900000), RUNGS_OK);
    CHECK_EQ(ev.lost, 1); /* reported once */
    s.struct_size = sizeof s;
    CHECK_EQ(rungs_endpoint_link_stats(e, 3, 900000, &s), RUNGS_OK);
    CHECK(s.flags & RUNGS_LINK_LOST);
    CHECK_EQ(s.messages_sent, 0); /* the re-entrant send did nothing */
    CHECK_EQ(rungs_endpoint_free(e), RUNGS_OK);
}

static void test_liveness_by_polling(void) {
    rungs_endpoint *e = NULL;
    rungs_endpoint_config c = config_for(0);
    uint8_t seat = 0xFF;
    uint32_t event = 99;
    c.liveness_timeout_ms = 100;
    CHECK_EQ(rungs_endpoint_new(&c, &e), RUNGS_OK);
    CHECK_EQ(rungs_endpoint_add_peer(e, 5, "127.0.0.1:9", 0), RUNGS_OK);
    CHECK_EQ(rungs_endpoint_poll(e, 200000), RUNGS_OK);
    CHECK_EQ(rungs_endpoint_poll_event(e, &seat, &event), RUNGS_OK);
    CHECK_EQ(seat, 5);
    CHECK_EQ(event, RUNGS_LINK_EVENT_LOST);
    CHECK_EQ(rungs_endpoint_poll_event(e, &seat, &event), RUNGS_OK);
    CHECK_EQ(event, RUNGS_LINK_EVENT_NONE);
    rungs_endpoint_free(e);
}

static void test_worker(void) {
    rungs_endpoint *a, *b;
    uint8_t buf[16];
    rungs_received got;
    uint64_t start;
    int received = 0, i;
    make_pair(&a, &b);
    CHECK_EQ(rungs_endpoint_poll(a, now_us()), RUNGS_OK);
    CHECK_EQ(rungs_endpoint_start_worker(a, 1000), RUNGS_OK);
    CHECK_EQ(rungs_endpoint_start_worker(a, 1000), RUNGS_ERR_STATE);
    for (i = 0; i < 10; i++) {
        uint8_t msg[2] = {'w', (uint8_t)i};
        CHECK_EQ(rungs_endpoint_send(a, 1, msg, sizeof msg), RUNGS_OK);
    }
    start = now_us();
    while (received < 10 && now_us() - start < 5000000u) {
        CHECK_EQ(rungs_endpoint_poll(b, now_us()), RUNGS_OK);
        CHECK_EQ(rungs_endpoint_poll(a, 0), RUNGS_OK); /* events only */
        while (rungs_endpoint_recv(b, buf, sizeof buf, &got) == RUNGS_OK && got.received) {
            CHECK_EQ(buf[1], received);
            received++;
        }
        sleep_ms(1);
    }
    CHECK_EQ(received, 10);
    CHECK_EQ(rungs_endpoint_stop_worker(a), RUNGS_OK);
    CHECK_EQ(rungs_endpoint_stop_worker(a), RUNGS_ERR_STATE);
    CHECK_EQ(rungs_endpoint_poll(a, now_us()), RUNGS_OK);
    /* A running worker is stopped by free as well. */
    CHECK_EQ(rungs_endpoint_start_worker(b, 1000), RUNGS_OK);
    CHECK_EQ(rungs_endpoint_free(b), RUNGS_OK);
    CHECK_EQ(rungs_endpoint_free(a), RUNGS_OK);
}

/* A link's liveness counts from the time its peer was added: a peer added
 * before the first poll (the engine's clock far from 0) is not reported lost
 * at that poll, and is once the liveness timeout has passed in silence. */
static void test_liveness_counts_from_add_peer(void) {
    rungs_endpoint *e = make(0);
    uint64_t t = now_us() + 1000000000ull; /* any clock, far from 0 */
    uint8_t seat = 9;
    uint32_t event = 9;
    if (!e) return;
    CHECK_EQ(rungs_endpoint_add_peer(e, 1, "127.0.0.1:9", t), RUNGS_OK);
    CHECK_EQ(rungs_endpoint_poll(e, t + 1000), RUNGS_OK);
    CHECK_EQ(rungs_endpoint_poll_event(e, &seat, &event), RUNGS_OK);
    CHECK_EQ(event, RUNGS_LINK_EVENT_NONE);
    CHECK_EQ(rungs_endpoint_poll(e, t + 60000000ull), RUNGS_OK);
    CHECK_EQ(rungs_endpoint_poll_event(e, &seat, &event), RUNGS_OK);
    CHECK_EQ(event, RUNGS_LINK_EVENT_LOST);
    CHECK_EQ(seat, 1);
    CHECK_EQ(rungs_endpoint_free(e), RUNGS_OK);
}

static void test_poisoned_after_panic(void) {
    rungs_endpoint *e = make(0);
    uint8_t byte = 0;
    CHECK_EQ(rungs_endpoint_add_peer(e, 1, "127.0.0.1:9", now_us()), RUNGS_OK);
    rungs_testing_panic_next_call();
    CHECK_EQ(rungs_endpoint_poll(e, 0), RUNGS_ERR_PANIC);
    CHECK_EQ(rungs_endpoint_send(e, 1, &byte, 1), RUNGS_ERR_POISONED);
    CHECK_EQ(rungs_endpoint_poll(e, 0), RUNGS_ERR_POISONED);
    CHECK_EQ(rungs_endpoint_free(e), RUNGS_OK);
}

/* S8 keys and the socket handle: the default (all-zero) key is refused with
 * a message naming it, a per-pair key is set, the socket is handed out, and
 * the worker status reads 0 without a worker. */
static void test_keys_and_socket(void) {
    rungs_endpoint_config c;
    rungs_endpoint *e = NULL;
    rungs_socket handle = UINT64_MAX;
    uint32_t status = 9;
    char message[512];
    size_t len = 0;
    static const uint8_t zero[16] = {0};
    static const uint8_t pair[16] = {'p', 'a', 'i', 'r', '-', 'k', 'e', 'y', '-', '0', '-', '1', '!', '!', '!', '!'};
    CHECK_EQ(rungs_endpoint_config_init(&c), RUNGS_OK);
    c.bind_address = "127.0.0.1:0";
    CHECK_EQ(rungs_endpoint_new(&c, &e), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_EQ(rungs_last_error_message(message, sizeof message, &len), RUNGS_OK);
    CHECK(strstr(message, "config->key is all zero") != NULL);
    CHECK(e == NULL);
    e = make(0);
    if (!e) return;
    CHECK_EQ(rungs_endpoint_add_peer(e, 1, "127.0.0.1:9", now_us()), RUNGS_OK);
    CHECK_EQ(rungs_endpoint_set_link_key(e, 1, NULL), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_endpoint_set_link_key(e, 1, &zero), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_EQ(rungs_endpoint_set_link_key(e, 2, &pair), RUNGS_ERR_UNKNOWN_SEAT);
    CHECK_EQ(rungs_endpoint_set_link_key(e, 1, &pair), RUNGS_OK);
    CHECK_EQ(rungs_endpoint_socket(e, NULL), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_endpoint_socket(e, &handle), RUNGS_OK);
    CHECK(handle != UINT64_MAX && (int)handle >= 0);
    CHECK_EQ(rungs_endpoint_worker_status(e, NULL), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_endpoint_worker_status(e, &status), RUNGS_OK);
    CHECK_EQ(status, 0);
    CHECK_EQ(rungs_endpoint_start_worker(e, 1000), RUNGS_OK);
    CHECK_EQ(rungs_endpoint_worker_status(e, &status), RUNGS_OK);
    CHECK_EQ(status, 1);
    CHECK_EQ(rungs_endpoint_socket(e, &handle), RUNGS_ERR_STATE);
    CHECK_EQ(rungs_endpoint_stop_worker(e), RUNGS_OK);
    CHECK_EQ(rungs_endpoint_free(e), RUNGS_OK);
}

int main(void) {
    test_config_and_new();
    test_keys_and_socket();
    test_null_handles();
    test_peers_and_argument_checks();
    test_drop_reason_names();
    test_messages_and_stats();
    test_spoofed_sender_is_counted();
    test_liveness_callback_and_reentry();
    test_liveness_by_polling();
    test_worker();
    test_liveness_counts_from_add_peer();
    test_poisoned_after_panic();
    return harness_report("transport");
}
