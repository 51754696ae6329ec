/* mod.c — rungs inside the Tiberian Sun-shaped game, hooked as a mod would
 * (tsmod.h; docs/ts-integration.md has the map of hooks, one row per
 * function). Built into the model on Linux; on Windows it is tsmod.dll,
 * linked against rungs.dll through its import library as an MSVC-built mod
 * is, and the game finds tsmod_init with GetProcAddress.
 *
 * Each hook replaces or disables one vanilla piece; the game's own rules
 * stay: the exact-frame DoList keeps its fatal late check (the mod restamps
 * the tags due on an executing frame, rungs_session_due_tags), events stay
 * 46 bytes in the compressed stream (NETWORK_REPORT is registered in the
 * length table under the first ID past the game's), the 60 Hz tick timer
 * paces (rungs only asks for rates it hits, config.tick_hz) and measures
 * (round trips and frame work in ticks), the game sends before it executes
 * (RUNGS_SEND_BEFORE_EXECUTE), and its transport stays unordered: the mod
 * numbers its packets, hands each arrival to rungs_session_packet_received
 * and asks rungs_session_peers_ready instead of the vanilla wait.
 *
 * A player whose machine vanishes is dropped by the mod's own procedure
 * (S4.7: the engine decides removals), the one docs/turns.md describes for
 * rungs' lockstep session: every survivor votes the last packet of the
 * vanished player it holds with every one before it; the cut is the highest
 * vote; a survivor short of it gets the missing packets relayed by the
 * lowest voter holding the cut; rungs_session_peer_cut ends the stream there
 * and the removal executes on rungs_session_cut_tag's frame, which no
 * machine can have run. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rungs.h"
#include "tsmod.h"

#if defined(_WIN32)
#define TSMOD_EXPORT __declspec(dllexport)
#else
#define TSMOD_EXPORT
#endif

#define SEATS 16
#define HOUSES 16
#define RING 1024
/* A peer silent this long while we wait is lost: its drop starts. */
#define LOST_TICKS 180
#define EXTRA_BYTES 4

enum message { MSG_VOTE = 1, MSG_REQUEST = 2, MSG_RELAY = 3 };

/* A packet kept until the ones sent before it are here. */
typedef struct held {
    int present;
    uint32_t number;
    int count;
    ts_event *events;
} held_t;

/* A packet's bytes as they arrived, for relaying in a drop. */
typedef struct raw {
    uint32_t number;
    size_t len;
    uint8_t *bytes;
} raw_t;

/* One vanished player's drop, as this machine runs it. Voters are houses
 * (humans and observers: an observer holds packets too), by house index. */
typedef struct drop {
    int dropping;                 /* this machine drops the seat */
    uint32_t vote;                /* its own vote (a packet number or RUNGS_NO_PACKET) */
    uint32_t votes[HOUSES];       /* each voter's vote */
    uint32_t voted;               /* bit per voter heard */
    int decided;
    uint32_t cut;
    int holder;                   /* house index of the voter that relays */
    uint32_t requests[HOUSES];    /* the watermark each asker holds */
    uint32_t asked;               /* bit per asker waiting for a relay */
    int removal_queued;
} drop_t;

typedef struct mod {
    const ts_game *g;
    rungs_session *s;
    rungs_measurements *measure; /* the session's, lent: the frames' work and waits */
    int tracking;
    uint8_t report_id;
    uint8_t report_len;
    int seat_count;
    int local_seat; /* RUNGS_NO_SEAT for an observer */
    int local_house; /* index in the game's houses */
    int32_t seat_house[SEATS];
    int human[SEATS];
    int removed[SEATS];
    uint32_t send_tag, send_frame;
    uint32_t packets_sent;
    uint32_t next_release[SEATS];
    uint64_t released_us[SEATS][RING]; /* when each packet's events reached the DoList */
    uint32_t own_send_frame[RING];     /* this machine's send frame of each packet number */
    uint64_t frame_due_us;             /* when the current frame was due */
    int need_counted;                  /* the current frame's need was counted */
    held_t held[SEATS][RING];
    raw_t raw[SEATS][RING];
    drop_t drops[SEATS];
    uint8_t waiting_for;
    uint32_t errors;
    int verbose;
} mod_t;

