/*
 * rungs.hpp — a header-only C++17 wrapper over the lockstep tier of the C API
 * (rungs/lockstep.h) and the version queries. Written by hand, unlike the C
 * headers beside it (build.rs writes those). docs/cpp.md is its guide.
 *
 * What it gives:
 *   rungs::lockstep            the all-in-one lockstep session (rungs_lockstep_*):
 *                              move-only, freed by its destructor; get() and
 *                              native_handle() give the C pointer.
 *   rungs::lockstep_config     the session's settings, every field starting at
 *                              the library's defaults (rungs_lockstep_config_init).
 *   rungs::lockstep_callbacks  the game's callbacks as std::function.
 *   rungs::error               the exception a failing call throws.
 *   rungs::abi_version() ...   the version queries and the ABI check.
 *   rungs::read_protocol_versions()  what a lobby compares before players meet.
 *
 * The error rule:
 *   - A call the game makes on a working session and that fails because of a
 *     bug or a broken session (a bad argument, a wrong state, a poisoned
 *     handle, an I/O failure) throws rungs::error: code() is the C
 *     rungs_result, what() is "<code name>: <the library's message>"
 *     (rungs_last_error_message, read right after the failing call).
 *   - Where the C API says "not now, try again later", the answer is a
 *     return value, not an exception:
 *       update()                    what happened is update_result::outcome;
 *                                   RUNGS_ERR_BUSY (another thread is inside
 *                                   a call on the session) is outcome::busy.
 *       submit_command(), submit_order(), submit_ai_order(),
 *       submit_ai_order_at(), ai_decision_begin()
 *                                   std::nullopt when the session cannot take
 *                                   it now: RUNGS_ERR_FULL (backpressure: let a
 *                                   frame run first) or RUNGS_ERR_BUSY. Nothing
 *                                   was queued; submit it again after the next
 *                                   update().
 *       is_checksum_frame(), abi_matches()   bool.
 *   - Every other RUNGS_ERR_BUSY throws (error::busy() says so): those calls
 *     belong to the thread that drives the game.
 *   - Destructors never throw (see ~lockstep).
 *
 * Callbacks: the C library copies the callbacks' `user` pointer at
 * rungs_lockstep_new, so the wrapper keeps the callables in a heap block
 * the session owns and points `user` there: moving a rungs::lockstep
 * moves only the pointer, the callbacks keep working. They run on the
 * thread that calls update(), inside it. An exception a callback throws is
 * caught in the trampoline (it never unwinds through the C library), the
 * rest of that update's callbacks are skipped, and update() rethrows it
 * once the C call has returned. The frame counts as run in rungs by then;
 * treat the exception as fatal for the game. Do not destroy or move the
 * session from inside one of its own callbacks (the C library refuses to
 * free it there).
 *
 * Events are C++ enum classes whose values are the C constants
 * (update_outcome, link_event, tier, policy, topology, order_kind,
 * order_refusal); a library newer than this header may pass a value the
 * enum does not name, so a switch over one wants a default.
 *
 * Threads: as the C API (docs/c-api.md): a session is driven from one thread
 * at a time; status() may be called from any thread while another drives
 * the session.
 */

#ifndef RUNGS_HPP
#define RUNGS_HPP

#include "rungs/lockstep.h"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <iterator>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace rungs {

/* ==== Errors ==== */

/** A failing call: the C result code and the library's message for it. */
class error : public std::runtime_error {
public:
    error(rungs_result code, const std::string &message)
        : std::runtime_error(message), code_(code) {}

    /** The C result, one of RUNGS_ERR_*. */
    rungs_result code() const noexcept { return code_; }
    /** The code's name, e.g. "RUNGS_ERR_INVALID_ARGUMENT". */
    const char *code_name() const noexcept { return rungs_result_str(code_); }
    /** Another thread was inside a call on the same object; retry later. */
    bool busy() const noexcept { return code_ == RUNGS_ERR_BUSY; }

private:
    rungs_result code_;
};

/** The library loaded is not the ABI this header was compiled against. */
class abi_mismatch : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

namespace detail {

/* The calling thread's message for the call that just failed; read before
 * any other call into rungs replaces it. */
inline std::string last_error_message() {
    std::size_t len = 0;
    if (rungs_last_error_message(nullptr, 0, &len) != RUNGS_OK || len == 0) return std::string();
    std::string text(len + 1, '\0');
    if (rungs_last_error_message(&text[0], text.size(), &len) != RUNGS_OK) return std::string();
    text.resize(len < text.size() ? len : text.size() - 1);
    return text;
}

[[noreturn]] inline void throw_error(rungs_result code, const char *function) {
    std::string message = last_error_message();
    if (message.empty()) message = function;
    throw error(code, std::string(rungs_result_str(code)) + ": " + message);
}

inline void check(rungs_result code, const char *function) {
    if (code != RUNGS_OK) throw_error(code, function);
}

/* For the calls whose "not now" is a return value: true when it was taken,
 * false for RUNGS_ERR_FULL or RUNGS_ERR_BUSY, throws otherwise. */
inline bool taken(rungs_result code, const char *function) {
    if (code == RUNGS_ERR_FULL || code == RUNGS_ERR_BUSY) return false;
    check(code, function);
    return true;
}

} // namespace detail

