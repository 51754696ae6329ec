/* tsmodel — the Tiberian Sun-shaped engine model (docs/ts-integration.md).
 *
 *   tsmodel [--games G] [--frames N] [--seed S] [--figures] [--short]
 *           [--verbose] [--mod PATH]
 *   tsmodel --scenario K [--mode M] [--seed S]   one figures game, told as it goes
 *   tsmodel --game N [--mode M] [--seed S]       one seeded game, told as it goes
 *
 * Modes: 0 vanilla RA, 1 vanilla protocol 0, 2 rungs adaptive, 3 rungs
 * tracking. Scenarios: 0 LAN, 1 100 ms, 2 250 ms + jitter + loss, 3 a spike,
 * 4 eight houses on mixed links.
 *
 * Plays seeded games of several machines in one process over a simulated
 * network (loss, jitter that reorders, spikes) driven by a simulated clock,
 * each machine with its own 60 Hz tick timer. Vanilla games run the game's
 * own timing (Red Alert's rule, or the spawner's protocol 0); rungs games
 * load the mod (mod.c; tsmod.dll on Windows) into every machine. The game
 * state is a running checksum of executed events, compared between machines
 * frame by frame.
 *
 * --games G (default 200) plays G seeded games with loss, reordering,
 * spikes, quits, crashes and bad input, in each vanilla mode and in rungs
 * mode (adaptive and tracking alternating). --figures plays the five
 * scenarios of the figures table for the four modes. The last line is
 *     ts-model: G games, D desyncs, L too late
 * for rungs mode, and the exit status is 1 if rungs mode desynced, found a
 * packet too late, hung, a rungs call failed or the game failed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "game.h"

#if defined(_WIN32)
#define WIN32_LEAN_AND_MEAN
#include <windows.h>
#endif

#define MAX_ORDERS 8192

typedef struct order {
    uint64_t issued_us, last_exec_us;
    uint8_t execs;
} order_t;

typedef struct driver {
    order_t *orders; /* [house][count] */
} driver_t;

static void on_order_issued(void *user, int machine, uint32_t serial, uint64_t now_us) {
    driver_t *d = user;
    uint32_t house = serial >> 24, count = serial & 0xFFFFFFu;
    (void)machine;
    if (house < MAX_HOUSES && count < MAX_ORDERS) d->orders[house * MAX_ORDERS + count].issued_us = now_us;
}

static void on_order_executed(void *user, int machine, uint32_t serial, uint64_t now_us) {
    driver_t *d = user;
    uint32_t house = serial >> 24, count = serial & 0xFFFFFFu;
    order_t *o;
    (void)machine;
    if (house >= MAX_HOUSES || count >= MAX_ORDERS) return;
    o = &d->orders[house * MAX_ORDERS + count];
    o->execs++;
    if (now_us > o->last_exec_us) o->last_exec_us = now_us;
}

/* ---- scenarios ---- */

typedef struct scenario {
    char name[48];
    int humans, ais, observer;
    uint32_t rtt_ms[MAX_MACHINES]; /* per machine; a path has the mean of its two ends */
    uint32_t jitter_ms, loss_ppm;
    uint32_t spike_rtt_ms, spike_start_ms, spike_ms;
    uint32_t frames;
    uint32_t work_us[MAX_MACHINES];
    int crash_machine[2];
    uint32_t crash_ms[2];
    int quit_machine;
    uint32_t quit_frame;
    int quit_closes; /* the quitter's game closes once its removal ran: unacknowledged packets are lost */
    int bad_input;
} scenario_t;

static void scenario_base(scenario_t *s, const char *name, int humans, uint32_t rtt_ms, uint32_t frames) {
    int i;
    memset(s, 0, sizeof *s);
    snprintf(s->name, sizeof s->name, "%s", name);
    s->humans = humans;
    s->frames = frames;
    for (i = 0; i < MAX_MACHINES; i++) {
        s->rtt_ms[i] = rtt_ms;
        s->work_us[i] = 5000;
    }
    s->crash_machine[0] = s->crash_machine[1] = -1;
    s->quit_machine = -1;
}

