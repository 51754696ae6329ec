//! `rungs-sim soak`: many seeded games under every fault at once
//! ([`rungs_sim::soak`]), run on every core, judged, and summed up in a
//! table. Exit 3 when any game broke an invariant.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use rungs_sim::soak::{soak_game, SoakGame, SoakSummary};

use crate::cli::SoakOptions;
use crate::{emit, emit_line, Status};

pub const HELP: &str = "\
rungs-sim soak: many seeded games under every fault at once

USAGE
  rungs-sim soak [--games N] [--seed S] [--jobs J]

  --games N   games to play [1000]
  --seed S    the soak's seed; game i plays the game drawn from (S, i) [1]
  --jobs J    games run at once [the number of cores]

Each game draws 2-8 players, round trips 10-300 ms with jitter, loss up to
30 %, duplication, reordering, outages, spikes, crashes (single,
simultaneous, mid-turn, the master), quits, restarts, address changes,
command bursts, and in about a quarter of the games a modified client
trying one to three attacks. A quarter of the games place crashes and quits
in game time, where they land while frames wait: vote then vanish (a second
crash while the vote on the first is on its way), a quit racing a crash, a
crash during a restart or move, crashes in a row. Nobody calls drop_player:
the sessions drop vanished players by themselves. Every game must finish
(or every survivor drop the vanished) with zero desyncs, zero lost and zero
doubled commands, no forgery obeyed, nobody removed by another, and bounded
memory. The table has a row per player count, per kind of crash, for the
modified-client games, per kind of fault placed in time, and the total;
every broken game is listed with its seed.

EXIT CODES
  0 every game sound; 3 some game broke an invariant
";

pub fn run(options: &SoakOptions) -> Status {
    let started = Instant::now();
    let next = AtomicU32::new(0);
    let done = AtomicU32::new(0);
    let results: Mutex<Vec<(u32, SoakGame)>> = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..options.jobs.min(options.games.max(1) as usize) {
            scope.spawn(|| loop {
                let index = next.fetch_add(1, Ordering::Relaxed);
                if index >= options.games {
                    break;
                }
                let game = soak_game(options.seed, index);
                let finished = done.fetch_add(1, Ordering::Relaxed) + 1;
                if finished % 100 == 0 {
                    eprintln!(
                        "rungs-sim soak: {finished}/{} games, {:.0} s",
                        options.games,
                        started.elapsed().as_secs_f64()
                    );
                }
                results
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push((index, game));
            });
        }
    });
    let mut results = results.into_inner().unwrap_or_else(|e| e.into_inner());
    results.sort_by_key(|(index, _)| *index);
    let mut summary = SoakSummary::default();
    let mut broken = Vec::new();
    for (index, game) in results {
        let failures = game.failures();
        if !failures.is_empty() {
            broken.push(format!(
                "  game {index} (game seed {:#x}, {} players): {}",
                game.seed,
                game.players,
                failures.join("; ")
            ));
        }
        summary.add(game);
    }
    emit_line(&format!(
        "rungs-sim soak --games {} --seed {}: {:.0} s wall",
        options.games,
        options.seed,
        started.elapsed().as_secs_f64()
    ));
    emit(&summary.table());
    if broken.is_empty() {
        emit_line("every game sound");
        Status::Success
    } else {
        emit_line(&format!("{} games broke an invariant:", broken.len()));
        for line in &broken {
            emit_line(line);
        }
        Status::Disagreement
    }
}
