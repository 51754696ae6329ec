/* engine.c — one machine of the Tiberian Sun-shaped game.
 *
 * Written from the facts of the public reverse-engineered Tiberian Sun
 * headers (TSpp, used by Vinifera), EA's GPL Red Alert source (QUEUE.CPP,
 * the connection manager) and the community spawner's protocol 0; no code
 * is copied. What it keeps (docs/ts-integration.md, "The model"):
 *
 * - 46-byte packed events; a packet is a FRAMEINFO header (the tag as its
 *   Frame, Delay = tag - send frame in one byte, a running command count)
 *   followed by events compressed as a type byte and the data length the
 *   EventLength table gives for it: no lengths travel.
 * - Queue_AI_Multiplayer's frame: the timing block; on a send frame (Frame
 *   a multiple of FrameSendRate) send, then wait until the peers allow the
 *   frame, then Execute_DoList; other frames neither wait nor execute. Then
 *   the game logic, and the next frame when the 60 Hz frame timer allows
 *   (60 / DesiredFrameRate whole ticks).
 * - Execute_DoList runs an event only on its exact frame, house by house in
 *   house order, each house's events in DoList order; an event for an
 *   earlier frame is the fatal "packet received too late" (the game stops).
 * - The TIMING handler applies MaxAhead, FrameSendRate and DesiredFrameRate
 *   at once and, when MaxAhead or FrameSendRate grows, reschedules every
 *   event tagged between NewMaxAheadFrame1 and NewMaxAheadFrame2 to the
 *   latter.
 * - The vanilla wait (Can_Advance): every peer's command count is in and
 *   Frame < the oldest peer frame + MaxAhead, a peer's frame being FRAMEINFO
 *   Frame - Delay.
 * - A reliable, unordered transport (net.c's connections): every message is
 *   resent on its own RetryDelta ticks after its last send (response time +
 *   10 after the first adjustment); the response time is the mean ack delay
 *   of game packets in ticks, timed from the first send.
 * - Process time in whole ticks per frame; PROCESS_TIME and the host's
 *   TIMING every 128 frames (Red Alert's rule), or protocol 0's
 *   RESPONSE_TIME_2 every 30 frames with latency levels that only rise.
 * - House IDs are heap indexes, not seat numbers; AI houses think on every
 *   machine and send nothing; an observer receives and executes, never sends.
 *
 * The game state is a running checksum of executed events, compared between
 * machines by the driver (model.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "game.h"

const char *const refusal_names[REFUSAL_COUNT] = {
    "event from an unknown house",
    "unregistered event ID",
    "truncated compressed stream",
    "refused by the mod",
};

/* Silence from a peer while waiting before the game drops it itself (the
 * spawner's ReconnectTimeout, in ticks). */
#define RECONNECT_TIMEOUT_TICKS 2400
#define FRAMEINFO_BYTES 17
#define P0_INTERVAL 30
#define P0_FIRST 180

/* The model's EventLength table: the data bytes each event carries in the
 * compressed stream. TIMING, PROCESS_TIME, FRAMEINFO and protocol 0's event
 * have Tiberian Sun's lengths; the rest are this model's. */
static const uint8_t vanilla_event_length[TS_EV_COUNT + 1] = {
    0,  5,  5,  4, 21, 23, 5, 5, 0,  5, 9, 4, 4, 8, 8, 8, 5, 12, 0,
    14, 5,  5,  4, 4,  7,  0, 1, 7, 0, 10, 8, 5, 2, 0, 4, 4,
    2, /* 36: RESPONSE_TIME_2 (protocol 0 only) */
};

/* Protocol 0's MaxAhead by latency level (the Tiberian Sun spawner's table). */
static const uint8_t p0_max_ahead[10] = {1, 4, 6, 9, 12, 15, 18, 21, 24, 27};

enum state { ST_TIMER, ST_WAITING, ST_STOPPED };

struct machine {
    game_setup_t setup;
    int index;
    int house; /* this machine's house (index in houses) */
    ts_house houses[MAX_HOUSES];
    int house_count;
    uint8_t human[MAX_HOUSES]; /* HouseClass::IsHuman, cleared when a house leaves */
    uint32_t removed_on[MAX_HOUSES]; /* the frame it left on, + 1 (0: still here) */
    int observer;
    rng_t rng;
    uint32_t work_us;
    uint32_t order_ppm;
    uint32_t orders;
    uint32_t tick_phase_us;
    uint64_t now_us;

    enum state state;
    int crashed;
    uint32_t frame;
    uint32_t next_frame_tick;
    uint64_t busy_until_us;
    int waited;
    uint64_t wait_start_us;
    uint32_t keepalive_tick;
    uint32_t quit_frame;

    ts_session session;
    uint32_t max_max_ahead;
    uint32_t new_max_ahead_frame1, new_max_ahead_frame2;

    ts_event out_list[OUT_LIST_MAX];
    int out_count;
    ts_event *do_list;
    int do_count;

    int32_t their_frame[MAX_HOUSES];
    uint32_t their_sent[MAX_HOUSES], their_recv[MAX_HOUSES];
    uint32_t my_sent;

    uint32_t process_ticks, process_frames;
    int32_t process_time[MAX_HOUSES];

    /* protocol 0 */
    uint32_t p0_next_send;
    uint8_t p0_level;
    uint32_t p0_new_send_rate;
    uint32_t precalc_max_ahead, precalc_frame_rate;
    uint32_t p0_max_aheads[16], p0_levels[16], p0_last_frame[16];
    uint32_t worst_max_ahead;

    connection_t conns[MAX_MACHINES];
    uint32_t retry_delta;

