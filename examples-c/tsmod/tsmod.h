/* tsmod.h — the seam between a game and an injected mod DLL.
 *
 * A loader injects tsmod.dll into the game's process and patches the game's
 * code to call the mod at a few places; this small example does the same
 * with a table of function pointers instead of patched call sites. The host
 * (game.c) plays the game: its own event IDs, its own OutList/DoList, its
 * own packets and its own frame loop. The mod (mod.c) adds rungs' adaptive
 * timing through rungs_session, linked statically into the mod.
 *
 * Both sides use cdecl explicitly (TSMOD_CALL), whatever the compilers'
 * defaults. All calls happen on the game's thread. */
#ifndef TSMOD_H
#define TSMOD_H

#include <stdint.h>

#if defined(_WIN32)
#define TSMOD_CALL __cdecl
#else
#define TSMOD_CALL
#endif

/* The game's own event IDs (Tiberian Sun's, and OpenTS's report). */
enum tsmod_event {
    TS_EV_ORDER = 1,           /* stands for the game's unit orders */
    TS_EV_TIMING = 31,         /* TIMING: u16 fps, u16 MaxAhead, u8 FrameSendRate */
    TS_EV_REMOVEPLAYER = 34,   /* data[0] = the house removed */
    TS_EV_LATENCYFUDGE = 35,   /* old recordings only; never sent with rungs */
    TS_EV_NETWORK_REPORT = 36, /* OpenTS NETWORK_REPORT */
};

/* What the game offers the mod: in a real injection, the game's own
 * functions at known addresses. `game` is passed back to each. */
typedef struct tsmod_game {
    uint32_t struct_size;
    void *game;
    /* Append an event to the house's OutList, as the game's code does. */
    void(TSMOD_CALL *queue_event)(void *game, uint8_t house, uint8_t type, const uint8_t *data,
                                  uint8_t len);
    /* Send the house's OutList now, its events to execute on frame `tag`. */
    void(TSMOD_CALL *send_out_list)(void *game, uint8_t house, uint32_t frame, uint32_t tag);
    /* Show a line on the house's screen. */
    void(TSMOD_CALL *print)(void *game, uint8_t house, const char *text);
} tsmod_game;

/* What the mod gives the game: one entry per hooked place. `house` is the
 * mod's state for one house, made by house_start. */
typedef struct tsmod_hooks {
    uint32_t struct_size;
    /* Game start: the mod's state for the house this machine plays. */
    void *(TSMOD_CALL *house_start)(uint8_t house, uint8_t houses, uint8_t speed_fps);
    /* Top of the frame: nonzero if the frame executes events (the game's
     * "frame sync" check, replaced). */
    int(TSMOD_CALL *frame_begin)(void *house, uint32_t frame);
    /* Event execution: each event the game executes from its DoList. */
    void(TSMOD_CALL *event_executed)(void *house, uint8_t type, uint8_t from, uint32_t frame,
                                     const uint8_t *data, uint8_t len);
    /* End of the frame, with the µs its work took: the mod queues its
     * events and, on a send frame, calls send_out_list. */
    void(TSMOD_CALL *frame_end)(void *house, uint32_t work_us);
    /* Frame pacing: how long the next frame lasts, µs. */
    uint32_t(TSMOD_CALL *frame_period_us)(void *house);
    /* The game stops for missing packets (begin nonzero) or goes on. */
    void(TSMOD_CALL *wait)(void *house, int begin, uint64_t now_us);
    /* The game's own ping: a round trip to `peer`, ms. */
    void(TSMOD_CALL *rtt_sample)(void *house, uint8_t peer, uint32_t rtt_ms);
    /* Game over for the house. */
    void(TSMOD_CALL *house_end)(void *house);
    /* rungs calls that failed so far (each was printed). */
    uint32_t(TSMOD_CALL *errors)(void);
} tsmod_hooks;

/* The mod's one export, found with GetProcAddress(mod, "tsmod_init"). */
typedef int(TSMOD_CALL *tsmod_init_fn)(const tsmod_game *game, tsmod_hooks *hooks);

#endif
