/* Relay tickets (S10) through the C API: a lobby issues tickets, a player
 * reads the text form `rungs-relay ticket` prints; misuse (NULL pointers,
 * bad seats, zero secrets, short buffers, malformed text); rungs_lockstep's
 * relay topology: its config checks, a session that has no peers and
 * waits for the relay, and its own calls (orders of every kind, checksum
 * frames, AI decisions, relay callbacks); a LAN host playing a whole match
 * with two sessions in this process; a replay of a turn log written byte
 * for byte as docs/relay.md documents it. (A relayed game against the
 * rungs-relay binary runs in tests/lockstep_relay_udp.rs and
 * examples-c/relay_demo.sh.) */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "rungs.h"

static const uint8_t LOBBY_SECRET[16] = {0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77,
                                         0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff};

static void hex(const uint8_t *bytes, size_t len, char *out) {
    size_t i;
    for (i = 0; i < len; i++) {
        sprintf(out + 2 * i, "%02x", bytes[i]);
    }
}

static void test_issue_and_parse_round_trip(void) {
    uint8_t ticket[RUNGS_RELAY_TICKET_BYTES], again[RUNGS_RELAY_TICKET_BYTES];
    uint8_t link[RUNGS_RELAY_SECRET_BYTES], link_again[RUNGS_RELAY_SECRET_BYTES];
    uint8_t other_link[RUNGS_RELAY_SECRET_BYTES];
    size_t len = 0, len_again = 0;
    uint8_t seat;
    char text[2 * RUNGS_RELAY_TICKET_BYTES + 1 + 2 * RUNGS_RELAY_SECRET_BYTES + 4];

    CHECK_EQ(rungs_relay_ticket_issue(LOBBY_SECRET, 4242, 2, 1800000000u, 7, ticket,
                                      sizeof ticket, &len, link),
             RUNGS_OK);
    CHECK_EQ(len, RUNGS_RELAY_TICKET_BYTES);
    CHECK_EQ(ticket[1], 2); /* the seat, in the clear */
    /* Same inputs, same ticket (the lobby and relay agree without state). */
    CHECK_EQ(rungs_relay_ticket_issue(LOBBY_SECRET, 4242, 2, 1800000000u, 7, again,
                                      sizeof again, &len_again, link_again),
             RUNGS_OK);
    CHECK(memcmp(ticket, again, sizeof ticket) == 0);
    CHECK(memcmp(link, link_again, sizeof link) == 0);
    /* Another nonce: another ticket and link secret. */
    CHECK_EQ(rungs_relay_ticket_issue(LOBBY_SECRET, 4242, 2, 1800000000u, 8, again,
                                      sizeof again, &len_again, other_link),
             RUNGS_OK);
    CHECK(memcmp(ticket, again, sizeof ticket) != 0);
    CHECK(memcmp(link, other_link, sizeof link) != 0);

    /* The text form round-trips, white space around it ignored. */
    text[0] = ' ';
    hex(ticket, sizeof ticket, text + 1);
    text[1 + 2 * RUNGS_RELAY_TICKET_BYTES] = ':';
    hex(link, sizeof link, text + 2 + 2 * RUNGS_RELAY_TICKET_BYTES);
    strcat(text, "\n");
    memset(again, 0, sizeof again);
    memset(link_again, 0, sizeof link_again);
    seat = 99;
    CHECK_EQ(rungs_relay_credentials_parse(text, again, sizeof again, &len_again, link_again,
                                           &seat),
             RUNGS_OK);
    CHECK_EQ(seat, 2);
    CHECK_EQ(len_again, RUNGS_RELAY_TICKET_BYTES);
    CHECK(memcmp(ticket, again, sizeof ticket) == 0);
    CHECK(memcmp(link, link_again, sizeof link) == 0);
}