    uint32_t crc;
    uint32_t *crc_at;
    machine_report_t rep;

    ts_game api;
    ts_hooks hooks;
    int modded;
    uint8_t event_count;
};

/* ---- small helpers ---- */

static uint32_t fnv(uint32_t h, const void *data, size_t len) {
    const uint8_t *p = data;
    size_t i;
    for (i = 0; i < len; i++) {
        h ^= p[i];
        h *= 16777619u;
    }
    return h;
}

static uint32_t ticks_at(const machine_t *m, uint64_t us) {
    return (uint32_t)((us + m->tick_phase_us) * TICK_HZ / 1000000u);
}

static uint32_t ticks(const machine_t *m) {
    return ticks_at(m, m->now_us);
}

static int house_of_id(const machine_t *m, int32_t id) {
    int h;
    for (h = 0; h < m->house_count; h++)
        if (m->houses[h].id == id) return h;
    return -1;
}

static int house_of_machine(const machine_t *m, int machine) {
    int h;
    for (h = 0; h < m->house_count; h++)
        if (m->setup.house_machine[h] == machine) return h;
    return -1;
}

static int is_player(const machine_t *m, int h) {
    return h >= 0 && m->houses[h].kind == TS_HOUSE_HUMAN && m->human[h];
}

/* Session.Am_I_Master: the first human house still playing, in house order. */
static int am_master(const machine_t *m) {
    int h;
    for (h = 0; h < m->house_count; h++)
        if (is_player(m, h)) return h == m->house;
    return 0;
}

static int event_length(const machine_t *m, uint8_t type) {
    if (type < m->event_count && type <= TS_EV_COUNT) return vanilla_event_length[type];
    if (m->modded && m->hooks.event_length) return m->hooks.event_length(m->hooks.mod, type);
    return -1;
}

static void stop(machine_t *m) {
    m->state = ST_STOPPED;
    m->rep.stopped = 1;
}

/* ---- the transport ---- */

static connection_t *conn_to(machine_t *m, int machine) {
    return machine >= 0 && machine < m->setup.machines && m->conns[machine].open ? &m->conns[machine]
                                                                                  : NULL;
}

static void transmit(machine_t *m, int to, const uint8_t *bytes, size_t len) {
    net_send(m->setup.net, m->now_us, m->index, to, bytes, len);
}

static void conn_send_entry(machine_t *m, connection_t *c, send_entry_t *e) {
    uint8_t buf[MAX_PACKET + 8];
    uint32_t now = ticks(m);
    buf[0] = 1; /* DATA */
    buf[1] = e->channel;
    ts_put_u32(buf + 2, e->id);
    memcpy(buf + 6, e->bytes, e->len);
    if (e->sends == 0) e->first_tick = now;
    e->last_tick = now;
    e->sends++;
    transmit(m, c->peer, buf, (size_t)e->len + 6);
}

/* Queue a reliable message; sent at once. */
static void conn_queue(machine_t *m, connection_t *c, uint8_t channel, const uint8_t *bytes, size_t len) {
    send_entry_t *e;
    if (len > MAX_PACKET) return;
    if (c->queued == SEND_QUEUE_MAX) {
        /* The connection cannot take more: the game's queue is full. */
        m->rep.failures++;
        return;
    }
    e = calloc(1, sizeof *e);
    if (!e) abort();
    e->id = c->next_id++;
    e->channel = channel;
    e->len = (uint16_t)len;
    memcpy(e->bytes, bytes, len);
    c->queue[c->queued++] = e;
    conn_send_entry(m, c, e);
}

/* Service_Send_Queue: resend what RetryDelta says is due, each on its own. */
static void conn_service(machine_t *m, connection_t *c) {
    int i;
    uint32_t now = ticks(m);
    for (i = 0; i < c->queued; i++) {
        send_entry_t *e = c->queue[i];
        if (now - e->last_tick > m->retry_delta) conn_send_entry(m, c, e);
    }
}

static void add_delay(connection_t *c, uint32_t delay) {
    if (c->num_delay == 256) {
        c->delay_sum -= c->mean_delay;
        c->delay_sum += delay;
        c->mean_delay = (c->delay_sum >> 8) + ((c->delay_sum & 0xff) > 127 ? 1 : 0);
    } else {
        c->num_delay++;
        c->delay_sum += delay;
        c->mean_delay = c->delay_sum / c->num_delay;
    }
}

/* IPXManagerClass::Response_Time: the worst connection's mean, in ticks. */
static uint32_t response_time(const machine_t *m) {
    uint32_t worst = 0;
    int i;
    for (i = 0; i < m->setup.machines; i++)
        if (m->conns[i].open && m->conns[i].mean_delay > worst) worst = m->conns[i].mean_delay;
    return worst;
}

static void conn_ack(machine_t *m, connection_t *c, uint32_t id) {
    int i;
    for (i = 0; i < c->queued; i++) {
        send_entry_t *e = c->queue[i];
        if (e->id != id) continue;
        if (e->channel == CHANNEL_GAME) {
            uint32_t delay = ticks(m) - e->first_tick;
            int h = house_of_machine(m, c->peer);
            add_delay(c, delay);
            if (m->modded && m->hooks.ack_delay && h >= 0)
                m->hooks.ack_delay(m->hooks.mod, m->houses[h].id, delay, e->sends > 1);
        }
        free(e);
        c->queue[i] = c->queue[--c->queued];
        return;
    }
}

