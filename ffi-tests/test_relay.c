/* Relay tickets (S10) through the C API: a lobby issues tickets, a player
 * reads the text form `rungs-relay ticket` prints; misuse (NULL pointers,
 * bad seats, zero secrets, short buffers, malformed text); rungs_lockstep's
 * relay topology: its config checks, and a session that has no peers and
 * waits for the relay. (A whole relayed game over loopback runs in
 * tests/lockstep_relay_udp.rs and examples-c/relay_demo.sh.) */
#include <stdint.h>
#include <stdio.h>

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
    CHECK_MESSAGE("rungs_lockstep_new: config->relay_ticket is for seat 1; expected "
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
    CHECK_EQ(rungs_lockstep_get_stats(ls, &stats), RUNGS_OK);
    CHECK_EQ(stats.desyncs, 0);
    CHECK_EQ(rungs_lockstep_free(ls), RUNGS_OK);
}

int main(void) {
    test_issue_and_parse_round_trip();
    test_misuse();
    test_lockstep_relay_config();
    return harness_report("relay");
}