/** The name of a result code, e.g. "RUNGS_ERR_FULL". */
inline std::string_view result_name(rungs_result code) noexcept { return rungs_result_str(code); }

/* ==== Version and ABI ==== */

/** The ABI version of the library actually loaded. */
inline std::uint32_t abi_version() noexcept { return rungs_abi_version(); }

/** The ABI version of the header this program was compiled against. */
constexpr std::uint32_t header_abi_version = RUNGS_ABI_VERSION;

/** The library version, e.g. "0.3.0" (RUNGS_VERSION_STRING of its header). */
inline std::string_view version() noexcept { return rungs_version(); }

/** Whether the library loaded has the ABI of the header compiled against. */
inline bool abi_matches() noexcept { return rungs_abi_version() == RUNGS_ABI_VERSION; }

/** Throws abi_mismatch unless abi_matches(): call it once at start-up. */
inline void check_abi() {
    if (!abi_matches())
        throw abi_mismatch("rungs: compiled against ABI " + std::to_string(RUNGS_ABI_VERSION) +
                           ", the library loaded has ABI " + std::to_string(rungs_abi_version()) + " (" +
                           std::string(version()) + ")");
}

/* ==== Protocol versions ==== */

/** Which protocol a version belongs to (rungs_protocol). */
enum class protocol : rungs_protocol {
    wire = RUNGS_PROTOCOL_WIRE,
    turn = RUNGS_PROTOCOL_TURN,
    relay = RUNGS_PROTOCOL_RELAY,
};

/** The protocol versions a build speaks (rungs_protocol_versions, without
 * its struct_size). Two builds play together if and only if the three are
 * equal: what a lobby compares before players meet. */
struct protocol_versions {
    std::uint8_t wire = 0;
    std::uint8_t turn = 0;
    std::uint8_t relay = 0;

    friend bool operator==(const protocol_versions &a, const protocol_versions &b) noexcept {
        return a.wire == b.wire && a.turn == b.turn && a.relay == b.relay;
    }
    friend bool operator!=(const protocol_versions &a, const protocol_versions &b) noexcept { return !(a == b); }
};

/** The protocol versions of the library loaded (rungs_read_protocol_versions). */
inline protocol_versions read_protocol_versions() {
    rungs_protocol_versions c{};
    c.struct_size = sizeof c;
    detail::check(rungs_read_protocol_versions(&c), "rungs_read_protocol_versions");
    protocol_versions v;
    v.wire = c.wire;
    v.turn = c.turn;
    v.relay = c.relay;
    return v;
}

/** Another player's machine speaks another protocol version (the arguments of
 * rungs_protocol_mismatch_fn). `text` names both versions and lives until the
 * callback returns: copy it to keep it. */
struct protocol_mismatch {
    std::uint8_t seat;
    rungs::protocol protocol;
    std::uint8_t theirs;
    std::uint8_t ours;
    /** Told again just before that seat's link_event(lost): this is why. */
    bool link_lost;
    std::string_view text;
};

/* ==== Vocabulary ==== */

/** A read-only view of bytes: a command, a turn log (C++17 has no std::span). */
class bytes_view {
public:
    constexpr bytes_view() noexcept = default;
    constexpr bytes_view(const std::uint8_t *data, std::size_t size) noexcept : data_(data), size_(size) {}
    bytes_view(const void *data, std::size_t size) noexcept
        : data_(static_cast<const std::uint8_t *>(data)), size_(size) {}
    /** Any contiguous container of bytes: std::vector, std::array, std::string. */
    template <class Container,
              class = std::enable_if_t<sizeof(*std::declval<const Container &>().data()) == 1 &&
                                       !std::is_same<std::decay_t<Container>, bytes_view>::value>>
    bytes_view(const Container &bytes) noexcept
        : data_(reinterpret_cast<const std::uint8_t *>(bytes.data())), size_(bytes.size()) {}

    constexpr const std::uint8_t *data() const noexcept { return data_; }
    constexpr std::size_t size() const noexcept { return size_; }
    constexpr bool empty() const noexcept { return size_ == 0; }
    constexpr const std::uint8_t *begin() const noexcept { return data_; }
    constexpr const std::uint8_t *end() const noexcept { return data_ + size_; }
    constexpr std::uint8_t operator[](std::size_t i) const noexcept { return data_[i]; }

private:
    const std::uint8_t *data_ = nullptr;
    std::size_t size_ = 0;
};

/** A 128-bit key or secret. */
using key16 = std::array<std::uint8_t, 16>;

