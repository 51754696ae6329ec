// wrapper_test — the rules include/rungs.hpp promises (docs/cpp.md), each
// checked against the real library:
//
//   - the header's ABI is the library's;
//   - a failing call throws rungs::error with the C code and the library's
//     message, and a config starts at the library's defaults;
//   - a moved session keeps its callbacks (they live on the heap);
//   - an exception thrown by a callback comes out of update(), after the C
//     call returned, and skips the rest of that update's callbacks;
//   - a call back into the session from its own callback (RUNGS_ERR_REENTRANT
//     in C) comes out of update() as rungs::error;
//   - a full turn (RUNGS_ERR_FULL) is std::nullopt from submit_command, not
//     an exception;
//   - status() answers from another thread while this one drives the game;
//   - close() frees the session and leaves it empty;
//   - a relay ticket issued as a lobby does reads back from its text form;
//   - the protocol versions are the C call's, and a player of another wire
//     version (a plain UDP socket forging its datagrams) is told once.
//
// A one-seat game on 127.0.0.1 with a clock of our own (every update a
// frame later), so nothing here waits for the network or the wall clock
// (but the mismatch rule, which waits a millisecond per update for the
// forged datagrams to arrive).
// Prints one line per rule and exits 1 on the first broken one.

#include "rungs.hpp"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace {

int failures = 0;

void expect(bool ok, const char *rule) {
    std::printf("%s  %s\n", ok ? "ok  " : "FAIL", rule);
    if (!ok) failures++;
}

constexpr std::uint64_t frame_us = 1000000 / 60;

rungs::lockstep_config one_seat_config() {
    rungs::lockstep_config c;
    c.speed_fps = 60;
    c.seat_count = 1;
    c.local_seat = 0;
    c.human_seat_mask = 1;
    c.session_id = 7;
    c.key = rungs::key16{'w', 'r', 'a', 'p', 'p', 'e', 'r', ' ', 't', 'e', 's', 't', 'k', 'e', 'y', '!'};
    c.bind_address = "127.0.0.1:0";
    return c;
}

// Drives `session` on our clock until `until` says stop or `max_updates` pass.
template <class Until>
void drive(rungs::lockstep &session, std::uint64_t &clock, int max_updates, Until until) {
    for (int i = 0; i < max_updates && !until(); i++) {
        session.update(clock);
        clock += frame_us;
    }
}

void abi_and_errors() {
    expect(rungs::abi_matches() && rungs::abi_version() == rungs::header_abi_version && !rungs::version().empty(),
           "the header's ABI is the library's");

    rungs::lockstep_config defaults;
    expect(defaults.policy == rungs::policy::adaptive && defaults.topology == rungs::topology::peer_to_peer &&
               defaults.bind_address.empty() && defaults.checksum_interval == 0 && !defaults.manual_drops,
           "a config starts at rungs_lockstep_config_init's defaults");

    rungs::lockstep_config zero_key = one_seat_config();
    zero_key.key = rungs::key16{};
    try {
        rungs::lockstep session(zero_key, 0);
        expect(false, "an all-zero key throws rungs::error");
    } catch (const rungs::error &e) {
        const std::string what = e.what();
        expect(e.code() == RUNGS_ERR_INVALID_ARGUMENT && what.find("RUNGS_ERR_INVALID_ARGUMENT") == 0 &&
                   what.find("rungs_lockstep_new") != std::string::npos,
               "an all-zero key throws rungs::error (INVALID_ARGUMENT, the library's message)");
        std::printf("      what(): %s\n", e.what());
    }
}

