/* tsmod.h — the seam between the Tiberian Sun-shaped game of this model and
 * a mod injected into it (docs/ts-integration.md).
 *
 * A loader injects a mod DLL into the game's process and patches the game's
 * code to call the mod at a few places. This model does the same with a
 * table of function pointers instead of patched call sites: the game
 * (engine.c) calls a hook where Tiberian Sun has the function a mod hooks,
 * and runs its own vanilla code where the hook is NULL. The game knows
 * nothing of rungs; the mod (mod.c, built as tsmod.dll on Windows) adds it.
 *
 * Everything here is the game's own shape, from the public reverse-engineered
 * Tiberian Sun headers (TSpp): 46-byte packed events with a one-byte type,
 * the frame, the executed flag, the house's heap ID and a 36-byte data
 * union; Tiberian Sun's event IDs; the Session globals a mod reads and
 * writes. Both sides use cdecl (TSMOD_CALL). All calls happen on the game's
 * thread. */
#ifndef TSMOD_H
#define TSMOD_H

#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32)
#define TSMOD_CALL __cdecl
#else
#define TSMOD_CALL
#endif

/* Tiberian Sun's event IDs (EventType, one byte). */
enum ts_event_type {
    TS_EV_EMPTY = 0,
    TS_EV_MEGAMISSION = 4, /* a unit order: stands for every player order here */
    TS_EV_FRAMESYNC = 24,
    TS_EV_RESPONSE_TIME = 26,
    TS_EV_FRAMEINFO = 27,
    TS_EV_TIMING = 31,       /* Data.Timing: u16 DesiredFrameRate, u16 MaxAhead, u8 FrameSendRate */
    TS_EV_PROCESS_TIME = 32, /* Data.ProcessTime: u16 AverageTicks */
    TS_EV_REMOVEPLAYER = 34, /* Data.General.Value: the heap ID of the house removed */
    TS_EV_LATENCYFUDGE = 35,
    TS_EV_COUNT = 36,          /* vanilla's EventLength table covers 0-35 */
    TS_EV_RESPONSE_TIME_2 = 36 /* the community spawner's protocol 0 event (MaxAhead u8, level u8) */
};

#define TS_EVENT_SIZE 46
#define TS_EVENT_DATA 36

/* EventClass: 46 bytes, packed. */
#if defined(_MSC_VER)
#pragma pack(push, 1)
#define TS_PACKED
#else
#define TS_PACKED __attribute__((packed))
#endif
typedef struct TS_PACKED ts_event {
    uint8_t type;        /* @0 */
    uint32_t frame;      /* @1: the frame it executes on */
    uint8_t is_executed; /* @5 */
    int32_t id;          /* @6: the sending house's heap ID */
    uint8_t data[TS_EVENT_DATA];
} ts_event;
#if defined(_MSC_VER)
#pragma pack(pop)
#endif
typedef char ts_event_is_46_bytes[sizeof(ts_event) == TS_EVENT_SIZE ? 1 : -1];

/* Multi-byte fields of packets and events are little-endian (x86). */
static inline void ts_put_u32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

static inline uint32_t ts_get_u32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* FRAMEINFO's data (the header of every packet, CRC u32, CommandCount u16,
 * Delay u8): the packet's events execute on `frame` (the event's Frame), sent
 * on frame `frame - delay`. */
typedef struct ts_frameinfo {
    uint32_t frame;
    int32_t id;
    uint32_t crc;
    uint16_t command_count;
    uint8_t delay;
} ts_frameinfo;

/* The Session globals the network code reads (Session.MaxAhead, ...). */
typedef struct ts_session {
    uint32_t max_ahead;
    uint32_t frame_send_rate;
    uint32_t desired_frame_rate; /* the frame timer waits 60 / this whole ticks */
} ts_session;

/* A house of the multiplayer game, in house order. Its heap ID is not its
 * index: the heap holds other houses too. */
enum ts_house_kind { TS_HOUSE_HUMAN = 0, TS_HOUSE_AI = 1, TS_HOUSE_OBSERVER = 2 };
typedef struct ts_house {
    int32_t id;
    uint8_t kind;
    uint8_t local; /* this machine's player */
} ts_house;

/* What the game offers a mod (in a real injection: the game's own functions
 * and globals at known addresses). `game` is passed back to each. */
