/* lockstep — a lockstep game where rungs carries the commands.
 *
 *   ./lockstep [FRAMES]      three players in one process, real UDP sockets
 *                            on 127.0.0.1 (default 240 frames at 60 fps);
 *                            the third vanishes at frame 120
 *
 * Each player is a rungs_lockstep: rungs sends the commands, measures round
 * trips, runs the adaptive timing, syncs the clocks, paces the frames and
 * hands every machine the same commands on the same frames through the
 * `command` callback. The engine only submits its commands, applies what
 * comes back, and calls rungs_lockstep_update. Between updates the loop
 * sleeps in poll() on the players' sockets (rungs_lockstep_socket) until a
 * datagram arrives or the earliest next_us, whichever comes first: no
 * spinning, no fixed sleep. Each pair of players has its own link key
 * (S8), so no player could sign a packet as another.
 *
 * At frame 120 the third player's program vanishes (as if killed: here its
 * handle is freed without a word). Nobody calls rungs_lockstep_drop_player:
 * the two survivors hear nothing from it for the liveness timeout (500 ms
 * here, liveness_timeout_ms; rungs' default is 2 s or more), drop it by
 * themselves, agree on the last of its turns that counts, and play on. At
 * the end the program checks that the survivors executed the same commands
 * on the same frames, and the vanished player the same up to its last frame
 * (exit 1 if not). POSIX (poll); on Windows the same loop uses WSAPoll. */
#define _POSIX_C_SOURCE 200809L

#if defined(_WIN32)
/* WSAPoll is Windows' poll() (Vista and later); the socket rungs hands out is
 * a SOCKET there. */
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

/* The lockstep tier alone (it includes rungs/common.h): everything this
 * program calls is declared there, which its build proves. */
#include "rungs/lockstep.h"

#define PLAYERS 3
#define MAX_LOG 4096
#define VANISHES 2          /* this seat's program vanishes... */
#define VANISHES_AT 120     /* ...after this frame */

static uint64_t now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

typedef struct {
    uint32_t frame;
    uint8_t seat;
    uint8_t bytes[8];
    size_t len;
} executed_t;

typedef struct {
    int seat;
    rungs_lockstep *game;
    executed_t log[MAX_LOG];
    size_t logged;
    uint32_t state; /* a stand-in for the simulation: a hash of every command */
    uint32_t frames_run;
    int issued;
    int gone; /* its program vanished */
} player_t;

static int fail(rungs_result rc, const char *what) {
    char detail[256];
    rungs_last_error_message(detail, sizeof detail, NULL);
    fprintf(stderr, "lockstep: %s: %s (%s)\n", what, rungs_result_str(rc), detail);
    exit(2);
}