/* A message ID seen before? Marks it seen. */
static int conn_seen(connection_t *c, uint32_t id) {
    uint32_t offset;
    if (id < c->received_below) return 1;
    offset = id - c->received_below;
    if (offset >= 1024) return 1; /* far beyond the window: dropped, resent later */
    if (c->received_bits[offset / 64] >> (offset % 64) & 1) return 1;
    c->received_bits[offset / 64] |= 1ull << (offset % 64);
    while (c->received_bits[0] & 1) {
        int w;
        for (w = 0; w < 16; w++) {
            c->received_bits[w] >>= 1;
            if (w + 1 < 16) c->received_bits[w] |= (c->received_bits[w + 1] & 1) << 63;
        }
        c->received_below++;
    }
    return 0;
}

static void conn_close(machine_t *m, int machine) {
    connection_t *c = conn_to(m, machine);
    int i;
    if (!c) return;
    for (i = 0; i < c->queued; i++) free(c->queue[i]);
    c->queued = 0;
    c->open = 0;
}

/* ---- events and packets ---- */

static int out_list_add(machine_t *m, const ts_event *e) {
    if (m->out_count == OUT_LIST_MAX) return 0;
    m->out_list[m->out_count] = *e;
    m->out_list[m->out_count].id = m->houses[m->house].id;
    m->out_count++;
    return 1;
}

static void do_list_add(machine_t *m, const ts_event *e) {
    if (m->do_count == DO_LIST_MAX) {
        /* RC_DOLIST_FULL: fatal in the game. */
        m->rep.failures++;
        stop(m);
        return;
    }
    m->do_list[m->do_count] = *e;
    m->do_list[m->do_count].is_executed = 0;
    m->do_count++;
}

static void add_event(machine_t *m, uint8_t type, const void *data, size_t len) {
    ts_event e;
    memset(&e, 0, sizeof e);
    e.type = type;
    memcpy(e.data, data, len);
    out_list_add(m, &e);
}

/* Build_Send_Packet with Add_Compressed_Events: FRAMEINFO, the mod's extra
 * bytes, then each OutList event as its type and data. Sent to every open
 * connection; our own events go to our DoList. */
static void send_packet(machine_t *m, uint32_t tag) {
    uint8_t buf[MAX_PACKET];
    size_t size = FRAMEINFO_BYTES;
    int sent = 0, i;
    uint32_t delay = tag - m->frame;
    if (delay > 255) {
        /* Delay is one byte: a timing this long cannot be sent. */
        m->rep.failures++;
        delay = 255;
    }
    if (m->modded && m->hooks.packet_extra) {
        m->hooks.packet_extra(m->hooks.mod, buf + size);
        size += m->hooks.packet_extra_len;
    }
    for (i = 0; i < m->out_count; i++) {
        ts_event *e = &m->out_list[i];
        int len = event_length(m, e->type);
        if (len < 0) continue; /* nothing the table knows: never sent */
        if (size + 1 + (size_t)len > sizeof buf) break;
        buf[size] = e->type;
        memcpy(buf + size + 1, e->data, (size_t)len);
        size += 1 + (size_t)len;
        e->frame = tag;
        e->id = m->houses[m->house].id;
        do_list_add(m, e);
        sent++;
    }
    memmove(m->out_list, m->out_list + sent, (size_t)(m->out_count - sent) * sizeof *m->out_list);
    m->out_count -= sent;
    m->my_sent += (uint32_t)sent;
    buf[0] = TS_EV_FRAMEINFO;
    ts_put_u32(buf + 1, tag);
    buf[5] = 0;
    ts_put_u32(buf + 6, (uint32_t)m->houses[m->house].id);
    ts_put_u32(buf + 10, m->crc);
    buf[14] = (uint8_t)m->my_sent;
    buf[15] = (uint8_t)(m->my_sent >> 8);
    buf[16] = (uint8_t)delay;
    for (i = 0; i < m->setup.machines; i++)
        if (conn_to(m, i) && !m->conns[i].leaving) conn_queue(m, &m->conns[i], CHANNEL_GAME, buf, size);
}

/* Process_Receive_Packet with Extract_Compressed_Events: refuse a packet that
 * cannot be parsed, with its reason, before anything of it is used. */
