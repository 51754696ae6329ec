/* Event payload codecs (S7) through the C API: the documented bytes, round
 * trips, the fog-of-war bias, the Red Alert layout, and every misuse: NULL
 * pointers, short buffers (nothing written), malformed bytes, out-of-range
 * values. */
#include <stdint.h>

#include "harness.h"
#include "rungs.h"

#define FILL 0xA5

static int all_bytes_are(const uint8_t *buf, size_t len, uint8_t value) {
    size_t i;
    for (i = 0; i < len; i++) {
        if (buf[i] != value) {
            return 0;
        }
    }
    return 1;
}

static void test_payload_lengths_fit_the_ts_event_union(void) {
    CHECK_EQ(RUNGS_TIMING_PAYLOAD_LEN, 5);
    CHECK_EQ(RUNGS_RA_TIMING_PAYLOAD_LEN, 4);
    CHECK_EQ(RUNGS_REPORT_PAYLOAD_LEN, 6);
    CHECK_EQ(RUNGS_REPORT_EXTENDED_PAYLOAD_LEN, 9);
    CHECK(RUNGS_REPORT_EXTENDED_PAYLOAD_LEN <= 36);
}

static void test_timing_bytes_and_round_trip(void) {
    rungs_timing_event event = {3, 9, 30};
    rungs_timing_event decoded = {0, 0, 0};
    uint8_t buf[16];
    size_t len = 0;
    memset(buf, FILL, sizeof buf);
    CHECK_EQ(rungs_timing_payload_encode(&event, 0, buf, sizeof buf, &len), RUNGS_OK);
    CHECK_EQ(len, RUNGS_TIMING_PAYLOAD_LEN);
    /* u16 DesiredFrameRate, u16 MaxAhead, u8 FrameSendRate, little-endian. */
    CHECK_EQ(buf[0], 30);
    CHECK_EQ(buf[1], 0);
    CHECK_EQ(buf[2], 9);
    CHECK_EQ(buf[3], 0);
    CHECK_EQ(buf[4], 3);
    CHECK(all_bytes_are(buf + len, sizeof buf - len, FILL));
    CHECK_EQ(rungs_timing_payload_decode(buf, len, 0, &decoded), RUNGS_OK);
    CHECK_EQ(decoded.send_period, 3);
    CHECK_EQ(decoded.look_ahead, 9);
    CHECK_EQ(decoded.fps, 30);
}

static void test_timing_fog_bias(void) {
    rungs_timing_event event = {10, 250, 60};
    rungs_timing_event decoded = {0, 0, 0};
    uint8_t buf[RUNGS_TIMING_PAYLOAD_LEN];
    size_t len = 0;
    CHECK_EQ(rungs_timing_payload_encode(&event, RUNGS_TS_FOG_BIAS, buf, sizeof buf, &len),
             RUNGS_OK);
    /* MaxAhead 260 = 250 + 10 on the wire. */
    CHECK_EQ(buf[2] | (buf[3] << 8), 260);
    CHECK_EQ(rungs_timing_payload_decode(buf, len, RUNGS_TS_FOG_BIAS, &decoded), RUNGS_OK);
    CHECK_EQ(decoded.look_ahead, 250);
    /* Read without the bias the same bytes break S1: malformed, out untouched. */
    memset(&decoded, 0, sizeof decoded);
    CHECK_EQ(rungs_timing_payload_decode(buf, len, 0, &decoded), RUNGS_ERR_MALFORMED);
    CHECK_EQ(decoded.look_ahead, 0);
}

