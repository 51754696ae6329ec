/* game.h — the Tiberian Sun-shaped game of the model: one machine's engine
 * (engine.c), the unordered reliable transport and the simulated network
 * (net.c), and the seeded games that drive them (model.c). Internal to the
 * game; a mod sees only tsmod.h. */
#ifndef TSMODEL_GAME_H
#define TSMODEL_GAME_H

#include <stddef.h>
#include <stdint.h>

#include "tsmod.h"

#define MAX_MACHINES 10
#define MAX_HOUSES 10
#define OUT_LIST_MAX 128 /* Tiberian Sun's OutList holds 128 events */
#define DO_LIST_MAX 4096
#define MAX_PACKET 1500
#define MAX_GAME_FRAMES 12000
#define TICK_HZ 60

/* How a game chooses its timing. */
enum mode {
    MODE_VANILLA_RA = 0, /* protocol 2 with Red Alert's timing rule */
    MODE_VANILLA_P0 = 1, /* the community spawner's protocol 0 */
    MODE_RUNGS_ADAPTIVE = 2,
    MODE_RUNGS_TRACKING = 3,
    MODE_COUNT
};

/* Why a packet was refused on arrival (counted per machine). */
enum refusal {
    REFUSED_UNKNOWN_HOUSE = 0,   /* FRAMEINFO names a house that is not the sender's */
    REFUSED_UNREGISTERED_EVENT,  /* an event ID without a length in the table */
    REFUSED_TRUNCATED,           /* the compressed stream ends inside an event */
    REFUSED_BY_MOD,              /* the mod's checks (rungs refused the packet) */
    REFUSAL_COUNT
};
extern const char *const refusal_names[REFUSAL_COUNT];

/* ---- deterministic randomness ---- */
typedef struct rng {
    uint64_t state;
} rng_t;
void rng_seed(rng_t *r, uint64_t seed);
uint32_t rng_next(rng_t *r);
/* Uniform in [0, n). */
uint32_t rng_below(rng_t *r, uint32_t n);
/* 1 with probability ppm / 1e6. */
int rng_chance(rng_t *r, uint32_t ppm);

/* ---- the simulated network and the transport (net.c) ---- */
enum channel { CHANNEL_GAME = 0, CHANNEL_MOD = 1 };

typedef struct path {
    uint32_t rtt_ms;
    uint32_t jitter_ms; /* each direction adds uniform 0..jitter */
    uint32_t loss_ppm;
} path_t;

typedef struct spike {
    uint32_t rtt_ms; /* the round trip during the spike */
    uint64_t start_us, end_us;
} spike_t;

typedef struct net net_t;
net_t *net_new(int machines, uint64_t seed);
void net_free(net_t *net);
void net_set_path(net_t *net, int a, int b, path_t path);
void net_add_spike(net_t *net, spike_t spike);
/* A datagram from machine `from` to `to`, arriving after the path's delay
 * (or lost). */
void net_send(net_t *net, uint64_t now_us, int from, int to, const uint8_t *bytes, size_t len);
/* The next datagram due by `now_us`, copied into `buf`; its length, or 0. */
size_t net_receive(net_t *net, uint64_t now_us, int *from, int *to, uint8_t *buf, size_t cap);
uint64_t net_datagrams(const net_t *net);

/* One end of a reliable, unordered connection (Red Alert's
 * ConnectionClass): every message is numbered and resent, on its own, until
 * acknowledged, RetryDelta ticks after its last send; the receiver delivers
 * each message the first time it arrives, whatever its order. */
#define SEND_QUEUE_MAX 512
typedef struct send_entry {
    uint32_t id;
    uint8_t channel;
    uint16_t len;
    uint16_t sends;
    uint32_t first_tick, last_tick;
    uint8_t bytes[MAX_PACKET];
} send_entry_t;