static void test_misuse(void) {
    uint8_t ticket[RUNGS_RELAY_TICKET_BYTES + 8];
    uint8_t link[RUNGS_RELAY_SECRET_BYTES];
    uint8_t zero[16];
    size_t len = 99;
    memset(zero, 0, sizeof zero);

    CHECK_EQ(rungs_relay_ticket_issue(NULL, 1, 0, 1, 1, ticket, sizeof ticket, &len, link),
             RUNGS_ERR_NULL_POINTER);
    CHECK_MESSAGE("rungs_relay_ticket_issue: lobby_secret is NULL");
    CHECK_EQ(rungs_relay_ticket_issue(LOBBY_SECRET, 1, 0, 1, 1, NULL, sizeof ticket, &len, link),
             RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_relay_ticket_issue(LOBBY_SECRET, 1, 0, 1, 1, ticket, sizeof ticket, NULL, link),
             RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_relay_ticket_issue(LOBBY_SECRET, 1, 0, 1, 1, ticket, sizeof ticket, &len, NULL),
             RUNGS_ERR_NULL_POINTER);
    CHECK_MESSAGE("rungs_relay_ticket_issue: link_secret_out is NULL");
    CHECK_EQ(rungs_relay_ticket_issue(LOBBY_SECRET, 1, 16, 1, 1, ticket, sizeof ticket, &len, link),
             RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE("rungs_relay_ticket_issue: seat is 16; expected 0 to 15");
    CHECK_EQ(rungs_relay_ticket_issue(zero, 1, 0, 1, 1, ticket, sizeof ticket, &len, link),
             RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE_HAS("lobby_secret is all zero");
    CHECK_EQ(rungs_relay_ticket_issue(LOBBY_SECRET, 1, 0, 1, 1, ticket,
                                      RUNGS_RELAY_TICKET_BYTES - 1, &len, link),
             RUNGS_ERR_BUFFER_TOO_SMALL);
    CHECK_EQ(len, 99); /* outputs untouched on failure */
    /* A larger buffer is fine; the length says how much was written. */
    CHECK_EQ(rungs_relay_ticket_issue(LOBBY_SECRET, 1, 15, 1, 1, ticket, sizeof ticket, &len, link),
             RUNGS_OK);
    CHECK_EQ(len, RUNGS_RELAY_TICKET_BYTES);

    CHECK_EQ(rungs_relay_credentials_parse(NULL, ticket, sizeof ticket, &len, link, NULL),
             RUNGS_ERR_NULL_POINTER);
    CHECK_MESSAGE("rungs_relay_credentials_parse: text is NULL");
    CHECK_EQ(rungs_relay_credentials_parse("abc:def", ticket, sizeof ticket, &len, link, NULL),
             RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE_HAS("expected <84 hex digits>:<32 hex digits>");
    CHECK_EQ(rungs_relay_credentials_parse("no colon", ticket, sizeof ticket, &len, link, NULL),
             RUNGS_ERR_INVALID_ARGUMENT);
}

/* ---- rungs_lockstep in the relay topology ---- */

static rungs_lockstep_config relay_config(const uint8_t *ticket, size_t ticket_len,
                                          const uint8_t *link, uint8_t seat, const char *relay) {
    rungs_lockstep_config c;
    memset(&c, 0, sizeof c);
    c.struct_size = sizeof c;
    c.speed_fps = 30;
    c.seat_count = 3;
    c.local_seat = seat;
    c.human_seat_mask = 0x7;
    c.checksum_interval = 30;
    c.bind_address = "127.0.0.1:0";
    c.topology = RUNGS_TOPOLOGY_RELAY;
    c.relay_address = relay;
    c.relay_ticket = ticket;
    c.relay_ticket_len = ticket_len;
    memcpy(c.relay_link_secret, link, RUNGS_RELAY_SECRET_BYTES);
    c.relay_jitter_ticks = RUNGS_RELAY_DEFAULT_JITTER_TICKS;
    return c;
}

static void test_lockstep_relay_config(void) {
    uint8_t ticket[RUNGS_RELAY_TICKET_BYTES], link[RUNGS_RELAY_SECRET_BYTES];
    uint8_t zero[RUNGS_RELAY_SECRET_BYTES];
    size_t len = 0;
    rungs_lockstep_config c;
    rungs_lockstep *ls = NULL;
    rungs_lockstep_update_result r;
    rungs_lockstep_stats stats;
    uint8_t order[2] = {1, 2};
    memset(zero, 0, sizeof zero);
    CHECK_EQ(rungs_relay_ticket_issue(LOBBY_SECRET, 9, 1, 4000000000u, 5, ticket, sizeof ticket,
                                      &len, link),
             RUNGS_OK);

    c = relay_config(ticket, len, link, 1, "127.0.0.1:9");
    c.topology = 2;
    CHECK_EQ(rungs_lockstep_new(&c, 0, &ls), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE("rungs_lockstep_new: config->topology is 2; expected RUNGS_TOPOLOGY_PEER_TO_PEER "
                  "(0) or RUNGS_TOPOLOGY_RELAY (1)");
    c = relay_config(ticket, len, link, 1, NULL);
    CHECK_EQ(rungs_lockstep_new(&c, 0, &ls), RUNGS_ERR_NULL_POINTER);
    CHECK_MESSAGE("rungs_lockstep_new: config->relay_address is NULL");
    c = relay_config(ticket, len, link, 1, "nowhere");
    CHECK_EQ(rungs_lockstep_new(&c, 0, &ls), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE_HAS("config->relay_address is \"nowhere\"");
    c = relay_config(ticket, len - 1, link, 1, "127.0.0.1:9");
    CHECK_EQ(rungs_lockstep_new(&c, 0, &ls), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE("rungs_lockstep_new: config->relay_ticket_len is 41; expected "
                  "RUNGS_RELAY_TICKET_BYTES (42)");
    c = relay_config(NULL, len, link, 1, "127.0.0.1:9");
    CHECK_EQ(rungs_lockstep_new(&c, 0, &ls), RUNGS_ERR_NULL_POINTER);
    c = relay_config(ticket, len, zero, 1, "127.0.0.1:9");
    CHECK_EQ(rungs_lockstep_new(&c, 0, &ls), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE_HAS("config->relay_link_secret is all zero");
    c = relay_config(ticket, len, link, 2, "127.0.0.1:9");
    CHECK_EQ(rungs_lockstep_new(&c, 0, &ls), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE("rungs_lockstep_new: config->relay_ticket's seat is 1; expected "
                  "config->local_seat (2)");
    CHECK(ls == NULL);

    /* A valid one: no key needed, no peers to add, waits for the relay. */
    c = relay_config(ticket, len, link, 1, "127.0.0.1:9");
    CHECK_EQ(rungs_lockstep_new(&c, 0, &ls), RUNGS_OK);
    CHECK_EQ(rungs_lockstep_add_peer(ls, 0, "127.0.0.1:10", 0), RUNGS_ERR_STATE);
    CHECK_MESSAGE_HAS("relay");
    CHECK_EQ(rungs_lockstep_drop_player(ls, 0), RUNGS_ERR_STATE);
    CHECK_EQ(rungs_lockstep_submit_command(ls, order, sizeof order, NULL), RUNGS_OK);
    /* AI orders need the Welcome (it brings ai_order_delay). */
    CHECK_EQ(rungs_lockstep_submit_ai_order(ls, 2, order, sizeof order, NULL), RUNGS_ERR_STATE);
    CHECK_MESSAGE_HAS("rungs_lockstep_submit_ai_order: ");
    CHECK_MESSAGE_HAS("Welcome");
    CHECK_EQ(rungs_lockstep_submit_ai_order(ls, 2, NULL, 1, NULL), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_lockstep_submit_ai_order(NULL, 2, order, sizeof order, NULL),
             RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_lockstep_update(ls, 1000, &r), RUNGS_OK);
    CHECK_EQ(r.outcome, RUNGS_LOCKSTEP_WAITING);
    CHECK(r.next_us > 1000);
    CHECK_EQ(rungs_lockstep_read_stats(ls, &stats), RUNGS_OK);
    CHECK_EQ(stats.desyncs, 0);
    CHECK_EQ(rungs_lockstep_free(ls), RUNGS_OK);
}

static void test_relay_topology_calls(void) {
    uint8_t ticket[RUNGS_RELAY_TICKET_BYTES], link[RUNGS_RELAY_SECRET_BYTES];
    size_t len = 0;
    rungs_lockstep_config c;
    rungs_lockstep *ls = NULL;
    rungs_relay_callbacks cb;
    uint64_t id = 99;
    uint32_t frame = 99;
    uint8_t is = 7;
    uint8_t order[2] = {3, 4};
    CHECK_EQ(rungs_relay_ticket_issue(LOBBY_SECRET, 9, 1, 4000000000u, 5, ticket, sizeof ticket,
                                      &len, link),
             RUNGS_OK);
    c = relay_config(ticket, len, link, 1, "127.0.0.1:9");
    CHECK_EQ(rungs_lockstep_new(&c, 0, &ls), RUNGS_OK);

    /* The state before every 30th frame is compared: after frames 29, 59... */
    CHECK_EQ(rungs_lockstep_is_checksum_frame(ls, 29, &is), RUNGS_OK);
    CHECK_EQ(is, 1);
    CHECK_EQ(rungs_lockstep_is_checksum_frame(ls, 30, &is), RUNGS_OK);
    CHECK_EQ(is, 0);
    CHECK_EQ(rungs_lockstep_is_checksum_frame(ls, 30, NULL), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_lockstep_submit_checksum(ls, 30, 1), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE_HAS("is_checksum_frame");
    CHECK_EQ(rungs_lockstep_submit_checksum(ls, 29, 1), RUNGS_OK);
    CHECK_EQ(rungs_lockstep_submit_initial_checksum(ls, 1), RUNGS_OK);

    /* Orders of every kind. */
    CHECK_EQ(rungs_lockstep_submit_order(ls, 3, order, sizeof order, &id, &frame),
             RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE("rungs_lockstep_submit_order: kind is 3; expected RUNGS_ORDER_COMMAND (0), "
                  "RUNGS_ORDER_QUIT (1) or RUNGS_ORDER_EPHEMERAL (2)");
    CHECK_EQ(rungs_lockstep_submit_order(ls, RUNGS_ORDER_COMMAND, order, sizeof order, &id,
                                         &frame),
             RUNGS_OK);
    CHECK_EQ(id, 1);
    CHECK_EQ(frame, 0);
    CHECK_EQ(rungs_lockstep_submit_order(ls, RUNGS_ORDER_EPHEMERAL, order, sizeof order, NULL,
                                         NULL),
             RUNGS_ERR_STATE);
    CHECK_MESSAGE_HAS("not connected to the relay");
    CHECK_EQ(rungs_lockstep_submit_order(ls, RUNGS_ORDER_QUIT, order, sizeof order, &id, NULL),
             RUNGS_OK);
    CHECK_EQ(id, 2);
    CHECK_EQ(rungs_lockstep_submit_order(ls, RUNGS_ORDER_COMMAND, order, sizeof order, NULL,
                                         NULL),
             RUNGS_ERR_STATE);
    CHECK_EQ(rungs_lockstep_submit_order(NULL, RUNGS_ORDER_COMMAND, order, 1, NULL, NULL),
             RUNGS_ERR_NULL_POINTER);

    /* AI decisions need the Welcome (ai_order_delay). */
    CHECK_EQ(rungs_lockstep_ai_decision_begin(ls, 2, 10, NULL), RUNGS_ERR_STATE);
    CHECK_MESSAGE_HAS("Welcome");
    CHECK_EQ(rungs_lockstep_submit_ai_order_at(ls, 2, 10, order, sizeof order, NULL),
             RUNGS_ERR_STATE);
    CHECK_EQ(rungs_lockstep_ai_decision_end(ls, 2, 10), RUNGS_ERR_STATE);
    CHECK_EQ(rungs_lockstep_submit_ai_order_at(ls, 2, 10, NULL, 1, NULL), RUNGS_ERR_NULL_POINTER);

    /* Relay callbacks: struct_size checked; NULL clears. */
    memset(&cb, 0, sizeof cb);
    cb.struct_size = 4;
    CHECK_EQ(rungs_lockstep_set_relay_callbacks(ls, &cb), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE_HAS("callbacks->struct_size is 4");
    cb.struct_size = sizeof cb;
    CHECK_EQ(rungs_lockstep_set_relay_callbacks(ls, &cb), RUNGS_OK);
    CHECK_EQ(rungs_lockstep_set_relay_callbacks(ls, NULL), RUNGS_OK);
    CHECK_EQ(rungs_lockstep_set_relay_callbacks(NULL, &cb), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_lockstep_free(ls), RUNGS_OK);
}

/* ---- A LAN host: the relay in this process, two players ---- */

typedef struct {
    uint32_t hash;
    uint32_t commands;
    uint32_t last_frame;
    uint32_t ephemeral;
    uint32_t removed_frame;
    uint32_t quit_order_frame;
    uint32_t refused;
    /* The AI seat's decisions: the one computing (its tick, when it is
     * in), and the orders that ran on their due frame. */
    int ai_open;
    uint32_t ai_tick;
    uint64_t ai_in_at_us;
    uint32_t ai_orders;
    uint32_t ai_misplaced;
} lan_player;

enum { LAN_AI_SEAT = 2, LAN_AI_DELAY = 8 };

static void RUNGS_CALL lan_command(void *user, uint32_t frame, uint8_t seat,
                                   const uint8_t *bytes, size_t len) {
    lan_player *p = user;
    size_t i;
    p->hash = p->hash * 31u + frame * 7u + seat;
    for (i = 0; i < len; i++) p->hash = p->hash * 31u + bytes[i];
    if (seat == LAN_AI_SEAT) {
        /* 'a' and the decision's tick: due on that tick + the delay. */
        uint32_t decided = 0;
        if (len == 5 && bytes[0] == 'a') memcpy(&decided, bytes + 1, 4);
        if (len != 5 || frame != decided + LAN_AI_DELAY) p->ai_misplaced++;
        p->ai_orders++;
        return;
    }
    p->commands++;
    if (len == 2 && bytes[0] == 'g' && bytes[1] == 'g') p->quit_order_frame = frame;
}

static void RUNGS_CALL lan_removed(void *user, uint32_t frame, uint8_t seat) {
    lan_player *p = user;
    (void)seat;
    p->removed_frame = frame;
}

static void RUNGS_CALL lan_ephemeral(void *user, uint32_t frame, uint8_t seat,
                                     const uint8_t *bytes, size_t len) {
    lan_player *p = user;
    (void)frame;
    if (seat == 0 && len == 5 && memcmp(bytes, "voice", 5) == 0) p->ephemeral++;
}

static void RUNGS_CALL lan_refused(void *user, uint64_t id, uint8_t reason) {
    lan_player *p = user;
    (void)id;
    (void)reason;
    p->refused++;
}

static void test_lan_host_plays_a_match(void) {
    rungs_relay_host_config hc;
    rungs_relay_host *host = NULL;
    rungs_relay_host_status st;
    uint16_t port = 0;
    char address[32];
    char text[RUNGS_RELAY_CREDENTIALS_TEXT_BYTES];
    size_t text_len = 0;
    rungs_lockstep *ls[2] = {NULL, NULL};
    lan_player players[2];
    uint64_t start;
    int i, done = 0, sent = 0, quit = 0;

    memset(&hc, 0, sizeof hc);
    hc.struct_size = sizeof hc;
    hc.seat_count = 3;
    hc.human_seat_mask = 0x3;
    hc.checksum_interval = 30;
    hc.match_id = 77;
    hc.listen_address = "127.0.0.1:0";
    /* Misuse first. */
    CHECK_EQ(rungs_relay_host_new(NULL, &host), RUNGS_ERR_NULL_POINTER);
    hc.policy = 9;
    CHECK_EQ(rungs_relay_host_new(&hc, &host), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE_HAS("config->policy is 9");
    hc.policy = RUNGS_POLICY_TRACKING;
    hc.reserved = 1;
    CHECK_EQ(rungs_relay_host_new(&hc, &host), RUNGS_ERR_INVALID_ARGUMENT);
    hc.reserved = 0;
    hc.ai_order_delay = 9;
    CHECK_EQ(rungs_relay_host_new(&hc, &host), RUNGS_ERR_INVALID_ARGUMENT);
    hc.ai_order_delay = LAN_AI_DELAY;
    CHECK(host == NULL);
    CHECK_EQ(rungs_relay_host_new(&hc, &host), RUNGS_OK);
    CHECK_EQ(rungs_relay_host_port(host, &port), RUNGS_OK);
    CHECK(port != 0);
    snprintf(address, sizeof address, "127.0.0.1:%u", (unsigned)port);
    CHECK_EQ(rungs_relay_host_credentials(host, 2, text, sizeof text, &text_len),
             RUNGS_ERR_INVALID_ARGUMENT); /* an AI seat */
    CHECK_EQ(rungs_relay_host_credentials(host, 0, text, 10, &text_len),
             RUNGS_ERR_BUFFER_TOO_SMALL);
    CHECK_EQ(rungs_relay_host_read_status(host, &st), RUNGS_OK);
    CHECK_EQ(st.started, 0);
    CHECK_EQ(st.presence[0], RUNGS_SEAT_LOADING);
    CHECK_EQ(st.presence[2], RUNGS_SEAT_AI);

    memset(players, 0, sizeof players);
    for (i = 0; i < 2; i++) {
        uint8_t ticket[RUNGS_RELAY_TICKET_BYTES], link[RUNGS_RELAY_SECRET_BYTES], seat = 99;
        size_t len = 0;
        rungs_lockstep_config c;
        rungs_relay_callbacks cb;
        /* Seat 0 takes the text form (what a host hands over chat), seat 1
         * the raw ticket. */
        if (i == 0) {
            CHECK_EQ(rungs_relay_host_credentials(host, 0, text, sizeof text, &text_len),
                     RUNGS_OK);
            CHECK_EQ(text_len, RUNGS_RELAY_CREDENTIALS_TEXT_BYTES - 1);
            CHECK_EQ(rungs_relay_credentials_parse(text, ticket, sizeof ticket, &len, link, &seat),
                     RUNGS_OK);
            CHECK_EQ(seat, 0);
        } else {
            CHECK_EQ(rungs_relay_host_ticket(host, 1, ticket, sizeof ticket, &len, link),
                     RUNGS_OK);
        }
        c = relay_config(ticket, len, link, (uint8_t)i, address);
        c.human_seat_mask = 0x3;
        c.callbacks.user = &players[i];
        c.callbacks.command = lan_command;
        c.callbacks.player_removed = lan_removed;
        CHECK_EQ(rungs_lockstep_new(&c, now_us(), &ls[i]), RUNGS_OK);
        memset(&cb, 0, sizeof cb);
        cb.struct_size = sizeof cb;
        cb.user = &players[i];
        cb.ephemeral = lan_ephemeral;
        cb.order_refused = lan_refused;
        CHECK_EQ(rungs_lockstep_set_relay_callbacks(ls[i], &cb), RUNGS_OK);
        CHECK_EQ(rungs_lockstep_submit_initial_checksum(ls[i], 0), RUNGS_OK);
    }
    start = now_us();
    while (!done && now_us() - start < 60000000u) { /* slow under valgrind */
        done = 1;
        for (i = 0; i < 2; i++) {
            rungs_lockstep_update_result r;
            uint8_t is = 0;
            if (rungs_lockstep_update(ls[i], now_us(), &r) != RUNGS_OK) {
                CHECK(0);
                done = 1;
                break;
            }
            if (players[i].ai_open && now_us() >= players[i].ai_in_at_us) {
                /* The AI's decision is in: its order, then the end. */
                uint8_t order[5] = {'a'};
                uint32_t due = 0;
                memcpy(order + 1, &players[i].ai_tick, 4);
                CHECK_EQ(rungs_lockstep_submit_ai_order_at(ls[i], LAN_AI_SEAT, players[i].ai_tick,
                                                           order, sizeof order, &due),
                         RUNGS_OK);
                CHECK_EQ(due, players[i].ai_tick + LAN_AI_DELAY);
                CHECK_EQ(rungs_lockstep_ai_decision_end(ls[i], LAN_AI_SEAT, players[i].ai_tick),
                         RUNGS_OK);
                players[i].ai_open = 0;
            }
            if (r.outcome == RUNGS_LOCKSTEP_RAN) {
                players[i].last_frame = r.frame;
                /* Every 15 frames both machines' AI decides for seat 2 with
                 * the state before the next frame, as if on another thread:
                 * machine 0's is in at once, machine 1's takes 400 ms, longer
                 * than the delay (8 frames, 267 ms). The order runs on the
                 * decision's frame + 8 on both machines all the same. */
                if (r.frame % 15 == 0 && r.frame < 100 && !players[i].ai_open) {
                    uint32_t due = 0;
                    players[i].ai_open = 1;
                    players[i].ai_tick = r.frame + 1;
                    players[i].ai_in_at_us = now_us() + (i == 0 ? 0 : 400000);
                    CHECK_EQ(rungs_lockstep_ai_decision_begin(ls[i], LAN_AI_SEAT,
                                                              players[i].ai_tick, &due),
                             RUNGS_OK);
                    CHECK_EQ(due, players[i].ai_tick + LAN_AI_DELAY);
                }
                CHECK_EQ(rungs_lockstep_is_checksum_frame(ls[i], r.frame, &is), RUNGS_OK);
                if (is) CHECK_EQ(rungs_lockstep_submit_checksum(ls[i], r.frame, players[i].hash), RUNGS_OK);
                if (i == 0 && r.frame >= 20 && r.frame % 10 == 0 && sent < 10) {
                    uint8_t order[2] = {'o', (uint8_t)sent};
                    CHECK_EQ(rungs_lockstep_submit_order(ls[0], RUNGS_ORDER_COMMAND, order, 2, NULL,
                                                         NULL),
                             RUNGS_OK);
                    CHECK_EQ(rungs_lockstep_submit_order(ls[0], RUNGS_ORDER_EPHEMERAL,
                                                         (const uint8_t *)"voice", 5, NULL, NULL),
                             RUNGS_OK);
                    sent++;
                }
                if (i == 1 && sent == 10 && !quit && r.frame > 140) {
                    CHECK_EQ(rungs_lockstep_submit_order(ls[1], RUNGS_ORDER_QUIT,
                                                         (const uint8_t *)"gg", 2, NULL, NULL),
                             RUNGS_OK);
                    quit = 1;
                }
            }
            if (!(i == 1 && r.outcome == RUNGS_LOCKSTEP_LEFT) &&
                !(i == 0 && players[0].removed_frame > 0 &&
                  players[0].last_frame > players[0].removed_frame + 5))
                done = 0;
        }
    }
    CHECK(done);
    CHECK_EQ(rungs_relay_host_read_status(host, &st), RUNGS_OK);
    CHECK_EQ(st.started, 1);
    CHECK_EQ(st.presence[1], RUNGS_SEAT_LEFT);
    CHECK_EQ(st.presence[0], RUNGS_SEAT_CONNECTED);
    /* Every frame a player ran was sent by the host first (how far past 140
     * the host got depends on the machine's speed: under valgrind, less). */
    CHECK(st.horizon > players[0].last_frame);
    /* Both players ran the same commands up to seat 1's removal; seat 0 saw
     * seat 1's quit order on the frame seat 1 was removed, and heard every
     * ephemeral order while live. */
    CHECK_EQ(players[0].commands, 11);
    CHECK(players[0].removed_frame > 140);
    CHECK_EQ(players[0].quit_order_frame, players[0].removed_frame);
    CHECK(players[1].ephemeral >= 9);
    CHECK_EQ(players[0].refused, 0);
    /* Seven AI decisions (frames 15 to 90), each on its frame + 8 on both. */
    for (i = 0; i < 2; i++) {
        CHECK_EQ(players[i].ai_orders, 7);
        CHECK_EQ(players[i].ai_misplaced, 0);
    }
    CHECK_EQ(rungs_relay_host_end(host), RUNGS_OK);
    for (i = 0; i < 2; i++) CHECK_EQ(rungs_lockstep_free(ls[i]), RUNGS_OK);
    CHECK_EQ(rungs_relay_host_free(host), RUNGS_OK);
    CHECK_EQ(rungs_relay_host_free(NULL), RUNGS_OK);
}

/* ---- A replay: a turn log written as docs/relay.md documents it ---- */

typedef struct {
    uint32_t commands[8][3]; /* frame, seat, first byte */
    int count;
    uint32_t removed_frame, removed_seat;
    uint32_t desync_frame, desync_seats;
} replay_engine;

static void RUNGS_CALL replay_command(void *user, uint32_t frame, uint8_t seat,
                                      const uint8_t *bytes, size_t len) {
    replay_engine *e = user;
    if (e->count < 8) {
        e->commands[e->count][0] = frame;
        e->commands[e->count][1] = seat;
        e->commands[e->count][2] = len > 0 ? bytes[0] : 0;
    }
    e->count++;
}

static void RUNGS_CALL replay_removed(void *user, uint32_t frame, uint8_t seat) {
    replay_engine *e = user;
    e->removed_frame = frame;
    e->removed_seat = seat;
}

static void RUNGS_CALL replay_desync(void *user, uint32_t frame, uint32_t seats) {
    replay_engine *e = user;
    if (e->desync_seats == 0) {
        e->desync_frame = frame;
        e->desync_seats = seats;
    }
}

static void put_u16(uint8_t *at, uint16_t v) {
    at[0] = (uint8_t)v;
    at[1] = (uint8_t)(v >> 8);
}

static void put_u32(uint8_t *at, uint32_t v) {
    put_u16(at, (uint16_t)v);
    put_u16(at + 2, (uint16_t)(v >> 16));
}

static void put_u64(uint8_t *at, uint64_t v) {
    put_u32(at, (uint32_t)v);
    put_u32(at + 4, (uint32_t)(v >> 32));
}

static void test_replay_of_a_turn_log(void) {
    uint8_t log[128];
    size_t n = 0;
    rungs_lockstep_config c;
    rungs_lockstep *ls = NULL;
    replay_engine e;
    int steps;
    uint8_t ticket[RUNGS_RELAY_TICKET_BYTES], link[RUNGS_RELAY_SECRET_BYTES];
    size_t len = 0;

    /* Header: 2 human seats, 30 ticks/s, checksums every 10, no AI delay,
     * every human left, match 5, end tick 12, 3 entries, 1 round. */
    memset(log, 0, sizeof log);
    memcpy(log, "RUNGSLOG", 8);
    log[8] = 1;
    log[9] = 2;
    put_u16(log + 10, 0x3);
    put_u32(log + 12, 30000);
    put_u16(log + 16, 10);
    log[18] = 0;
    log[19] = 0;
    put_u64(log + 20, 5);
    put_u32(log + 28, 12);
    put_u32(log + 32, 3);
    put_u32(log + 36, 1);
    n = 40;
    /* (tick 0, seat 0, order "a"), (3, 1, order "bc"), (11, 1, quit). */
    put_u32(log + n, 0), log[n + 4] = 0, log[n + 5] = 0, put_u16(log + n + 6, 1), log[n + 8] = 'a';
    n += 9;
    put_u32(log + n, 3), log[n + 4] = 1, log[n + 5] = 0, put_u16(log + n + 6, 2);
    log[n + 8] = 'b', log[n + 9] = 'c';
    n += 10;
    put_u32(log + n, 11), log[n + 4] = 1, log[n + 5] = 1, put_u16(log + n + 6, 0);
    n += 8;
    /* The state before tick 10: seat 0 reported 1234, seat 1 reported 99. */
    put_u32(log + n, 10), put_u16(log + n + 4, 0x3);
    put_u64(log + n + 6, 1234), put_u64(log + n + 14, 99);
    n += 22;

    CHECK_EQ(rungs_relay_ticket_issue(LOBBY_SECRET, 5, 0, 4000000000u, 5, ticket, sizeof ticket,
                                      &len, link),
             RUNGS_OK);
    c = relay_config(ticket, len, link, 0, "127.0.0.1:9");
    c.seat_count = 2;
    c.human_seat_mask = 0x3;
    c.checksum_interval = 10;
    memset(&e, 0, sizeof e);
    c.callbacks.user = &e;
    c.callbacks.command = replay_command;
    c.callbacks.player_removed = replay_removed;
    c.callbacks.desync = replay_desync;
    CHECK_EQ(rungs_lockstep_replay_new(&c, log, n - 1, 0, &ls), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE_HAS("not a rungs turn log");
    CHECK_EQ(rungs_lockstep_replay_new(&c, NULL, n, 0, &ls), RUNGS_ERR_NULL_POINTER);
    c.checksum_interval = 30;
    CHECK_EQ(rungs_lockstep_replay_new(&c, log, n, 0, &ls), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE_HAS("checksum_interval");
    c.checksum_interval = 10;
    CHECK_EQ(rungs_lockstep_replay_new(&c, log, n, 0, &ls), RUNGS_OK);
    for (steps = 0; steps < 100; steps++) {
        rungs_lockstep_update_result r;
        CHECK_EQ(rungs_lockstep_update(ls, 0, &r), RUNGS_OK);
        /* This engine's state before tick 10 is seat 0's. */
        if (r.outcome == RUNGS_LOCKSTEP_RAN && r.frame == 9)
            CHECK_EQ(rungs_lockstep_submit_checksum(ls, 9, 1234), RUNGS_OK);
        if (r.outcome == RUNGS_LOCKSTEP_LEFT) break;
        CHECK_EQ(r.outcome, RUNGS_LOCKSTEP_RAN);
    }
    CHECK_EQ(e.count, 2);
    CHECK_EQ(e.commands[0][0], 0);
    CHECK_EQ(e.commands[0][2], 'a');
    CHECK_EQ(e.commands[1][0], 3);
    CHECK_EQ(e.commands[1][1], 1);
    CHECK_EQ(e.removed_frame, 11);
    CHECK_EQ(e.removed_seat, 1);
    CHECK_EQ(e.desync_frame, 10);
    CHECK_EQ(e.desync_seats, 0x2);
    CHECK_EQ(rungs_lockstep_submit_order(ls, RUNGS_ORDER_COMMAND, (const uint8_t *)"x", 1, NULL,
                                         NULL),
             RUNGS_ERR_STATE);
    CHECK_EQ(rungs_lockstep_free(ls), RUNGS_OK);
}

int main(void) {
    test_issue_and_parse_round_trip();
    test_misuse();
    test_lockstep_relay_config();
    test_relay_topology_calls();
    test_lan_host_plays_a_match();
    test_replay_of_a_turn_log();
    return harness_report("relay");
}
