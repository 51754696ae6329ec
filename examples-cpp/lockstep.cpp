// lockstep — examples-c/lockstep.c's game in C++, through include/rungs.hpp.
//
//   ./lockstep [FRAMES]      three players in one process, real UDP sockets
//                            on 127.0.0.1 (default 240 frames at 60 fps);
//                            the third vanishes at frame 120
//
// Each player is a rungs::lockstep; its callbacks are lambdas capturing the
// player, and the session object is moved into place after it is made (the
// callbacks live on the heap, so the move does not disturb them). Between
// updates the loop sleeps in poll() on the players' sockets until a datagram
// arrives or the earliest next_us. At frame 120 the third player's program
// vanishes: its session is destroyed without a word, and the survivors drop
// it by themselves after the 500 ms liveness timeout. At the end the program
// checks that the survivors executed the same commands on the same frames,
// and the vanished player the same up to its last frame (exit 1 if not); a
// failing call throws rungs::error (exit 2). POSIX (poll).

#include "rungs.hpp"

#include <poll.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

namespace {

constexpr int player_count = 3;
constexpr int vanishes = 2;               // this seat's program vanishes...
constexpr std::uint32_t vanishes_at = 120; // ...after this frame

std::uint64_t now_us() {
    using namespace std::chrono;
    return static_cast<std::uint64_t>(duration_cast<microseconds>(steady_clock::now().time_since_epoch()).count());
}

// One command as a machine executed it.
struct executed {
    std::uint32_t frame;
    std::uint8_t seat;
    std::vector<std::uint8_t> bytes;
    bool operator==(const executed &o) const { return frame == o.frame && seat == o.seat && bytes == o.bytes; }
};

struct player {
    int seat = 0;
    std::optional<rungs::lockstep> session; // empty once its program vanished
    std::vector<executed> log;
    std::uint32_t state = 0; // a stand-in for the simulation: a hash of every command
    std::uint32_t frames_run = 0;
    int issued = 0;
};

rungs::lockstep_config config_for(player &p, const rungs::key16 &key) {
    rungs::lockstep_config c; // the library's defaults
    c.speed_fps = 60;
    c.seat_count = player_count;
    c.local_seat = static_cast<std::uint8_t>(p.seat);
    c.human_seat_mask = (1u << player_count) - 1;
    c.session_id = 2026;
    c.key = key;
    c.checksum_interval = 32;
    c.bind_address = "127.0.0.1:0";
    // A player unheard for 500 ms has vanished (rungs' default is 2 s or
    // more); rungs drops it by itself (manual_drops false).
    c.liveness_timeout_ms = 500;
    // Game setup hands each pair a key of its own; here: the game key with
    // the pair's seats mixed in (a real lobby draws random ones).
    for (int other = 0; other < player_count; other++)
        if (other != p.seat) {
            rungs::link_key pair{static_cast<std::uint8_t>(other), key};
            pair.key[0] ^= static_cast<std::uint8_t>(1u << p.seat | 1u << other);
            c.link_keys.push_back(pair);
        }

    c.callbacks.command = [&p](std::uint32_t frame, std::uint8_t seat, rungs::bytes_view bytes) {
        p.log.push_back({frame, seat, std::vector<std::uint8_t>(bytes.begin(), bytes.end())});
        for (std::uint8_t b : bytes) p.state = p.state * 31u + b + seat;
    };
    c.callbacks.player_removed = [&p](std::uint32_t frame, std::uint8_t seat) {
        std::printf("seat %d: seat %u dropped on frame %u\n", p.seat, unsigned(seat), unsigned(frame));
    };
    c.callbacks.desync = [&p](std::uint32_t frame, std::uint32_t seats) {
        std::printf("DESYNC seen by seat %d on frame %u (seats %#x)\n", p.seat, unsigned(frame), unsigned(seats));
    };
    if (p.seat == 1) {
        c.callbacks.timing_changed = [](std::uint32_t frame, std::uint8_t send_period, std::uint8_t look_ahead) {
            std::printf("frame %4u  timing %s\n", unsigned(frame), rungs::timing_label(send_period, look_ahead).c_str());
        };
        c.callbacks.player_message = [](std::uint32_t frame, rungs::tier, std::string_view text) {
            std::printf("frame %4u  message: \"%.*s\"\n", unsigned(frame), int(text.size()), text.data());
        };
    }
    return c;
}

int play(std::uint32_t frames) {
    rungs::check_abi();
    const rungs::key16 key{'l', 'o', 'c', 'k', 's', 't', 'e', 'p', ' ', 'e', 'x', 'a', 'm', 'p', 'l', 'e'};
    std::array<player, player_count> players;
    std::array<pollfd, player_count> sockets{};
    std::array<std::uint16_t, player_count> ports{};

    for (int i = 0; i < player_count; i++) {
        player &p = players[i];
        p.seat = i;
        p.session = rungs::lockstep(config_for(p, key), now_us()); // made, then moved into place
        ports[i] = p.session->local_port();
        sockets[i].fd = static_cast<int>(p.session->socket());
        sockets[i].events = POLLIN;
    }
    for (int i = 0; i < player_count; i++)
        for (int j = 0; j < player_count; j++)
            if (i != j)
                players[i].session->add_peer(static_cast<std::uint8_t>(j), "127.0.0.1:" + std::to_string(ports[j]),
                                             now_us());
    std::printf("rungs %.*s (ABI %u); three players on 127.0.0.1 ports %u, %u, %u; %u frames at 60 fps\n",
                int(rungs::version().size()), rungs::version().data(), unsigned(rungs::abi_version()),
                unsigned(ports[0]), unsigned(ports[1]), unsigned(ports[2]), unsigned(frames));

    const std::uint64_t start = now_us();
    for (bool done = false; !done;) {
        std::uint64_t wake = now_us() + 5000;
        done = true;
        for (player &p : players) {
            if (!p.session || p.frames_run >= frames) continue;
            done = false;
            const rungs::update_result r = p.session->update(now_us());
            if (!r.ran()) {
                if (r.next_us < wake) wake = r.next_us;
                continue;
            }
            p.frames_run = r.frame + 1;
            p.session->add_frame_work_us(2000);
            // The player's input: a command every 20 frames.
            if ((r.frame + static_cast<std::uint32_t>(p.seat) * 7u) % 20u == 0 && r.frame + 40 < frames) {
                const std::array<std::uint8_t, 4> command{static_cast<std::uint8_t>(p.seat),
                                                          static_cast<std::uint8_t>(p.issued), 0xC0, 0xDE};
                if (!p.session->submit_command(command)) {
                    std::printf("seat %d: the next turn is full; command dropped\n", p.seat);
                    return 1;
                }
                p.issued++;
            }
            if (p.session->is_checksum_frame(r.frame)) p.session->submit_checksum(r.frame, p.state);
            if (p.seat == vanishes && r.frame == vanishes_at && frames > vanishes_at + 60) {
                // Killed: no goodbye; destroying the session closes its socket.
                std::printf("seat %d: vanishes after frame %u\n", p.seat, unsigned(r.frame));
                p.session.reset();
                continue;
            }
            wake = now_us();
        }
        if (!done) {
            const std::uint64_t now = now_us();
            const int timeout_ms = wake > now ? static_cast<int>((wake - now + 999u) / 1000u) : 0;
            // A vanished player's socket is closed: poll() skips a negative fd.
            for (int i = 0; i < player_count; i++)
                if (!players[i].session) sockets[i].fd = -1;
            (void)poll(sockets.data(), sockets.size(), timeout_ms);
        }
        if (now_us() - start > 60u * 1000000u) {
            std::printf("lockstep: the game did not finish in 60 s\n");
            return 1;
        }
    }

    bool ok = true;
    for (player &p : players) {
        if (!p.session) {
            std::printf("seat %d: vanished after %zu commands executed\n", p.seat, p.log.size());
            continue;
        }
        const rungs::lockstep_stats s = p.session->read_stats();
        std::printf("seat %d: %zu commands executed, state %08x, %llu stalled frames, clock offset %lld us\n", p.seat,
                    p.log.size(), unsigned(p.state), static_cast<unsigned long long>(s.stalled_frames),
                    static_cast<long long>(s.clock_offset_us));
        if (s.desyncs != 0) ok = false;
    }
    const std::vector<executed> &reference = players[0].log;
    for (const player &p : players) {
        // A survivor's log is the reference; a vanished player's is its start.
        const bool same = p.session ? p.log == reference
                                    : p.log.size() <= reference.size() &&
                                          std::equal(p.log.begin(), p.log.end(), reference.begin());
        if (!same) ok = false;
    }
    if (reference.empty()) ok = false; // nothing compared is no proof
    std::printf(ok ? "the survivors executed the same commands on the same frames, the vanished player the same "
                     "up to its last\n"
                   : "PLAYERS DIVERGED\n");
    return ok ? 0 : 1;
    // The sessions are freed here, by their destructors.
}

} // namespace

int main(int argc, char **argv) {
    const std::uint32_t frames = argc > 1 ? static_cast<std::uint32_t>(std::strtoul(argv[1], nullptr, 10)) : 240;
    try {
        return play(frames);
    } catch (const rungs::error &e) {
        std::fprintf(stderr, "lockstep: %s\n", e.what());
        return 2;
    } catch (const std::exception &e) {
        std::fprintf(stderr, "lockstep: %s\n", e.what());
        return 2;
    }
}
