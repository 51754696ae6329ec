/* chat — processes on one machine talking through rungs' UDP transport (S8).
 *
 * Each process owns one seat and one UDP port, sends numbered chat lines to
 * every peer, prints what arrives (exactly once, in order, per peer), and
 * when everyone has everything prints each link's round trip, loss and
 * counters, then exits. Nothing to type: it runs as a demo.
 *
 *   chat --seat S --port P --peer SEAT=IP:PORT [--peer ...] [--count N]
 *        [--interval-ms MS]
 *
 * Three players on 127.0.0.1 (after `make -C examples-c`):
 *
 *   B=examples-c/build/chat
 *   $B --seat 0 --port 47000 --peer 1=127.0.0.1:47001 --peer 2=127.0.0.1:47002 --count 20 &
 *   $B --seat 1 --port 47001 --peer 0=127.0.0.1:47000 --peer 2=127.0.0.1:47002 --count 20 &
 *   $B --seat 2 --port 47002 --peer 0=127.0.0.1:47000 --peer 1=127.0.0.1:47001 --count 20
 *   wait
 *
 * (examples-c/chat_demo.sh does exactly that.) Every process must be given
 * the same session id and key; a real game hands them out with the game
 * setup. The exit status is 0 when every line arrived and was acknowledged.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rungs.h"

#define MAX_PEERS 8
#define GIVE_UP_US (30u * 1000000u)

struct peer {
    uint8_t seat;
    char address[64];
    unsigned received; /* lines received from this peer, in order */
};

static uint64_t now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static void sleep_ms(long ms) {
    struct timespec ts;
    ts.tv_sec = ms / 1000;
    ts.tv_nsec = (ms % 1000) * 1000000L;
    nanosleep(&ts, NULL);
}

static void on_link_event(void *user, uint8_t seat, uint32_t event) {
    const uint8_t *me = (const uint8_t *)user;
    printf("[seat %u] link to seat %u %s\n", (unsigned)*me, (unsigned)seat,
           event == RUNGS_LINK_EVENT_LOST ? "LOST (nothing heard for a while)" : "recovered");
}

static int fail(const char *what, rungs_result r) {
    char detail[256];
    rungs_last_error_message(detail, sizeof detail, NULL);
    fprintf(stderr, "chat: %s: %s (%s)\n", what, rungs_result_str(r), detail);
    return 1;
}

static int usage(void) {
    fprintf(stderr, "usage: chat --seat S --port P --peer SEAT=IP:PORT [--peer ...] "
                    "[--count N] [--interval-ms MS]\n");
    return 2;
}

static void print_stats(rungs_endpoint *endpoint, uint8_t me, const struct peer *p) {
    rungs_link_stats s;
    uint32_t reason;
    s.struct_size = sizeof s;
    if (rungs_endpoint_link_stats(endpoint, p->seat, now_us(), &s) != RUNGS_OK) return;
    printf("[seat %u] link to seat %u: ", (unsigned)me, (unsigned)p->seat);
    if (s.flags & RUNGS_LINK_CLEAN_MEASUREMENT)
        printf("rtt %.2f ms (var %.2f, worst recent %.2f, %u samples)", s.srtt_us / 1000.0,
               s.rttvar_us / 1000.0, s.worst_recent_rtt_us / 1000.0, (unsigned)s.rtt_samples);
    else
        printf("rtt not measured yet");
    printf(", rto %u ms, loss %u.%u %%%s%s\n", (unsigned)(s.rto_us / 1000),
           (unsigned)(s.loss_permille / 10), (unsigned)(s.loss_permille % 10),
           (s.flags & RUNGS_LINK_RETRANSMITTING) ? ", retransmitting" : "",
           (s.flags & RUNGS_LINK_LOST) ? ", lost" : "");
    printf("          packets %u sent / %u received, bytes %u / %u, messages %u sent / %u "
           "delivered, %u resent, %u duplicates, heard %u ms ago\n",
           (unsigned)s.packets_sent, (unsigned)s.packets_received, (unsigned)s.bytes_sent,
           (unsigned)s.bytes_received, (unsigned)s.messages_sent, (unsigned)s.messages_delivered,
           (unsigned)s.messages_retransmitted, (unsigned)s.duplicate_messages,
           (unsigned)s.last_heard_ms_ago);
    for (reason = 0; reason < RUNGS_DROP_REASON_COUNT; reason++)
        if (s.dropped[reason])
            printf("          dropped %u as %s\n", (unsigned)s.dropped[reason],
                   rungs_drop_reason_str(reason));
}

/* Every line sent and acknowledged, every peer's lines received. */
static int finished(rungs_endpoint *endpoint, const struct peer *peers, int npeers,
                    unsigned sent, unsigned count) {
    int i;
    if (sent < count) return 0;
    for (i = 0; i < npeers; i++) {
        rungs_link_stats s;
        s.struct_size = sizeof s;
        if (peers[i].received < count) return 0;
        if (rungs_endpoint_link_stats(endpoint, peers[i].seat, now_us(), &s) != RUNGS_OK ||
            s.messages_in_flight > 0)
            return 0;
    }
    return 1;
}

