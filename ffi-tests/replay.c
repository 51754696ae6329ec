/* Vector replay through the C API.
 *
 *   replay DIR      replays every *.vec file in DIR
 *
 * Each vector (see tests/vectors/README.md) is one game: executed reports and
 * removals go in; every timing event the master sends, every change of the
 * timing in force and every player message must come out exactly as listed.
 * The replay drives one rungs_timing_machine per human seat plus an observer,
 * exactly as an engine would: the master's timing events are queued as
 * commands tagged on the next send frame and executed when due.
 *
 * Prints one line per failing vector with its first difference, then
 * "vectors: N passed, M failed". Exits 1 if any failed (or none was found).
 * Plain C99 + POSIX dirent, no other dependency. */
#include "rungs.h"
#include "vector_file.h"

/* The observer's messages are collected through the player_message callback. */
static void on_message(void *user, uint32_t frame, uint8_t tier, const char *text) {
    lines_t *messages = user;
    line_t l;
    (void)tier;
    memset(&l, 0, sizeof l);
    l.kind = 'm';
    l.frame = frame;
    snprintf(l.text, sizeof l.text, "%s", text);
    push_line(messages, &l);
}

typedef struct {
    uint8_t seat;
    rungs_timing_event event;
} issued_t;

#define TRY(call)                                                                          \
    do {                                                                                   \
        rungs_result try_rc = (call);                                                      \
        if (try_rc != RUNGS_OK) {                                                          \
            snprintf(err, errcap, "frame %u: %s returned %s", (unsigned)frame, #call,      \
                     rungs_result_str(try_rc));                                            \
            goto done;                                                                     \
        }                                                                                  \
    } while (0)

/* Replay `v`; fills the actual lines. Returns 0, or -1 with `err` set. */
static int run_vector(const vector_t *v, lines_t *sends, lines_t *forces, lines_t *messages, char *err,
                      size_t errcap) {
    rungs_timing_machine *machines[MAX_PLAYERS + 1] = {0}; /* [0] is the observer */
    int count = v->player_count + 1, i, status = -1;
    issued_t *issued = NULL;
    size_t issued_len = 0, issued_cap = 0, next_input = 0, outgoing_from = 0;
    uint32_t frame = 0, seat_count = 0, mask = 0;
    rungs_timing in_force = {0, 0};
    uint8_t in_force_fps = 0;
    int have_force = 0;

    for (i = 0; i < v->player_count; i++) {
        if ((uint32_t)v->players[i] + 1 > seat_count) seat_count = v->players[i] + 1u;
        mask |= 1u << v->players[i];
    }
    for (i = 0; i < count; i++) {
        rungs_timing_machine_config config;
        memset(&config, 0, sizeof config);
        config.struct_size = sizeof config;
        config.speed_fps = (uint8_t)v->speed;
        config.seat_count = (uint8_t)seat_count;
        config.local_seat = i == 0 ? RUNGS_NO_SEAT : v->players[i - 1];
        config.human_seat_mask = mask;
        if (i == 0) {
            config.callbacks.user = messages;
            config.callbacks.player_message = on_message;
        }
        TRY(rungs_timing_machine_new(&config, &machines[i]));
    }

    for (frame = 0; frame <= v->until; frame++) {
        int executes = 0, found = 1;
        rungs_timing timing;
        uint8_t fps = 0;
        /* 1. Staged decreases. */
        for (i = 0; i < count; i++) {
            int e = 0;
            TRY(rungs_timing_machine_frame_begin(machines[i], frame, &e));
            if (i == 0) executes = e;
            else if (e != executes) {
                snprintf(err, errcap, "frame %u: machines disagree on the send frame", (unsigned)frame);
                goto done;
            }
        }
        /* 2. Due commands (the master's timing events). */
        while (executes && found) {
            uint64_t item = 0;
            for (i = 0; i < count; i++) {
                int f = 0;
                uint64_t it = 0;
                TRY(rungs_timing_machine_pop_due(machines[i], &f, &it, NULL, NULL));
                if (i == 0) {
                    found = f;
                    item = it;
                } else if (f != found || (f && it != item)) {
                    snprintf(err, errcap, "frame %u: machines disagree on due commands", (unsigned)frame);
                    goto done;
                }
            }
            if (found)
                for (i = 0; i < count; i++)
                    TRY(rungs_timing_machine_execute_timing_event(machines[i], issued[item].seat,
                                                                   &issued[item].event));
        }
        /* 3. The vector's inputs for this frame, in file order. */
        for (next_input = 0; next_input < v->input_count; next_input++) {
            const input_t *in = &v->inputs[next_input];
            if (in->frame != frame) continue;
            for (i = 0; i < count; i++) {
                if (in->kind == 'r')
                    TRY(rungs_timing_machine_execute_report(machines[i], in->seat, &in->report));
                else
                    TRY(rungs_timing_machine_execute_removal(machines[i], in->seat));
            }
        }
        /* 4. The timing in force on this frame. */
        TRY(rungs_timing_machine_timing(machines[0], &timing));
        TRY(rungs_timing_machine_fps(machines[0], &fps));
        if (!have_force || timing.send_period != in_force.send_period ||
            timing.look_ahead != in_force.look_ahead || fps != in_force_fps) {
            line_t l;
            memset(&l, 0, sizeof l);
            l.kind = 'f';
            l.frame = frame;
            l.send_period = timing.send_period;
            l.look_ahead = timing.look_ahead;
            l.fps = fps;
            if (push_line(forces, &l)) goto done;
            in_force = timing;
            in_force_fps = fps;
            have_force = 1;
        }
        /* 5. Evaluation: only the master's machine returns an event. */
        for (i = 0; i < count; i++) {
            int has = 0;
            rungs_timing_event event;
            TRY(rungs_timing_machine_frame_end(machines[i], &has, &event));
            if (has) {
                line_t l;
                rungs_timing_status status;
                TRY(rungs_timing_machine_status(machines[i], &status));
                if (i == 0 || !status.is_master) {
                    snprintf(err, errcap, "frame %u: a non-master machine sent", (unsigned)frame);
                    goto done;
                }
                memset(&l, 0, sizeof l);
                l.kind = 's';
                l.frame = frame;
                l.send_period = event.send_period;
                l.look_ahead = event.look_ahead;
                l.fps = event.fps;
                if (push_line(sends, &l)) goto done;
                if (issued_len == issued_cap) {
                    size_t cap = issued_cap ? issued_cap * 2 : 16;
                    issued_t *grown = realloc(issued, cap * sizeof *grown);
                    if (!grown) goto done;
                    issued = grown;
                    issued_cap = cap;
                }
                issued[issued_len].seat = status.master_seat;
                issued[issued_len].event = event;
                issued_len++;
            }
        }
        /* 6. On a send frame everything issued since the previous one goes out. */
        {
            int send = 0;
            uint32_t tag = 0;
            TRY(rungs_timing_machine_is_send_frame(machines[0], &send));
            if (send) {
                TRY(rungs_timing_machine_command_tag(machines[0], &tag));
                for (; outgoing_from < issued_len; outgoing_from++)
                    for (i = 0; i < count; i++)
                        TRY(rungs_timing_machine_queue_command(machines[i], tag, issued[outgoing_from].seat,
                                                               outgoing_from));
            }
        }
    }
    status = 0;
done:
    for (i = 0; i < count; i++) rungs_timing_machine_free(machines[i]);
    free(issued);
    return status;
}

int main(int argc, char **argv) {
    return replay_directory(argc > 1 ? argv[1] : "../tests/vectors", "vectors", run_vector);
}