static int receive_packet(machine_t *m, int from_house, const uint8_t *buf, size_t len) {
    ts_frameinfo info;
    ts_event events[OUT_LIST_MAX];
    int count = 0, h, verdict = 1;
    size_t pos = FRAMEINFO_BYTES, extra_len = 0;
    const uint8_t *extra = NULL;
    if (len < FRAMEINFO_BYTES) {
        m->rep.refused[REFUSED_TRUNCATED]++;
        return 0;
    }
    if (buf[0] != TS_EV_FRAMEINFO) {
        m->rep.refused[REFUSED_UNREGISTERED_EVENT]++;
        return 0;
    }
    info.frame = ts_get_u32(buf + 1);
    info.id = (int32_t)ts_get_u32(buf + 6);
    info.crc = ts_get_u32(buf + 10);
    info.command_count = (uint16_t)(buf[14] | buf[15] << 8);
    info.delay = buf[16];
    h = house_of_id(m, info.id);
    if (h < 0 || h != from_house || m->houses[h].kind != TS_HOUSE_HUMAN) {
        m->rep.refused[REFUSED_UNKNOWN_HOUSE]++;
        return 0;
    }
    if (m->modded && m->hooks.packet_extra) {
        extra_len = m->hooks.packet_extra_len;
        if (len < pos + extra_len) {
            m->rep.refused[REFUSED_TRUNCATED]++;
            return 0;
        }
        extra = buf + pos;
        pos += extra_len;
    }
    while (pos < len) {
        uint8_t type = buf[pos];
        int elen = event_length(m, type);
        ts_event *e;
        if (elen < 0) {
            m->rep.refused[REFUSED_UNREGISTERED_EVENT]++;
            return 0;
        }
        if (pos + 1 + (size_t)elen > len) {
            m->rep.refused[REFUSED_TRUNCATED]++;
            return 0;
        }
        if (count == OUT_LIST_MAX) {
            m->rep.refused[REFUSED_TRUNCATED]++;
            return 0;
        }
        e = &events[count++];
        memset(e, 0, sizeof *e);
        e->type = type;
        e->frame = info.frame;
        e->id = info.id;
        memcpy(e->data, buf + pos + 1, (size_t)elen);
        pos += 1 + (size_t)elen;
    }
    if (!m->human[h]) return 1; /* a house that left: nothing of it runs */
    if (m->modded && m->hooks.receive_packet) {
        verdict = m->hooks.receive_packet(m->hooks.mod, info.id, &info, extra, extra_len, events, count,
                                          buf, len);
        if (verdict < 0) {
            m->rep.refused[REFUSED_BY_MOD]++;
            return 0;
        }
    }
    /* Red Alert's bookkeeping for its own wait: the peer's frame when it
     * sent, and its command count. */
    if (m->their_frame[h] < (int32_t)(info.frame - info.delay))
        m->their_frame[h] = (int32_t)(info.frame - info.delay);
    if (info.command_count > m->their_sent[h]) m->their_sent[h] = info.command_count;
    if (verdict == 1) {
        int i;
        for (i = 0; i < count; i++) do_list_add(m, &events[i]);
        m->their_recv[h] += (uint32_t)count;
    }
    return 1;
}

/* ---- the vanilla handlers ---- */

static void do_timing(machine_t *m, const ts_event *e) {
    uint32_t fps = (uint32_t)(e->data[0] | e->data[1] << 8);
    uint32_t max_ahead = (uint32_t)(e->data[2] | e->data[3] << 8);
    uint32_t send_rate = e->data[4] ? e->data[4] : 1;
    /* About to grow: reschedule what was sent under the old, shorter one. */
    if (max_ahead > m->session.max_ahead || send_rate > m->session.frame_send_rate) {
        m->new_max_ahead_frame1 = e->frame;
        m->new_max_ahead_frame2 = send_rate * ((send_rate + max_ahead + e->frame - 1) / send_rate);
    } else {
        m->new_max_ahead_frame1 = 0;
        m->new_max_ahead_frame2 = 0;
    }
    m->session.desired_frame_rate = fps ? fps : 1;
    m->session.max_ahead = max_ahead;
    if (max_ahead > m->max_max_ahead) m->max_max_ahead = max_ahead;
    m->session.frame_send_rate = send_rate;
}

static uint8_t p0_level_for(uint32_t response_time) {
    uint8_t level;
    for (level = 1; level < 9; level++)
        if (response_time <= p0_max_ahead[level]) return level;
    return 9;
}

static void p0_apply(machine_t *m, uint8_t level) {
    char text[80];
    if (level > 9) level = 9;
    if (level <= m->p0_level) return;
    m->p0_level = level;
    m->p0_new_send_rate = level;
    m->precalc_frame_rate = 60;
    m->precalc_max_ahead = p0_max_ahead[level];
    if (m->setup.verbose && m->index == 0) {
        snprintf(text, sizeof text, "Network: Latency mode set to: %u", (unsigned)level);
        printf("    machine %d frame %u: %s\n", m->index, (unsigned)m->frame, text);
    }
}

static void do_response_time_2(machine_t *m, const ts_event *e) {
    uint32_t id = (uint32_t)e->id & 15, worst = 0, i;
    uint8_t level = 0;
    if (m->setup.mode != MODE_VANILLA_P0 || e->data[0] == 0) return;
    m->p0_max_aheads[id] = e->data[0];
    m->p0_levels[id] = e->data[1];
    m->p0_last_frame[id] = e->frame;
    for (i = 0; i < 16; i++) {
        if (m->p0_last_frame[i] + P0_INTERVAL * 4 < m->frame) {
            m->p0_max_aheads[i] = 0;
            m->p0_levels[i] = 0;
        } else {
            if (m->p0_max_aheads[i] > worst) worst = m->p0_max_aheads[i];
            if (m->p0_levels[i] > level) level = (uint8_t)m->p0_levels[i];
        }
    }
    m->worst_max_ahead = worst;
    p0_apply(m, level);
}

/* A house leaves (Destroy_Connection): nothing new goes to its machine, but
 * what is on its way is still resent, so a leaving player can run the
 * frames up to its removal. */
static void remove_house(machine_t *m, int h) {
    connection_t *c;
    if (h < 0 || !m->human[h]) return;
    m->human[h] = 0;
    m->removed_on[h] = m->frame + 1;
    if (h == m->house) return;
    c = conn_to(m, m->setup.house_machine[h]);
    if (c) c->leaving = 1;
}

