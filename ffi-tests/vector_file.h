/* vector_file.h - read timing vector files (.vec, see tests/vectors/README.md).
 *
 * Header-only, plain C99 + POSIX dirent, no other dependency; shared by
 * the two C replays, replay.c (timing machines) and replay_session.c
 * (engine sessions). A vector is one game: the
 * executed reports and removals, and the expected timing events sent,
 * changes of the timing in force and player messages.
 *
 *   vector_t v;  char err[128];
 *   if (parse_vector("x.vec", &v, err, sizeof err) == 0) { ...; free_vector(&v); }
 *   char **names; size_t n = list_vectors(dir, &names);  ... free_names(names, n);
 */
#ifndef RUNGS_VECTOR_FILE_H
#define RUNGS_VECTOR_FILE_H

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
                rungs_report_init(&in.report);
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

/* The *.vec file names in `dir`, sorted, through *out (free with
 * free_names). Returns how many; -1 if the directory cannot be read. */
static long list_vectors(const char *dir, char ***out) {
    DIR *d = opendir(dir);
    struct dirent *entry;
    char **names = NULL;
    size_t count = 0, cap = 0;
    *out = NULL;
    if (!d) return -1;
    while ((entry = readdir(d)) != NULL) {
        size_t n = strlen(entry->d_name);
        if (n > 4 && strcmp(entry->d_name + n - 4, ".vec") == 0) {
            if (count == cap) {
                size_t grown_cap = cap ? cap * 2 : 32;
                char **grown = realloc(names, grown_cap * sizeof *grown);
                if (!grown) break;
                names = grown;
                cap = grown_cap;
            }
            names[count] = malloc(n + 1);
            if (!names[count]) break;
            memcpy(names[count++], entry->d_name, n + 1);
        }
    }
    closedir(d);
    if (count > 1) qsort(names, count, sizeof *names, compare_names);
    *out = names;
    return (long)count;
}

static void free_names(char **names, long count) {
    long i;
    for (i = 0; i < count; i++) free(names[i]);
    free(names);
}

/* Compare the three kinds of lines; 1 and a description on the first difference. */
static int vector_difference(const vector_t *v, const lines_t *sends, const lines_t *forces,
                             const lines_t *messages, char *out, size_t cap) {
    return first_difference(&v->expect_send, sends, out, cap) ||
           first_difference(&v->expect_force, forces, out, cap) ||
           first_difference(&v->expect_message, messages, out, cap);
}

/* Replays one vector: fills the actual sends, forces and messages, or
 * returns -1 with `err` set. */
typedef int (*vector_runner)(const vector_t *v, lines_t *sends, lines_t *forces, lines_t *messages,
                             char *err, size_t errcap);

/* Replay every vector in `dir` with `run`: one line per failing vector with
 * its first difference, then "LABEL: N passed, M failed". Returns 0 when all
 * passed and there was at least one. */
static int replay_directory(const char *dir, const char *label, vector_runner run) {
    char **names;
    long count = list_vectors(dir, &names), k;
    int passed = 0, failed = 0;
    if (count < 0) {
        fprintf(stderr, "%s: cannot open vector directory %s\n", label, dir);
        printf("%s: 0 passed, 0 failed\n", label);
        return 1;
    }
    for (k = 0; k < count; k++) {
        char path[4096], err[512] = "";
        vector_t v;
        lines_t sends = {0}, forces = {0}, messages = {0};
        int ok = 0;
        snprintf(path, sizeof path, "%s/%s", dir, names[k]);
        if (parse_vector(path, &v, err, sizeof err) != 0 || run(&v, &sends, &forces, &messages, err, sizeof err) != 0) {
            printf("%s: %s\n", names[k], err);
        } else if (vector_difference(&v, &sends, &forces, &messages, err, sizeof err)) {
            printf("%s: %s\n", names[k], err);
        } else {
            ok = 1;
        }
        if (ok) passed++;
        else failed++;
        free(sends.items);
        free(forces.items);
        free(messages.items);
        free_vector(&v);
    }
    free_names(names, count);
    printf("%s: %d passed, %d failed\n", label, passed, failed);
    return failed > 0 || passed == 0 ? 1 : 0;
}

#endif