static uint32_t error_count;

/* Every rungs call goes through here: a failure is printed (the first few)
 * and counted, and the game goes on (a mod must not take it down). */
static void check(mod_t *m, rungs_result rc, const char *what) {
    char detail[300];
    if (rc == RUNGS_OK) return;
    m->errors++;
    error_count++;
    rungs_last_error_message(detail, sizeof detail, NULL);
    if (error_count <= 5) fprintf(stderr, "tsmod: %s: %s (%s)\n", what, rungs_result_str(rc), detail);
}

static int seat_of(const mod_t *m, int32_t house_id) {
    int s;
    for (s = 0; s < m->seat_count; s++)
        if (m->seat_house[s] == house_id) return s;
    return -1;
}

static int house_index(const mod_t *m, int32_t house_id) {
    int h;
    for (h = 0; h < m->g->house_count && h < HOUSES; h++)
        if (m->g->houses[h].id == house_id) return h;
    return -1;
}

static int present_peer(const mod_t *m, int seat);

/* A voter of a drop, as this machine sees it: a human still playing that
 * it does not drop itself, or an observer it still hears. */
static int voter(const mod_t *m, int h) {
    const ts_house *house = &m->g->houses[h];
    int seat = seat_of(m, house->id);
    if (house->kind == TS_HOUSE_OBSERVER)
        return h == m->local_house || m->g->silent_ticks(m->g->game, house->id) < LOST_TICKS;
    return house->kind == TS_HOUSE_HUMAN && seat >= 0 && !m->removed[seat] && !m->drops[seat].dropping;
}

static int present_peer(const mod_t *m, int seat) {
    return seat >= 0 && seat != m->local_seat && m->human[seat] && !m->removed[seat];
}

/* The last packet of `seat` held here with every one before it. */
static uint32_t watermark(mod_t *m, int seat) {
    uint32_t mark = RUNGS_NO_PACKET;
    check(m, rungs_session_packet_watermark(m->s, (uint8_t)seat, &mark), "rungs_session_packet_watermark");
    return mark;
}

/* The last packet of `seat` handed to the DoList, with every one before it. */
static uint32_t released(const mod_t *m, int seat) {
    return m->next_release[seat] ? m->next_release[seat] - 1 : RUNGS_NO_PACKET;
}

static int below(uint32_t mark, uint32_t cut) {
    return cut != RUNGS_NO_PACKET && (mark == RUNGS_NO_PACKET || mark < cut);
}

/* ---- rungs' callbacks: into the game ---- */

static void RUNGS_CALL on_queue_event(void *user, uint32_t frame, uint8_t type, const uint8_t *payload,
                                      size_t len) {
    mod_t *m = user;
    ts_event e;
    (void)frame;
    memset(&e, 0, sizeof e);
    e.type = type;
    memcpy(e.data, payload, len < TS_EVENT_DATA ? len : TS_EVENT_DATA);
    if (!m->g->out_list_add(m->g->game, &e)) m->errors++;
}

static void RUNGS_CALL on_send_frame(void *user, uint32_t frame, uint32_t tag) {
    mod_t *m = user;
    m->send_frame = frame;
    m->send_tag = tag;
}

static void RUNGS_CALL on_frame_rate(void *user, uint32_t frame, uint8_t fps) {
    mod_t *m = user;
    (void)frame;
    m->g->session->desired_frame_rate = fps;
}

static void RUNGS_CALL on_timing(void *user, uint32_t frame, uint8_t send_period, uint8_t look_ahead) {
    mod_t *m = user;
    (void)frame;
    m->g->session->frame_send_rate = send_period;
    m->g->session->max_ahead = look_ahead;
}

static void RUNGS_CALL on_message(void *user, uint32_t frame, uint8_t tier, const char *text) {
    mod_t *m = user;
    (void)frame;
    (void)tier;
    m->g->add_message(m->g->game, text);
}