void moves_and_callbacks() {
    std::uint64_t clock = 1000000;
    std::vector<std::uint32_t> executed; // the frame of every command seen
    rungs::lockstep_config c = one_seat_config();
    c.callbacks.command = [&](std::uint32_t frame, std::uint8_t, rungs::bytes_view) { executed.push_back(frame); };

    std::optional<rungs::lockstep> holder;
    {
        rungs::lockstep made(c, clock);
        rungs::lockstep moved(std::move(made));
        expect(!made && moved, "a moved-from session is empty, the moved-to one holds the handle");
        holder = std::move(moved); // and once more, by move assignment
    }
    rungs::lockstep &session = *holder;
    const std::uint8_t order[] = {1, 2, 3};
    expect(session.submit_command(rungs::bytes_view(order, sizeof order)).has_value(), "a command is taken");
    drive(session, clock, 200, [&] { return !executed.empty(); });
    expect(executed.size() == 1, "after two moves, the command still reaches its callback");

    // An exception from a callback: two commands on one frame, the first
    // throws; update() rethrows it and the second is never delivered, not
    // even by the updates after it (its frame has run).
    int delivered = 0;
    rungs::lockstep_config t = one_seat_config();
    t.callbacks.command = [&](std::uint32_t, std::uint8_t, rungs::bytes_view) {
        if (delivered++ == 0) throw std::logic_error("the game refused a command");
    };
    rungs::lockstep throwing(t, clock);
    const auto first = throwing.submit_command(rungs::bytes_view(order, 1));
    const auto second = throwing.submit_command(rungs::bytes_view(order, 2));
    bool caught = false;
    try {
        drive(throwing, clock, 200, [&] { return delivered > 0; });
    } catch (const std::logic_error &e) {
        caught = std::string(e.what()) == "the game refused a command";
    }
    drive(throwing, clock, 100, [] { return false; });
    expect(first && second && *first == *second && caught && delivered == 1,
           "a callback's exception comes out of update(), the rest of that update's callbacks skipped");
    expect(throwing.status().frame > *first, "the session runs on after the rethrow");
}

void reentrant_call() {
    std::uint64_t clock = 1000000;
    std::optional<rungs::lockstep> session;
    rungs::lockstep_config c = one_seat_config();
    c.callbacks.timing_changed = [&](std::uint32_t, std::uint8_t, std::uint8_t) { session->leave(); };
    session.emplace(c, clock);
    rungs_result code = RUNGS_OK;
    try {
        drive(*session, clock, 50, [] { return false; });
    } catch (const rungs::error &e) {
        code = e.code();
    }
    expect(code == RUNGS_ERR_REENTRANT, "a call into the session from its own callback throws REENTRANT from update()");
}

void backpressure() {
    std::uint64_t clock = 1000000;
    rungs::lockstep session(one_seat_config(), clock);
    session.update(clock);
    const std::vector<std::uint8_t> command(1000, 0xAB);
    int taken = 0;
    bool refused = false;
    for (int i = 0; i < 100 && !refused; i++) {
        if (session.submit_command(command))
            taken++;
        else
            refused = true;
    }
    std::printf("      %d commands of 1000 bytes taken before the turn was full\n", taken);
    expect(refused && taken > 0, "a full turn is std::nullopt, not an exception");
    drive(session, clock, 200, [&] { return session.submit_command(command).has_value(); });
    expect(session.submit_command(command).has_value(), "once frames run, commands are taken again");
}

void status_from_another_thread() {
    std::uint64_t clock = 1000000;
    rungs::lockstep session(one_seat_config(), clock);
    std::atomic<bool> stop{false};
    std::atomic<int> reads{0}, errors{0};
    std::thread ui([&] {
        while (!stop) {
            try {
                (void)session.status();
                reads++;
            } catch (const rungs::error &) {
                errors++;
            }
            std::this_thread::yield();
        }
    });
    int busy = 0;
    for (int i = 0; i < 3000; i++) {
        if (session.update(clock).outcome == rungs::update_outcome::busy) busy++;
        clock += frame_us;
    }
    // Keep the game going until the other thread has had its turn (a
    // machine running one thread at a time may not have scheduled it yet).
    while (reads == 0) {
        session.update(clock);
        clock += frame_us;
        std::this_thread::yield();
    }
    stop = true;
    ui.join();
    expect(reads > 0 && errors == 0 && busy == 0, "status() from another thread never fails nor makes update() busy");
    session.close();
    expect(!session && session.get() == nullptr, "close() frees the session and leaves it empty");
}