/** A timing tier (RUNGS_TIER_*). */
enum class tier : std::uint8_t {
    fast = RUNGS_TIER_FAST,
    normal = RUNGS_TIER_NORMAL,
    poor = RUNGS_TIER_POOR,
    bad = RUNGS_TIER_BAD,
};

/** The tier's name, "Fast" ... "Bad"; throws for a value no tier has. */
inline std::string_view tier_name(tier t) {
    const char *name = nullptr;
    detail::check(rungs_tier_name(static_cast<rungs_tier>(t), &name), "rungs_tier_name");
    return name;
}

/** The slider label of a timing, e.g. "Fast (rung 2)"; throws if it breaks S1. */
inline std::string timing_label(std::uint8_t send_period, std::uint8_t look_ahead) {
    rungs_timing timing{send_period, look_ahead};
    char buf[RUNGS_LABEL_CAPACITY];
    detail::check(rungs_timing_label(&timing, buf, sizeof buf, nullptr), "rungs_timing_label");
    return buf;
}

/** The timing policy (RUNGS_POLICY_*); the same on every machine of a game. */
enum class policy : rungs_policy {
    adaptive = RUNGS_POLICY_ADAPTIVE,
    tracking = RUNGS_POLICY_TRACKING,
};

/** How the machines of a game connect (RUNGS_TOPOLOGY_*). */
enum class topology : rungs_topology {
    peer_to_peer = RUNGS_TOPOLOGY_PEER_TO_PEER,
    relay = RUNGS_TOPOLOGY_RELAY,
};

/** What happened to a link (RUNGS_LINK_EVENT_*). */
enum class link_event : rungs_link_event {
    lost = RUNGS_LINK_EVENT_LOST,
    recovered = RUNGS_LINK_EVENT_RECOVERED,
    restarted = RUNGS_LINK_EVENT_RESTARTED,
};

/** The seat of the relay in link events (RUNGS_RELAY_SEAT). */
constexpr std::uint8_t relay_seat = RUNGS_RELAY_SEAT;
/** "No seat" (RUNGS_NO_SEAT): no master, an observer. */
constexpr std::uint8_t no_seat = RUNGS_NO_SEAT;

/** What update() did (RUNGS_LOCKSTEP_*, and busy, the wrapper's own). */
enum class update_outcome : rungs_lockstep_outcome {
    ran = RUNGS_LOCKSTEP_RAN,         /**< a frame ran; its commands went to `command` */
    not_due = RUNGS_LOCKSTEP_NOT_DUE, /**< the next frame is not due yet */
    waiting = RUNGS_LOCKSTEP_WAITING, /**< it is due but waits for turns (waiting_for) */
    left = RUNGS_LOCKSTEP_LEFT,       /**< this player has left the game */
    busy = -1,                        /**< RUNGS_ERR_BUSY: another thread was inside a call;
                                           nothing happened, call again */
};

struct update_result {
    update_outcome outcome;
    /** The frame that ran (outcome ran), else the latest frame run; 0 when busy. */
    std::uint32_t frame;
    /** Call update() again by this time (µs on your clock). */
    std::uint64_t next_us;
    /** Bit i set: the next frame waits for seat i's turns. */
    std::uint32_t waiting_for;

    bool ran() const noexcept { return outcome == update_outcome::ran; }
};

/** What an order is (RUNGS_ORDER_*), for submit_order. */
enum class order_kind : rungs_order_kind {
    command = RUNGS_ORDER_COMMAND,
    quit = RUNGS_ORDER_QUIT,
    ephemeral = RUNGS_ORDER_EPHEMERAL,
};

/** Why the relay refused an order (RUNGS_ORDER_REFUSED_*). */
enum class order_refusal : rungs_order_refusal {
    queue_full = RUNGS_ORDER_REFUSED_QUEUE_FULL,
    tick_limit = RUNGS_ORDER_REFUSED_TICK_LIMIT,
    leaving = RUNGS_ORDER_REFUSED_LEAVING,
};

/** An order submit_order took: its id (0 when it cannot be refused later) and
 * the earliest frame it can run on. */
struct order_receipt {
    std::uint64_t id;
    std::uint32_t frame;
};

/** The timing status snapshot and the diagnostics counters, as in C. */
using timing_status = rungs_timing_status;
using lockstep_stats = rungs_lockstep_stats;

/* ==== Callbacks ==== */

/** The lockstep session's callbacks, each optional (empty: not called).
 * They run inside update(), on its thread; the arguments are the C
 * callback's, after `user`. bytes_view and std::string_view arguments live
 * until the callback returns: copy what you keep. */