static void RUNGS_CALL on_log(void *user, uint8_t level, const char *text) {
    mod_t *m = user;
    if (m->verbose && level <= RUNGS_LOG_INFO) fprintf(stderr, "    rungs house %d: %s\n", m->local_house, text);
}

/* ---- the reorder buffer: each house's packets reach the DoList in the
 * order they were sent, so events of one house that share a frame (a staged
 * decrease repeats a tag) run in issue order on every machine ---- */

static void release(mod_t *m, int seat) {
    const drop_t *d = &m->drops[seat];
    for (;;) {
        held_t *h = &m->held[seat][m->next_release[seat] % RING];
        if (!h->present || h->number != m->next_release[seat]) return;
        /* Past a vanished player's cut, packets are void. */
        if (d->decided && (d->cut == RUNGS_NO_PACKET || h->number > d->cut)) return;
        if (h->count) m->g->do_list_add(m->g->game, h->events, h->count);
        m->released_us[seat][h->number % RING] = m->g->now_us(m->g->game);
        free(h->events);
        h->events = NULL;
        h->present = 0;
        m->next_release[seat]++;
    }
}

static int hold(mod_t *m, int seat, uint32_t number, const ts_event *events, int count) {
    held_t *h = &m->held[seat][number % RING];
    if (h->present) return h->number == number; /* a copy */
    h->events = malloc((size_t)(count > 0 ? count : 1) * sizeof *events);
    if (!h->events) return 0;
    if (count > 0) memcpy(h->events, events, (size_t)count * sizeof *events);
    h->count = count;
    h->number = number;
    h->present = 1;
    return 1;
}

static void keep_raw(mod_t *m, int seat, uint32_t number, const uint8_t *bytes, size_t len) {
    raw_t *r = &m->raw[seat][number % RING];
    uint8_t *copy;
    if (r->bytes && r->number == number) return;
    copy = malloc(len);
    if (!copy) return;
    memcpy(copy, bytes, len);
    free(r->bytes);
    r->bytes = copy;
    r->len = len;
    r->number = number;
}

static const raw_t *stored_raw(const mod_t *m, int seat, uint32_t number) {
    const raw_t *r = &m->raw[seat][number % RING];
    return r->bytes && r->number == number ? r : NULL;
}

/* ---- the drop procedure ---- */

static void drop_decide(mod_t *m, int seat);

static void send_vote(mod_t *m, int seat) {
    uint8_t msg[8];
    uint16_t mask = 0;
    int s;
    for (s = 0; s < m->seat_count; s++)
        if (m->drops[s].dropping) mask |= (uint16_t)(1u << s);
    msg[0] = MSG_VOTE;
    msg[1] = (uint8_t)seat;
    ts_put_u32(msg + 2, m->drops[seat].vote);
    msg[6] = (uint8_t)mask;
    msg[7] = (uint8_t)(mask >> 8);
    m->g->send_private(m->g->game, -1, msg, sizeof msg);
}

static void drop_start(mod_t *m, int seat) {
    drop_t *d = &m->drops[seat];
    int s;
    if (d->dropping || !present_peer(m, seat)) return;
    d->dropping = 1;
    d->vote = watermark(m, seat);
    d->votes[m->local_house] = d->vote;
    d->voted |= 1u << m->local_house;
    if (m->verbose)
        fprintf(stderr, "tsmod house %d (tick %u): seat %d is lost; votes packet %d\n", m->local_house,
                (unsigned)m->g->tick_count(m->g->game), seat, (int)d->vote);
    send_vote(m, seat);
    /* A voter fewer: other drops may be decided now. */
    for (s = 0; s < m->seat_count; s++) drop_decide(m, s);
}