static void test_timing_misuse(void) {
    rungs_timing_event event = {2, 6, 30};
    rungs_timing_event out = {7, 7, 7};
    uint8_t buf[RUNGS_TIMING_PAYLOAD_LEN];
    size_t len = 99;
    static const uint8_t rate_zero[] = {0, 0, 6, 0, 2};
    static const uint8_t rate_256[] = {0, 1, 6, 0, 2};
    static const uint8_t breaks_s1[] = {30, 0, 7, 0, 2};
    static const uint8_t send_period_11[] = {30, 0, 33, 0, 11};
    static const uint8_t six_bytes[] = {30, 0, 6, 0, 2, 0};

    /* NULL pointers. */
    CHECK_EQ(rungs_timing_payload_encode(NULL, 0, buf, sizeof buf, &len), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_timing_payload_encode(&event, 0, NULL, sizeof buf, &len),
             RUNGS_ERR_NULL_POINTER);
    CHECK_MESSAGE("rungs_timing_payload_encode: buf is NULL but its length is 5; expected a "
                  "valid pointer, or a length of 0");
    CHECK_EQ(rungs_timing_payload_encode(&event, 0, buf, sizeof buf, NULL),
             RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_timing_payload_decode(NULL, 5, 0, &out), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_timing_payload_decode(rate_zero, 5, 0, NULL), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(len, 99);

    /* Buffer too small: nothing written, out_len untouched. */
    memset(buf, FILL, sizeof buf);
    CHECK_EQ(rungs_timing_payload_encode(&event, 0, buf, RUNGS_TIMING_PAYLOAD_LEN - 1, &len),
             RUNGS_ERR_BUFFER_TOO_SMALL);
    CHECK_EQ(rungs_timing_payload_encode(&event, 0, buf, 0, &len), RUNGS_ERR_BUFFER_TOO_SMALL);
    CHECK_EQ(rungs_timing_payload_encode(&event, 0, NULL, 0, &len), RUNGS_ERR_BUFFER_TOO_SMALL);
    CHECK_MESSAGE("rungs_timing_payload_encode: cap is 0; expected at least 5");
    CHECK(all_bytes_are(buf, sizeof buf, FILL));
    CHECK_EQ(len, 99);

    /* Out-of-range events. */
    event.fps = 0;
    CHECK_EQ(rungs_timing_payload_encode(&event, 0, buf, sizeof buf, &len),
             RUNGS_ERR_INVALID_ARGUMENT);
    event.fps = 30;
    event.look_ahead = 7;
    CHECK_EQ(rungs_timing_payload_encode(&event, 0, buf, sizeof buf, &len),
             RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE("rungs_timing_payload_encode: event is send_period 2, look_ahead 7; expected "
                  "send_period 1 to 10 and look_ahead a multiple of send_period from "
                  "send_period to 250");
    event.send_period = 11;
    event.look_ahead = 33;
    CHECK_EQ(rungs_timing_payload_encode(&event, 0, buf, sizeof buf, &len),
             RUNGS_ERR_INVALID_ARGUMENT);
    CHECK(all_bytes_are(buf, sizeof buf, FILL));
    CHECK_EQ(len, 99);

    /* Malformed bytes: out untouched. */
    CHECK_EQ(rungs_timing_payload_decode(rate_zero, sizeof rate_zero, 0, &out),
             RUNGS_ERR_MALFORMED);
    CHECK_EQ(rungs_timing_payload_decode(rate_256, sizeof rate_256, 0, &out),
             RUNGS_ERR_MALFORMED);
    CHECK_EQ(rungs_timing_payload_decode(breaks_s1, sizeof breaks_s1, 0, &out),
             RUNGS_ERR_MALFORMED);
    CHECK_EQ(rungs_timing_payload_decode(send_period_11, sizeof send_period_11, 0, &out),
             RUNGS_ERR_MALFORMED);
    CHECK_EQ(rungs_timing_payload_decode(six_bytes, sizeof six_bytes, 0, &out),
             RUNGS_ERR_MALFORMED);
    CHECK_MESSAGE("rungs_timing_payload_decode: len is 6; expected 5, the payload's length");
    CHECK_EQ(rungs_timing_payload_decode(six_bytes, 4, 0, &out), RUNGS_ERR_MALFORMED);
    CHECK_EQ(rungs_timing_payload_decode(six_bytes, 0, 0, &out), RUNGS_ERR_MALFORMED);
    CHECK_MESSAGE("rungs_timing_payload_decode: len is 0; expected 5, the payload's length");
    /* NULL with a length of 0 is an empty buffer: the wrong length, not a NULL. */
    CHECK_EQ(rungs_timing_payload_decode(NULL, 0, 0, &out), RUNGS_ERR_MALFORMED);
    /* A wild length is just the wrong length. */
    CHECK_EQ(rungs_timing_payload_decode(six_bytes, SIZE_MAX, 0, &out), RUNGS_ERR_MALFORMED);
    /* MaxAhead 6 is below a fog bias of 10. */
    CHECK_EQ(rungs_timing_payload_decode(six_bytes, 5, RUNGS_TS_FOG_BIAS, &out),
             RUNGS_ERR_MALFORMED);
    CHECK_EQ(out.send_period, 7);
    CHECK_EQ(out.look_ahead, 7);
    CHECK_EQ(out.fps, 7);
}

static void test_red_alert_timing(void) {
    rungs_timing_event event = {3, 15, 30};
    rungs_timing_event decoded = {0, 0, 0};
    uint8_t buf[8];
    size_t len = 0;
    static const uint8_t not_a_multiple[] = {30, 0, 16, 0};

    memset(buf, FILL, sizeof buf);
    CHECK_EQ(rungs_ra_timing_payload_encode(&event, 3, buf, sizeof buf, &len), RUNGS_OK);
    CHECK_EQ(len, RUNGS_RA_TIMING_PAYLOAD_LEN);
    CHECK_EQ(buf[0], 30);
    CHECK_EQ(buf[2], 15);
    CHECK_EQ(buf[4], FILL);
    CHECK_EQ(rungs_ra_timing_payload_decode(buf, len, 3, &decoded), RUNGS_OK);
    CHECK_EQ(decoded.send_period, 3);
    CHECK_EQ(decoded.look_ahead, 15);
    CHECK_EQ(decoded.fps, 30);

    /* The bytes cannot carry another send period than the session's. */
    CHECK_EQ(rungs_ra_timing_payload_encode(&event, 2, buf, sizeof buf, &len),
             RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_EQ(rungs_ra_timing_payload_encode(&event, 0, buf, sizeof buf, &len),
             RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE("rungs_ra_timing_payload_encode: send_period is 0; expected 1 to 10");
    CHECK_EQ(rungs_ra_timing_payload_decode(buf, len, 11, &decoded), RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE("rungs_ra_timing_payload_decode: send_period is 11; expected 1 to 10");
    CHECK_EQ(rungs_ra_timing_payload_decode(not_a_multiple, 4, 3, &decoded), RUNGS_ERR_MALFORMED);
    CHECK_EQ(rungs_ra_timing_payload_decode(buf, 5, 3, &decoded), RUNGS_ERR_MALFORMED);
    CHECK_EQ(rungs_ra_timing_payload_encode(&event, 3, buf, 3, &len), RUNGS_ERR_BUFFER_TOO_SMALL);
    CHECK_EQ(rungs_ra_timing_payload_encode(NULL, 3, buf, sizeof buf, &len),
             RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_ra_timing_payload_decode(NULL, 4, 3, &decoded), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_ra_timing_payload_decode(buf, 4, 3, NULL), RUNGS_ERR_NULL_POINTER);
}

static void test_report_compact(void) {
    rungs_report report = basic_report(12001, 250, 180, 1);
    rungs_report decoded;
    rungs_report_init(&decoded);
    uint8_t buf[RUNGS_REPORT_PAYLOAD_LEN];
    size_t len = 0;
    CHECK_EQ(rungs_report_payload_encode(&report, RUNGS_REPORT_LAYOUT_COMPACT, buf, sizeof buf,
                                         &len),
             RUNGS_OK);
    CHECK_EQ(len, 6);
    /* 12.001 ms rounds up to 13 ms so a slow machine is never under-reported. */
    CHECK_EQ(buf[0], 13);
    CHECK_EQ(buf[2], 180);
    CHECK_EQ(buf[4], 250);
    CHECK_EQ(rungs_report_payload_decode(buf, len, &decoded),
             RUNGS_OK);
    CHECK_EQ(decoded.process_us, 13000);
    CHECK_EQ(decoded.worst_rtt_ms, 180);
    CHECK_EQ(decoded.has_worst_rtt, 1);
    CHECK_EQ(decoded.max_wait_ms, 250);

    /* No round trip is 0xFFFF; a huge one saturates at 0xFFFE and stays "some". */
    report.has_worst_rtt = 0;
    CHECK_EQ(rungs_report_payload_encode(&report, RUNGS_REPORT_LAYOUT_COMPACT, buf, sizeof buf,
                                         &len),
             RUNGS_OK);
    CHECK_EQ(buf[2], 0xFF);
    CHECK_EQ(buf[3], 0xFF);
    CHECK_EQ(rungs_report_payload_decode(buf, len, &decoded),
             RUNGS_OK);
    CHECK_EQ(decoded.has_worst_rtt, 0);
    CHECK_EQ(decoded.worst_rtt_ms, 0);
    report.has_worst_rtt = 1;
    report.worst_rtt_ms = 100000;
    CHECK_EQ(rungs_report_payload_encode(&report, RUNGS_REPORT_LAYOUT_COMPACT, buf, sizeof buf,
                                         &len),
             RUNGS_OK);
    CHECK_EQ(rungs_report_payload_decode(buf, len, &decoded),
             RUNGS_OK);
    CHECK_EQ(decoded.has_worst_rtt, 1);
    CHECK_EQ(decoded.worst_rtt_ms, 0xFFFE);
}

static void test_report_extended(void) {
    rungs_report report = basic_report(0x01020304, 99, 0, 0);
    rungs_report decoded;
    rungs_report_init(&decoded);
    uint8_t buf[RUNGS_REPORT_EXTENDED_PAYLOAD_LEN];
    size_t len = 0;
    CHECK_EQ(rungs_report_payload_encode(&report, RUNGS_REPORT_LAYOUT_EXTENDED, buf, sizeof buf,
                                         &len),
             RUNGS_OK);
    CHECK_EQ(len, 9);
    CHECK_EQ(buf[0], 1);
    CHECK_EQ(buf[1], 4);
    CHECK_EQ(buf[4], 1);
    CHECK_EQ(rungs_report_payload_decode(buf, len, &decoded),
             RUNGS_OK);
    CHECK_EQ(decoded.process_us, 0x01020304);
    CHECK_EQ(decoded.max_wait_ms, 99);
    CHECK_EQ(decoded.has_worst_rtt, 0);
    /* Another version byte is malformed: the length says extended. */
    buf[0] = 2;
    CHECK_EQ(rungs_report_payload_decode(buf, len, &decoded),
             RUNGS_ERR_MALFORMED);
}

static void test_report_misuse(void) {
    rungs_report report = basic_report(1000, 0, 50, 1);
    rungs_report out = basic_report(7, 7, 7, 7);
    uint8_t buf[RUNGS_REPORT_EXTENDED_PAYLOAD_LEN];
    size_t len = 99;

    CHECK_EQ(rungs_report_payload_encode(NULL, 0, buf, sizeof buf, &len), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_report_payload_encode(&report, 0, NULL, sizeof buf, &len),
             RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_report_payload_encode(&report, 0, buf, sizeof buf, NULL),
             RUNGS_ERR_NULL_POINTER);
    /* The basic layout is validated. */
    CHECK_EQ(rungs_report_payload_encode(&report, 2, buf, sizeof buf, &len),
             RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_EQ(rungs_report_payload_encode(&report, 255, buf, sizeof buf, &len),
             RUNGS_ERR_INVALID_ARGUMENT);
    /* So is the has_worst_rtt flag. */
    report.has_worst_rtt = 2;
    CHECK_EQ(rungs_report_payload_encode(&report, 0, buf, sizeof buf, &len),
             RUNGS_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE("rungs_report_payload_encode: report->has_worst_rtt is 2; expected 0 or 1");
    report.has_worst_rtt = 1;

    memset(buf, FILL, sizeof buf);
    CHECK_EQ(rungs_report_payload_encode(&report, RUNGS_REPORT_LAYOUT_COMPACT, buf, 5, &len),
             RUNGS_ERR_BUFFER_TOO_SMALL);
    CHECK_EQ(rungs_report_payload_encode(&report, RUNGS_REPORT_LAYOUT_EXTENDED, buf, 8, &len),
             RUNGS_ERR_BUFFER_TOO_SMALL);
    CHECK(all_bytes_are(buf, sizeof buf, FILL));
    CHECK_EQ(len, 99);

    CHECK_EQ(rungs_report_payload_decode(NULL, 6, &out), RUNGS_ERR_NULL_POINTER);
    CHECK_EQ(rungs_report_payload_decode(buf, 6, NULL), RUNGS_ERR_NULL_POINTER);
    /* A length that is no layout's, and a 9-byte payload without its version. */
    CHECK_EQ(rungs_report_payload_decode(buf, 5, &out), RUNGS_ERR_MALFORMED);
    CHECK_EQ(rungs_report_payload_decode(buf, 7, &out), RUNGS_ERR_MALFORMED);
    CHECK_EQ(rungs_report_payload_decode(buf, 9, &out), RUNGS_ERR_MALFORMED);
    CHECK_EQ(out.process_us, 7);
    CHECK_EQ(out.has_worst_rtt, 7);
}

int main(void) {
    test_payload_lengths_fit_the_ts_event_union();
    test_timing_bytes_and_round_trip();
    test_timing_fog_bias();
    test_timing_misuse();
    test_red_alert_timing();
    test_report_compact();
    test_report_extended();
    test_report_misuse();
    return harness_report("payload");
}