/* The figures table's five networks. */
static int figure_scenario(int which, uint32_t frames, scenario_t *s) {
    switch (which) {
    case 0:
        scenario_base(s, "LAN", 4, 2, frames);
        return 1;
    case 1:
        scenario_base(s, "100 ms", 4, 100, frames);
        return 1;
    case 2:
        scenario_base(s, "250 ms, 40 ms jitter, 2 % loss", 4, 250, frames);
        s->jitter_ms = 40;
        s->loss_ppm = 20000;
        return 1;
    case 3:
        scenario_base(s, "800 ms spike for 5 s", 4, 100, frames);
        s->spike_rtt_ms = 800;
        s->spike_start_ms = frames * 1000 / 60 / 3;
        s->spike_ms = 5000;
        return 1;
    case 4: {
        static const uint32_t rtt[6] = {20, 60, 90, 150, 200, 300};
        int i;
        scenario_base(s, "8 houses, mixed links", 6, 0, frames);
        s->ais = 1;
        s->observer = 1;
        for (i = 0; i < 6; i++) s->rtt_ms[i] = rtt[i];
        s->rtt_ms[6] = 40; /* the observer */
        s->work_us[2] = 18000; /* one slow machine */
        return 1;
    }
    default:
        return 0;
    }
}

/* A seeded game with faults: loss, reordering, spikes, quits, crashes, bad input. */
static void random_scenario(uint64_t seed, uint32_t frames, scenario_t *s) {
    rng_t r;
    int i;
    rng_seed(&r, seed * 7919 + 17);
    scenario_base(s, "seeded", 2 + (int)rng_below(&r, 5), 0, frames);
    snprintf(s->name, sizeof s->name, "seeded %llu", (unsigned long long)seed);
    s->ais = (int)rng_below(&r, 3);
    s->observer = rng_below(&r, 2) == 0;
    for (i = 0; i < MAX_MACHINES; i++) {
        s->rtt_ms[i] = 5 + rng_below(&r, 300);
        s->work_us[i] = 2000 + rng_below(&r, 9000);
    }
    s->jitter_ms = rng_below(&r, 60);
    s->loss_ppm = rng_below(&r, 30001);
    if (rng_below(&r, 10) < 4) {
        s->spike_rtt_ms = 400 + rng_below(&r, 1100);
        s->spike_start_ms = 3000 + rng_below(&r, frames * 1000 / 60 / 2);
        s->spike_ms = 1000 + rng_below(&r, 5000);
    }
    if (s->humans > 2 && rng_below(&r, 10) < 4) {
        s->quit_machine = (int)rng_below(&r, (uint32_t)s->humans);
        s->quit_frame = 200 + rng_below(&r, frames / 2);
        /* Half the quitters close their game at once (without a draw, so
         * the other faults stay as they were). */
        s->quit_closes = (int)(seed & 1);
    }
    if (s->humans > 2 && rng_below(&r, 10) < 4) {
        s->crash_machine[0] = (int)rng_below(&r, (uint32_t)s->humans);
        s->crash_ms[0] = 2000 + rng_below(&r, frames * 1000 / 60 / 2);
        if (s->humans > 3 && rng_below(&r, 3) == 0) {
            s->crash_machine[1] = (s->crash_machine[0] + 1) % s->humans;
            s->crash_ms[1] = s->crash_ms[0] + rng_below(&r, 1500);
        }
    }
    s->bad_input = rng_below(&r, 5) == 0;
}

/* ---- one game ---- */

typedef struct result {
    int desync;
    uint32_t desync_frame;
    uint32_t too_late;
    int hung;
    uint32_t mod_errors; /* rungs calls that failed (tsmod_errors) */
    uint32_t failures;   /* the game's own (machine_report_t) */
    uint32_t refused[REFUSAL_COUNT];
    uint64_t latency_sum_us;
    uint32_t latency_count;
    uint32_t stalled_frames; /* summed over machines */
    uint64_t stall_us;
    uint32_t machines;
    uint32_t final_fps, final_send_rate, final_max_ahead;
} result_t;

static tsmod_init_fn mod_entry;
typedef uint32_t(TSMOD_CALL *tsmod_errors_fn)(void);
static tsmod_errors_fn mod_errors;

/* Garbage a modified or broken client might send: from a house that is not
 * the sender's, with an event ID the table lacks, cut inside an event. */