static void execute_event(machine_t *m, const ts_event *e) {
    int len = event_length(m, e->type);
    m->crc = fnv(m->crc, &m->frame, sizeof m->frame);
    m->crc = fnv(m->crc, &e->type, 1);
    m->crc = fnv(m->crc, &e->id, sizeof e->id);
    if (len > 0) m->crc = fnv(m->crc, e->data, (size_t)len);
    if (e->type == TS_EV_MEGAMISSION && m->setup.order_executed)
        m->setup.order_executed(m->setup.driver, m->index, ts_get_u32(e->data), m->now_us);
    if (m->modded && m->hooks.execute_event && m->hooks.execute_event(m->hooks.mod, m->frame, e)) return;
    switch (e->type) {
    case TS_EV_TIMING:
        do_timing(m, e);
        break;
    case TS_EV_PROCESS_TIME: {
        int h = house_of_id(m, e->id);
        if (h >= 0) m->process_time[h] = e->data[0] | e->data[1] << 8;
        break;
    }
    case TS_EV_REMOVEPLAYER: {
        int h = house_of_id(m, (int32_t)ts_get_u32(e->data));
        remove_house(m, h);
        if (h == m->house) m->quit_frame = m->frame; /* leaves after this frame */
        break;
    }
    case TS_EV_RESPONSE_TIME_2:
        do_response_time_2(m, e);
        break;
    default:
        break;
    }
}

/* Execute_DoList: the exact-frame rule, house by house. 0 on "too late". */
static int execute_do_list(machine_t *m) {
    uint32_t frame = m->frame;
    int h, j, k;
    if (m->modded && m->hooks.execute_do_list)
        m->hooks.execute_do_list(m->hooks.mod, frame, m->do_list, m->do_count);
    for (j = 0; j < m->do_count; j++) {
        ts_event *e = &m->do_list[j];
        if (e->type != TS_EV_FRAMEINFO && e->frame > m->new_max_ahead_frame1 &&
            e->frame < m->new_max_ahead_frame2)
            e->frame = m->new_max_ahead_frame2;
    }
    for (h = 0; h < m->house_count; h++) {
        if (m->houses[h].kind != TS_HOUSE_HUMAN || !m->human[h]) continue;
        for (j = 0; j < m->do_count; j++) {
            ts_event *e = &m->do_list[j];
            int exempt;
            if (e->id != m->houses[h].id || e->is_executed || frame < e->frame) continue;
            /* The spawner's protocol 0 spares its own events the check. */
            exempt = e->type == TS_EV_FRAMEINFO ||
                     (m->setup.mode == MODE_VANILLA_P0 &&
                      (e->type == TS_EV_EMPTY || e->type == TS_EV_PROCESS_TIME ||
                       e->type == TS_EV_RESPONSE_TIME_2));
            if (frame > e->frame && !exempt) {
                m->rep.too_late++;
                if (m->setup.verbose)
                    printf("    machine %d frame %u: packet received too late (event %u for frame %u)\n",
                           m->index, (unsigned)frame, (unsigned)e->type, (unsigned)e->frame);
                return 0;
            }
            e->is_executed = 1;
            execute_event(m, e);
            if (m->state == ST_STOPPED) return 1;
            if (!m->human[h]) break; /* the house left with this event */
        }
    }
    /* Clean_DoList: executed events go, and so do those of a house that left. */
    for (j = 0, k = 0; j < m->do_count; j++) {
        int hh = house_of_id(m, m->do_list[j].id);
        if (m->do_list[j].is_executed || (hh >= 0 && !m->human[hh])) continue;
        m->do_list[k++] = m->do_list[j];
    }
    m->do_count = k;
    return 1;
}

/* ---- the vanilla timing ---- */

/* Queue_AI_Multiplayer's timing block (the parts a mod may replace). */
static void timing_block(machine_t *m) {
    uint32_t frame = m->frame;
    int skip = m->modded && m->hooks.timing_events && m->hooks.timing_events(m->hooks.mod, frame);
    if (m->setup.mode == MODE_VANILLA_P0 && !skip && !m->observer && frame > m->p0_next_send) {
        /* MessageListClass::Manage's hook: the real response time, + 1. */
        uint32_t resp = response_time(m);
        uint8_t data[2];
        data[0] = (uint8_t)(resp + 1);
        data[1] = p0_level_for(resp);
        add_event(m, TS_EV_RESPONSE_TIME_2, data, 2);
        m->p0_next_send = frame + P0_INTERVAL;
    }
    if (frame == 0 || frame % 128 != 0) return;
    /* Set_Timing: resend after the response time + 10 ticks. Protocol 0's
     * Response_Time answers the worst MaxAhead instead. */
    m->retry_delta = (m->setup.mode == MODE_VANILLA_P0 ? m->worst_max_ahead : response_time(m)) + 10;
    if (skip || m->observer) return;
    {
        uint16_t avg = (uint16_t)(m->process_frames ? m->process_ticks / m->process_frames : 0);
        uint8_t data[2];
        data[0] = (uint8_t)avg;
        data[1] = (uint8_t)(avg >> 8);
        add_event(m, TS_EV_PROCESS_TIME, data, 2);
        m->process_ticks = 0;
        m->process_frames = 0;
    }
    if (!am_master(m)) return;
    if (m->setup.mode == MODE_VANILLA_P0 && m->precalc_max_ahead) {
        uint8_t data[5];
        data[0] = (uint8_t)m->precalc_frame_rate;
        data[1] = 0;
        data[2] = (uint8_t)m->precalc_max_ahead;
        data[3] = 0;
        data[4] = (uint8_t)m->p0_new_send_rate;
        add_event(m, TS_EV_TIMING, data, 5);
        m->precalc_max_ahead = 0;
        m->precalc_frame_rate = 0;
        return;
    }
    if (m->my_sent < 5) return;
    {
        uint32_t highest = 0, fps, speed = m->setup.speed_fps, max_ahead, fsr = m->session.frame_send_rate;
        uint8_t data[5];
        int h;
        for (h = 0; h < m->house_count; h++) {
            if (!is_player(m, h)) continue;
            if (m->process_time[h] < 0) return; /* not heard from everyone yet */
            if ((uint32_t)m->process_time[h] > highest) highest = (uint32_t)m->process_time[h];
        }
        fps = highest ? 60 / highest : 60;
        if (fps > speed) fps = speed;
        if (m->setup.mode == MODE_VANILLA_P0) {
            max_ahead = m->session.max_ahead;
        } else {
            max_ahead = response_time(m) * fps / 120;
            max_ahead = (max_ahead + fsr - 1) / fsr * fsr;
            if (max_ahead < 3 * fsr) max_ahead = 3 * fsr;
        }
        data[0] = (uint8_t)fps;
        data[1] = 0;
        data[2] = (uint8_t)max_ahead;
        data[3] = (uint8_t)(max_ahead >> 8);
        data[4] = (uint8_t)fsr;
        add_event(m, TS_EV_TIMING, data, 5);
    }
}