typedef struct ts_game {
    uint32_t struct_size;
    void *game;
    ts_session *session;
    const ts_house *houses;
    uint8_t house_count;
    /* Entries of the game's EventLength table as it runs, mods included:
     * the first ID free for a new event. */
    uint8_t event_count;
    /* OutList.Add: queue an event from this machine's house. 0 if full. */
    int(TSMOD_CALL *out_list_add)(void *game, const ts_event *event);
    /* Add a packet's events (from Extract_Compressed_Events) to the DoList. */
    void(TSMOD_CALL *do_list_add)(void *game, const ts_event *events, int count);
    /* Process_Receive_Packet for raw packet bytes that came some other way
     * (a relay): parsed and handed to the receive hook as if from `house_id`.
     * 0 if the game refused them. */
    int(TSMOD_CALL *receive_raw)(void *game, int32_t house_id, const uint8_t *bytes, size_t len);
    /* Send bytes of the mod's own over the connection to `house_id`
     * (reliably, unordered), or to every connection (-1). */
    void(TSMOD_CALL *send_private)(void *game, int32_t house_id, const uint8_t *bytes, size_t len);
    /* MessageListClass::Add_Message. */
    void(TSMOD_CALL *add_message)(void *game, const char *text);
    /* The 60 Hz TickCount, and a µs clock (QueryPerformanceCounter). */
    uint32_t(TSMOD_CALL *tick_count)(void *game);
    uint64_t(TSMOD_CALL *now_us)(void *game);
    /* Ticks since anything arrived from `house_id`'s machine. */
    uint32_t(TSMOD_CALL *silent_ticks)(void *game, int32_t house_id);
    /* The mod's settings, as the spawner's INI gives them
     * ("policy=adaptive" or "policy=tracking"). */
    const char *settings;
} ts_game;

/* What a mod hooks: one entry per Tiberian Sun function it patches
 * (docs/ts-integration.md has the map). NULL runs the game's vanilla code. */
typedef struct ts_hooks {
    uint32_t struct_size;
    void *mod; /* passed back to every hook */
    /* Queue_AI_Multiplayer, Process_Send_Period and the FRAMEINFO tag: at the
     * top of frame `frame`, before anything else. Nonzero when the frame
     * sends (and so waits and executes its DoList); then *tag is the frame
     * its packet's events execute on. */
    int(TSMOD_CALL *send_period)(void *mod, uint32_t frame, uint32_t *tag);
    /* Queue_AI_Multiplayer's timing block (every 128 frames: PROCESS_TIME,
     * the host's TIMING; protocol 0's RESPONSE_TIME_2 every 30 frames).
     * Nonzero skips the game's events; its resend delay still adapts. */
    int(TSMOD_CALL *timing_events)(void *mod, uint32_t frame);
    /* Build_Send_Packet: `packet_extra_len` bytes the mod writes after
     * FRAMEINFO; Process_Receive_Packet hands them to receive_packet. */
    uint32_t packet_extra_len;
    void(TSMOD_CALL *packet_extra)(void *mod, uint8_t *out);
    /* Process_Receive_Packet, once the packet parsed: its FRAMEINFO, the
     * extra bytes and its events. 1: add the events to the DoList now; 0:
     * the mod keeps them (and adds them later with do_list_add); -1: refuse
     * the packet (counted, nothing added). */
    int(TSMOD_CALL *receive_packet)(void *mod, int32_t house_id, const ts_frameinfo *info,
                                    const uint8_t *extra, size_t extra_len, const ts_event *events,
                                    int count, const uint8_t *raw, size_t raw_len);
    /* Can_Advance: nonzero when frame `frame` may execute its DoList. */
    int(TSMOD_CALL *can_advance)(void *mod, uint32_t frame);
    /* Wait_For_Players starts (begin 1) or ends (0) a wait for peers. */
    void(TSMOD_CALL *waiting)(void *mod, int begin);
    /* Execute_DoList, before its loop: the DoList may be restamped. */
    void(TSMOD_CALL *execute_do_list)(void *mod, uint32_t frame, ts_event *do_list, int count);
    /* EventClass::Execute: nonzero when the mod executed the event (the
     * game's own handler then does not run). */
    int(TSMOD_CALL *execute_event)(void *mod, uint32_t frame, const ts_event *event);
    /* EventClass::Event_Length for IDs past the game's table; -1: unknown. */
    int(TSMOD_CALL *event_length)(void *mod, uint8_t type);
    /* ConnectionClass::Service_Send_Queue where Add_Delay records a
     * response time: an acknowledged packet to `house_id` took `ticks` from
     * its first send; `resent` when it went out more than once. */
    void(TSMOD_CALL *ack_delay)(void *mod, int32_t house_id, uint32_t ticks, int resent);
    /* The end of the main loop's frame, where it counts ProcessTicks:
     * frame `frame`'s logic spanned `ticks` of the 60 Hz timer and took
     * `work_us` by the performance counter. */
    void(TSMOD_CALL *frame_done)(void *mod, uint32_t frame, uint32_t ticks, uint32_t work_us);
    /* Bytes another machine's mod sent with send_private. */
    void(TSMOD_CALL *mod_message)(void *mod, int32_t house_id, const uint8_t *bytes, size_t len);
    /* Wait_For_Players' timeout (the reconnect dialog): nonzero if the mod
     * handles the silent player (the game then does not drop it itself). */
    int(TSMOD_CALL *connection_timeout)(void *mod, int32_t house_id);
    /* Game over for this machine: free the mod's state. */
    void(TSMOD_CALL *game_end)(void *mod);
} ts_hooks;

/* The mod's one export, found with GetProcAddress(mod, "tsmod_init"): fills
 * `hooks` for one machine of the game; 0 on failure (the game plays
 * vanilla). Called once per game, after the houses are set up. */
typedef int(TSMOD_CALL *tsmod_init_fn)(const ts_game *game, ts_hooks *hooks);

#endif