static void inject_bad_input(machine_t **machines, int humans, uint64_t now_us, uint32_t frame, int kind) {
    uint8_t packet[64];
    size_t len = 17;
    int target = (int)(frame % (uint32_t)humans), from = (target + 1) % humans;
    memset(packet, 0, sizeof packet);
    packet[0] = TS_EV_FRAMEINFO;
    packet[1] = (uint8_t)(frame + 40);
    packet[16] = 40;
    /* The sending machine's own house ID (little-endian). */
    packet[6] = (uint8_t)machine_house_id(machines[from]);
    switch (kind) {
    case 0: /* an unknown house */
        packet[6] = 99;
        break;
    case 1: /* an event ID past the table, and past the mod's */
        packet[len++] = 0; /* the mod's packet number bytes, when a mod runs */
        packet[len++] = 0;
        packet[len++] = 0;
        packet[len++] = 0;
        packet[len++] = 200;
        break;
    default: /* a MEGAMISSION cut short */
        packet[len++] = 0;
        packet[len++] = 0;
        packet[len++] = 0;
        packet[len++] = 0;
        packet[len++] = TS_EV_MEGAMISSION;
        packet[len++] = 1;
        break;
    }
    machine_inject(machines[target], now_us, from, packet, len);
}

static void play(const scenario_t *sc, enum mode mode, uint64_t seed, int verbose, result_t *out) {
    game_setup_t setup;
    machine_t *machines[MAX_MACHINES];
    driver_t driver;
    net_t *net;
    int count, i, j, h, pos, crashed[2] = {0, 0}, quit_done = 0;
    uint64_t now_us, end_us;
    rng_t r;
    uint8_t buf[MAX_PACKET + 16];
    uint32_t frame;

    uint32_t errors_before = mod_errors ? mod_errors() : 0;
    memset(out, 0, sizeof *out);
    memset(&setup, 0, sizeof setup);
    driver.orders = calloc((size_t)MAX_HOUSES * MAX_ORDERS, sizeof *driver.orders);
    if (!driver.orders) abort();
    rng_seed(&r, seed ^ 0x686F7573ull);
    count = sc->humans + sc->observer;
    net = net_new(count, seed);
    /* Houses in house order: humans and AI interleaved, the observer among
     * them; heap IDs from 1 (0 is a house of the map), so a house's ID is
     * not its seat. */
    setup.house_count = sc->humans + sc->ais + sc->observer;
    {
        int kinds[MAX_HOUSES], n = 0, machine = 0;
        for (i = 0; i < sc->humans; i++) kinds[n++] = TS_HOUSE_HUMAN;
        for (i = 0; i < sc->ais; i++) kinds[n++] = TS_HOUSE_AI;
        if (sc->observer) kinds[n++] = TS_HOUSE_OBSERVER;
        for (i = n - 1; i > 0; i--) {
            int k = (int)rng_below(&r, (uint32_t)i + 1), t = kinds[i];
            kinds[i] = kinds[k];
            kinds[k] = t;
        }
        for (h = 0; h < n; h++) {
            setup.houses[h].id = h + 1;
            setup.houses[h].kind = (uint8_t)kinds[h];
            setup.house_machine[h] = -1;
        }
        /* Machines: the humans in house order, then the observer. */
        for (h = 0; h < n; h++)
            if (kinds[h] == TS_HOUSE_HUMAN) setup.house_machine[h] = machine++;
        for (h = 0; h < n; h++)
            if (kinds[h] == TS_HOUSE_OBSERVER) setup.house_machine[h] = machine++;
    }
    for (i = 0; i < count; i++)
        for (j = i + 1; j < count; j++) {
            path_t p;
            p.rtt_ms = (sc->rtt_ms[i] + sc->rtt_ms[j]) / 2;
            p.jitter_ms = sc->jitter_ms;
            p.loss_ppm = sc->loss_ppm;
            net_set_path(net, i, j, p);
        }
    if (sc->spike_ms) {
        spike_t s;
        s.rtt_ms = sc->spike_rtt_ms;
        s.start_us = (uint64_t)sc->spike_start_ms * 1000;
        s.end_us = s.start_us + (uint64_t)sc->spike_ms * 1000;
        net_add_spike(net, s);
    }
    setup.mode = mode;
    setup.machines = count;
    setup.speed_fps = 60;
    setup.frames = sc->frames;
    setup.seed = seed;
    setup.net = net;
    setup.order_issued = on_order_issued;
    setup.order_executed = on_order_executed;
    setup.driver = &driver;
    setup.verbose = verbose;
    if (mode == MODE_RUNGS_ADAPTIVE || mode == MODE_RUNGS_TRACKING) {
        setup.mod_init = mod_entry;
        setup.mod_settings = mode == MODE_RUNGS_TRACKING ? (verbose ? "policy=tracking verbose" : "policy=tracking")
                                                          : (verbose ? "policy=adaptive verbose" : "policy=adaptive");
    }
    for (i = 0; i < count; i++) {
        machines[i] = machine_new(&setup, i, sc->work_us[i], 50000);
        if (!machines[i]) abort();
    }

    /* The clock: one ms a step; a game may take three times its length
     * plus two minutes (a vanilla game waits 40 s for a vanished player). */
    end_us = (uint64_t)sc->frames * 1000000u / 60 * 3 + 120000000u;
    for (now_us = 0; now_us < end_us; now_us += 1000) {
        int from, to, running = 0;
        size_t len;
        while ((len = net_receive(net, now_us, &from, &to, buf, sizeof buf)) > 0)
            machine_datagram(machines[to], now_us, from, buf, len);
        for (i = 0; i < count; i++) machine_step(machines[i], now_us);
        for (i = 0; i < 2; i++)
            if (sc->crash_machine[i] >= 0 && !crashed[i] && now_us >= (uint64_t)sc->crash_ms[i] * 1000) {
                machine_crash(machines[sc->crash_machine[i]]);
                crashed[i] = 1;
            }
        if (sc->quit_machine >= 0 && !quit_done && machine_frame(machines[sc->quit_machine]) >= sc->quit_frame) {
            machine_quit(machines[sc->quit_machine]);
            quit_done = 1;
        }
        /* A quitter whose game closes: once it has stopped (its REMOVEPLAYER
         * ran), its connections go too, with whatever was unacknowledged. */
        if (quit_done && sc->quit_closes && !machine_alive(machines[sc->quit_machine]) &&
            !machine_crashed(machines[sc->quit_machine]))
            machine_crash(machines[sc->quit_machine]);
        if (sc->bad_input && now_us % 997000 == 0 && now_us > 0) {
            frame = machine_frame(machines[0]);
            inject_bad_input(machines, sc->humans, now_us, frame, (int)((now_us / 997000) % 3));
        }
        for (i = 0; i < count; i++) running += machine_alive(machines[i]);
        if (!running) break;
    }

    /* Results. */
    out->machines = (uint32_t)count;
    for (i = 0; i < count; i++) {
        machine_report_t rep = machine_report(machines[i]);
        int k;
        out->too_late += rep.too_late;
        out->failures += rep.failures;
        out->stalled_frames += rep.stalled_frames;
        out->stall_us += rep.stall_us;
        for (k = 0; k < REFUSAL_COUNT; k++) out->refused[k] += rep.refused[k];
        /* A machine that neither finished, crashed, quit nor stopped on a
         * late packet is hung. */
        if (machine_alive(machines[i])) out->hung = 1;
    }
    out->final_fps = machine_fps(machines[0]);
    machine_timing(machines[0], &out->final_send_rate, &out->final_max_ahead);
    /* Checksums, frame by frame, between every machine that reached it. A
     * crashed machine may have run on with packets of a vanished player
     * (itself, or another that vanished with only it holding them) past
     * the cut the survivors agreed: it counts up to the first frame on which
     * any machine removed any crashed player. */
    {
        uint32_t until[MAX_MACHINES], first_cut = UINT32_MAX;
        for (i = 0; i < count; i++) {
            if (!machine_crashed(machines[i])) continue;
            for (j = 0; j < count; j++) {
                uint32_t on = j == i ? 0 : machine_removed_on(machines[j], machine_house_id(machines[i]));
                if (on && on - 1 < first_cut) first_cut = on - 1;
            }
        }
        for (i = 0; i < count; i++) until[i] = machine_crashed(machines[i]) ? first_cut : UINT32_MAX;
    for (frame = 0; frame <= sc->frames && !out->desync; frame++) {
        uint32_t first = 0, crc;
        int have = 0;
        for (i = 0; i < count; i++) {
            if (frame >= until[i] || !machine_checksum(machines[i], frame, &crc)) continue;
            if (have && crc != first) {
                out->desync = 1;
                out->desync_frame = frame;
                break;
            }
            first = crc;
            have = 1;
        }
    }
    }
    for (pos = 0; pos < MAX_HOUSES * MAX_ORDERS; pos++) {
        const order_t *o = &driver.orders[pos];
        if (o->execs == 0 || o->last_exec_us < o->issued_us) continue;
        out->latency_sum_us += o->last_exec_us - o->issued_us;
        out->latency_count++;
    }
    if (verbose && out->desync)
        for (frame = out->desync_frame > 3 ? out->desync_frame - 3 : 0; frame <= out->desync_frame + 1; frame++) {
            printf("  frame %u:", (unsigned)frame);
            for (i = 0; i < count; i++) {
                uint32_t crc = 0;
                if (machine_checksum(machines[i], frame, &crc)) printf(" %08x", (unsigned)crc); else printf(" --------");
            }
            printf("\n");
        }
    if (verbose)
        for (i = 0; i < count; i++) {
            machine_report_t rep = machine_report(machines[i]);
            printf("  machine %d (house %d): frame %u, %s, %u stalled frames\n", i, machine_house_id(machines[i]),
                   (unsigned)machine_frame(machines[i]), machine_alive(machines[i]) ? "still running" : "stopped",
                   (unsigned)rep.stalled_frames);
        }
    for (i = 0; i < count; i++) machine_free(machines[i]);
    if (mod_errors) out->mod_errors += mod_errors() - errors_before;
    net_free(net);
    free(driver.orders);
}