struct lockstep_callbacks {
    /** A command issued by `seat` executes on `frame`: apply it now. */
    std::function<void(std::uint32_t frame, std::uint8_t seat, bytes_view command)> command;
    std::function<void(std::uint32_t frame, std::uint8_t send_period, std::uint8_t look_ahead)> timing_changed;
    std::function<void(std::uint32_t frame, std::uint8_t fps)> frame_rate_changed;
    std::function<void(std::uint32_t frame, tier t, std::string_view text)> player_message;
    std::function<void(std::uint32_t frame, std::uint8_t seat)> master_changed;
    std::function<void(std::uint32_t frame, std::uint8_t seat)> player_removed;
    /** Checksums of `frame` differ; bit i of `seats` set for each seat that
     * differs from the lowest seat's. */
    std::function<void(std::uint32_t frame, std::uint32_t seats)> desync;
    /** The link to `seat` (relay_seat for the relay) had an event. */
    std::function<void(std::uint8_t seat, rungs::link_event event)> link_event;
};

/** The relay topology's own callbacks (set_relay_callbacks). */
struct relay_callbacks {
    std::function<void(std::uint64_t order_id, order_refusal reason)> order_refused;
    /** An ephemeral order from `seat` that came with `frame`. */
    std::function<void(std::uint32_t frame, std::uint8_t seat, bytes_view order)> ephemeral;
};

/* ==== Configuration ==== */

/** The key of the link between this machine and `seat` (per-pair keys, S8). */
struct link_key {
    std::uint8_t seat;
    key16 key;
};

/** How to set up a lockstep game on this machine: rungs_lockstep_config,
 * owning its strings and arrays. Every field starts at the library's
 * default (rungs_lockstep_config_init); include/rungs/lockstep.h documents
 * each. speed_fps, seat_count, human_seat_mask and key are yours to set. */
struct lockstep_config {
    std::uint8_t speed_fps;
    std::uint8_t seat_count;
    std::uint8_t local_seat;
    rungs::policy policy;
    std::uint32_t human_seat_mask;
    std::uint32_t session_id;
    key16 key;
    /** Frames between state checksums; 0 for none. */
    std::uint32_t checksum_interval;
    /** "ip:port" to bind; empty for the default, "0.0.0.0:0". */
    std::string bind_address;
    std::vector<link_key> link_keys;
    /** 0: taken from the wall clock. */
    std::uint32_t epoch;
    rungs::topology topology;
    /* Relay topology only. */
    std::string relay_address;
    std::vector<std::uint8_t> relay_ticket;
    key16 relay_link_secret;
    std::uint32_t relay_have_horizon;
    std::uint32_t relay_jitter_ticks;
    /** 0: rungs' default. */
    std::uint32_t liveness_timeout_ms;
    /** false: rungs drops vanished players by itself. */
    bool manual_drops;
    lockstep_callbacks callbacks;

    /** The library's defaults; throws rungs::error if it cannot give them. */
    lockstep_config() {
        rungs_lockstep_config c = defaults();
        speed_fps = c.speed_fps;
        seat_count = c.seat_count;
        local_seat = c.local_seat;
        policy = static_cast<rungs::policy>(c.policy);
        human_seat_mask = c.human_seat_mask;
        session_id = c.session_id;
        std::copy(std::begin(c.key), std::end(c.key), key.begin());
        checksum_interval = c.checksum_interval;
        if (c.bind_address) bind_address = c.bind_address;
        epoch = c.epoch;
        topology = static_cast<rungs::topology>(c.topology);
        if (c.relay_address) relay_address = c.relay_address;
        std::copy(std::begin(c.relay_link_secret), std::end(c.relay_link_secret), relay_link_secret.begin());
        relay_have_horizon = c.relay_have_horizon;
        relay_jitter_ticks = c.relay_jitter_ticks;
        liveness_timeout_ms = c.liveness_timeout_ms;
        manual_drops = c.manual_drops != 0;
    }

    /** The C struct, starting from the library's defaults (so a field this
     * header does not know keeps its default) with this config's values.
     * Its pointers point into *this and into `c_link_keys`: valid while
     * both live unchanged. The callbacks are left empty. */
    rungs_lockstep_config to_c(std::vector<rungs_link_key> &c_link_keys) const {
        rungs_lockstep_config c = defaults();
        c.speed_fps = speed_fps;
        c.seat_count = seat_count;
        c.local_seat = local_seat;
        c.policy = static_cast<rungs_policy>(policy);
        c.human_seat_mask = human_seat_mask;
        c.session_id = session_id;
        std::copy(key.begin(), key.end(), std::begin(c.key));
        c.checksum_interval = checksum_interval;
        c.bind_address = bind_address.empty() ? nullptr : bind_address.c_str();
        c_link_keys.clear();
        for (const link_key &k : link_keys) {
            rungs_link_key ck{};
            ck.seat = k.seat;
            std::copy(k.key.begin(), k.key.end(), std::begin(ck.key));
            c_link_keys.push_back(ck);
        }
        c.link_keys = c_link_keys.empty() ? nullptr : c_link_keys.data();
        c.link_key_count = c_link_keys.size();
        c.epoch = epoch;
        c.topology = static_cast<rungs_topology>(topology);
        c.relay_address = relay_address.empty() ? nullptr : relay_address.c_str();
        c.relay_ticket = relay_ticket.empty() ? nullptr : relay_ticket.data();
        c.relay_ticket_len = relay_ticket.size();
        std::copy(relay_link_secret.begin(), relay_link_secret.end(), std::begin(c.relay_link_secret));
        c.relay_have_horizon = relay_have_horizon;
        c.relay_jitter_ticks = relay_jitter_ticks;
        c.liveness_timeout_ms = liveness_timeout_ms;
        c.manual_drops = manual_drops ? 1u : 0u;
        return c;
    }

private:
    static rungs_lockstep_config defaults() {
        rungs_lockstep_config c{};
        detail::check(rungs_lockstep_config_init(&c), "rungs_lockstep_config_init");
        return c;
    }
};