typedef struct connection {
    int peer; /* machine index */
    int open;
    int leaving; /* its house left: nothing new is sent, resends go on until acknowledged */
    uint32_t next_id;
    send_entry_t *queue[SEND_QUEUE_MAX];
    int queued;
    /* Received message IDs: all below `received_below`, and the bitmap of
     * the 1024 after it. */
    uint32_t received_below;
    uint64_t received_bits[16];
    /* CommBufferClass's response time: the mean ack delay of game packets,
     * cumulative for 256 samples, then a 1/256 moving average. */
    uint32_t num_delay, delay_sum, mean_delay;
    uint32_t last_heard_tick;
} connection_t;

/* ---- one machine's game (engine.c) ---- */
typedef struct game_setup game_setup_t;
typedef struct machine machine_t;

/* What the driver (model.c) gets told. */
typedef struct machine_report {
    uint32_t frames_run;
    uint32_t stalled_frames;
    uint64_t stall_us;
    uint32_t too_late;
    uint32_t refused[REFUSAL_COUNT];
    /* The game's own failures: a full send queue or DoList, a Delay past one
     * byte, a mod that would not load. */
    uint32_t failures;
    int stopped; /* the game stopped here: too late, or a full DoList */
} machine_report_t;

struct game_setup {
    enum mode mode;
    int machines;
    int house_count;
    ts_house houses[MAX_HOUSES]; /* in house order; `local` unset here */
    int house_machine[MAX_HOUSES]; /* the machine playing each human or observer house; -1 for AI */
    uint32_t speed_fps;  /* the game speed's rate */
    uint32_t frames;     /* frames to play */
    uint64_t seed;
    net_t *net;
    /* The mod's entry point (NULL: vanilla) and its settings. */
    tsmod_init_fn mod_init;
    const char *mod_settings;
    /* Order tracking for command latency (model.c). */
    void (*order_issued)(void *driver, int machine, uint32_t serial, uint64_t now_us);
    void (*order_executed)(void *driver, int machine, uint32_t serial, uint64_t now_us);
    void *driver;
    int verbose;
};

machine_t *machine_new(const game_setup_t *setup, int index, uint32_t work_us, uint32_t order_ppm);
void machine_free(machine_t *m);
/* Advance the machine to `now_us`: receive, service its connections, run
 * its frame loop as far as its timer, its work and its peers allow. */
void machine_step(machine_t *m, uint64_t now_us);
/* A datagram for this machine. */
void machine_datagram(machine_t *m, uint64_t now_us, int from, const uint8_t *bytes, size_t len);
/* Fault injection: a crash (the machine stops at once), a quit (the player
 * asks for its removal, REMOVEPLAYER of its own house, and plays on until
 * it executes). */
void machine_crash(machine_t *m);
void machine_quit(machine_t *m);
/* Bad input: raw game-channel bytes as if from `from_machine` (the model's
 * tests of the receive path). */
void machine_inject(machine_t *m, uint64_t now_us, int from_machine, const uint8_t *bytes, size_t len);
int machine_alive(const machine_t *m);
int machine_crashed(const machine_t *m);
/* The frame on which this machine removed `house_id`'s house, + 1; 0 if it
 * did not. */
uint32_t machine_removed_on(const machine_t *m, int32_t house_id);
uint32_t machine_frame(const machine_t *m);
/* The running checksum after frame `frame` executed (0: not reached). */
int machine_checksum(const machine_t *m, uint32_t frame, uint32_t *out);
machine_report_t machine_report(const machine_t *m);
int machine_house(const machine_t *m);
int32_t machine_house_id(const machine_t *m);
uint32_t machine_fps(const machine_t *m);
/* The timing in force, for logs. */
void machine_timing(const machine_t *m, uint32_t *send_rate, uint32_t *max_ahead);

/* Order serials encode the house and a count: an order's identity. */
#define ORDER_SERIAL(house_index, count) (((uint32_t)(house_index) << 24) | ((count) & 0xFFFFFFu))

#endif