static const char *const mode_names[MODE_COUNT] = {"vanilla RA", "vanilla protocol 0", "rungs adaptive",
                                                   "rungs tracking"};

/* ---- the figures table ---- */

static void figures(uint32_t frames, int seeds, uint64_t seed) {
    int which, mode, k;
    scenario_t sc;
    printf("Figures: %d seeded games per cell, %u frames at up to 60 fps each\n", seeds, (unsigned)frames);
    printf("| network | rule | mean command latency | stalled frames | stall time | fatal lates | desyncs |\n");
    printf("|---|---|---:|---:|---:|---:|---:|\n");
    for (which = 0; figure_scenario(which, frames, &sc); which++) {
        for (mode = 0; mode < MODE_COUNT; mode++) {
            uint64_t latency = 0, stall_us = 0;
            uint32_t latency_n = 0, stalled = 0, machines = 0, late = 0, desyncs = 0;
            for (k = 0; k < seeds; k++) {
                result_t res;
                play(&sc, (enum mode)mode, seed + (uint64_t)k, 0, &res);
                latency += res.latency_sum_us;
                latency_n += res.latency_count;
                stalled += res.stalled_frames;
                stall_us += res.stall_us;
                machines += res.machines;
                late += res.too_late;
                desyncs += (uint32_t)res.desync;
            }
            printf("| %s | %s | %u ms | %.0f | %.1f s | %u | %u |\n", sc.name, mode_names[mode],
                   latency_n ? (unsigned)(latency / latency_n / 1000) : 0u,
                   machines ? (double)stalled / machines : 0.0, machines ? (double)stall_us / 1e6 / machines : 0.0,
                   (unsigned)late, (unsigned)desyncs);
            fflush(stdout);
        }
    }
    printf("(stalled frames and stall time: per machine and game; fatal lates and desyncs: summed over the games)\n\n");
}