/* ==== Relay credentials (the lobby's side and the player's) ==== */

/** A relay ticket and its link secret, for lockstep_config's relay fields. */
struct relay_credentials {
    std::vector<std::uint8_t> ticket;
    key16 link_secret;
    /** The seat the ticket admits (parse only). */
    std::uint8_t seat;
};

/** Read credentials in the text form `rungs-relay ticket` prints. */
inline relay_credentials parse_relay_credentials(const std::string &text) {
    relay_credentials out{std::vector<std::uint8_t>(RUNGS_RELAY_TICKET_BYTES), key16{}, 0};
    std::size_t len = 0;
    detail::check(rungs_relay_credentials_parse(text.c_str(), out.ticket.data(), out.ticket.size(), &len,
                                                out.link_secret.data(), &out.seat),
                  "rungs_relay_credentials_parse");
    out.ticket.resize(len);
    return out;
}

/** Issue a ticket admitting `seat` to `match_id` until `expires_unix_s`, as a lobby does. */
inline relay_credentials issue_relay_ticket(const key16 &lobby_secret, std::uint64_t match_id, std::uint8_t seat,
                                            std::uint64_t expires_unix_s, std::uint64_t nonce) {
    relay_credentials out{std::vector<std::uint8_t>(RUNGS_RELAY_TICKET_BYTES), key16{}, seat};
    std::size_t len = 0;
    detail::check(rungs_relay_ticket_issue(lobby_secret.data(), match_id, seat, expires_unix_s, nonce,
                                           out.ticket.data(), out.ticket.size(), &len, out.link_secret.data()),
                  "rungs_relay_ticket_issue");
    out.ticket.resize(len);
    return out;
}

/* ==== The lockstep session ==== */

