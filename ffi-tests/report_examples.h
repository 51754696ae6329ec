/* The detailed NETWORK_REPORT example of docs/payloads.md as C structs,
 * and the comparisons the report tests share (test_detailed_report.c,
 * test_needs_report.c). */
#ifndef RUNGS_FFI_REPORT_EXAMPLES_H
#define RUNGS_FFI_REPORT_EXAMPLES_H

#include <stdint.h>
#include <string.h>

#include "rungs.h"

#define FILL 0xA5

/* 5000 us, worst 180 ms, longest wait 40 ms, median 120, p90 150, latest
 * 125, 128 frames of which 2 stalled for 40 ms, mostly waiting for seat 3. */
static rungs_report example_report(void) {
    rungs_report r;
    rungs_report_init(&r);
    r.process_us = 5000;
    r.max_wait_ms = 40;
    r.worst_rtt_ms = 180;
    r.has_worst_rtt = 1;
    return r;
}

static rungs_report_detail example_detail(void) {
    rungs_report_detail d;
    memset(&d, 0, sizeof d);
    d.median_rtt_ms = 120;
    d.p90_rtt_ms = 150;
    d.latest_rtt_ms = 125;
    d.has_median_rtt = 1;
    d.has_p90_rtt = 1;
    d.has_latest_rtt = 1;
    d.frames = 128;
    d.stalled_frames = 2;
    d.stall_ms = 40;
    d.waited_for = 3;
    return d;
}

static int all_bytes_are(const uint8_t *buf, size_t len, uint8_t value) {
    size_t i;
    for (i = 0; i < len; i++) {
        if (buf[i] != value) return 0;
    }
    return 1;
}

static int same_detail(const rungs_report_detail *a, const rungs_report_detail *b) {
    return a->median_rtt_ms == b->median_rtt_ms && a->p90_rtt_ms == b->p90_rtt_ms &&
           a->latest_rtt_ms == b->latest_rtt_ms && a->frames == b->frames &&
           a->stalled_frames == b->stalled_frames && a->stall_ms == b->stall_ms &&
           a->has_median_rtt == b->has_median_rtt && a->has_p90_rtt == b->has_p90_rtt &&
           a->has_latest_rtt == b->has_latest_rtt && a->waited_for == b->waited_for;
}

static int same_report(const rungs_report *a, const rungs_report *b) {
    return a->process_us == b->process_us && a->max_wait_ms == b->max_wait_ms &&
           a->worst_rtt_ms == b->worst_rtt_ms && a->has_worst_rtt == b->has_worst_rtt;
}

/* `r` with the detail `d` and, when `n` is not NULL, the needs `n` as its
 * sections: the one struct the report calls take. NULL `r` stays NULL (for
 * the NULL-pointer cases). */
static const rungs_report *with_sections(const rungs_report *r, const rungs_report_detail *d,
                                         const rungs_look_ahead_needs *n) {
    static rungs_report whole;
    if (!r) return NULL;
    whole = *r;
    whole.has_detail = 1;
    whole.detail = *d;
    whole.has_needs = n != NULL;
    if (n) whole.needs = *n;
    return &whole;
}

/* Decode into `out` (struct_size set first, as a caller does) and, on
 * success, hand its detail (and needs) out beside it. */
static rungs_result decode_sections(const uint8_t *bytes, size_t len, rungs_report *out,
                                    rungs_report_detail *out_detail,
                                    rungs_look_ahead_needs *out_needs) {
    rungs_result rc;
    if (out) out->struct_size = sizeof *out;
    rc = rungs_report_payload_decode(bytes, len, out);
    if (rc == RUNGS_OK && out_detail) *out_detail = out->detail;
    if (rc == RUNGS_OK && out_needs) *out_needs = out->needs;
    return rc;
}

/* Take the report with `sections` into `out` and, on success, hand its
 * detail (and needs) out beside it. */
static rungs_result take_sections(rungs_measurements *m, rungs_report_sections sections,
                                  rungs_report *out, rungs_report_detail *out_detail,
                                  rungs_look_ahead_needs *out_needs) {
    rungs_result rc;
    if (out) rungs_report_init(out);
    rc = rungs_measurements_take_report(m, sections, out);
    if (rc == RUNGS_OK && out_detail) *out_detail = out->detail;
    if (rc == RUNGS_OK && out_needs) *out_needs = out->needs;
    return rc;
}

/* A tracking timing machine's config: 30 fps, seats 0 and 1 human, this
 * machine seat 0 (the master). */
static rungs_timing_machine_config tracking_config(void) {
    rungs_timing_machine_config c;
    memset(&c, 0, sizeof c);
    c.struct_size = sizeof c;
    c.speed_fps = 30;
    c.seat_count = 2;
    c.local_seat = 0;
    c.policy = RUNGS_POLICY_TRACKING;
    c.human_seat_mask = 0x3;
    return c;
}

#endif
