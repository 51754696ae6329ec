/* Relay tickets (S10) through the C API: a lobby issues tickets, a player
 * reads the text form `rungs-relay ticket` prints; misuse (NULL pointers,
 * bad seats, zero secrets, short buffers, malformed text). */
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

int main(void) {
    test_issue_and_parse_round_trip();
    test_misuse();
    return harness_report("relay");
}
