/* relay_client — one player of a lockstep game behind a relay (S10).
 *
 *   ./relay_client RELAY_ADDRESS CREDENTIALS [SEATS] [FRAMES]
 *   ./relay_client --host PORT [SEATS] [FRAMES]
 *
 * RELAY_ADDRESS is the relay's "ip:port"; CREDENTIALS the text
 * `rungs-relay ticket` prints for this player (<ticket hex>:<link secret
 * hex>; a lobby in C issues them with rungs_relay_ticket_issue); SEATS the
 * match's seat count, every seat human (default 3); FRAMES how long to play
 * (default 450 frames: 15 s at the relay's 30 ticks/s).
 *
 * The game is the same rungs_lockstep an engine uses peer-to-peer, with
 * `topology = RUNGS_TOPOLOGY_RELAY`: no peers to add, one frame per relay
 * tick. The program joins the match (the relay starts it when every seat has
 * said Hello), submits an order every 15 frames, applies the commands every
 * player's program receives on the same frames, reports a state checksum
 * every 30 frames (the relay compares them), and leaves at the end. If the
 * link to the relay is lost (pull the cable, or `kill -STOP` the program for
 * six seconds and `kill -CONT` it), rungs reconnects by itself, resends the
 * orders the relay had not confirmed, and the program catches up: no
 * order is lost or executed twice. Prints one line per event worth knowing
 * and the final state hash, which is the same for every player. POSIX
 * (poll); on Windows the same loop uses WSAPoll.
 *
 * With --host the program is a LAN host: its game process runs the relay
 * itself (rungs_relay_host_new: a socket on PORT and a thread), prints one
 * `credentials seat N: ...` line for every other player, and plays seat 0
 * against its own relay on 127.0.0.1; it keeps the relay up until every
 * player has left. The others run `relay_client HOST_IP:PORT CREDENTIALS`.
 *
 * Checksums: the relay compares the state *before* every 30th frame, so the
 * program asks rungs_lockstep_is_checksum_frame after each frame, and
 * reports the initial state too. */
#define _POSIX_C_SOURCE 200809L

#if defined(_WIN32)
#define _WIN32_WINNT 0x0600
#include <winsock2.h>
#define poll WSAPoll
typedef SOCKET socket_fd;
#else
#include <poll.h>
typedef int socket_fd;
#endif
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rungs.h"

typedef struct {
    uint8_t seat;
    uint32_t state;    /* a stand-in for the simulation: a hash of every command */
    uint32_t commands; /* commands applied */
    int connected;
} player_t;

static uint64_t now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static int fail(rungs_result rc, const char *what) {
    char detail[256];
    rungs_last_error_message(detail, sizeof detail, NULL);
    fprintf(stderr, "relay_client: %s: %s (%s)\n", what, rungs_result_str(rc), detail);
    exit(2);
}

