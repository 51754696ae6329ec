//! The all-in-one lockstep session over real UDP sockets: two players on
//! loopback, each a `LockstepDriver` (a session and its socket) polled from
//! a frame loop with the machine's monotonic clock. rungs carries the
//! commands, chooses the timing and paces the frames; the engine submits
//! commands and executes what `update` hands back.
//!
//! A real game runs one driver per machine and sleeps until
//! `Wake::next_us` or a datagram on `LockstepDriver::socket`, whichever
//! comes first; this example polls both players from one loop.
//!
//! Run it with `cargo run -p rungs-net --example lockstep_udp`.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use rungs_core::link::LinkConfig;
use rungs_core::session::{LockstepConfig, LockstepSession, Topology};
use rungs_core::timing::MachineConfig;
use rungs_core::wire::SessionKey;
use rungs_net::LockstepDriver;

fn main() -> rungs_core::Result<()> {
    // Once per process, before any session: this run's connection nonces
    // differ from the last run's, so peers tell a restart apart (S8).
    rungs_net::seed_connection_nonces();
    let start = Instant::now();
    let now_us = || start.elapsed().as_micros() as u64;
    let mut players = Vec::new();
    for seat in 0..2u8 {
        let config = LockstepConfig {
            machine: MachineConfig::adaptive(30, vec![true, true], Some(seat)),
            // What the lobby hands every player: the session id and key.
            session_id: 0x5EED,
            key: SessionKey(*b"sixteen byte key"),
            link_keys: Vec::new(),
            epoch: 1,
            link: LinkConfig::default(),
            checksum_interval: 64,
            topology: Topology::PeerToPeer,
            manual_drops: false,
        };
        let session = LockstepSession::new(&config, now_us())?;
        let bind: SocketAddr = "127.0.0.1:0".parse().expect("an address");
        players.push(LockstepDriver::bind(bind, session)?);
    }
    let addresses = [players[0].local_addr()?, players[1].local_addr()?];
    for (seat, player) in players.iter_mut().enumerate() {
        let other = 1 - seat;
        player
            .session_mut()
            .add_peer(other as u8, addresses[other], now_us())?;
    }

    let mut executed: [Vec<(u32, u8, Vec<u8>)>; 2] = Default::default();
    let mut submitted = 0u32;
    let mut last_frame = 0;
    while executed[0].len() < 10 || executed[1].len() < 10 {
        assert!(start.elapsed() < Duration::from_secs(30), "the game runs");
        let mut next_us = u64::MAX;
        for (seat, player) in players.iter_mut().enumerate() {
            let log = &mut executed[seat];
            let wake = player.update(now_us(), |frame, command| {
                log.push((frame, command.seat, command.bytes.clone()));
            })?;
            next_us = next_us.min(wake.next_us);
            // Each player issues a command every 15 frames, 5 each.
            if let Some(frame) = wake.frame {
                if frame >= last_frame + 15 && submitted < 10 {
                    let order = format!("order {submitted} from seat {seat}");
                    player.session_mut().submit_command(order.as_bytes())?;
                    submitted += 1;
                    last_frame = frame;
                }
            }
        }
        // Sleep until the next frame or timer (a game would also wake on
        // a datagram: select/poll on `LockstepDriver::socket`).
        let sleep = next_us.saturating_sub(now_us()).min(2_000);
        std::thread::sleep(Duration::from_micros(sleep));
    }
    assert_eq!(
        executed[0], executed[1],
        "the same commands on the same frames"
    );
    for (frame, seat, bytes) in &executed[0] {
        println!(
            "frame {frame:4}: seat {seat}: {}",
            String::from_utf8_lossy(bytes)
        );
    }
    let timing = players[0].session().machine().timing();
    println!(
        "both players executed {} commands identically; timing now {timing}",
        executed[0].len()
    );
    Ok(())
}