static void relay_to(mod_t *m, int seat, int asker) {
    drop_t *d = &m->drops[seat];
    uint32_t n = d->requests[asker] == RUNGS_NO_PACKET ? 0 : d->requests[asker] + 1;
    uint8_t msg[6 + 1500];
    for (; d->cut != RUNGS_NO_PACKET && n <= d->cut; n++) {
        const raw_t *r = stored_raw(m, seat, n);
        if (!r || r->len > 1500) continue;
        msg[0] = MSG_RELAY;
        msg[1] = (uint8_t)seat;
        ts_put_u32(msg + 2, n);
        memcpy(msg + 6, r->bytes, r->len);
        m->g->send_private(m->g->game, m->g->houses[asker].id, msg, 6 + r->len);
    }
}

/* With the cut decided and every packet through it here: end the stream in
 * rungs and queue the removal on the frame after the cut. */
static void drop_finish(mod_t *m, int seat) {
    drop_t *d = &m->drops[seat];
    uint32_t tag = RUNGS_NO_FRAME;
    ts_event e;
    if (!d->decided || d->removal_queued || below(released(m, seat), d->cut)) return;
    check(m, rungs_session_cut_tag(m->s, d->cut, &tag), "rungs_session_cut_tag");
    if (tag == RUNGS_NO_FRAME) return; /* this machine has not had that send frame yet */
    memset(&e, 0, sizeof e);
    e.type = TS_EV_REMOVEPLAYER;
    e.frame = tag;
    e.id = m->seat_house[seat];
    ts_put_u32(e.data, (uint32_t)m->seat_house[seat]);
    m->g->do_list_add(m->g->game, &e, 1);
    if (m->verbose)
        fprintf(stderr, "tsmod house %d: removal of seat %d queued on tag %u\n", m->local_house, seat, (unsigned)tag);
    d->removal_queued = 1;
}

static void drop_decide(mod_t *m, int seat) {
    drop_t *d = &m->drops[seat];
    uint32_t cut = RUNGS_NO_PACKET, n;
    int h;
    if (!d->dropping || d->decided) return;
    for (h = 0; h < m->g->house_count && h < HOUSES; h++) {
        if (!voter(m, h)) continue;
        if (!(d->voted >> h & 1)) return;
        if (d->votes[h] != RUNGS_NO_PACKET && (cut == RUNGS_NO_PACKET || d->votes[h] > cut)) cut = d->votes[h];
    }
    d->decided = 1;
    d->cut = cut;
    d->holder = -1;
    for (h = 0; h < m->g->house_count && h < HOUSES; h++)
        if (voter(m, h) && d->votes[h] == cut) {
            d->holder = h;
            break;
        }
    if (m->verbose)
        fprintf(stderr, "tsmod house %d: cut for seat %d at packet %d, holder house %d\n", m->local_house, seat,
                (int)cut, d->holder);
    /* The stream ends at the cut now, while this machine holds no more than
     * its vote: packets past it, here out of order, never count. */
    check(m, rungs_session_peer_cut(m->s, (uint8_t)seat, cut), "rungs_session_peer_cut");
    /* Packets kept back since this machine's vote, up to the cut. */
    for (n = d->vote == RUNGS_NO_PACKET ? 0 : d->vote + 1; cut != RUNGS_NO_PACKET && n <= cut; n++) {
        const raw_t *r = stored_raw(m, seat, n);
        if (!r) break;
        m->g->receive_raw(m->g->game, m->seat_house[seat], r->bytes, r->len);
    }
    if (d->holder == m->local_house) {
        for (h = 0; h < HOUSES; h++)
            if (d->asked >> h & 1) relay_to(m, seat, h);
        d->asked = 0;
    } else if (d->holder >= 0 && below(watermark(m, seat), cut)) {
        uint8_t msg[6];
        msg[0] = MSG_REQUEST;
        msg[1] = (uint8_t)seat;
        ts_put_u32(msg + 2, watermark(m, seat));
        m->g->send_private(m->g->game, m->g->houses[d->holder].id, msg, sizeof msg);
    }
    drop_finish(m, seat);
}

/* A vote about a player this machine has already removed: it quit, and
 * its game closed before every machine had its last packets. Those that
 * lack them drop it; this machine ran the removal, so it holds every packet
 * through it and votes them, once, and relays them if its vote is the cut.
 * Without the answer the voters wait for it for ever. */
