/* net.c — the model's simulated network: datagrams between machines of one
 * process, each delayed by its path's round trip (half each way) plus
 * jitter, lost at the path's rate, and held longer during a spike. Jitter
 * reorders them, as the Internet does. Seeded: a game replays exactly. */
#include <stdlib.h>
#include <string.h>

#include "game.h"

void rng_seed(rng_t *r, uint64_t seed) {
    r->state = seed * 0x9E3779B97F4A7C15ull + 0x2545F4914F6CDD1Dull;
    if (r->state == 0) r->state = 1;
}

uint32_t rng_next(rng_t *r) {
    /* xorshift64* */
    r->state ^= r->state >> 12;
    r->state ^= r->state << 25;
    r->state ^= r->state >> 27;
    return (uint32_t)((r->state * 0x2545F4914F6CDD1Dull) >> 32);
}

uint32_t rng_below(rng_t *r, uint32_t n) {
    return n ? (uint32_t)(((uint64_t)rng_next(r) * n) >> 32) : 0;
}

int rng_chance(rng_t *r, uint32_t ppm) {
    return rng_below(r, 1000000) < ppm;
}

typedef struct datagram {
    uint64_t arrives_us;
    uint64_t order; /* ties keep sending order */
    int from, to;
    uint16_t len;
    uint8_t *bytes;
} datagram_t;

#define MAX_SPIKES 8

struct net {
    int machines;
    path_t paths[MAX_MACHINES][MAX_MACHINES];
    spike_t spikes[MAX_SPIKES];
    int spike_count;
    rng_t rng;
    datagram_t *heap;
    size_t len, cap;
    uint64_t sent;
};

net_t *net_new(int machines, uint64_t seed) {
    net_t *net = calloc(1, sizeof *net);
    if (!net) return NULL;
    net->machines = machines;
    rng_seed(&net->rng, seed ^ 0x6E657477ull);
    return net;
}

void net_free(net_t *net) {
    size_t i;
    if (!net) return;
    for (i = 0; i < net->len; i++) free(net->heap[i].bytes);
    free(net->heap);
    free(net);
}

void net_set_path(net_t *net, int a, int b, path_t path) {
    net->paths[a][b] = path;
    net->paths[b][a] = path;
}

void net_add_spike(net_t *net, spike_t spike) {
    if (net->spike_count < MAX_SPIKES) net->spikes[net->spike_count++] = spike;
}

static int earlier(const datagram_t *a, const datagram_t *b) {
    return a->arrives_us < b->arrives_us || (a->arrives_us == b->arrives_us && a->order < b->order);
}

static void sift_up(net_t *net, size_t i) {
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        datagram_t tmp;
        if (!earlier(&net->heap[i], &net->heap[parent])) break;
        tmp = net->heap[i];
        net->heap[i] = net->heap[parent];
        net->heap[parent] = tmp;
        i = parent;
    }
}

static void sift_down(net_t *net, size_t i) {
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        datagram_t tmp;
        if (l < net->len && earlier(&net->heap[l], &net->heap[m])) m = l;
        if (r < net->len && earlier(&net->heap[r], &net->heap[m])) m = r;
        if (m == i) break;
        tmp = net->heap[i];
        net->heap[i] = net->heap[m];
        net->heap[m] = tmp;
        i = m;
    }
}

void net_send(net_t *net, uint64_t now_us, int from, int to, const uint8_t *bytes, size_t len) {
    const path_t *p = &net->paths[from][to];
    uint64_t one_way_us = (uint64_t)p->rtt_ms * 500;
    datagram_t d;
    int i;
    net->sent++;
    for (i = 0; i < net->spike_count; i++) {
        const spike_t *s = &net->spikes[i];
        if (now_us >= s->start_us && now_us < s->end_us && (uint64_t)s->rtt_ms * 500 > one_way_us)
            one_way_us = (uint64_t)s->rtt_ms * 500;
    }
    if (rng_chance(&net->rng, p->loss_ppm)) return;
    if (p->jitter_ms) one_way_us += rng_below(&net->rng, p->jitter_ms * 1000 + 1);
    if (net->len == net->cap) {
        size_t cap = net->cap ? net->cap * 2 : 1024;
        datagram_t *grown = realloc(net->heap, cap * sizeof *grown);
        if (!grown) abort();
        net->heap = grown;
        net->cap = cap;
    }
    d.arrives_us = now_us + one_way_us;
    d.order = net->sent;
    d.from = from;
    d.to = to;
    d.len = (uint16_t)len;
    d.bytes = malloc(len ? len : 1);
    if (!d.bytes) abort();
    memcpy(d.bytes, bytes, len);
    net->heap[net->len++] = d;
    sift_up(net, net->len - 1);
}

size_t net_receive(net_t *net, uint64_t now_us, int *from, int *to, uint8_t *buf, size_t cap) {
    datagram_t d;
    size_t len;
    if (net->len == 0 || net->heap[0].arrives_us > now_us) return 0;
    d = net->heap[0];
    net->heap[0] = net->heap[--net->len];
    sift_down(net, 0);
    len = d.len < cap ? d.len : cap;
    memcpy(buf, d.bytes, len);
    free(d.bytes);
    *from = d.from;
    *to = d.to;
    return len;
}

uint64_t net_datagrams(const net_t *net) {
    return net->sent;
}
