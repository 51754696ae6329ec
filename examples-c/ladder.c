/* ladder — the first rungs program to read.
 *
 *   ./ladder                 prints the ladder of ten timing rungs
 *   ./ladder RTT_MS FPS      also what that round trip needs at that rate
 *
 * Example: `./ladder 250 30` needs `2/6 Fast (rung 2)` raw and
 * `3/9 Normal (rung 3)` with a quarter of headroom (docs/model.md S2).
 *
 * A timing "2/6" means: send a packet every 2 frames, schedule commands
 * 6 frames ahead. Build: make -C examples-c (links against librungs). */
#include <stdio.h>
#include <stdlib.h>

#include "rungs.h"

static int fail(rungs_result rc, const char *what) {
    char detail[256];
    rungs_last_error_message(detail, sizeof detail, NULL);
    fprintf(stderr, "ladder: %s: %s (%s)\n", what, rungs_result_str(rc), detail);
    return 1;
}

/* Print "SP/LA Label" for a timing. */
static int print_timing(const rungs_timing *t) {
    char label[RUNGS_LABEL_CAPACITY];
    rungs_result rc = rungs_timing_label(t, label, sizeof label, NULL);
    if (rc != RUNGS_OK) return fail(rc, "label");
    printf("%u/%u %s", (unsigned)t->send_period, (unsigned)t->look_ahead, label);
    return 0;
}

int main(int argc, char **argv) {
    uint8_t rung;
    unsigned long rtt = 0, fps = 0;
    if (argc == 3) {
        char *end1, *end2;
        rtt = strtoul(argv[1], &end1, 10);
        fps = strtoul(argv[2], &end2, 10);
        if (*end1 || *end2 || rtt > 0xFFFFFFFFul || fps == 0 || fps > 255) argc = -1;
    }
    if (argc != 1 && argc != 3) {
        fprintf(stderr, "usage: %s [RTT_MS FPS]  (FPS 1-255)\n", argv[0]);
        return 2;
    }
    printf("rungs %s - the timing ladder (send period / look-ahead, in frames)\n\n", rungs_version());
    printf("rung  timing  tier     slider  covers one-way trips of\n");
    for (rung = 1; rung <= 10; rung++) {
        rungs_timing t;
        uint8_t tier = 0, slider = 0;
        const char *tier_name = "";
        rungs_result rc = rungs_rung_timing(rung, &t);
        if (rc == RUNGS_OK) rc = rungs_timing_tier(&t, &tier);
        if (rc == RUNGS_OK) rc = rungs_timing_slider_position(&t, &slider);
        if (rc == RUNGS_OK) rc = rungs_tier_name(tier, &tier_name);
        if (rc != RUNGS_OK) return fail(rc, "ladder");
        printf("%4u  %2u/%-3u  %-7s  %6u  up to %u frames\n", (unsigned)rung, (unsigned)t.send_period,
               (unsigned)t.look_ahead, tier_name, (unsigned)slider,
               (unsigned)(t.look_ahead - t.send_period));
    }
    printf("beyond: 10/L, L a multiple of 10 up to 250 (extended, reads Bad)\n");

    if (argc == 3) {
        uint32_t raw_owt = 0, headroom_owt = 0;
        rungs_timing raw, headroom;
        rungs_result rc;
        rc = rungs_one_way_frames((uint32_t)rtt, (uint8_t)fps, &raw_owt);
        if (rc == RUNGS_OK) rc = rungs_one_way_frames_headroom((uint32_t)rtt, (uint8_t)fps, &headroom_owt);
        if (rc == RUNGS_OK) rc = rungs_required_timing(raw_owt, &raw);
        if (rc == RUNGS_OK) rc = rungs_required_timing(headroom_owt, &headroom);
        if (rc != RUNGS_OK) return fail(rc, "required timing");
        printf("\nround trip %lu ms at %lu fps:\n", rtt, fps);
        printf("  raw:           one-way %u frames -> ", (unsigned)raw_owt);
        if (print_timing(&raw)) return 1;
        printf("\n  with headroom: one-way %u frames -> ", (unsigned)headroom_owt);
        if (print_timing(&headroom)) return 1;
        printf("\n");
    }
    return 0;
}