static void answer_for_removed(mod_t *m, int seat) {
    drop_t *d = &m->drops[seat];
    int h;
    if (d->decided) return;
    d->vote = watermark(m, seat);
    d->votes[m->local_house] = d->vote;
    d->voted |= 1u << m->local_house;
    send_vote(m, seat);
    /* Nothing to decide here (the removal ran): only to relay. */
    d->decided = 1;
    d->cut = d->vote;
    d->holder = m->local_house;
    d->removal_queued = 1;
    for (h = 0; h < HOUSES; h++)
        if (d->asked >> h & 1) relay_to(m, seat, h);
    d->asked = 0;
}

static void TSMOD_CALL mod_message(void *mod, int32_t house_id, const uint8_t *bytes, size_t len) {
    mod_t *m = mod;
    int from = house_index(m, house_id), from_seat = seat_of(m, house_id), seat;
    drop_t *d;
    if (from < 0 || len < 2) return;
    seat = bytes[1];
    if (seat >= m->seat_count || !m->human[seat]) return;
    d = &m->drops[seat];
    switch (bytes[0]) {
    case MSG_VOTE: {
        uint16_t mask;
        int s;
        /* A vote from a seat this machine drops is not counted. */
        if (len < 8 || (from_seat >= 0 && m->drops[from_seat].dropping) || seat == from_seat) return;
        mask = (uint16_t)(bytes[6] | bytes[7] << 8);
        d->votes[from] = ts_get_u32(bytes + 2);
        d->voted |= 1u << from;
        if (m->removed[seat]) {
            answer_for_removed(m, seat);
            break;
        }
        /* Join a drop at once if this machine does not hear the seat either. */
        for (s = 0; s < m->seat_count; s++)
            if ((mask >> s & 1) && present_peer(m, s) &&
                m->g->silent_ticks(m->g->game, m->seat_house[s]) >= LOST_TICKS)
                drop_start(m, s);
        drop_decide(m, seat);
        break;
    }
    case MSG_REQUEST:
        if (len < 6) return;
        d->requests[from] = ts_get_u32(bytes + 2);
        if (d->decided && d->holder == m->local_house)
            relay_to(m, seat, from);
        else
            d->asked |= 1u << from;
        break;
    case MSG_RELAY: {
        uint32_t number;
        if (len < 6 + 17 || !d->decided || from != d->holder) return;
        number = ts_get_u32(bytes + 2);
        if (!below(watermark(m, seat), d->cut) || number > d->cut) return;
        m->g->receive_raw(m->g->game, m->seat_house[seat], bytes + 6, len - 6);
        drop_finish(m, seat);
        break;
    }
    default:
        break;
    }
}

/* ---- the hooks ---- */

static int TSMOD_CALL send_period(void *mod, uint32_t frame, uint32_t *tag) {
    mod_t *m = mod;
    int32_t executes = 0;
    int s;
    check(m, rungs_session_frame_begin(m->s, frame, &executes), "rungs_session_frame_begin");
    *tag = m->send_tag;
    m->frame_due_us = m->g->now_us(m->g->game);
    m->need_counted = 0;
    /* A removal waiting for its frame to be known. */
    for (s = 0; s < m->seat_count; s++) drop_finish(m, s);
    return executes != 0;
}

static int TSMOD_CALL timing_events(void *mod, uint32_t frame) {
    (void)mod;
    (void)frame;
    return 1; /* rungs queues the reports and the master's TIMING */
}

static void TSMOD_CALL packet_extra(void *mod, uint8_t *out) {
    mod_t *m = mod;
    m->own_send_frame[m->packets_sent % RING] = m->send_frame;
    ts_put_u32(out, m->packets_sent++);
}