int main(int argc, char **argv) {
    static const uint8_t key[16] = {'c', 'h', 'a', 't', '-', 'd', 'e', 'm',
                                    'o', '-', 's', 'e', 's', 's', 'i', 'o'};
    struct peer peers[MAX_PEERS];
    int npeers = 0, i;
    long seat = -1, port = -1, count = 10, interval_ms = 100;
    char bind[64], line[RUNGS_MAX_MESSAGE_BYTES + 1];
    uint8_t me;
    rungs_endpoint_config config;
    rungs_endpoint *endpoint = NULL;
    rungs_result r;
    unsigned sent = 0;
    uint64_t start, next_send, done_at = 0;
    int status = 1;

    for (i = 1; i < argc; i++) {
        const char *arg = argv[i], *value = i + 1 < argc ? argv[i + 1] : NULL;
        if (!value) return usage();
        if (strcmp(arg, "--seat") == 0) seat = strtol(value, NULL, 10);
        else if (strcmp(arg, "--port") == 0) port = strtol(value, NULL, 10);
        else if (strcmp(arg, "--count") == 0) count = strtol(value, NULL, 10);
        else if (strcmp(arg, "--interval-ms") == 0) interval_ms = strtol(value, NULL, 10);
        else if (strcmp(arg, "--peer") == 0) {
            const char *eq = strchr(value, '=');
            long peer_seat = strtol(value, NULL, 10);
            if (!eq || npeers == MAX_PEERS || peer_seat < 0 || peer_seat > 255) return usage();
            peers[npeers].seat = (uint8_t)peer_seat;
            snprintf(peers[npeers].address, sizeof peers[npeers].address, "%s", eq + 1);
            peers[npeers].received = 0;
            npeers++;
        } else
            return usage();
        i++;
    }
    if (seat < 0 || seat > 255 || port < 0 || port > 65535 || npeers == 0 || count < 0 ||
        interval_ms < 1)
        return usage();
    me = (uint8_t)seat;

    rungs_endpoint_config_init(&config);
    config.session_id = 0xC4A7;
    memcpy(config.key, key, sizeof key);
    config.local_seat = me;
    snprintf(bind, sizeof bind, "127.0.0.1:%ld", port);
    config.bind_address = bind;
    config.on_link_event = on_link_event;
    config.user = &me;
    r = rungs_endpoint_new(&config, &endpoint);
    if (r != RUNGS_OK) return fail("rungs_endpoint_new", r);
    for (i = 0; i < npeers; i++) {
        r = rungs_endpoint_add_peer(endpoint, peers[i].seat, peers[i].address, now_us());
        if (r != RUNGS_OK) {
            fail("rungs_endpoint_add_peer", r);
            goto out;
        }
    }
    printf("[seat %u] on %s, %d peer(s), sending %ld line(s) each\n", (unsigned)me, bind, npeers,
           count);
    fflush(stdout);

    start = next_send = now_us();
    for (;;) {
        uint64_t now = now_us();
        rungs_received got;
        if (sent < (unsigned)count && now >= next_send) {
            int len = snprintf(line, sizeof line, "line %u from seat %u", sent, (unsigned)me);
            for (i = 0; i < npeers; i++) {
                r = rungs_endpoint_send(endpoint, peers[i].seat, (const uint8_t *)line,
                                        (size_t)len);
                if (r != RUNGS_OK) {
                    fail("rungs_endpoint_send", r);
                    goto out;
                }
            }
            sent++;
            next_send = now + (uint64_t)interval_ms * 1000u;
        }
        r = rungs_endpoint_poll(endpoint, now);
        if (r != RUNGS_OK) {
            fail("rungs_endpoint_poll", r);
            goto out;
        }
        while ((r = rungs_endpoint_recv(endpoint, (uint8_t *)line, sizeof line - 1, &got)) ==
                   RUNGS_OK &&
               got.received) {
            line[got.length] = '\0';
            for (i = 0; i < npeers; i++)
                if (peers[i].seat == got.seat) peers[i].received++;
            printf("[seat %u] from seat %u: %s\n", (unsigned)me, (unsigned)got.seat, line);
        }
        if (r != RUNGS_OK) {
            fail("rungs_endpoint_recv", r);
            goto out;
        }
        fflush(stdout);
        /* Done: keep answering for a moment so the peers get our last acks. */
        if (!done_at && finished(endpoint, peers, npeers, sent, (unsigned)count)) done_at = now;
        if (done_at && now - done_at > 500000u) {
            status = 0;
            break;
        }
        if (now - start > GIVE_UP_US) {
            fprintf(stderr, "[seat %u] gave up after 30 s\n", (unsigned)me);
            break;
        }
        sleep_ms(1);
    }
    for (i = 0; i < npeers; i++) print_stats(endpoint, me, &peers[i]);
    for (i = 0; i < npeers; i++)
        if (peers[i].received != (unsigned)count) status = 1;
out:
    rungs_endpoint_free(endpoint);
    return status;
}
