/* Protocol versions from C: rungs_read_protocol_versions gives the numbers
 * the library really puts on the wire (read back from its own datagrams
 * with a plain UDP socket playing the other player), and a player whose
 * datagrams carry another transport version is reported once, through
 * rungs_lockstep_set_protocol_mismatch, naming both versions; the same
 * datagrams from an address no player has are only counted. */
#define _POSIX_C_SOURCE 200809L

#include <stdint.h>
#include <stdlib.h>

#include "harness.h"
#include "rungs.h"

static void test_read_protocol_versions(void) {
    rungs_protocol_versions v;
    memset(&v, 0xEE, sizeof v);
    CHECK_EQ(rungs_read_protocol_versions(NULL), RUNGS_ERR_NULL_POINTER);
    CHECK_MESSAGE("rungs_read_protocol_versions: out is NULL");
    v.struct_size = 4;
    CHECK_EQ(rungs_read_protocol_versions(&v), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE_STARTS("rungs_read_protocol_versions: out->struct_size is 4; expected "
                         "sizeof(rungs_protocol_versions) = 8");
    CHECK_EQ(v.wire, 0xEE); /* nothing written on failure */
    v.struct_size = sizeof v;
    CHECK_EQ(rungs_read_protocol_versions(&v), RUNGS_OK);
    CHECK_EQ(v.struct_size, sizeof v);
    CHECK(v.wire != 0 && v.turn != 0 && v.relay != 0);
    CHECK_EQ(v.reserved, 0);
}

#if defined(_WIN32)

int main(void) {
    test_read_protocol_versions();
    /* The rest needs a plain UDP socket beside the library's, and the
     * harness links no Winsock. */
    harness_not_run++;
    printf("NOT RUN on Windows: test_protocol.c's wire checks need POSIX sockets\n");
    return harness_report("protocol");
}

#else

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

static const uint8_t KEY[16] = {'p', 'r', 'o', 't', 'o', 'c', 'o', 'l',
                                '-', 't', 'e', 's', 't', '-', 'k', 'y'};

typedef struct {
    int calls;
    uint8_t seat, protocol, theirs, ours, link_lost;
    char text[160];
} mismatch_seen;

static void on_mismatch(void *user, uint8_t seat, rungs_protocol protocol, uint8_t theirs,
                        uint8_t ours, uint8_t link_lost, const char *text) {
    mismatch_seen *s = user;
    s->calls++;
    s->seat = seat;
    s->protocol = protocol;
    s->theirs = theirs;
    s->ours = ours;
    s->link_lost = link_lost;
    snprintf(s->text, sizeof s->text, "%s", text);
}

/* A UDP socket on 127.0.0.1 and its port. */
static int udp_socket(uint16_t *port) {
    struct sockaddr_in a;
    socklen_t len = sizeof a;
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    CHECK(fd >= 0);
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK_EQ(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    CHECK_EQ(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    *port = ntohs(a.sin_port);
    return fd;
}

static void send_to_port(int fd, uint16_t port, const uint8_t *bytes, size_t len) {
    struct sockaddr_in to;
    memset(&to, 0, sizeof to);
    to.sin_family = AF_INET;
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    to.sin_port = htons(port);
    CHECK_EQ(sendto(fd, bytes, len, 0, (struct sockaddr *)&to, sizeof to), (long)len);
}

/* Drive `ls` for `ms` milliseconds. */
static void drive(rungs_lockstep *ls, int ms) {
    int i;
    for (i = 0; i < ms; i++) {
        CHECK_EQ(rungs_lockstep_update(ls, now_us(), NULL), RUNGS_OK);
        sleep_ms(1);
    }
}

static void test_versions_on_the_wire_and_a_mismatched_player(void) {
    rungs_protocol_versions v;
    rungs_lockstep_config c;
    rungs_lockstep *ls = NULL;
    mismatch_seen seen;
    uint16_t peer_port = 0, stranger_port = 0, game_port = 0;
    int peer = udp_socket(&peer_port);
    int stranger = udp_socket(&stranger_port);
    char address[96];
    uint8_t buf[2048];
    uint8_t forged[40];
    int i, got_message = 0;

    v.struct_size = sizeof v;
    CHECK_EQ(rungs_read_protocol_versions(&v), RUNGS_OK);
    memset(&seen, 0, sizeof seen);

    /* Seat 1 of two; seat 0 (the master) is the plain socket `peer`. */
    CHECK_EQ(rungs_lockstep_config_init(&c), RUNGS_OK);
    c.speed_fps = 30;
    c.seat_count = 2;
    c.local_seat = 1;
    c.human_seat_mask = 0x3;
    c.session_id = 4711;
    memcpy(c.key, KEY, sizeof KEY);
    c.bind_address = "127.0.0.1:0";
    c.liveness_timeout_ms = 1000;
    CHECK_EQ(rungs_lockstep_new(&c, now_us(), &ls), RUNGS_OK);
    CHECK_EQ(rungs_lockstep_set_protocol_mismatch(NULL, on_mismatch, &seen),
             RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_lockstep_set_protocol_mismatch(ls, on_mismatch, &seen), RUNGS_OK);
    CHECK_EQ(rungs_lockstep_local_port(ls, &game_port), RUNGS_OK);
    snprintf(address, sizeof address, "127.0.0.1:%u", (unsigned)peer_port);
    CHECK_EQ(rungs_lockstep_add_peer(ls, 0, address, now_us()), RUNGS_OK);

    /* What the library sends the master: packets of version `wire`, whose
     * first message (a clock ping) is of turn layout `turn`. */
    for (i = 0; i < 2000 && !got_message; i++) {
        long n;
        CHECK_EQ(rungs_lockstep_update(ls, now_us(), NULL), RUNGS_OK);
        while ((n = recv(peer, buf, sizeof buf, MSG_DONTWAIT)) > 0) {
            size_t header = (buf[2] & 1) ? 34 : 24; /* the ack block's flag */
            CHECK_EQ(buf[0], 0xB7);
            CHECK_EQ(buf[1], v.wire);
            if ((size_t)n > header + 3 + 8) {
                /* number (2), short length (1), then kind and version */
                CHECK_EQ(buf[header + 4], v.turn);
                got_message = 1;
            }
        }
        sleep_ms(1);
    }
    CHECK(got_message);

    /* The master's machine speaks wire version wire + 1: its datagrams, from
     * its address, reported once however many come. */
    memset(forged, 0, sizeof forged);
    forged[0] = 0xB7;
    forged[1] = (uint8_t)(v.wire + 1);
    for (i = 0; i < 20; i++) send_to_port(peer, game_port, forged, sizeof forged);
    drive(ls, 50);
    CHECK_EQ(seen.calls, 1);
    CHECK_EQ(seen.seat, 0);
    CHECK_EQ(seen.protocol, RUNGS_PROTOCOL_WIRE);
    CHECK_EQ(seen.theirs, v.wire + 1);
    CHECK_EQ(seen.ours, v.wire);
    CHECK_EQ(seen.link_lost, 0);
    snprintf(address, sizeof address, "seat 0 speaks wire protocol %u; this build speaks %u",
             (unsigned)(v.wire + 1), (unsigned)v.wire);
    CHECK_STR(seen.text, address);

    /* The same from an address no player has: counted, not reported. */
    forged[1] = (uint8_t)(v.wire + 2);
    for (i = 0; i < 20; i++) send_to_port(stranger, game_port, forged, sizeof forged);
    drive(ls, 50);
    CHECK_EQ(seen.calls, 1);

    /* Nothing valid ever came from seat 0: when its link is lost, the
     * report comes again, saying that is why. */
    for (i = 0; i < 5000 && seen.calls < 2; i++) drive(ls, 1);
    CHECK_EQ(seen.calls, 2);
    CHECK_EQ(seen.link_lost, 1);
    CHECK_EQ(seen.theirs, v.wire + 1);
    snprintf(address, sizeof address,
             "link to seat 0 lost: seat 0 speaks wire protocol %u; this build speaks %u",
             (unsigned)(v.wire + 1), (unsigned)v.wire);
    CHECK_STR(seen.text, address);

    CHECK_EQ(rungs_lockstep_free(ls), RUNGS_OK);
    close(peer);
    close(stranger);
}

/* The engine session's transport (rungs_endpoint) reports the same: once per
 * seat and version, and again just before that seat's LOST event. */
static void test_an_endpoint_names_a_mismatched_peer(void) {
    rungs_protocol_versions v;
    rungs_endpoint_config c;
    rungs_endpoint *e = NULL;
    mismatch_seen seen;
    uint16_t peer_port = 0, endpoint_port = 0;
    int peer = udp_socket(&peer_port);
    char address[96];
    uint8_t forged[40];
    uint8_t event_seat = 0;
    rungs_link_event event = RUNGS_LINK_EVENT_NONE;
    int i, lost = 0;

    v.struct_size = sizeof v;
    CHECK_EQ(rungs_read_protocol_versions(&v), RUNGS_OK);
    memset(&seen, 0, sizeof seen);
    CHECK_EQ(rungs_endpoint_config_init(&c), RUNGS_OK);
    c.session_id = 4712;
    memcpy(c.key, KEY, sizeof KEY);
    c.local_seat = 0;
    c.bind_address = "127.0.0.1:0";
    c.liveness_timeout_ms = 300;
    CHECK_EQ(rungs_endpoint_new(&c, &e), RUNGS_OK);
    CHECK_EQ(rungs_endpoint_set_protocol_mismatch(NULL, on_mismatch, &seen),
             RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_endpoint_set_protocol_mismatch(e, on_mismatch, &seen), RUNGS_OK);
    CHECK_EQ(rungs_endpoint_local_port(e, &endpoint_port), RUNGS_OK);
    snprintf(address, sizeof address, "127.0.0.1:%u", (unsigned)peer_port);
    CHECK_EQ(rungs_endpoint_add_peer(e, 1, address, now_us()), RUNGS_OK);

    memset(forged, 0, sizeof forged);
    forged[0] = 0xB7;
    forged[1] = (uint8_t)(v.wire + 1);
    for (i = 0; i < 20; i++) send_to_port(peer, endpoint_port, forged, sizeof forged);
    for (i = 0; i < 50; i++) {
        CHECK_EQ(rungs_endpoint_poll(e, now_us()), RUNGS_OK);
        sleep_ms(1);
    }
    CHECK_EQ(seen.calls, 1);
    CHECK_EQ(seen.seat, 1);
    CHECK_EQ(seen.protocol, RUNGS_PROTOCOL_WIRE);
    CHECK_EQ(seen.theirs, v.wire + 1);
    CHECK_EQ(seen.ours, v.wire);
    CHECK_EQ(seen.link_lost, 0);
    snprintf(address, sizeof address, "seat 1 speaks wire protocol %u; this build speaks %u",
             (unsigned)(v.wire + 1), (unsigned)v.wire);
    CHECK_STR(seen.text, address);

    /* Nothing valid ever came: the link is lost, and the report comes again
     * first. */
    for (i = 0; i < 3000 && !lost; i++) {
        CHECK_EQ(rungs_endpoint_poll(e, now_us()), RUNGS_OK);
        do {
            CHECK_EQ(rungs_endpoint_poll_event(e, &event_seat, &event), RUNGS_OK);
            if (event == RUNGS_LINK_EVENT_LOST && event_seat == 1) lost = 1;
        } while (event != RUNGS_LINK_EVENT_NONE && !lost);
        sleep_ms(1);
    }
    CHECK(lost);
    CHECK_EQ(seen.calls, 2);
    CHECK_EQ(seen.link_lost, 1);
    snprintf(address, sizeof address,
             "link to seat 1 lost: seat 1 speaks wire protocol %u; this build speaks %u",
             (unsigned)(v.wire + 1), (unsigned)v.wire);
    CHECK_STR(seen.text, address);

    /* Cleared: reports are no longer kept or told. */
    CHECK_EQ(rungs_endpoint_set_protocol_mismatch(e, NULL, NULL), RUNGS_OK);
    CHECK_EQ(rungs_endpoint_free(e), RUNGS_OK);
    close(peer);
}

int main(void) {
    test_read_protocol_versions();
    test_versions_on_the_wire_and_a_mismatched_player();
    test_an_endpoint_names_a_mismatched_peer();
    return harness_report("protocol");
}

#endif