/* ---- the seeded games ---- */

typedef struct tally {
    uint32_t games, desyncs, too_late, hung, errors, crashes, quits, spikes, bad;
    uint32_t refused[REFUSAL_COUNT];
} tally_t;

static void seeded(int games, uint32_t frames, uint64_t seed, int verbose, tally_t tallies[MODE_COUNT]) {
    int g;
    for (g = 0; g < games; g++) {
        scenario_t sc;
        enum mode modes[3];
        int k;
        random_scenario(seed + (uint64_t)g, frames, &sc);
        modes[0] = MODE_VANILLA_RA;
        modes[1] = MODE_VANILLA_P0;
        modes[2] = g % 2 ? MODE_RUNGS_TRACKING : MODE_RUNGS_ADAPTIVE;
        for (k = 0; k < 3; k++) {
            result_t res;
            tally_t *t = &tallies[modes[k]];
            int r;
            play(&sc, modes[k], seed + (uint64_t)g, 0, &res);
            t->games++;
            t->desyncs += (uint32_t)res.desync;
            t->too_late += res.too_late;
            t->hung += (uint32_t)res.hung;
            t->errors += res.mod_errors + res.failures;
            for (r = 0; r < REFUSAL_COUNT; r++) t->refused[r] += res.refused[r];
            t->crashes += (uint32_t)(sc.crash_machine[0] >= 0) + (uint32_t)(sc.crash_machine[1] >= 0);
            t->quits += (uint32_t)(sc.quit_machine >= 0);
            t->spikes += (uint32_t)(sc.spike_ms > 0);
            t->bad += (uint32_t)sc.bad_input;
            if ((verbose || res.desync || res.hung || res.too_late || res.mod_errors || res.failures) &&
                (k == 2 || verbose))
                printf("  game %d (%s, %d humans, %d AI, observer %d, loss %u ppm, jitter %u ms): %s%s%s%s"
                       " (desync frame %u, late %u, errors %u)\n",
                       g, mode_names[modes[k]], sc.humans, sc.ais, sc.observer, (unsigned)sc.loss_ppm,
                       (unsigned)sc.jitter_ms, res.desync ? "DESYNC " : "", res.hung ? "HUNG " : "",
                       res.too_late ? "TOO LATE " : "", res.mod_errors ? "ERRORS" : "ok",
                       (unsigned)res.desync_frame, (unsigned)res.too_late, (unsigned)res.mod_errors);
        }
    }
}