#define CALL(expr)                                                                         \
    do {                                                                                   \
        rungs_result call_rc = (expr);                                                     \
        if (call_rc != RUNGS_OK) fail(call_rc, #expr);                                     \
    } while (0)

/* Apply a command to the simulation (here: remember it and hash it). */
static void on_command(void *user, uint32_t frame, uint8_t seat, const uint8_t *bytes, size_t len) {
    player_t *p = user;
    size_t i;
    if (p->logged < MAX_LOG) {
        executed_t *e = &p->log[p->logged++];
        e->frame = frame;
        e->seat = seat;
        e->len = len < sizeof e->bytes ? len : sizeof e->bytes;
        memcpy(e->bytes, bytes, e->len);
    }
    for (i = 0; i < len; i++) p->state = p->state * 31u + bytes[i] + seat;
}

static void on_timing(void *user, uint32_t frame, uint8_t send_period, uint8_t look_ahead) {
    player_t *p = user;
    if (p->seat == 1) printf("frame %4u  timing %u/%u\n", (unsigned)frame, (unsigned)send_period, (unsigned)look_ahead);
}

static void on_message(void *user, uint32_t frame, uint8_t tier, const char *text) {
    player_t *p = user;
    (void)tier;
    if (p->seat == 1) printf("frame %4u  message: \"%s\"\n", (unsigned)frame, text);
}

static void on_removed(void *user, uint32_t frame, uint8_t seat) {
    player_t *p = user;
    printf("seat %d: seat %u dropped on frame %u\n", p->seat, (unsigned)seat, (unsigned)frame);
}

static void on_desync(void *user, uint32_t frame, uint32_t seats) {
    player_t *p = user;
    printf("DESYNC seen by seat %d on frame %u (seats %#x)\n", p->seat, (unsigned)frame, (unsigned)seats);
}

int main(int argc, char **argv) {
    static player_t players[PLAYERS];
    uint32_t frames = argc > 1 ? (uint32_t)strtoul(argv[1], NULL, 10) : 240;
    static const uint8_t key[16] = {'l', 'o', 'c', 'k', 's', 't', 'e', 'p', ' ', 'e', 'x', 'a', 'm', 'p', 'l', 'e'};
    uint16_t ports[PLAYERS];
    struct pollfd sockets[PLAYERS];
    int i, j, done = 0, ok = 1;
    uint64_t start = now_us();

    for (i = 0; i < PLAYERS; i++) {
        rungs_lockstep_config c;
        rungs_link_key pair_keys[PLAYERS - 1];
        rungs_socket handle;
        int n = 0;
        /* Game setup hands each pair a key of its own; here: the game key
         * with the pair's seats mixed in (a real lobby draws random ones). */
        for (j = 0; j < PLAYERS; j++)
            if (j != i) {
                memset(&pair_keys[n], 0, sizeof pair_keys[n]);
                pair_keys[n].seat = (uint8_t)j;
                memcpy(pair_keys[n].key, key, sizeof key);
                pair_keys[n].key[0] ^= (uint8_t)(1u << i | 1u << j);
                n++;
            }
        rungs_lockstep_config_init(&c); /* struct_size and the defaults */
        c.speed_fps = 60;
        c.seat_count = PLAYERS;
        c.local_seat = (uint8_t)i;
        c.human_seat_mask = (1u << PLAYERS) - 1;
        c.session_id = 2026;
        memcpy(c.key, key, sizeof key);
        c.checksum_interval = 32;
        c.bind_address = "127.0.0.1:0";
        c.callbacks.user = &players[i];
        c.callbacks.command = on_command;
        c.callbacks.timing_changed = on_timing;
        c.callbacks.player_message = on_message;
        c.callbacks.desync = on_desync;
        c.callbacks.player_removed = on_removed;
        /* A player unheard for 500 ms has vanished (0: rungs' default,
         * 2 s or more); rungs drops it by itself (manual_drops 0). */
        c.liveness_timeout_ms = 500;
        c.link_keys = pair_keys;
        c.link_key_count = (size_t)n;
        players[i].seat = i;
        CALL(rungs_lockstep_new(&c, now_us(), &players[i].game));
        CALL(rungs_lockstep_local_port(players[i].game, &ports[i]));
        CALL(rungs_lockstep_socket(players[i].game, &handle));
        sockets[i].fd = (socket_fd)handle;
        sockets[i].events = POLLIN;
    }
    for (i = 0; i < PLAYERS; i++)
        for (j = 0; j < PLAYERS; j++)
            if (i != j) {
                char address[32];
                snprintf(address, sizeof address, "127.0.0.1:%u", (unsigned)ports[j]);
                CALL(rungs_lockstep_add_peer(players[i].game, (uint8_t)j, address, now_us()));
            }
    printf("three players on 127.0.0.1 ports %u, %u, %u; %u frames at 60 fps\n", (unsigned)ports[0],
           (unsigned)ports[1], (unsigned)ports[2], (unsigned)frames);

    while (!done) {
        uint64_t wake = now_us() + 5000;
        done = 1;
        for (i = 0; i < PLAYERS; i++) {
            player_t *p = &players[i];
            rungs_lockstep_update_result r;
            if (p->gone || p->frames_run >= frames) continue;
            done = 0;
            CALL(rungs_lockstep_update(p->game, now_us(), &r));
            if (r.outcome == RUNGS_LOCKSTEP_RAN) {
                p->frames_run = r.frame + 1;
                CALL(rungs_lockstep_add_frame_work_us(p->game, 2000));
                /* The player's input: a command every 20 frames. */
                if ((r.frame + (uint32_t)i * 7u) % 20u == 0 && r.frame + 40 < frames) {
                    uint8_t command[4] = {(uint8_t)i, (uint8_t)p->issued, 0xC0, 0xDE};
                    CALL(rungs_lockstep_submit_command(p->game, command, sizeof command, NULL));
                    p->issued++;
                }
                if (r.frame % 32u == 0) CALL(rungs_lockstep_submit_checksum(p->game, r.frame, p->state));
                if (i == VANISHES && r.frame == VANISHES_AT && frames > VANISHES_AT + 60) {
                    /* Killed: no goodbye, its socket simply closes. */
                    printf("seat %d: vanishes after frame %u\n", i, (unsigned)r.frame);
                    CALL(rungs_lockstep_free(p->game));
                    p->game = NULL;
                    p->gone = 1;
                    continue;
                }
                wake = now_us();
            } else if (r.next_us < wake) {
                wake = r.next_us;
            }
        }
        /* Sleep until a datagram arrives or the earliest wake-up is due. */
        if (!done) {
            uint64_t now = now_us();
            int timeout_ms = wake > now ? (int)((wake - now + 999u) / 1000u) : 0;
            (void)poll(sockets, PLAYERS, timeout_ms);
        }
        if (now_us() - start > 60u * 1000000u) {
            printf("lockstep: the game did not finish in 60 s\n");
            return 1;
        }
    }
    for (i = 0; i < PLAYERS; i++) {
        rungs_lockstep_stats s;
        if (players[i].gone) {
            printf("seat %d: vanished after %lu commands executed\n", i, (unsigned long)players[i].logged);
            continue;
        }
        CALL(rungs_lockstep_read_stats(players[i].game, &s));
        printf("seat %d: %lu commands executed, %lu stalled frames, clock offset %lld us\n", i,
               (unsigned long)players[i].logged, (unsigned long)s.stalled_frames, (long long)s.clock_offset_us);
        if (s.desyncs) ok = 0;
    }
    for (i = 1; i < PLAYERS; i++) {
        size_t n = players[i].logged < players[0].logged ? players[i].logged : players[0].logged, k;
        /* A vanished player's log is the start of the survivors'. */
        if (players[i].logged != players[0].logged && !players[i].gone) ok = 0;
        for (k = 0; k < n; k++) {
            const executed_t *a = &players[0].log[k], *b = &players[i].log[k];
            if (a->frame != b->frame || a->seat != b->seat || a->len != b->len || memcmp(a->bytes, b->bytes, a->len))
                ok = 0;
        }
    }
    for (i = 0; i < PLAYERS; i++) CALL(rungs_lockstep_free(players[i].game));
    printf(ok ? "the survivors executed the same commands on the same frames, the vanished player the "
                "same up to its last\n"
              : "PLAYERS DIVERGED\n");
    return ok ? 0 : 1;
}
