#!/usr/bin/env python3
"""Judge a changed policy against a saved sweep without playing the baselines again.

    rungs-sim sweep --seed 1 --conditions --json > before.json
    (change the policy, build)
    scripts/sweep-replay.py before.json target/release/rungs-sim [--jobs 2]

A sweep plays every policy and searches the oracle on every condition; when
only `tracking` changed, the baselines' games are the same, and replaying
`tracking` alone on each condition (the flags `--conditions` prints) takes a
tenth of the time. Each replay is judged as `rungs-sim sweep` judges it
(`SweepResult::target_miss` in crates/rungs-sim/src/sweep.rs): mean latency
strictly below every baseline stalling on under 1 % of the frames, stalls at
most max(the fewest among the baselines, 0.5 %). The saved sweep's figures are
rounded to 0.1 ms, so the replay's latency is rounded the same way before it
is compared: a tie stays a tie.

Prints the conditions met before and after, which ones changed, the
per-condition latency ratio (geometric mean), and the stall figures. The
sweep itself stays the measure of record: quote its table once a change is
kept.
"""

import argparse
import concurrent.futures
import json
import math
import subprocess
import sys

BASELINES = ["ra", "protocol0", "protocol0-ts", "lobby", "fixed:2/6", "fixed:3/9"]


def judge(condition, latency_ms, stall_percent):
    """'met', or why the target was missed, as the sweep judges it."""
    policies = {p["policy"]: p for p in condition["policies"]}
    baselines = [policies[name] for name in BASELINES if name in policies]
    if not baselines:
        sys.exit("sweep-replay: the sweep has none of the baselines " + ", ".join(BASELINES))
    allowance = max(min(b["stall_percent"] for b in baselines), 0.5)
    if stall_percent > allowance + 1e-9:
        return "stalls over %.2f %%" % allowance
    slower = [b["policy"] for b in baselines
              if b["stall_percent"] < 1.0 and not latency_ms < b["latency_mean_ms"]]
    return "not faster than " + ", ".join(slower) if slower else "met"


def replay(binary, policy, condition):
    flags = condition["flags"].split()
    done = subprocess.run([binary, *flags, "--policy", policy, "--json"],
                          capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit("sweep-replay: condition %d failed (exit %d): %s"
                 % (condition["index"], done.returncode, done.stderr.strip()))
    report = json.loads(done.stdout)
    return round(report["latency_ms"]["mean"], 1), round(report["stall_percent"], 3)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sweep", help="a `rungs-sim sweep --conditions --json` output")
    parser.add_argument("binary", help="the rungs-sim to replay with")
    parser.add_argument("--policy", default="tracking",
                        help="the policy replayed and judged [tracking]")
    parser.add_argument("--jobs", type=int, default=2, help="replays at once [2]")
    args = parser.parse_args()

    with open(args.sweep) as f:
        sweep = json.load(f)
    conditions = sweep.get("conditions")
    if not conditions:
        sys.exit("sweep-replay: %s has no conditions: run the sweep with --conditions --json"
                 % args.sweep)
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        replays = list(pool.map(lambda c: replay(args.binary, args.policy, c), conditions))

    before_met = after_met = 0
    gained, lost, log_ratios, stalls = [], [], [], []
    for condition, (latency, stall) in zip(conditions, replays):
        old = next((p for p in condition["policies"] if p["policy"] == args.policy), None)
        if old is None:
            sys.exit("sweep-replay: the sweep did not play %s" % args.policy)
        was = judge(condition, old["latency_mean_ms"], old["stall_percent"]) == "met"
        now = judge(condition, latency, stall) == "met"
        before_met += was
        after_met += now
        if now and not was:
            gained.append(condition["index"])
        if was and not now:
            lost.append(condition["index"])
        log_ratios.append(math.log(latency / old["latency_mean_ms"]))
        stalls.append((old["stall_percent"], stall))

    count = len(conditions)
    print("%s, seed %s: target met %d -> %d of %d" % (args.policy, sweep.get("seed"),
                                                     before_met, after_met, count))
    print("  gained %s" % (gained or "none"))
    print("  lost   %s" % (lost or "none"))
    print("  latency per condition x%.4f (geometric mean)" % math.exp(sum(log_ratios) / count))
    for label, pick in (("before", 0), ("after", 1)):
        values = sorted(s[pick] for s in stalls)
        print("  stalls %-6s median %.3f %%, mean %.3f %%, over 0.5 %% on %d, over 1 %% on %d"
              % (label, values[count // 2], sum(values) / count,
                 sum(v > 0.5 for v in values), sum(v > 1.0 for v in values)))


if __name__ == "__main__":
    main()