#if defined(_WIN32)
/* As an injector does: LoadLibrary, then GetProcAddress. */
static tsmod_init_fn load_mod(const char *path) {
    HMODULE mod = LoadLibraryA(path);
    if (!mod) {
        fprintf(stderr, "tsmodel: cannot load %s (error %lu)\n", path, (unsigned long)GetLastError());
        return NULL;
    }
    mod_errors = (tsmod_errors_fn)(void (*)(void))GetProcAddress(mod, "tsmod_errors");
    return (tsmod_init_fn)(void (*)(void))GetProcAddress(mod, "tsmod_init");
}
#else
/* Linked into the model here. */
int TSMOD_CALL tsmod_init(const ts_game *game, ts_hooks *hooks);
uint32_t TSMOD_CALL tsmod_errors(void);
static tsmod_init_fn load_mod(const char *path) {
    (void)path;
    mod_errors = tsmod_errors;
    return tsmod_init;
}
#endif

/* One game, told as it goes (--scenario N --mode M). */
static int one_game(int which, int mode, uint32_t frames, uint64_t seed, int seeded_game) {
    scenario_t sc;
    result_t res;
    int r;
    if (seeded_game >= 0) {
        random_scenario(seed + (uint64_t)seeded_game, frames, &sc);
        seed += (uint64_t)seeded_game;
        printf("  %d humans, %d AI, observer %d, loss %u ppm, jitter %u ms, spike %u ms at %u ms for %u ms,"
               " quit %d@%u, crash %d@%u ms %d@%u ms, bad input %d\n",
               sc.humans, sc.ais, sc.observer, (unsigned)sc.loss_ppm, (unsigned)sc.jitter_ms,
               (unsigned)sc.spike_rtt_ms, (unsigned)sc.spike_start_ms, (unsigned)sc.spike_ms, sc.quit_machine,
               (unsigned)sc.quit_frame, sc.crash_machine[0], (unsigned)sc.crash_ms[0], sc.crash_machine[1],
               (unsigned)sc.crash_ms[1], sc.bad_input);
    } else if (!figure_scenario(which, frames, &sc)) {
        which = -1;
    }
    if (which < 0 || mode < 0 || mode >= MODE_COUNT) {
        fprintf(stderr, "tsmodel: no scenario %d or mode %d\n", which, mode);
        return 2;
    }
    printf("%s, %s, seed %llu:\n", sc.name, mode_names[mode], (unsigned long long)seed);
    play(&sc, (enum mode)mode, seed, 1, &res);
    printf("  latency %u ms over %u orders, %.1f stalled frames per machine (%.1f s), %u too late, %s,"
           " ends at %u/%u and %u fps\n",
           res.latency_count ? (unsigned)(res.latency_sum_us / res.latency_count / 1000) : 0u,
           (unsigned)res.latency_count, (double)res.stalled_frames / res.machines,
           (double)res.stall_us / 1e6 / res.machines, (unsigned)res.too_late,
           res.desync ? "DESYNC" : "in step", (unsigned)res.final_send_rate, (unsigned)res.final_max_ahead,
           (unsigned)res.final_fps);
    for (r = 0; r < REFUSAL_COUNT; r++)
        if (res.refused[r]) printf("  refused: %u %s\n", (unsigned)res.refused[r], refusal_names[r]);
    if (res.hung) printf("  HUNG\n");
    return res.desync || res.hung ? 1 : 0;
}