/* Can_Advance: every peer's commands in, and not a MaxAhead past the oldest. */
static int vanilla_can_advance(const machine_t *m) {
    int32_t oldest = (int32_t)m->frame + 1000;
    int h, peers = 0;
    for (h = 0; h < m->house_count; h++) {
        if (!is_player(m, h) || h == m->house) continue;
        peers++;
        if (m->their_recv[h] < m->their_sent[h]) return 0;
        if (m->their_frame[h] < oldest) oldest = m->their_frame[h];
    }
    return peers == 0 || (int32_t)m->frame < oldest + (int32_t)m->session.max_ahead;
}

/* Wait_For_Players' timeout: a human silent that long is dropped here
 * (Handle_Timeout, Destroy_Connection: its house goes to the computer). */
static void check_timeouts(machine_t *m) {
    int h;
    for (h = 0; h < m->house_count; h++) {
        connection_t *c;
        if (!is_player(m, h) || h == m->house) continue;
        c = conn_to(m, m->setup.house_machine[h]);
        if (!c || ticks(m) - c->last_heard_tick < RECONNECT_TIMEOUT_TICKS) continue;
        if (m->modded && m->hooks.connection_timeout &&
            m->hooks.connection_timeout(m->hooks.mod, m->houses[h].id))
            continue;
        remove_house(m, h);
    }
}

/* Wait_For_Players sends a FRAMESYNC now and then while it waits, so its
 * peers hear it is alive though it sends no packets. */
static void keepalive(machine_t *m) {
    uint8_t sync[5] = {3, 0, 0, 0, 0};
    int i;
    if (ticks(m) - m->keepalive_tick < 30) return;
    m->keepalive_tick = ticks(m);
    ts_put_u32(sync + 1, m->frame);
    for (i = 0; i < m->setup.machines; i++)
        if (conn_to(m, i) && !m->conns[i].leaving) transmit(m, i, sync, sizeof sync);
}

/* ---- the frame loop ---- */

static void game_logic(machine_t *m) {
    uint32_t frame = m->frame, work, spanned;
    int h;
    /* The human plays: now and then an order (a MEGAMISSION). */
    if (!m->observer && m->human[m->house] && m->quit_frame == 0 && rng_chance(&m->rng, m->order_ppm)) {
        uint8_t data[21];
        uint32_t serial = ORDER_SERIAL(m->house, m->orders++);
        int i;
        ts_put_u32(data, serial);
        for (i = 4; i < 21; i++) data[i] = (uint8_t)rng_next(&m->rng);
        add_event(m, TS_EV_MEGAMISSION, data, sizeof data);
        if (m->setup.order_issued) m->setup.order_issued(m->setup.driver, m->index, serial, m->now_us);
    }
    /* The AI houses think, alike on every machine. */
    if (frame % 16 == 0)
        for (h = 0; h < m->house_count; h++)
            if (m->houses[h].kind == TS_HOUSE_AI) {
                m->crc = fnv(m->crc, &m->houses[h].id, sizeof m->houses[h].id);
                m->crc = fnv(m->crc, &frame, sizeof frame);
            }
    if (frame <= MAX_GAME_FRAMES) m->crc_at[frame] = m->crc | 1u;
    if (m->setup.verbose && m->index == 0 && frame % 300 == 0)
        printf("    t %6.2f s frame %5u: %u/%u at %u fps, %u stalled frames so far, retry %u ticks, response %u\n",
               (double)m->now_us / 1e6, (unsigned)frame, (unsigned)m->session.frame_send_rate,
               (unsigned)m->session.max_ahead, (unsigned)m->session.desired_frame_rate,
               (unsigned)m->rep.stalled_frames, (unsigned)m->retry_delta, (unsigned)response_time(m));
    /* The frame's work: a few ms, counted in whole ticks as the game does. */
    work = m->work_us / 2 + rng_below(&m->rng, m->work_us + 1);
    m->busy_until_us = m->now_us + work;
    spanned = ticks_at(m, m->busy_until_us) - ticks(m);
    m->process_ticks += spanned;
    m->process_frames++;
    m->rep.frames_run++;
    if (m->modded && m->hooks.frame_done) m->hooks.frame_done(m->hooks.mod, frame, spanned, work);
    m->frame++;
}

static void begin_frame(machine_t *m) {
    uint32_t tag = 0, fps = m->session.desired_frame_rate ? m->session.desired_frame_rate : 60;
    int sends;
    m->next_frame_tick = ticks(m) + (60 / fps ? 60 / fps : 1);
    if (m->quit_frame && m->frame == m->quit_frame + 1) {
        /* Its REMOVEPLAYER ran: this player's game is over. */
        stop(m);
        return;
    }
    if (m->modded && m->hooks.send_period) {
        sends = m->hooks.send_period(m->hooks.mod, m->frame, &tag);
    } else {
        uint32_t fsr = m->session.frame_send_rate ? m->session.frame_send_rate : 1;
        sends = m->frame % fsr == 0;
        tag = (m->frame + m->session.max_ahead + fsr - 1) / fsr * fsr;
    }
    timing_block(m);
    if (m->state == ST_STOPPED) return;
    m->waited = 0;
    if (!sends) {
        game_logic(m);
        return;
    }
    if (!m->observer && m->human[m->house]) send_packet(m, tag);
    m->state = ST_WAITING;
}