namespace detail {

/* What the C library's `user` points at: the callables and the exception a
 * callback threw during the current update(). On the heap, owned by the
 * rungs::lockstep, so its address survives moves of the session object. */
struct lockstep_state {
    lockstep_callbacks callbacks;
    relay_callbacks relay;
    std::function<void(const protocol_mismatch &)> protocol_mismatch;
    std::exception_ptr failure;
};

/* Runs a callback for the C library: an exception is caught and kept for
 * update() to rethrow, never let through the C frames; after one, the rest
 * of that update's callbacks are skipped. */
template <class Call>
void guarded(void *user, Call &&call) noexcept {
    lockstep_state *state = static_cast<lockstep_state *>(user);
    if (state->failure) return;
    try {
        call(*state);
    } catch (...) {
        state->failure = std::current_exception();
    }
}

/* The trampolines the C library calls (RUNGS_CALL: the library's calling
 * convention, whatever the program's default). */
inline void RUNGS_CALL on_command(void *user, std::uint32_t frame, std::uint8_t seat, const std::uint8_t *bytes,
                                  std::size_t len) noexcept {
    guarded(user, [&](lockstep_state &s) {
        if (s.callbacks.command) s.callbacks.command(frame, seat, bytes_view(bytes, len));
    });
}
inline void RUNGS_CALL on_timing_changed(void *user, std::uint32_t frame, std::uint8_t send_period,
                                         std::uint8_t look_ahead) noexcept {
    guarded(user, [&](lockstep_state &s) {
        if (s.callbacks.timing_changed) s.callbacks.timing_changed(frame, send_period, look_ahead);
    });
}
inline void RUNGS_CALL on_frame_rate_changed(void *user, std::uint32_t frame, std::uint8_t fps) noexcept {
    guarded(user, [&](lockstep_state &s) {
        if (s.callbacks.frame_rate_changed) s.callbacks.frame_rate_changed(frame, fps);
    });
}
inline void RUNGS_CALL on_player_message(void *user, std::uint32_t frame, rungs_tier t, const char *text) noexcept {
    guarded(user, [&](lockstep_state &s) {
        if (s.callbacks.player_message) s.callbacks.player_message(frame, static_cast<tier>(t), text);
    });
}
inline void RUNGS_CALL on_master_changed(void *user, std::uint32_t frame, std::uint8_t seat) noexcept {
    guarded(user, [&](lockstep_state &s) {
        if (s.callbacks.master_changed) s.callbacks.master_changed(frame, seat);
    });
}
inline void RUNGS_CALL on_player_removed(void *user, std::uint32_t frame, std::uint8_t seat) noexcept {
    guarded(user, [&](lockstep_state &s) {
        if (s.callbacks.player_removed) s.callbacks.player_removed(frame, seat);
    });
}
inline void RUNGS_CALL on_desync(void *user, std::uint32_t frame, std::uint32_t seats) noexcept {
    guarded(user, [&](lockstep_state &s) {
        if (s.callbacks.desync) s.callbacks.desync(frame, seats);
    });
}
inline void RUNGS_CALL on_link_event(void *user, std::uint8_t seat, rungs_link_event event) noexcept {
    guarded(user, [&](lockstep_state &s) {
        if (s.callbacks.link_event) s.callbacks.link_event(seat, static_cast<rungs::link_event>(event));
    });
}
inline void RUNGS_CALL on_order_refused(void *user, std::uint64_t id, rungs_order_refusal reason) noexcept {
    guarded(user, [&](lockstep_state &s) {
        if (s.relay.order_refused) s.relay.order_refused(id, static_cast<order_refusal>(reason));
    });
}
inline void RUNGS_CALL on_ephemeral(void *user, std::uint32_t frame, std::uint8_t seat, const std::uint8_t *bytes,
                                    std::size_t len) noexcept {
    guarded(user, [&](lockstep_state &s) {
        if (s.relay.ephemeral) s.relay.ephemeral(frame, seat, bytes_view(bytes, len));
    });
}

inline void RUNGS_CALL on_protocol_mismatch(void *user, std::uint8_t seat, rungs_protocol which, std::uint8_t theirs,
                                           std::uint8_t ours, std::uint8_t link_lost, const char *text) noexcept {
    guarded(user, [&](lockstep_state &s) {
        if (s.protocol_mismatch)
            s.protocol_mismatch(rungs::protocol_mismatch{seat, static_cast<rungs::protocol>(which), theirs, ours,
                                                         link_lost != 0, std::string_view(text ? text : "")});
    });
}

/* The C callbacks for `callbacks`: a trampoline for each one set, NULL for
 * the others (so the library skips them). */
inline rungs_lockstep_callbacks c_callbacks(const lockstep_callbacks &callbacks, lockstep_state *state) {
    rungs_lockstep_callbacks c{};
    c.user = state;
    c.command = callbacks.command ? on_command : nullptr;
    c.timing_changed = callbacks.timing_changed ? on_timing_changed : nullptr;
    c.frame_rate_changed = callbacks.frame_rate_changed ? on_frame_rate_changed : nullptr;
    c.player_message = callbacks.player_message ? on_player_message : nullptr;
    c.master_changed = callbacks.master_changed ? on_master_changed : nullptr;
    c.player_removed = callbacks.player_removed ? on_player_removed : nullptr;
    c.desync = callbacks.desync ? on_desync : nullptr;
    c.link_event = callbacks.link_event ? on_link_event : nullptr;
    return c;
}

} // namespace detail

/** A lockstep game on this machine (rungs_lockstep): move-only; the
 * destructor frees it (closing its socket). */
class lockstep {
public:
    /** rungs_lockstep_new: the game, its socket bound, for the eve of frame 0
     * at `now_us` (your monotonic clock, µs). Peer-to-peer, add_peer() every
     * other human seat before the first update(). */
    lockstep(const lockstep_config &config, std::uint64_t now_us) : state_(new detail::lockstep_state) {
        std::vector<rungs_link_key> keys;
        rungs_lockstep_config c = config.to_c(keys);
        c.callbacks = detail::c_callbacks(config.callbacks, state_.get());
        state_->callbacks = config.callbacks;
        detail::check(rungs_lockstep_new(&c, now_us, &handle_), "rungs_lockstep_new");
    }

    /** rungs_lockstep_replay_new: a game that replays a match's turn log
     * (docs/relay.md "Replays") instead of talking to anyone. */
    static lockstep replay(const lockstep_config &config, bytes_view turn_log, std::uint64_t now_us) {
        lockstep session;
        session.state_.reset(new detail::lockstep_state);
        std::vector<rungs_link_key> keys;
        rungs_lockstep_config c = config.to_c(keys);
        c.callbacks = detail::c_callbacks(config.callbacks, session.state_.get());
        session.state_->callbacks = config.callbacks;
        detail::check(rungs_lockstep_replay_new(&c, turn_log.data(), turn_log.size(), now_us, &session.handle_),
                      "rungs_lockstep_replay_new");
        return session;
    }

    lockstep(const lockstep &) = delete;
    lockstep &operator=(const lockstep &) = delete;

    /* A move hands over the C handle and the callbacks' heap block; the C
     * library's `user` still points at that block, so nothing else changes. */
    lockstep(lockstep &&other) noexcept
        : handle_(std::exchange(other.handle_, nullptr)), state_(std::move(other.state_)) {}
    lockstep &operator=(lockstep &&other) noexcept {
        if (this != &other) {
            release_noexcept();
            handle_ = std::exchange(other.handle_, nullptr);
            state_ = std::move(other.state_);
        }
        return *this;
    }