#define CALL(expr)                                                                         \
    do {                                                                                   \
        rungs_result call_rc = (expr);                                                     \
        if (call_rc != RUNGS_OK) fail(call_rc, #expr);                                     \
    } while (0)

/* Apply a command to the simulation: every player applies the same ones on
 * the same frames, seats in order. */
static void on_command(void *user, uint32_t frame, uint8_t seat, const uint8_t *bytes, size_t len) {
    player_t *p = user;
    size_t i;
    p->state = p->state * 31u + frame + seat;
    for (i = 0; i < len; i++) p->state = p->state * 31u + bytes[i];
    p->commands++;
    if (len >= 2) printf("frame %4u  seat %u order %u\n", (unsigned)frame, (unsigned)seat, (unsigned)bytes[1]);
}

static void on_removed(void *user, uint32_t frame, uint8_t seat) {
    (void)user;
    printf("frame %4u  seat %u left\n", (unsigned)frame, (unsigned)seat);
}

static void on_desync(void *user, uint32_t frame, uint32_t seats) {
    (void)user;
    printf("DESYNC at frame %u: seats %#x disagree\n", (unsigned)frame, (unsigned)seats);
}

/* The relay link is seat RUNGS_RELAY_SEAT. */
static void on_link(void *user, uint8_t seat, uint32_t event) {
    player_t *p = user;
    if (seat != RUNGS_RELAY_SEAT) return;
    if (event == RUNGS_LINK_EVENT_LOST) {
        p->connected = 0;
        printf("relay link lost: reconnecting\n");
    } else if (event == RUNGS_LINK_EVENT_RECOVERED) {
        p->connected = 1;
        printf("relay link back: catching up\n");
    } else if (event == RUNGS_LINK_EVENT_RESTARTED) {
        /* The relay could not resume where we stopped: a real game reloads
         * its state here and runs again from frame 0. */
        p->state = 0;
        p->commands = 0;
        printf("relay resumes from frame 0: state reset\n");
    }
}

static void on_refused(void *user, uint64_t id, uint8_t reason) {
    (void)user;
    printf("the relay refused order %llu (reason %u): it never runs\n", (unsigned long long)id,
           (unsigned)reason);
}

/* --host: the relay in this process. Prints the others' credentials and the
 * relay's address for our own player. */
static rungs_relay_host *start_host(const char *port, unsigned seats, char *address,
                                    size_t address_cap) {
    rungs_relay_host_config hc;
    rungs_relay_host *host = NULL;
    char listen[32];
    char text[RUNGS_RELAY_CREDENTIALS_TEXT_BYTES];
    uint16_t bound = 0;
    unsigned s;
    rungs_relay_host_config_init(&hc); /* struct_size and the defaults */
    hc.seat_count = (uint8_t)seats;
    hc.human_seat_mask = (1u << seats) - 1u;
    hc.checksum_interval = 30;
    hc.match_id = 1;
    hc.policy = RUNGS_POLICY_TRACKING;
    snprintf(listen, sizeof listen, "0.0.0.0:%s", port);
    hc.listen_address = listen;
    CALL(rungs_relay_host_new(&hc, &host));
    CALL(rungs_relay_host_port(host, &bound));
    for (s = 1; s < seats; s++) {
        CALL(rungs_relay_host_credentials(host, (uint8_t)s, text, sizeof text, NULL));
        printf("credentials seat %u: %s\n", s, text);
    }
    fflush(stdout);
    snprintf(address, address_cap, "127.0.0.1:%u", (unsigned)bound);
    return host;
}

static void sleep_ms(unsigned ms) {
#if defined(_WIN32)
    Sleep(ms);
#else
    struct timespec ts;
    ts.tv_sec = (time_t)(ms / 1000u);
    ts.tv_nsec = (long)(ms % 1000u) * 1000000L;
    nanosleep(&ts, NULL);
#endif
}

/* --host: keep the relay up until every player has left (or 60 s). */
static void host_until_everyone_left(rungs_relay_host *host) {
    uint64_t until = now_us() + 60u * 1000000u;
    for (;;) {
        rungs_relay_host_status st;
        if (rungs_relay_host_read_status(host, &st) != RUNGS_OK || st.over || now_us() > until) break;
        sleep_ms(100);
    }
    CALL(rungs_relay_host_free(host));
}

int main(int argc, char **argv) {
    player_t player;
    rungs_lockstep_config c;
    rungs_lockstep *game = NULL;
    rungs_socket handle;
    struct pollfd socket;
    uint8_t ticket[RUNGS_RELAY_TICKET_BYTES];
    uint8_t link_secret[RUNGS_RELAY_SECRET_BYTES];
    size_t ticket_len = 0;
    uint8_t seat = 0;
    unsigned seats = argc > 3 ? (unsigned)strtoul(argv[3], NULL, 10) : 3;
    uint32_t frames = argc > 4 ? (uint32_t)strtoul(argv[4], NULL, 10) : 450;
    uint32_t issued = 0, last_frame = 0;
    int leaving = 0;
    uint64_t start = now_us();
    rungs_relay_host *host = NULL;
    char host_address[32];
    const char *relay_address = argc > 1 ? argv[1] : "";
    rungs_relay_callbacks relay_callbacks;

    if (argc < 3 || seats < 1 || seats > 16) {
        fprintf(stderr, "usage: relay_client RELAY_ADDRESS CREDENTIALS [SEATS] [FRAMES]\n"
                        "       relay_client --host PORT [SEATS] [FRAMES]\n");
        return 2;
    }
    if (strcmp(argv[1], "--host") == 0) {
        host = start_host(argv[2], seats, host_address, sizeof host_address);
        relay_address = host_address;
        CALL(rungs_relay_host_ticket(host, 0, ticket, sizeof ticket, &ticket_len, link_secret));
        seat = 0;
    } else {
        CALL(rungs_relay_credentials_parse(argv[2], ticket, sizeof ticket, &ticket_len, link_secret,
                                           &seat));
    }

    memset(&player, 0, sizeof player);
    player.seat = seat;
    rungs_lockstep_config_init(&c); /* struct_size and the defaults */
    c.speed_fps = 30; /* the relay's tick rate: one frame per tick */
    c.seat_count = (uint8_t)seats;
    c.local_seat = seat;
    c.human_seat_mask = (1u << seats) - 1u;
    c.checksum_interval = 30; /* the match's checksum_interval */
    c.bind_address = "0.0.0.0:0";
    c.callbacks.user = &player;
    c.callbacks.command = on_command;
    c.callbacks.player_removed = on_removed;
    c.callbacks.desync = on_desync;
    c.callbacks.link_event = on_link;
    c.topology = RUNGS_TOPOLOGY_RELAY;
    c.relay_address = relay_address;
    c.relay_ticket = ticket;
    c.relay_ticket_len = ticket_len;
    memcpy(c.relay_link_secret, link_secret, sizeof link_secret);
    CALL(rungs_lockstep_new(&c, now_us(), &game));
    memset(&relay_callbacks, 0, sizeof relay_callbacks);
    relay_callbacks.struct_size = sizeof relay_callbacks;
    relay_callbacks.user = &player;
    relay_callbacks.order_refused = on_refused;
    CALL(rungs_lockstep_set_relay_callbacks(game, &relay_callbacks));
    CALL(rungs_lockstep_submit_initial_checksum(game, player.state));
    CALL(rungs_lockstep_socket(game, &handle));
    socket.fd = (socket_fd)handle;
    socket.events = POLLIN;
    printf("seat %u joining the match on relay %s%s\n", (unsigned)seat, relay_address,
           host ? " (hosted in this process)" : "");

    for (;;) {
        rungs_lockstep_update_result r;
        uint64_t now = now_us();
        CALL(rungs_lockstep_update(game, now, &r));
        if (r.outcome == RUNGS_LOCKSTEP_LEFT) break;
        if (r.outcome == RUNGS_LOCKSTEP_RAN) {
            last_frame = r.frame;
            if (r.frame == 0) printf("the match started\n");
            /* The player's input: an order every 15 frames. */
            /* None in the last 30 frames, so every order runs before anyone's
             * quit and every player ends with the same state. */
            if (!leaving && (r.frame + seat * 5u) % 15u == 0 && r.frame + 30u < frames) {
                uint8_t order[2] = {seat, (uint8_t)issued++};
                CALL(rungs_lockstep_submit_command(game, order, sizeof order, NULL));
            }
            {
                uint8_t compare = 0;
                CALL(rungs_lockstep_is_checksum_frame(game, r.frame, &compare));
                if (compare) CALL(rungs_lockstep_submit_checksum(game, r.frame, player.state));
            }
            if (!leaving && r.frame + 1 >= frames) {
                CALL(rungs_lockstep_leave(game)); /* runs until the quit executes */
                leaving = 1;
            }
            continue; /* another frame may be due at once (catching up) */
        }
        /* Sleep until a datagram arrives or the next frame is due. */
        {
            int timeout_ms = r.next_us > now ? (int)((r.next_us - now + 999u) / 1000u) : 0;
            (void)poll(&socket, 1, timeout_ms);
        }
        if (now_us() - start > 600u * 1000000u) {
            fprintf(stderr, "relay_client: gave up after 10 minutes\n");
            return 1;
        }
    }
    printf("seat %u left after frame %u: %u commands applied, state %08x\n", (unsigned)seat,
           (unsigned)last_frame, (unsigned)player.commands, (unsigned)player.state);
    fflush(stdout);
    if (host) host_until_everyone_left(host);
    CALL(rungs_lockstep_free(game));
    return 0;
}