static void run(machine_t *m) {
    for (;;) {
        if (m->state == ST_STOPPED) return;
        if (m->state == ST_TIMER) {
            if (m->frame > m->setup.frames) {
                m->state = ST_STOPPED;
                return;
            }
            if (m->now_us < m->busy_until_us || ticks(m) < m->next_frame_tick) return;
            begin_frame(m);
            continue;
        }
        /* ST_WAITING: frame 0 has nothing to wait for. */
        if (m->frame > 0) {
            int ready = m->modded && m->hooks.can_advance ? m->hooks.can_advance(m->hooks.mod, m->frame)
                                                          : vanilla_can_advance(m);
            if (m->state == ST_STOPPED) return;
            if (!ready) {
                if (!m->waited) {
                    m->waited = 1;
                    m->wait_start_us = m->now_us;
                    m->rep.stalled_frames++;
                    if (m->modded && m->hooks.waiting) m->hooks.waiting(m->hooks.mod, 1);
                }
                keepalive(m);
                check_timeouts(m);
                return;
            }
            if (m->waited) {
                m->rep.stall_us += m->now_us - m->wait_start_us;
                if (m->modded && m->hooks.waiting) m->hooks.waiting(m->hooks.mod, 0);
                m->waited = 0;
            }
        }
        if (!execute_do_list(m)) {
            stop(m); /* "packet received too late": the game ends here */
            return;
        }
        if (m->state == ST_STOPPED) return;
        m->state = ST_TIMER;
        game_logic(m);
    }
}

void machine_step(machine_t *m, uint64_t now_us) {
    int i;
    m->now_us = now_us;
    if (m->crashed) return;
    for (i = 0; i < m->setup.machines; i++) {
        if (!m->conns[i].open) continue;
        conn_service(m, &m->conns[i]);
        if (m->conns[i].leaving && m->conns[i].queued == 0) conn_close(m, i);
    }
    run(m);
}

void machine_datagram(machine_t *m, uint64_t now_us, int from, const uint8_t *bytes, size_t len) {
    connection_t *c;
    m->now_us = now_us;
    if (m->crashed || len < 5) return;
    c = conn_to(m, from);
    if (!c) return;
    c->last_heard_tick = ticks(m);
    if (bytes[0] == 2) {
        conn_ack(m, c, ts_get_u32(bytes + 1));
        return;
    }
    if (bytes[0] == 3) return; /* a FRAMESYNC keepalive: heard */
    if (bytes[0] != 1 || len < 6) return;
    {
        uint8_t ack[5];
        uint32_t id = ts_get_u32(bytes + 2);
        ack[0] = 2;
        ts_put_u32(ack + 1, id);
        transmit(m, from, ack, sizeof ack);
        if (conn_seen(c, id)) return;
    }
    if (bytes[1] == CHANNEL_MOD) {
        int h = house_of_machine(m, from);
        if (m->modded && m->hooks.mod_message && h >= 0 && m->state != ST_STOPPED)
            m->hooks.mod_message(m->hooks.mod, m->houses[h].id, bytes + 6, len - 6);
        return;
    }
    if (m->state == ST_STOPPED) return;
    receive_packet(m, house_of_machine(m, from), bytes + 6, len - 6);
    run(m);
}

void machine_inject(machine_t *m, uint64_t now_us, int from_machine, const uint8_t *bytes, size_t len) {
    m->now_us = now_us;
    if (m->crashed || m->state == ST_STOPPED) return;
    receive_packet(m, house_of_machine(m, from_machine), bytes, len);
}

/* ---- the services the game offers a mod ---- */

static int TSMOD_CALL api_out_list_add(void *game, const ts_event *event) {
    return out_list_add(game, event);
}

static void TSMOD_CALL api_do_list_add(void *game, const ts_event *events, int count) {
    machine_t *m = game;
    int i;
    for (i = 0; i < count; i++) do_list_add(m, &events[i]);
}

static int TSMOD_CALL api_receive_raw(void *game, int32_t house_id, const uint8_t *bytes, size_t len) {
    machine_t *m = game;
    return receive_packet(m, house_of_id(m, house_id), bytes, len);
}

static void TSMOD_CALL api_send_private(void *game, int32_t house_id, const uint8_t *bytes, size_t len) {
    machine_t *m = game;
    int h, i;
    if (house_id >= 0) {
        connection_t *c;
        h = house_of_id(m, house_id);
        c = h >= 0 ? conn_to(m, m->setup.house_machine[h]) : NULL;
        if (c && !c->leaving) conn_queue(m, c, CHANNEL_MOD, bytes, len);
        return;
    }
    for (i = 0; i < m->setup.machines; i++)
        if (conn_to(m, i) && !m->conns[i].leaving) conn_queue(m, &m->conns[i], CHANNEL_MOD, bytes, len);
}

static void TSMOD_CALL api_add_message(void *game, const char *text) {
    machine_t *m = game;
    if (m->setup.verbose && m->index == 0) printf("    frame %5u  message: %s\n", (unsigned)m->frame, text);
}

static uint32_t TSMOD_CALL api_tick_count(void *game) {
    return ticks(game);
}