void relay_credentials() {
    const rungs::key16 lobby_secret{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
    const rungs::relay_credentials issued = rungs::issue_relay_ticket(lobby_secret, 99, 3, 4000000000u, 1);
    // The text form `rungs-relay ticket` prints: <ticket hex>:<link secret hex>.
    const auto to_hex = [](rungs::bytes_view bytes) {
        std::string out;
        char hex[3];
        for (std::uint8_t b : bytes) {
            std::snprintf(hex, sizeof hex, "%02x", b);
            out += hex;
        }
        return out;
    };
    const std::string text = to_hex(issued.ticket) + ":" + to_hex(issued.link_secret);
    const rungs::relay_credentials parsed = rungs::parse_relay_credentials(text);
    expect(issued.ticket.size() == RUNGS_RELAY_TICKET_BYTES && parsed.ticket == issued.ticket &&
               parsed.link_secret == issued.link_secret && parsed.seat == 3,
           "a relay ticket issued as a lobby does reads back from its text form");
    bool refused = false;
    try {
        (void)rungs::parse_relay_credentials("not credentials");
    } catch (const rungs::error &e) {
        refused = e.code() == RUNGS_ERR_INVALID_ARGUMENT;
    }
    expect(refused, "text that is not credentials throws INVALID_ARGUMENT");
}

// The lobby's versions are the C call's, and a player whose datagrams carry
// another wire version reaches set_protocol_mismatch's callable once,
// naming both versions: a plain UDP socket plays seat 0.
void protocol_versions_and_a_mismatched_player() {
    rungs_protocol_versions c{};
    c.struct_size = sizeof c;
    const bool c_ok = rungs_read_protocol_versions(&c) == RUNGS_OK;
    const rungs::protocol_versions v = rungs::read_protocol_versions();
    expect(c_ok && v.wire == c.wire && v.turn == c.turn && v.relay == c.relay && v == rungs::read_protocol_versions(),
           "read_protocol_versions() gives the C call's numbers");

    const int peer = ::socket(AF_INET, SOCK_DGRAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (peer < 0 || ::bind(peer, reinterpret_cast<sockaddr *>(&a), sizeof a) != 0 ||
        ::getsockname(peer, reinterpret_cast<sockaddr *>(&a), &len) != 0) {
        expect(false, "a UDP socket on 127.0.0.1 for the mismatched player");
        return;
    }
    rungs::lockstep_config cfg = one_seat_config();
    cfg.seat_count = 2;
    cfg.local_seat = 1;
    cfg.human_seat_mask = 0x3;
    std::uint64_t clock = 1000000;
    rungs::lockstep session(cfg, clock);
    std::vector<rungs::protocol_mismatch> seen;
    std::string text;
    session.set_protocol_mismatch([&](const rungs::protocol_mismatch &m) {
        seen.push_back(m);
        text = std::string(m.text);
    });
    session.add_peer(0, "127.0.0.1:" + std::to_string(ntohs(a.sin_port)), clock);

    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    to.sin_port = htons(session.local_port());
    std::uint8_t forged[40] = {0xB7, static_cast<std::uint8_t>(v.wire + 1)};
    for (int i = 0; i < 10; i++)
        ::sendto(peer, forged, sizeof forged, 0, reinterpret_cast<sockaddr *>(&to), sizeof to);
    for (int i = 0; i < 200 && seen.empty(); i++) {
        session.update(clock);
        clock += frame_us;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    drive(session, clock, 20, [] { return false; });
    const std::string expected = "seat 0 speaks wire protocol " + std::to_string(v.wire + 1) +
                                 "; this build speaks " + std::to_string(v.wire);
    expect(seen.size() == 1 && seen[0].seat == 0 && seen[0].protocol == rungs::protocol::wire &&
               seen[0].theirs == v.wire + 1 && seen[0].ours == v.wire && !seen[0].link_lost && text == expected,
           "a player of another wire version is told once, naming both versions");
    std::printf("      text: %s\n", text.c_str());
    ::close(peer);
}

} // namespace

int main() {
    try {
        abi_and_errors();
        moves_and_callbacks();
        reentrant_call();
        backpressure();
        status_from_another_thread();
        relay_credentials();
        protocol_versions_and_a_mismatched_player();
    } catch (const std::exception &e) {
        std::printf("FAIL  unexpected exception: %s\n", e.what());
        return 1;
    }
    std::printf("wrapper_test: %s\n", failures ? "FAILED" : "every rule holds");
    return failures ? 1 : 0;
}