    /** Frees the game. RUNGS_ERR_BUSY (another thread is inside a call) is
     * retried until that call returns; if the library refuses otherwise
     * (from inside one of its own callbacks, a panic), the callbacks' block
     * is leaked rather than freed under a library that may still call it.
     * close() is the same with the failure thrown. */
    ~lockstep() { release_noexcept(); }

    /** Free the game now; throws rungs::error if the library refuses (the
     * session is then unchanged). Afterwards the object is empty. */
    void close() {
        if (!handle_) return;
        rungs_result rc;
        while ((rc = rungs_lockstep_free(handle_)) == RUNGS_ERR_BUSY) std::this_thread::yield();
        detail::check(rc, "rungs_lockstep_free");
        handle_ = nullptr;
        state_.reset();
    }

    /** The C handle (nullptr once moved from or closed). */
    rungs_lockstep *get() const noexcept { return handle_; }
    rungs_lockstep *native_handle() const noexcept { return handle_; }
    explicit operator bool() const noexcept { return handle_ != nullptr; }

    /* ---- Setup ---- */

    /** The UDP port the socket is bound to. */
    std::uint16_t local_port() const {
        std::uint16_t port = 0;
        detail::check(rungs_lockstep_local_port(handle_, &port), "rungs_lockstep_local_port");
        return port;
    }

    /** The OS socket, to wait on (never read it): a file descriptor on Unix,
     * a SOCKET on Windows. */
    rungs_socket socket() const {
        rungs_socket s = 0;
        detail::check(rungs_lockstep_socket(handle_, &s), "rungs_lockstep_socket");
        return s;
    }

    /** Bind human `seat` to `address` ("ip:port"), before frame 0. */
    void add_peer(std::uint8_t seat, const std::string &address, std::uint64_t now_us) {
        detail::check(rungs_lockstep_add_peer(handle_, seat, address.c_str(), now_us), "rungs_lockstep_add_peer");
    }

    /** Set (replacing) the relay topology's callbacks. */
    void set_relay_callbacks(relay_callbacks callbacks) {
        rungs_relay_callbacks c{};
        c.struct_size = sizeof c;
        c.user = state_.get();
        c.order_refused = callbacks.order_refused ? detail::on_order_refused : nullptr;
        c.ephemeral = callbacks.ephemeral ? detail::on_ephemeral : nullptr;
        /* The library first: refused (e.g. from inside a callback), the
         * callables in use stay untouched. */
        detail::check(rungs_lockstep_set_relay_callbacks(handle_, &c), "rungs_lockstep_set_relay_callbacks");
        state_->relay = std::move(callbacks);
    }

    /** Set (replacing; an empty function clears) what is told when another
     * player's machine speaks another protocol version: once per seat and
     * version, and again just before that seat's link is reported lost.
     * Peer-to-peer only (behind a relay, update() throws naming both
     * versions). Runs inside update(), like the other callbacks. */
    void set_protocol_mismatch(std::function<void(const protocol_mismatch &)> callback) {
        detail::check(rungs_lockstep_set_protocol_mismatch(handle_, callback ? detail::on_protocol_mismatch : nullptr,
                                                           state_.get()),
                      "rungs_lockstep_set_protocol_mismatch");
        state_->protocol_mismatch = std::move(callback);
    }

    /* ---- The frame loop ---- */

    /** Drive the game at `now_us`: read the socket, run the next frame if it
     * is due and its turns are here (its commands reach the `command`
     * callback before this returns), send. An exception a callback threw is
     * rethrown here, ahead of any error of the call itself. */
    update_result update(std::uint64_t now_us) {
        /* Kept in a local: a callback may have moved *this elsewhere. */
        detail::lockstep_state *state = state_.get();
        rungs_lockstep_update_result r{};
        const rungs_result rc = rungs_lockstep_update(handle_, now_us, &r);
        if (state && state->failure) std::rethrow_exception(std::exchange(state->failure, nullptr));
        if (rc == RUNGS_ERR_BUSY) return update_result{update_outcome::busy, 0, now_us, 0};
        detail::check(rc, "rungs_lockstep_update");
        return update_result{static_cast<update_outcome>(r.outcome), r.frame, r.next_us, r.waiting_for};
    }

    /** One frame's work took `duration_us` (for the timing reports). */
    void add_frame_work_us(std::uint64_t duration_us) {
        detail::check(rungs_lockstep_add_frame_work_us(handle_, duration_us), "rungs_lockstep_add_frame_work_us");
    }

    /* ---- Commands and orders: std::nullopt means "not now" (FULL or BUSY) ---- */

    /** Issue a command: the frame it is forecast to execute on or after, or
     * std::nullopt when the next turn cannot take it now. */
    std::optional<std::uint32_t> submit_command(bytes_view command) {
        std::uint32_t frame = 0;
        if (!detail::taken(rungs_lockstep_submit_command(handle_, command.data(), command.size(), &frame),
                           "rungs_lockstep_submit_command"))
            return std::nullopt;
        return frame;
    }

