/* rungs_lockstep through the C API: setup validation, misuse (NULLs, bad
 * addresses, bad config, re-entry from a callback, a poisoned object), and a
 * short two-player game over real UDP on 127.0.0.1 in which both players
 * execute the same commands on the same frames. */
#define _POSIX_C_SOURCE 200809L

#include <stddef.h>
#include <stdlib.h>

#include "harness.h"
#include "rungs.h"

static const uint8_t KEY[16] = {'l', 'o', 'c', 'k', 's', 't', 'e', 'p', '-', 't', 'e', 's', 't', 'k', 'e', 'y'};

typedef struct {
    rungs_lockstep *self;
    uint32_t removed; /* bit per seat the player_removed callback named */
    uint32_t frames[64];
    uint8_t seats[64];
    uint8_t first_byte[64];
    int count;
    int timing_changes;
    rungs_result reentry;
    rungs_result status_inside; /* rungs_lockstep_status from inside on_command */
} seen_t;

static void on_command(void *user, uint32_t frame, uint8_t seat, const uint8_t *bytes, size_t len) {
    seen_t *s = user;
    if (s->count < 64) {
        s->frames[s->count] = frame;
        s->seats[s->count] = seat;
        s->first_byte[s->count] = len ? bytes[0] : 0;
        s->count++;
    }
    if (s->self) {
        rungs_lockstep_update_result r;
        rungs_timing_status st;
        s->reentry = rungs_lockstep_update(s->self, 0, &r);
        s->status_inside = rungs_lockstep_status(s->self, &st);
    }
}

static void on_timing(void *user, uint32_t frame, uint8_t sp, uint8_t la) {
    seen_t *s = user;
    (void)frame;
    (void)sp;
    (void)la;
    s->timing_changes++;
}

static void on_removed(void *user, uint32_t frame, uint8_t seat) {
    seen_t *s = user;
    (void)frame;
    s->removed |= 1u << seat;
}

static rungs_lockstep_config config_for(seen_t *seen, uint8_t seat) {
    rungs_lockstep_config c;
    memset(&c, 0, sizeof c);
    c.struct_size = sizeof c;
    c.speed_fps = 60;
    c.seat_count = 2;
    c.local_seat = seat;
    c.human_seat_mask = 0x3;
    c.session_id = 77;
    memcpy(c.key, KEY, sizeof KEY);
    c.checksum_interval = 16;
    c.bind_address = "127.0.0.1:0";
    c.callbacks.user = seen;
    c.callbacks.command = on_command;
    c.callbacks.timing_changed = on_timing;
    c.callbacks.player_removed = on_removed;
    return c;
}