static int TSMOD_CALL receive_packet(void *mod, int32_t house_id, const ts_frameinfo *info,
                                     const uint8_t *extra, size_t extra_len, const ts_event *events, int count,
                                     const uint8_t *raw, size_t raw_len) {
    mod_t *m = mod;
    int seat = seat_of(m, house_id);
    uint32_t number;
    drop_t *d;
    rungs_result rc;
    if (seat < 0 || !m->human[seat] || extra_len != EXTRA_BYTES) return -1;
    if (m->removed[seat]) return 0;
    number = ts_get_u32(extra);
    d = &m->drops[seat];
    /* Past this machine's own vote a dropped seat's packets wait for the
     * cut; past the cut they are void. */
    if (d->dropping) {
        uint32_t limit = d->decided ? d->cut : d->vote;
        if (!d->decided) keep_raw(m, seat, number, raw, raw_len);
        if (limit == RUNGS_NO_PACKET || number > limit) return 0;
    }
    rc = rungs_session_packet_received(m->s, (uint8_t)seat, number, info->frame - info->delay);
    if (rc != RUNGS_OK) {
        check(m, rc, "rungs_session_packet_received");
        return -1;
    }
    keep_raw(m, seat, number, raw, raw_len);
    if (number < m->next_release[seat] || !hold(m, seat, number, events, count)) return 0;
    release(m, seat);
    return 0;
}

/* The look-ahead frame `frame` needed (the needs layout, what `tracking`
 * sheds its margin by): its packets were sent look_ahead frames before it,
 * the last of them reached the DoList at ready, and it was due when it
 * began. */
static void count_need(mod_t *m, uint32_t frame) {
    uint32_t needed_frame = RUNGS_NO_FRAME, n, fps = m->g->session->desired_frame_rate;
    uint64_t ready_us = 0;
    uint8_t needed = 0;
    int s;
    if (!m->tracking || m->need_counted || m->local_seat == RUNGS_NO_SEAT || fps == 0) return;
    m->need_counted = 1;
    check(m, rungs_session_required_send_frame(m->s, frame, &needed_frame), "rungs_session_required_send_frame");
    if (needed_frame == RUNGS_NO_FRAME || frame - needed_frame < 1 || frame - needed_frame > 250) return;
    /* Its packet number: this machine's own packet of that send frame. */
    for (n = m->packets_sent; n > 0 && m->packets_sent - n < RING; n--)
        if (m->own_send_frame[(n - 1) % RING] == needed_frame) break;
    if (n == 0 || m->packets_sent - n >= RING) return;
    n--;
    for (s = 0; s < m->seat_count; s++)
        if (present_peer(m, s) && !m->drops[s].decided && m->next_release[s] > n &&
            m->released_us[s][n % RING] > ready_us)
            ready_us = m->released_us[s][n % RING];
    if (ready_us == 0) ready_us = m->frame_due_us;
    check(m, rungs_needed_look_ahead((uint8_t)(frame - needed_frame), m->frame_due_us, ready_us, 1000000u / fps, &needed),
          "rungs_needed_look_ahead");
    if (needed) check(m, rungs_measurements_add_frame_need(m->measure, (uint8_t)(frame - needed_frame), needed), "rungs_measurements_add_frame_need");
}

static int TSMOD_CALL can_advance(void *mod, uint32_t frame) {
    mod_t *m = mod;
    int32_t ready = 0;
    int s;
    (void)frame;
    check(m, rungs_session_peers_ready(m->s, &ready, &m->waiting_for), "rungs_session_peers_ready");
    if (ready) {
        count_need(m, frame);
        return 1;
    }
    for (s = 0; s < m->seat_count; s++)
        if (present_peer(m, s) && m->g->silent_ticks(m->g->game, m->seat_house[s]) >= LOST_TICKS)
            drop_start(m, s);
    return 0;
}

static void TSMOD_CALL waiting(void *mod, int begin) {
    mod_t *m = mod;
    uint64_t now = m->g->now_us(m->g->game);
    if (begin)
        check(m, rungs_measurements_wait_begin_for(m->measure, now, m->waiting_for), "rungs_measurements_wait_begin_for");
    else
        check(m, rungs_measurements_wait_end(m->measure, now), "rungs_measurements_wait_end");
}

