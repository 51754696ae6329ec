/* Vector replay through the C API.
 *
 *   replay DIR      replays every *.vec file in DIR
 *
 * Each vector (see vectors/README.md) is one game: executed reports and
 * removals go in; every timing event the master sends, every change of the
 * timing in force and every player message must come out exactly as listed.
 * The replay drives one rungs_timing_machine per human seat plus an observer,
 * exactly as an engine would: the master's timing events are queued as
 * commands tagged on the next send frame and executed when due.
 *
 * Prints one line per failing vector with its first difference, then
 * "vectors: N passed, M failed". Exits 1 if any failed (or none was found).
 * Plain C99 + POSIX dirent, no other dependency. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rungs.h"

#define MAX_PLAYERS 16
#define TEXT_MAX 128

/* One output line: kind 's' send, 'f' force, 'm' message. */
typedef struct {
    char kind;
    uint32_t frame;
    unsigned send_period, look_ahead, fps;
    char text[TEXT_MAX];
} line_t;

typedef struct {
    line_t *items;
    size_t len, cap;
} lines_t;

typedef struct {
    char kind; /* 'r' report, 'x' remove */
    uint32_t frame;
    uint8_t seat;
    rungs_report report;
} input_t;

typedef struct {
    unsigned speed;
    uint8_t players[MAX_PLAYERS];
    int player_count;
    uint32_t until;
    input_t *inputs;
    size_t input_count, input_cap;
    lines_t expect_send, expect_force, expect_message;
} vector_t;

static int push_line(lines_t *lines, const line_t *line) {
    if (lines->len == lines->cap) {
        size_t cap = lines->cap ? lines->cap * 2 : 16;
        line_t *grown = realloc(lines->items, cap * sizeof *grown);
        if (!grown) return -1;
        lines->items = grown;
        lines->cap = cap;
    }
    lines->items[lines->len++] = *line;
    return 0;
}

static void free_vector(vector_t *v) {
    free(v->inputs);
    free(v->expect_send.items);
    free(v->expect_force.items);
    free(v->expect_message.items);
}

static void format_line(const line_t *l, char *buf, size_t cap) {
    if (l->kind == 'm')
        snprintf(buf, cap, "message %u %s", (unsigned)l->frame, l->text);
    else
        snprintf(buf, cap, "%s %u %u %u %u", l->kind == 's' ? "send" : "force", (unsigned)l->frame,
                 l->send_period, l->look_ahead, l->fps);
}

static int lines_equal(const line_t *a, const line_t *b) {
    if (a->kind != b->kind || a->frame != b->frame) return 0;
    if (a->kind == 'm') return strcmp(a->text, b->text) == 0;
    return a->send_period == b->send_period && a->look_ahead == b->look_ahead && a->fps == b->fps;
}

/* Trim trailing whitespace and a '#' comment in place. */
static void strip(char *s) {
    char *hash = strchr(s, '#');
    size_t n;
    if (hash) *hash = '\0';
    n = strlen(s);
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r' || s[n - 1] == '\n'))
        s[--n] = '\0';
}

static int parse_vector(const char *path, vector_t *v, char *err, size_t errcap) {
    char buf[512];
    int lineno = 0;
    FILE *f = fopen(path, "r");
    memset(v, 0, sizeof *v);
    if (!f) {
        snprintf(err, errcap, "cannot open");
        return -1;
    }
    while (fgets(buf, sizeof buf, f)) {
        char word[32] = "";
        int used = 0;
        char *p;
        lineno++;
        strip(buf);
        p = buf;
        while (*p == ' ' || *p == '\t') p++;
        if (*p == '\0') continue;
        if (sscanf(p, "%31s%n", word, &used) != 1) goto bad;
        p += used;
        if (strcmp(word, "speed") == 0) {
            if (sscanf(p, "%u", &v->speed) != 1 || v->speed == 0 || v->speed > 255) goto bad;
        } else if (strcmp(word, "players") == 0) {
            unsigned seat;
            while (sscanf(p, "%u%n", &seat, &used) == 1) {
                if (v->player_count == MAX_PLAYERS || seat >= MAX_PLAYERS) goto bad;
                v->players[v->player_count++] = (uint8_t)seat;
                p += used;
            }
        } else if (strcmp(word, "until") == 0) {
            unsigned until;
            if (sscanf(p, "%u", &until) != 1) goto bad;
            v->until = until;
        } else if (strcmp(word, "report") == 0 || strcmp(word, "remove") == 0) {
            input_t in;
            unsigned frame, seat, process, wait;
            char rtt[32];
            memset(&in, 0, sizeof in);
            if (word[2] == 'p') {
                if (sscanf(p, "%u %u %u %u %31s", &frame, &seat, &process, &wait, rtt) != 5) goto bad;
                in.kind = 'r';
                in.report.process_us = process;
                in.report.max_wait_ms = wait;
                in.report.has_worst_rtt = strcmp(rtt, "-") != 0;
                in.report.worst_rtt_ms = in.report.has_worst_rtt ? (uint32_t)strtoul(rtt, NULL, 10) : 0;
            } else {
                if (sscanf(p, "%u %u", &frame, &seat) != 2) goto bad;
                in.kind = 'x';
            }
            in.frame = frame;
            in.seat = (uint8_t)seat;
            if (v->input_count == v->input_cap) {
                size_t cap = v->input_cap ? v->input_cap * 2 : 64;
                input_t *grown = realloc(v->inputs, cap * sizeof *grown);
                if (!grown) goto bad;
                v->inputs = grown;
                v->input_cap = cap;
            }
            v->inputs[v->input_count++] = in;
        } else if (strcmp(word, "expect") == 0) {
            line_t l;
            unsigned frame;
            memset(&l, 0, sizeof l);
            if (sscanf(p, "%31s%n", word, &used) != 1) goto bad;
            p += used;
            if (strcmp(word, "message") == 0) {
                if (sscanf(p, "%u%n", &frame, &used) != 1) goto bad;
                p += used;
                while (*p == ' ' || *p == '\t') p++;
                l.kind = 'm';
                l.frame = frame;
                snprintf(l.text, sizeof l.text, "%s", p);
                if (push_line(&v->expect_message, &l)) goto bad;
            } else if (strcmp(word, "send") == 0 || strcmp(word, "force") == 0) {
                if (sscanf(p, "%u %u %u %u", &frame, &l.send_period, &l.look_ahead, &l.fps) != 4) goto bad;
                l.kind = word[0] == 's' ? 's' : 'f';
                l.frame = frame;
                if (push_line(l.kind == 's' ? &v->expect_send : &v->expect_force, &l)) goto bad;
            } else {
                goto bad;
            }
        } else {
            goto bad;
        }
    }
    fclose(f);
    if (v->speed == 0 || v->player_count == 0) {
        snprintf(err, errcap, "needs `speed` and `players`");
        return -1;
    }
    return 0;
bad:
    fclose(f);
    snprintf(err, errcap, "cannot parse line %d", lineno);
    return -1;
}

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
            TRY(rungs_timing_machine_begin_frame(machines[i], frame, &e));
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
            TRY(rungs_timing_machine_end_frame(machines[i], &has, &event));
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