int main(int argc, char **argv) {
    int games = 200, do_figures = 0, verbose = 0, i, r, seeds = 3, scenario = -1, mode = 2, game = -1;
    uint32_t frames = 1800, figure_frames = 3600;
    uint64_t seed = 1;
    const char *mod_path = "tsmod.dll";
    tally_t tallies[MODE_COUNT];
    for (i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--games") && i + 1 < argc)
            games = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--frames") && i + 1 < argc)
            frames = (uint32_t)atoi(argv[++i]);
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc)
            seed = (uint64_t)atoll(argv[++i]);
        else if (!strcmp(argv[i], "--figures"))
            do_figures = 1;
        else if (!strcmp(argv[i], "--short")) {
            frames = 900;
            figure_frames = 1800;
            seeds = 1;
        } else if (!strcmp(argv[i], "--mod") && i + 1 < argc)
            mod_path = argv[++i];
        else if (!strcmp(argv[i], "--verbose"))
            verbose = 1;
        else if (!strcmp(argv[i], "--scenario") && i + 1 < argc)
            scenario = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--mode") && i + 1 < argc)
            mode = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--game") && i + 1 < argc)
            game = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: tsmodel [--games G] [--frames N] [--seed S] [--figures] [--short] [--verbose]"
                            " [--mod PATH] [--scenario K | --game N] [--mode M]\n");
            return 2;
        }
    }
    if (frames > MAX_GAME_FRAMES || figure_frames > MAX_GAME_FRAMES) {
        fprintf(stderr, "tsmodel: at most %d frames\n", MAX_GAME_FRAMES);
        return 2;
    }
    mod_entry = load_mod(mod_path);
    if (!mod_entry) {
        fprintf(stderr, "tsmodel: no tsmod_init in %s\n", mod_path);
        return 2;
    }
    if (scenario >= 0) return one_game(scenario, mode, figure_frames, seed, -1);
    if (game >= 0) return one_game(0, mode, frames, seed, game);
    if (do_figures) figures(figure_frames, seeds, seed);
    memset(tallies, 0, sizeof tallies);
    seeded(games, frames, seed, verbose, tallies);
    printf("Seeded games (%u frames each, loss, reordering, spikes, quits, crashes, bad input):\n",
           (unsigned)frames);
    for (r = 0; r < MODE_COUNT; r++) {
        const tally_t *t = &tallies[r];
        if (!t->games) continue;
        int k;
        printf("  %-20s %4u games: %3u desyncs, %3u too late, %3u hung, %u errors"
               " (%u crashes, %u quits, %u spikes, %u with bad input)\n",
               mode_names[r], (unsigned)t->games, (unsigned)t->desyncs, (unsigned)t->too_late,
               (unsigned)t->hung, (unsigned)t->errors, (unsigned)t->crashes,
               (unsigned)t->quits, (unsigned)t->spikes, (unsigned)t->bad);
        printf("  %-20s packets refused:", "");
        for (k = 0; k < REFUSAL_COUNT; k++)
            printf("%s %u %s", k ? "," : "", (unsigned)t->refused[k], refusal_names[k]);
        printf("\n");
    }
    {
        tally_t rungs;
        memset(&rungs, 0, sizeof rungs);
        for (r = MODE_RUNGS_ADAPTIVE; r <= MODE_RUNGS_TRACKING; r++) {
            rungs.games += tallies[r].games;
            rungs.desyncs += tallies[r].desyncs;
            rungs.too_late += tallies[r].too_late;
            rungs.hung += tallies[r].hung;
            rungs.errors += tallies[r].errors;
        }
        printf("ts-model: %u games, %u desyncs, %u too late\n", (unsigned)rungs.games, (unsigned)rungs.desyncs,
               (unsigned)rungs.too_late);
        return rungs.desyncs || rungs.too_late || rungs.hung || rungs.errors ? 1 : 0;
    }
}