static uint64_t TSMOD_CALL api_now_us(void *game) {
    return ((machine_t *)game)->now_us;
}

static uint32_t TSMOD_CALL api_silent_ticks(void *game, int32_t house_id) {
    machine_t *m = game;
    int h = house_of_id(m, house_id);
    connection_t *c = h >= 0 ? conn_to(m, m->setup.house_machine[h]) : NULL;
    return c ? ticks(m) - c->last_heard_tick : 0;
}

/* ---- setup ---- */

machine_t *machine_new(const game_setup_t *setup, int index, uint32_t work_us, uint32_t order_ppm) {
    machine_t *m = calloc(1, sizeof *m);
    int h, i;
    if (!m) return NULL;
    m->do_list = calloc(DO_LIST_MAX, sizeof *m->do_list);
    m->crc_at = calloc(MAX_GAME_FRAMES + 1, sizeof *m->crc_at);
    if (!m->do_list || !m->crc_at) {
        machine_free(m);
        return NULL;
    }
    m->setup = *setup;
    m->index = index;
    m->house_count = setup->house_count;
    m->house = -1;
    for (h = 0; h < m->house_count; h++) {
        m->houses[h] = setup->houses[h];
        m->houses[h].local = setup->house_machine[h] == index;
        m->human[h] = 1;
        if (m->houses[h].local) m->house = h;
        m->process_time[h] = m->houses[h].kind == TS_HOUSE_HUMAN ? -1 : 0;
    }
    m->observer = m->house >= 0 && m->houses[m->house].kind == TS_HOUSE_OBSERVER;
    rng_seed(&m->rng, setup->seed * 131 + (uint64_t)index + 7);
    m->tick_phase_us = rng_below(&m->rng, 16667);
    m->work_us = work_us;
    m->order_ppm = order_ppm;
    m->event_count = setup->mode == MODE_VANILLA_P0 ? TS_EV_COUNT + 1 : TS_EV_COUNT;
    m->retry_delta = 60; /* the spawner's Set_Timing(60, -1, 600) */
    m->session.desired_frame_rate = setup->speed_fps;
    if (setup->mode == MODE_VANILLA_P0) {
        m->session.frame_send_rate = 2;
        m->session.max_ahead = 12;
        m->session.desired_frame_rate = 60;
        m->worst_max_ahead = 24;
        m->p0_next_send = P0_FIRST;
    } else {
        m->session.frame_send_rate = 3;
        m->session.max_ahead = 9;
    }
    for (i = 0; i < setup->machines; i++) {
        m->conns[i].peer = i;
        m->conns[i].open = i != index;
    }
    if (setup->mod_init) {
        m->api.struct_size = sizeof m->api;
        m->api.game = m;
        m->api.session = &m->session;
        m->api.houses = m->houses;
        m->api.house_count = (uint8_t)m->house_count;
        m->api.event_count = m->event_count;
        m->api.out_list_add = api_out_list_add;
        m->api.do_list_add = api_do_list_add;
        m->api.receive_raw = api_receive_raw;
        m->api.send_private = api_send_private;
        m->api.add_message = api_add_message;
        m->api.tick_count = api_tick_count;
        m->api.now_us = api_now_us;
        m->api.silent_ticks = api_silent_ticks;
        m->api.settings = setup->mod_settings;
        m->hooks.struct_size = sizeof m->hooks;
        m->modded = setup->mod_init(&m->api, &m->hooks);
        if (m->modded && m->hooks.packet_extra_len > 16) m->modded = 0;
        if (!m->modded) m->rep.failures++;
    }
    return m;
}

void machine_free(machine_t *m) {
    int i;
    if (!m) return;
    if (m->modded && m->hooks.game_end) m->hooks.game_end(m->hooks.mod);
    for (i = 0; i < MAX_MACHINES; i++) conn_close(m, i);
    free(m->do_list);
    free(m->crc_at);
    free(m);
}

void machine_crash(machine_t *m) {
    m->crashed = 1;
    m->state = ST_STOPPED;
}

void machine_quit(machine_t *m) {
    if (m->crashed || m->state == ST_STOPPED || m->observer) return;
    {
        uint8_t data[4];
        ts_put_u32(data, (uint32_t)m->houses[m->house].id);
        add_event(m, TS_EV_REMOVEPLAYER, data, 4);
    }
}

uint32_t machine_removed_on(const machine_t *m, int32_t house_id) {
    int h = house_of_id(m, house_id);
    return h >= 0 ? m->removed_on[h] : 0;
}

int machine_crashed(const machine_t *m) {
    return m->crashed;
}

int machine_alive(const machine_t *m) {
    return !m->crashed && m->state != ST_STOPPED;
}

uint32_t machine_frame(const machine_t *m) {
    return m->frame;
}

int machine_checksum(const machine_t *m, uint32_t frame, uint32_t *out) {
    if (frame > MAX_GAME_FRAMES || !m->crc_at[frame]) return 0;
    *out = m->crc_at[frame];
    return 1;
}

machine_report_t machine_report(const machine_t *m) {
    return m->rep;
}

int machine_house(const machine_t *m) {
    return m->house;
}

int32_t machine_house_id(const machine_t *m) {
    return m->house >= 0 ? m->houses[m->house].id : -1;
}

uint32_t machine_fps(const machine_t *m) {
    return m->session.desired_frame_rate;
}

void machine_timing(const machine_t *m, uint32_t *send_rate, uint32_t *max_ahead) {
    *send_rate = m->session.frame_send_rate;
    *max_ahead = m->session.max_ahead;
}