static void test_setup_and_misuse(void) {
    seen_t seen;
    rungs_lockstep_config c;
    rungs_lockstep *ls = NULL;
    rungs_lockstep_update_result r;
    rungs_timing_status st;
    rungs_lockstep_stats stats;
    uint16_t port = 0;
    uint32_t frame;
    memset(&seen, 0, sizeof seen);

    c = config_for(&seen, 0);
    CHECK_EQ(rungs_lockstep_new(NULL, 0, &ls), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_lockstep_new(&c, 0, NULL), RUNGS_ERR_NULL_POINTER);
    c.struct_size = 16;
    CHECK_EQ(rungs_lockstep_new(&c, 0, &ls), RUNGS_ERR_INVALID_ARGUMENT);
    c = config_for(&seen, 0);
    c.bind_address = "not an address";
    CHECK_EQ(rungs_lockstep_new(&c, 0, &ls), RUNGS_ERR_INVALID_ARGUMENT);
    c = config_for(&seen, 0);
    c.human_seat_mask = 0x7;
    CHECK_EQ(rungs_lockstep_new(&c, 0, &ls), RUNGS_ERR_INVALID_ARGUMENT);
    c = config_for(&seen, 2);
    CHECK_EQ(rungs_lockstep_new(&c, 0, &ls), RUNGS_ERR_INVALID_ARGUMENT);
    c = config_for(&seen, 0);
    c.speed_fps = 0;
    CHECK_EQ(rungs_lockstep_new(&c, 0, &ls), RUNGS_ERR_INVALID_ARGUMENT);
    c = config_for(&seen, 0);
    c.policy = 2;
    CHECK_EQ(rungs_lockstep_new(&c, 0, &ls), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE("rungs_lockstep_new: config->policy is 2; expected RUNGS_POLICY_ADAPTIVE (0) or "
                  "RUNGS_POLICY_TRACKING (1)");
    CHECK(ls == NULL);

    CHECK_EQ(rungs_lockstep_update(NULL, 0, &r), RUNGS_ERR_NULL_POINTER);
    CHECK_MESSAGE("rungs_lockstep_update: the handle (first argument) is NULL");
    CHECK_EQ(rungs_lockstep_local_port(NULL, &port), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_lockstep_add_peer(NULL, 1, "127.0.0.1:1", 0), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_lockstep_submit_command(NULL, (const uint8_t *)"x", 1, &frame), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_lockstep_submit_checksum(NULL, 16, 1), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_lockstep_add_frame_work_us(NULL, 1), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_lockstep_leave(NULL), RUNGS_ERR_NULL_POINTER);
    CHECK_MESSAGE("rungs_lockstep_leave: the handle (first argument) is NULL");
    CHECK_EQ(rungs_lockstep_drop_player(NULL, 1), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_lockstep_status(NULL, &st), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_lockstep_read_stats(NULL, &stats), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_lockstep_free(NULL), RUNGS_OK);

    c = config_for(&seen, 0);
    CHECK_EQ(rungs_lockstep_new(&c, now_us(), &ls), RUNGS_OK);
    if (!ls) return;
    CHECK_EQ(rungs_lockstep_local_port(ls, &port), RUNGS_OK);
    CHECK(port != 0);
    CHECK_EQ(rungs_lockstep_local_port(ls, NULL), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_lockstep_add_peer(ls, 1, NULL, 0), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_lockstep_add_peer(ls, 1, "nowhere", 0), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_EQ(rungs_lockstep_add_peer(ls, 0, "127.0.0.1:9", 0), RUNGS_ERR_UNKNOWN_SEAT); /* itself */
    CHECK_EQ(rungs_lockstep_add_peer(ls, 5, "127.0.0.1:9", 0), RUNGS_ERR_UNKNOWN_SEAT);
    CHECK_EQ(rungs_lockstep_submit_command(ls, NULL, 3, &frame), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_lockstep_submit_checksum(ls, 15, 1), RUNGS_ERR_INVALID_ARGUMENT); /* not a checksum frame */
    CHECK_EQ(rungs_lockstep_submit_ai_order(ls, 1, (const uint8_t *)"x", 1, &frame),
             RUNGS_ERR_STATE); /* peer-to-peer: the engine runs its AI itself */
    CHECK_MESSAGE_HAS("behind a relay");
    CHECK_EQ(rungs_lockstep_drop_player(ls, 0), RUNGS_ERR_UNKNOWN_SEAT); /* itself */
    CHECK_EQ(rungs_lockstep_status(ls, NULL), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_lockstep_read_stats(ls, NULL), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_lockstep_status(ls, &st), RUNGS_OK);
    CHECK(st.send_period == 2 && st.look_ahead == 6 && st.is_master == 1);
    rungs_testing_panic_next_call();
    CHECK_EQ(rungs_lockstep_update(ls, now_us(), &r), RUNGS_ERR_PANIC);
    CHECK_EQ(rungs_lockstep_update(ls, now_us(), &r), RUNGS_ERR_POISONED);
    CHECK_EQ(rungs_lockstep_free(ls), RUNGS_OK);
}

/* Two players on loopback run `frames` frames; each issues a command every
 * 10 frames; both must execute the same commands on the same frames. */
/* Two players on 127.0.0.1, each the other's peer; `liveness_ms` and
 * `manual` as in the config. 0 if either could not be made. */
static int two_players(seen_t seen[2], rungs_lockstep *ls[2], uint32_t liveness_ms, uint32_t manual) {
    uint16_t port[2];
    char address[32];
    int i;
    memset(seen, 0, 2 * sizeof *seen);
    for (i = 0; i < 2; i++) {
        rungs_lockstep_config c = config_for(&seen[i], (uint8_t)i);
        c.liveness_timeout_ms = liveness_ms;
        c.manual_drops = manual;
        CHECK_EQ(rungs_lockstep_new(&c, now_us(), &ls[i]), RUNGS_OK);
        if (!ls[i]) return 0;
        rungs_lockstep_local_port(ls[i], &port[i]);
    }
    for (i = 0; i < 2; i++) {
        snprintf(address, sizeof address, "127.0.0.1:%u", (unsigned)port[1 - i]);
        CHECK_EQ(rungs_lockstep_add_peer(ls[i], (uint8_t)(1 - i), address, now_us()), RUNGS_OK);
    }
    return 1;
}

static void test_two_player_game(void) {
    seen_t seen[2];
    rungs_lockstep *ls[2] = {NULL, NULL};
    const uint32_t frames = 120;
    uint32_t ran[2] = {0, 0};
    uint64_t start = now_us();
    int i, k, update_errors = 0, forecasts_in_the_past = 0, unexpected_outcomes = 0;
    if (!two_players(seen, ls, 0, 0)) return;
    /* Real time: count problems in the loop and check them once after, so
     * the number of checks does not depend on how often the loop ran. */
    while ((ran[0] < frames || ran[1] < frames) && now_us() - start < 20000000u) {
        for (i = 0; i < 2; i++) {
            rungs_lockstep_update_result r;
            if (ran[i] >= frames) continue;
            if (rungs_lockstep_update(ls[i], now_us(), &r) != RUNGS_OK) update_errors++;
            if (r.outcome == RUNGS_LOCKSTEP_RAN) {
                ran[i] = r.frame + 1;
                if (r.frame % 10 == 5 && r.frame + 30 < frames) {
                    uint8_t command[2] = {(uint8_t)(0x40 + i), (uint8_t)r.frame};
                    uint32_t due = 0;
                    if (rungs_lockstep_submit_command(ls[i], command, sizeof command, &due) != RUNGS_OK) update_errors++;
                    if (due <= r.frame) forecasts_in_the_past++;
                }
                if (r.frame % 16 == 0 && rungs_lockstep_submit_checksum(ls[i], r.frame, seen[i].count) != RUNGS_OK)
                    update_errors++;
            } else if (r.outcome != RUNGS_LOCKSTEP_NOT_DUE && r.outcome != RUNGS_LOCKSTEP_WAITING) {
                unexpected_outcomes++;
            }
        }
        sleep_ms(1);
    }
    CHECK_EQ(update_errors, 0);
    CHECK_EQ(forecasts_in_the_past, 0);
    CHECK_EQ(unexpected_outcomes, 0);
    CHECK_EQ(ran[0], frames);
    CHECK_EQ(ran[1], frames);
    CHECK(seen[0].count > 10);
    CHECK_EQ(seen[0].count, seen[1].count);
    for (k = 0; k < seen[0].count && k < seen[1].count; k++) {
        CHECK_EQ(seen[0].frames[k], seen[1].frames[k]);
        CHECK_EQ(seen[0].seats[k], seen[1].seats[k]);
        CHECK_EQ(seen[0].first_byte[k], seen[1].first_byte[k]);
    }
    CHECK(seen[0].timing_changes >= 1); /* frame 0 announces 2/6 */
    /* A callback reaches its own handle through a user pointer set after
     * rungs_lockstep_new: it may read the status there; re-entering the
     * game (an update) is refused. */
    {
        static seen_t reached;
        uint8_t command[2] = {0x55, 0};
        memset(&reached, 0, sizeof reached);
        reached.self = ls[0];
        reached.status_inside = -1;
        CHECK_EQ(rungs_lockstep_set_user(NULL, &reached), RUNGS_ERR_NULL_POINTER);
        CHECK_EQ(rungs_lockstep_set_user(ls[0], &reached), RUNGS_OK);
        for (i = 0; i < 2; i++) CHECK_EQ(rungs_lockstep_submit_command(ls[i], command, 2, NULL), RUNGS_OK);
        start = now_us();
        while (reached.reentry == 0 && now_us() - start < 5000000u) {
            for (i = 0; i < 2; i++) rungs_lockstep_update(ls[i], now_us(), NULL);
            sleep_ms(1);
        }
        CHECK(reached.count >= 1);
        CHECK_EQ(reached.reentry, RUNGS_ERR_REENTRANT);
        CHECK_EQ(reached.status_inside, RUNGS_OK);
        CHECK_EQ(seen[0].reentry, 0); /* the old user pointer no longer gets calls */
    }
    for (i = 0; i < 2; i++) {
        rungs_lockstep_stats stats;
        CHECK_EQ(rungs_lockstep_read_stats(ls[i], &stats), RUNGS_OK);
        CHECK_EQ(stats.desyncs, 0);
        CHECK_EQ(stats.malformed_messages, 0);
        CHECK_EQ(rungs_lockstep_free(ls[i]), RUNGS_OK);
    }
}

/* The last error message contains `needle`. */
static int last_error_mentions(const char *needle) {
    char message[512];
    size_t len = 0;
    if (rungs_last_error_message(message, sizeof message, &len) != RUNGS_OK) return 0;
    return strstr(message, needle) != NULL;
}

/* Every config rungs_lockstep_new refuses, one by one, with messages that
 * name the field; a forgotten rungs_lockstep_add_peer is named as such; the
 * socket is handed out; a full turn pushes back with RUNGS_ERR_FULL. */
static void test_refused_configs_and_messages(void) {
    seen_t seen;
    rungs_lockstep_config c;
    rungs_lockstep *ls = NULL;
    rungs_lockstep_update_result r;
    rungs_link_key keys[2];
    rungs_socket socket_handle = UINT64_MAX;
    uint8_t command[1000];
    uint32_t frame;
    int i, full = 0;
    memset(&seen, 0, sizeof seen);
    memset(keys, 0, sizeof keys);
    memset(command, 7, sizeof command);

    c = config_for(&seen, 0);
    memset(c.key, 0, sizeof c.key);
    CHECK_EQ(rungs_lockstep_new(&c, 0, &ls), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE_STARTS("rungs_lockstep_new: config->key is all zero");
    c = config_for(&seen, 0);
    c.human_seat_mask = 0x2; /* seat 0, this machine, is not human */
    CHECK_EQ(rungs_lockstep_new(&c, 0, &ls), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE("rungs_lockstep_new: config->local_seat is 0; expected a human seat "
                  "(set in config->human_seat_mask: 1)");
    c = config_for(&seen, 0);
    c.link_key_count = 1; /* and link_keys NULL */
    CHECK_EQ(rungs_lockstep_new(&c, 0, &ls), RUNGS_ERR_NULL_POINTER);
    CHECK_MESSAGE("rungs_lockstep_new: config->link_keys is NULL but its length is 1; "
                  "expected a valid pointer, or a length of 0");
    c = config_for(&seen, 0);
    c.link_keys = keys;
    c.link_key_count = 17;
    CHECK_EQ(rungs_lockstep_new(&c, 0, &ls), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE("rungs_lockstep_new: config->link_key_count is 17; expected 0 to 16");
    c.link_key_count = 1;
    keys[0].seat = 1; /* all-zero key */
    CHECK_EQ(rungs_lockstep_new(&c, 0, &ls), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE_STARTS("rungs_lockstep_new: config->link_keys[0].key is all zero");
    memcpy(keys[0].key, KEY, sizeof KEY);
    keys[0].seat = 0; /* this machine's own seat */
    CHECK_EQ(rungs_lockstep_new(&c, 0, &ls), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE("rungs_lockstep_new: config->link_keys[0].seat is 0; expected a human "
                  "seat other than config->local_seat (0)");
    keys[0].seat = 5; /* no such seat */
    CHECK_EQ(rungs_lockstep_new(&c, 0, &ls), RUNGS_ERR_INVALID_ARGUMENT);
    keys[0].seat = 1;
    keys[0].reserved[1] = 1;
    CHECK_EQ(rungs_lockstep_new(&c, 0, &ls), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE("rungs_lockstep_new: config->link_keys[0].reserved[1] is 1; expected 0");
    keys[0].reserved[1] = 0;
    CHECK(ls == NULL);
    c.liveness_timeout_ms = 600001;
    CHECK_EQ(rungs_lockstep_new(&c, 0, &ls), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE("rungs_lockstep_new: config->liveness_timeout_ms is 600001; expected 0 to 600000");
    c.liveness_timeout_ms = 0;
    c.manual_drops = 2;
    CHECK_EQ(rungs_lockstep_new(&c, 0, &ls), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE("rungs_lockstep_new: config->manual_drops is 2; expected 0 (rungs drops "
                  "vanished players) or 1 (the engine does)");
    /* A program built before the two fields existed: its struct ends where
     * they start, and it gets their defaults (the 2 here is never read). */
    c.struct_size = (uint32_t)offsetof(rungs_lockstep_config, manual_drops);
    CHECK_EQ(rungs_lockstep_new(&c, 0, &ls), RUNGS_OK);
    CHECK_EQ(rungs_lockstep_free(ls), RUNGS_OK);
    ls = NULL;
    c.struct_size = (uint32_t)offsetof(rungs_lockstep_config, liveness_timeout_ms) - 4;
    CHECK_EQ(rungs_lockstep_new(&c, 0, &ls), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE_STARTS("rungs_lockstep_new: config->struct_size is ");
    c.struct_size = sizeof c;
    c.manual_drops = 0;
    CHECK(ls == NULL);

    /* A good config with a per-pair key; the peer is never added. */
    CHECK_EQ(rungs_lockstep_new(&c, now_us(), &ls), RUNGS_OK);
    if (!ls) return;
    CHECK_EQ(rungs_lockstep_socket(ls, NULL), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_lockstep_socket(NULL, &socket_handle), RUNGS_ERR_NULL_POINTER);
    CHECK_MESSAGE("rungs_lockstep_socket: the handle (first argument) is NULL");
    CHECK_EQ(rungs_lockstep_socket(ls, &socket_handle), RUNGS_OK);
    CHECK(socket_handle != UINT64_MAX && (int)socket_handle >= 0);
    CHECK_EQ(rungs_lockstep_update(ls, now_us(), &r), RUNGS_ERR_STATE);
    CHECK(last_error_mentions("rungs_lockstep_add_peer"));
    CHECK_MESSAGE_STARTS("rungs_lockstep_update: ");
    /* A command pointer+length pair: NULL only with length 0. */
    CHECK_EQ(rungs_lockstep_submit_command(ls, NULL, 3, &frame), RUNGS_ERR_NULL_POINTER);
    CHECK_MESSAGE("rungs_lockstep_submit_command: bytes is NULL but its length is 3; "
                  "expected a valid pointer, or a length of 0");
    CHECK_EQ(rungs_lockstep_add_peer(ls, 1, "nowhere", now_us()), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE("rungs_lockstep_add_peer: address is \"nowhere\"; expected \"ip:port\", "
                  "e.g. \"127.0.0.1:7000\" or \"[::1]:7000\"");
    /* Backpressure: about 30 KB of commands fit one turn, then FULL. */
    for (i = 0; i < 100; i++) {
        rungs_result res = rungs_lockstep_submit_command(ls, command, sizeof command, &frame);
        if (res == RUNGS_ERR_FULL) {
            full = 1;
            break;
        }
        CHECK_EQ(res, RUNGS_OK);
    }
    CHECK(full && i > 20);
    CHECK_EQ(rungs_lockstep_leave(ls), RUNGS_OK);
    CHECK_EQ(rungs_lockstep_leave(ls), RUNGS_ERR_STATE);
    CHECK_EQ(rungs_lockstep_submit_command(ls, command, 1, &frame), RUNGS_ERR_STATE);
    CHECK_EQ(rungs_lockstep_free(ls), RUNGS_OK);
}

/* Two players; seat 1's program vanishes after frame 30 (its handle freed
 * without a word). With `manual_drops` 0 seat 0 drops it by itself once
 * nothing was heard for the liveness timeout and plays on; with 1 it waits
 * until the engine calls rungs_lockstep_drop_player. */
static void test_a_vanished_player_is_dropped(int manual) {
    seen_t seen[2];
    rungs_lockstep *ls[2] = {NULL, NULL};
    uint32_t ran = 0, waited_at = 0;
    uint64_t start = now_us(), vanished_at = 0;
    int i, dropped_by_engine = 0;
    if (!two_players(seen, ls, 300, (uint32_t)manual)) return;
    while (ran < 90 && now_us() - start < 10000000u) {
        rungs_lockstep_update_result r;
        for (i = 0; i < 2; i++) {
            if (!ls[i]) continue;
            if (rungs_lockstep_update(ls[i], now_us(), &r) != RUNGS_OK) continue;
            if (r.outcome != RUNGS_LOCKSTEP_RAN) continue;
            if (i == 0) ran = r.frame + 1;
            if (i == 1 && r.frame == 30) {
                CHECK_EQ(rungs_lockstep_free(ls[1]), RUNGS_OK);
                ls[1] = NULL;
                vanished_at = now_us();
            }
        }
        /* The engine that decides: a second after the vanishing, seat 0
         * has not run past the frames seat 1's last turns cover. */
        if (manual && vanished_at && !dropped_by_engine && now_us() - vanished_at > 1000000u) {
            waited_at = ran;
            CHECK_EQ(rungs_lockstep_drop_player(ls[0], 1), RUNGS_OK);
            CHECK_EQ(rungs_lockstep_drop_player(ls[0], 1), RUNGS_OK); /* again: no change */
            dropped_by_engine = 1;
        }
        sleep_ms(1);
    }
    CHECK_EQ(ran, 90);
    CHECK_EQ(seen[0].removed, 1u << 1);
    if (manual) {
        CHECK(dropped_by_engine);
        CHECK(waited_at > 30 && waited_at < 60);
    }
    CHECK_EQ(rungs_lockstep_free(ls[0]), RUNGS_OK);
    CHECK_EQ(rungs_lockstep_free(ls[1]), RUNGS_OK); /* NULL */
}

/* The mistakes a new user makes first are refused with the code the header
 * gives and a message that names the mistake: one's own seat as a peer or as
 * a seat to drop, a checksum with checksums off, a command too large for one
 * packet (its size and the limit). */
static void test_first_mistakes_are_named(void) {
    seen_t seen;
    rungs_lockstep_config c;
    rungs_lockstep *ls = NULL;
    static uint8_t command[1008];
    uint32_t frame = 0;
    memset(&seen, 0, sizeof seen);

    c = config_for(&seen, 0);
    c.checksum_interval = 0;
    CHECK_EQ(rungs_lockstep_new(&c, now_us(), &ls), RUNGS_OK);
    if (!ls) return;
    CHECK_EQ(rungs_lockstep_add_peer(ls, 0, "127.0.0.1:9", 0), RUNGS_ERR_UNKNOWN_SEAT);
    CHECK_MESSAGE("rungs_lockstep_add_peer: seat 0 is this machine's own seat "
                  "(config->local_seat); add the other human seats");
    CHECK_EQ(rungs_lockstep_drop_player(ls, 0), RUNGS_ERR_UNKNOWN_SEAT);
    CHECK_MESSAGE("rungs_lockstep_drop_player: seat 0 is this machine's own seat "
                  "(config->local_seat); to leave the game call rungs_lockstep_leave");
    CHECK_EQ(rungs_lockstep_drop_player(ls, 5), RUNGS_ERR_UNKNOWN_SEAT);
    CHECK_MESSAGE_HAS("seat 5 is not a seat of this game");
    CHECK_EQ(rungs_lockstep_submit_checksum(ls, 16, 1), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE("rungs_lockstep_submit_checksum: config->checksum_interval is 0; expected "
                  "positive for checksums to be compared (0 turns them off)");
    CHECK_EQ(rungs_lockstep_submit_command(ls, command, sizeof command, &frame),
             RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE("rungs_lockstep_submit_command: len is 1008; expected at most 1007 bytes, "
                  "what one command carries in this game");
    CHECK_EQ(rungs_lockstep_submit_command(ls, command, sizeof command - 1, &frame), RUNGS_OK);
    CHECK_EQ(rungs_lockstep_free(ls), RUNGS_OK);
}

int main(void) {
    test_setup_and_misuse();
    test_first_mistakes_are_named();
    test_refused_configs_and_messages();
    test_two_player_game();
    test_a_vanished_player_is_dropped(0);
    test_a_vanished_player_is_dropped(1);
    return harness_report("lockstep");
}