/* Compare expected and actual lines of one kind; 1 and a description on the first difference. */
static int first_difference(const lines_t *expected, const lines_t *actual, char *out, size_t cap) {
    size_t i;
    char e[TEXT_MAX + 32], a[TEXT_MAX + 32];
    for (i = 0; i < expected->len && i < actual->len; i++) {
        if (!lines_equal(&expected->items[i], &actual->items[i])) {
            format_line(&expected->items[i], e, sizeof e);
            format_line(&actual->items[i], a, sizeof a);
            snprintf(out, cap, "expected `%s`, got `%s`", e, a);
            return 1;
        }
    }
    if (i < expected->len) {
        format_line(&expected->items[i], e, sizeof e);
        snprintf(out, cap, "missing `%s`", e);
        return 1;
    }
    if (i < actual->len) {
        format_line(&actual->items[i], a, sizeof a);
        snprintf(out, cap, "unexpected `%s`", a);
        return 1;
    }
    return 0;
}

static int compare_names(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : "../shared/vectors";
    DIR *d = opendir(dir);
    struct dirent *entry;
    char **names = NULL;
    size_t name_count = 0, name_cap = 0, k;
    int passed = 0, failed = 0;

    if (!d) {
        fprintf(stderr, "replay: cannot open vector directory %s\n", dir);
        printf("vectors: 0 passed, 0 failed\n");
        return 1;
    }
    while ((entry = readdir(d)) != NULL) {
        size_t n = strlen(entry->d_name);
        if (n > 4 && strcmp(entry->d_name + n - 4, ".vec") == 0) {
            if (name_count == name_cap) {
                size_t cap = name_cap ? name_cap * 2 : 32;
                char **grown = realloc(names, cap * sizeof *grown);
                if (!grown) break;
                names = grown;
                name_cap = cap;
            }
            names[name_count] = malloc(n + 1);
            if (!names[name_count]) break;
            memcpy(names[name_count++], entry->d_name, n + 1);
        }
    }
    closedir(d);
    if (name_count > 1) qsort(names, name_count, sizeof *names, compare_names);

    for (k = 0; k < name_count; k++) {
        char path[4096], err[512] = "", diff[512] = "";
        vector_t v;
        lines_t sends = {0}, forces = {0}, messages = {0};
        int ok;
        snprintf(path, sizeof path, "%s/%s", dir, names[k]);
        if (parse_vector(path, &v, err, sizeof err) != 0) {
            printf("%s: %s\n", names[k], err);
            failed++;
            free_vector(&v);
            free(names[k]);
            continue;
        }
        if (run_vector(&v, &sends, &forces, &messages, err, sizeof err) != 0) {
            printf("%s: %s\n", names[k], err);
            ok = 0;
        } else {
            ok = !first_difference(&v.expect_send, &sends, diff, sizeof diff) &&
                 !first_difference(&v.expect_force, &forces, diff, sizeof diff) &&
                 !first_difference(&v.expect_message, &messages, diff, sizeof diff);
            if (!ok) printf("%s: %s\n", names[k], diff);
        }
        if (ok) passed++;
        else failed++;
        free(sends.items);
        free(forces.items);
        free(messages.items);
        free_vector(&v);
        free(names[k]);
    }
    free(names);
    printf("vectors: %d passed, %d failed\n", passed, failed);
    return failed > 0 || passed == 0 ? 1 : 0;
}