static void TSMOD_CALL execute_do_list(void *mod, uint32_t frame, ts_event *do_list, int count) {
    mod_t *m = mod;
    uint32_t first = RUNGS_NO_FRAME, last = RUNGS_NO_FRAME;
    int i;
    check(m, rungs_session_due_tags(m->s, &first, &last), "rungs_session_due_tags");
    if (first == RUNGS_NO_FRAME) return;
    for (i = 0; i < count; i++)
        if (!do_list[i].is_executed && do_list[i].frame >= first && do_list[i].frame <= last)
            do_list[i].frame = frame;
}

static int TSMOD_CALL execute_event(void *mod, uint32_t frame, const ts_event *e) {
    mod_t *m = mod;
    int seat = seat_of(m, e->id);
    if (e->type == TS_EV_TIMING || e->type == m->report_id || e->type == TS_EV_LATENCYFUDGE) {
        size_t len = e->type == TS_EV_TIMING ? RUNGS_TIMING_PAYLOAD_LEN : e->type == m->report_id ? m->report_len : 4;
        if (seat >= 0)
            check(m, rungs_session_event_executed(m->s, e->type, (uint8_t)seat, frame, e->data, len),
                  "rungs_session_event_executed");
        return 1;
    }
    if (e->type == TS_EV_REMOVEPLAYER) {
        int gone = seat_of(m, (int32_t)ts_get_u32(e->data));
        if (gone >= 0 && m->human[gone]) {
            check(m, rungs_session_player_removed(m->s, (uint8_t)gone), "rungs_session_player_removed");
            m->removed[gone] = 1;
        }
        return 0; /* the game removes the house too */
    }
    /* Red Alert's and protocol 0's timing events: never sent with rungs. */
    return e->type == TS_EV_PROCESS_TIME || e->type == TS_EV_RESPONSE_TIME_2;
}

static int TSMOD_CALL event_length(void *mod, uint8_t type) {
    mod_t *m = mod;
    return type == m->report_id ? m->report_len : -1;
}

static void TSMOD_CALL ack_delay(void *mod, int32_t house_id, uint32_t ticks, int resent) {
    mod_t *m = mod;
    int seat = seat_of(m, house_id);
    if (m->local_seat == RUNGS_NO_SEAT || !present_peer(m, seat)) return;
    check(m, rungs_session_rtt_sample_ticks(m->s, (uint8_t)seat, ticks, resent ? 1 : 0),
          "rungs_session_rtt_sample_ticks");
}

static void TSMOD_CALL frame_done(void *mod, uint32_t frame, uint32_t ticks, uint32_t work_us) {
    mod_t *m = mod;
    (void)frame;
    /* The performance counter, not the ticks: a frame starts on a tick, so
     * a tick count under-reads short frames (18 ms of work spans one tick or
     * none), and the rate would swing between 30 and 60 fps. An engine with
     * only its ticks passes them (rungs_measurements_add_frame_ticks). */
    (void)ticks;
    check(m, rungs_measurements_add_frame_work_us(m->measure, work_us), "rungs_measurements_add_frame_work_us");
    check(m, rungs_session_frame_end(m->s), "rungs_session_frame_end");
}

static int TSMOD_CALL connection_timeout(void *mod, int32_t house_id) {
    (void)mod;
    (void)house_id;
    return 1; /* the drop procedure decides */
}

static void TSMOD_CALL game_end(void *mod) {
    mod_t *m = mod;
    int s, i;
    if (!m) return;
    check(m, rungs_session_free(m->s), "rungs_session_free");
    for (s = 0; s < SEATS; s++)
        for (i = 0; i < RING; i++) {
            free(m->held[s][i].events);
            free(m->raw[s][i].bytes);
        }
    free(m);
}

/* ---- setup ---- */