    /** Submit an order of `kind`: its id and earliest frame, or std::nullopt. */
    std::optional<order_receipt> submit_order(order_kind kind, bytes_view order) {
        order_receipt receipt{0, 0};
        if (!detail::taken(rungs_lockstep_submit_order(handle_, static_cast<rungs_order_kind>(kind), order.data(),
                                                       order.size(), &receipt.id, &receipt.frame),
                           "rungs_lockstep_submit_order"))
            return std::nullopt;
        return receipt;
    }

    /** Behind a relay: an AI order for AI seat `seat`: the frame it runs on, or std::nullopt. */
    std::optional<std::uint32_t> submit_ai_order(std::uint8_t seat, bytes_view order) {
        std::uint32_t frame = 0;
        if (!detail::taken(rungs_lockstep_submit_ai_order(handle_, seat, order.data(), order.size(), &frame),
                           "rungs_lockstep_submit_ai_order"))
            return std::nullopt;
        return frame;
    }

    /** Behind a relay: an AI order decided at `tick`: the frame it runs on, or std::nullopt. */
    std::optional<std::uint32_t> submit_ai_order_at(std::uint8_t seat, std::uint32_t tick, bytes_view order) {
        std::uint32_t due = 0;
        if (!detail::taken(
                rungs_lockstep_submit_ai_order_at(handle_, seat, tick, order.data(), order.size(), &due),
                "rungs_lockstep_submit_ai_order_at"))
            return std::nullopt;
        return due;
    }

    /** Behind a relay: an AI decision began for `seat` on `tick`: the frame its
     * orders run on, or std::nullopt (256 decisions open, or BUSY). */
    std::optional<std::uint32_t> ai_decision_begin(std::uint8_t seat, std::uint32_t tick) {
        std::uint32_t due = 0;
        if (!detail::taken(rungs_lockstep_ai_decision_begin(handle_, seat, tick, &due),
                           "rungs_lockstep_ai_decision_begin"))
            return std::nullopt;
        return due;
    }

    /** Behind a relay: the decision begun for `seat` at `tick` is in. */
    void ai_decision_end(std::uint8_t seat, std::uint32_t tick) {
        detail::check(rungs_lockstep_ai_decision_end(handle_, seat, tick), "rungs_lockstep_ai_decision_end");
    }

    /* ---- Leaving and drops ---- */

    /** Leave the game; keep calling update() until it says left. */
    void leave() { detail::check(rungs_lockstep_leave(handle_), "rungs_lockstep_leave"); }

    /** Drop `seat`, whose machine no longer answers (with manual_drops). */
    void drop_player(std::uint8_t seat) {
        detail::check(rungs_lockstep_drop_player(handle_, seat), "rungs_lockstep_drop_player");
    }

    /* ---- Checksums ---- */

    /** Your state checksum after `frame` ran (a checksum frame). */
    void submit_checksum(std::uint32_t frame, std::uint64_t checksum) {
        detail::check(rungs_lockstep_submit_checksum(handle_, frame, checksum), "rungs_lockstep_submit_checksum");
    }

    /** Whether submit_checksum compares the state after `frame`. */
    bool is_checksum_frame(std::uint32_t frame) {
        std::uint8_t yes = 0;
        detail::check(rungs_lockstep_is_checksum_frame(handle_, frame, &yes), "rungs_lockstep_is_checksum_frame");
        return yes != 0;
    }

    /** Behind a relay: your state checksum before frame 0. */
    void submit_initial_checksum(std::uint64_t checksum) {
        detail::check(rungs_lockstep_submit_initial_checksum(handle_, checksum),
                      "rungs_lockstep_submit_initial_checksum");
    }

    /* ---- Status and statistics ---- */

    /** The timing status the game published when its latest call returned.
     * Any thread may call it while another drives the game; never busy. */
    timing_status status() const {
        timing_status s{};
        detail::check(rungs_lockstep_status(handle_, &s), "rungs_lockstep_status");
        return s;
    }

    /** Counters for a diagnostics screen. */
    lockstep_stats read_stats() {
        lockstep_stats s{};
        detail::check(rungs_lockstep_read_stats(handle_, &s), "rungs_lockstep_read_stats");
        return s;
    }

private:
    lockstep() = default;

    void release_noexcept() noexcept {
        if (!handle_) {
            state_.reset();
            return;
        }
        rungs_result rc;
        while ((rc = rungs_lockstep_free(handle_)) == RUNGS_ERR_BUSY) std::this_thread::yield();
        if (rc == RUNGS_OK)
            state_.reset();
        else
            (void)state_.release(); /* the library may still call into it */
        handle_ = nullptr;
    }

    rungs_lockstep *handle_ = nullptr;
    std::unique_ptr<detail::lockstep_state> state_;
};

} // namespace rungs

#endif /* RUNGS_HPP */