static mod_t *mod_new(const ts_game *g) {
    rungs_session_config c;
    mod_t *m = calloc(1, sizeof *m);
    int h, seat = 0;
    uint32_t humans = 0;
    rungs_result rc;
    if (!m) return NULL;
    m->g = g;
    m->local_seat = RUNGS_NO_SEAT;
    m->local_house = -1;
    for (h = 0; h < g->house_count && h < HOUSES; h++)
        if (g->houses[h].local) m->local_house = h;
    if (m->local_house < 0) {
        free(m);
        return NULL;
    }
    m->tracking = g->settings && strstr(g->settings, "policy=tracking") != NULL;
    m->verbose = g->settings && strstr(g->settings, "verbose") != NULL;
    /* Seats are the houses in house order, observers left out; a house's
     * heap ID is not its seat. */
    for (h = 0; h < g->house_count && seat < SEATS; h++) {
        if (g->houses[h].kind == TS_HOUSE_OBSERVER) continue;
        m->seat_house[seat] = g->houses[h].id;
        m->human[seat] = g->houses[h].kind == TS_HOUSE_HUMAN;
        if (m->human[seat]) humans |= 1u << seat;
        if (g->houses[h].local) m->local_seat = seat;
        seat++;
    }
    m->seat_count = seat;
    /* NETWORK_REPORT: the first ID past the game's table as it runs. */
    m->report_id = g->event_count;
    m->report_len = m->tracking ? RUNGS_REPORT_NEEDS_PAYLOAD_LEN : RUNGS_REPORT_PAYLOAD_LEN;
    rungs_session_config_init(&c); /* struct_size and the defaults */
    c.speed_fps = (uint8_t)g->session->desired_frame_rate;
    c.seat_count = (uint8_t)m->seat_count;
    c.local_seat = (uint8_t)m->local_seat;
    c.human_seat_mask = humans;
    c.report_layout = m->tracking ? RUNGS_REPORT_LAYOUT_NEEDS : RUNGS_REPORT_LAYOUT_COMPACT;
    c.policy = m->tracking ? RUNGS_POLICY_TRACKING : RUNGS_POLICY_ADAPTIVE;
    c.timing_event_id = TS_EV_TIMING;
    c.network_report_event_id = m->report_id;
    c.latency_fudge_event_id = TS_EV_LATENCYFUDGE;
    c.tick_hz = 60;
    c.send_order = RUNGS_SEND_BEFORE_EXECUTE;
    c.callbacks.user = m;
    c.callbacks.queue_event = on_queue_event;
    c.callbacks.send_frame = on_send_frame;
    c.callbacks.set_frame_rate = on_frame_rate;
    c.callbacks.timing_changed = on_timing;
    c.callbacks.player_message = on_message;
    c.callbacks.log = on_log;
    rc = rungs_session_new(&c, &m->s);
    if (rc != RUNGS_OK) {
        check(m, rc, "rungs_session_new");
        free(m);
        return NULL;
    }
    check(m, rungs_session_measurements(m->s, &m->measure), "rungs_session_measurements");
    return m;
}

TSMOD_EXPORT int TSMOD_CALL tsmod_init(const ts_game *g, ts_hooks *hooks) {
    mod_t *m;
    if (!g || !hooks || g->struct_size < sizeof *g || hooks->struct_size < sizeof *hooks) return 0;
    if (rungs_abi_version() != RUNGS_ABI_VERSION) return 0;
    m = mod_new(g);
    if (!m) return 0;
    hooks->mod = m;
    hooks->send_period = send_period;
    hooks->timing_events = timing_events;
    hooks->packet_extra_len = EXTRA_BYTES;
    hooks->packet_extra = packet_extra;
    hooks->receive_packet = receive_packet;
    hooks->can_advance = can_advance;
    hooks->waiting = waiting;
    hooks->execute_do_list = execute_do_list;
    hooks->execute_event = execute_event;
    hooks->event_length = event_length;
    hooks->ack_delay = ack_delay;
    hooks->frame_done = frame_done;
    hooks->mod_message = mod_message;
    hooks->connection_timeout = connection_timeout;
    hooks->game_end = game_end;
    return 1;
}

/* rungs calls that failed in this process so far (each was counted). */
TSMOD_EXPORT uint32_t TSMOD_CALL tsmod_errors(void) {
    return error_count;
}
