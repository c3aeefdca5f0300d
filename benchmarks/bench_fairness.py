"""Web fairness under load: how long valid programs wait while 8 sessions send runaway programs and memory bombs.

Runs the page's jobs (`service.analyze`) in one worker pool set up like the
page's (`service.SETTINGS`: 2 warm workers, at most 4), first as main did
(every session calls the pool directly: the peer), then through `FairRunner`
(ours), under the same load: 8 sessions each resubmitting, as soon as its last
one ends, a runaway program whose text changes every time (a new comment and
seed) and, every third time, a memory bomb; and 4 sessions each sending a small
valid program every second. Reports p50/p95 latency of the valid programs answered,
p95 of all valid programs sent (a "busy" answer counted at the time it took),
the share answered, how many were refused "busy", and the ratio. In-process (no
network); stops by itself.

`--impatient S`: the runaway sessions do not wait for their last program; each
presses Run on a new runaway every S seconds, as a person who gives up on a
slow program does (the page starts a new run at once; the old one is left to
the runner).

`--arms fair`: only the `FairRunner` arm (to compare two versions of it: run the
script against each version's tree, one after the other). `--arms alone`: first the
valid sessions alone (no hostile load) through `FairRunner`, then the `FairRunner` arm
under load; prints the ratio of their p95 (issue 30.11: within 2x).

`--kill-every S`: under load, a worker of the pool (a child of its forkserver, found in
/proc) is killed with SIGKILL every S seconds, as an operator or the OOM killer would.

`--valid mlp`: the valid sessions send a small MLP (three 64-wide layers, batch 32)
instead of the seed program, a job of a few tenths of a second rather than a few
hundredths, so the ratio is not of noise.

Run: .venv/bin/python benchmarks/bench_fairness.py [--seconds 60] [--time-limit 15] [--impatient 2]
     [--arms both|fair|alone] [--kill-every 35] [--valid seed|mlp]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import signal
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from graphviz_app.web import service
from graphviz_app.web.fairness import FairRunner
from graphviz_app.web.results import Failure
from graphviz_app.web.urlstate import Options

# Ops of ~3 s each in a loop: each passes the multiply-add limit (one op of 27 billion
# steps is now refused before it runs), the loop holds its worker until the language's
# 10 s limit or the worker's time limit stops it.
RUNAWAY = (
    "# attempt {k}: a new comment every time, so its text never repeats\n"
    "torch.manual_seed({k})\na = torch.randn(400, 20000)\n"
    "for i in range(1000):\n    b = torch.cdist(a, a, p=1).sum()\nb"
)
# Memory bombs refused from their sizes by both versions compared (so both arms spend the same on them).
# `--bombs red-team`: the red team's, which allocate GiBs before failing where sizes are not checked first.
BOMBS = ("# bomb {k}\ntorch.randn(int(3e10)).sum()", "# bomb {k}\ntorch.ones(10**5, 10**5).sum()")
RED_TEAM_BOMBS = ("# bomb {k}\ntorch.zeros(1000000000, 0).count_nonzero(1).sum()",
                  "# bomb {k}\ntorch.prod(torch.zeros(0, 600000000), 0).sum()")
VALID = "x = torch.arange(3., requires_grad=True)\n((x+2)**2+{k}).mean()"
VALID_MLP = ("x = torch.randn(32, 64)\nl1 = nn.Linear(64, 64)\nl2 = nn.Linear(64, 64)\nl3 = nn.Linear(64, 8)\n"
             "(l3(torch.relu(l2(torch.relu(l1(x))))) ** 2).mean() + {k}")
RUNAWAY_SESSIONS, VALID_SESSIONS = 8, 4


def load(get_runner: Callable[[str], service.JobRunner], seconds: float,
         impatient: float | None = None, *, hostile: bool = True,
         kill_every: float | None = None) -> tuple[list[float], int, int, list[float]]:
    """Latencies of valid programs that succeeded, valid programs refused busy, other failures,
    and the time every valid program took to any answer (a "busy" one included)."""
    stop = time.monotonic() + seconds
    latencies: list[float] = []
    answers: list[float] = []
    counts = {"busy": 0, "other": 0}
    lock = threading.Lock()
    presses: list[threading.Thread] = []

    def runaway(name: str) -> None:
        k = 0
        while time.monotonic() < stop:
            k += 1
            program = BOMBS[k % 2].format(k=k) if k % 3 == 0 else RUNAWAY.format(k=k)
            if impatient is None:
                service.analyze(get_runner(name), program, Options())
                continue
            press = threading.Thread(target=service.analyze, args=(get_runner(name), program, Options()))
            press.start()
            with lock:
                presses.append(press)
            time.sleep(impatient)

    def valid(name: str) -> None:
        k = 0
        while time.monotonic() < stop:
            k += 1
            t0 = time.perf_counter()
            found = service.analyze(get_runner(name), VALID.format(k=int(name[1:]) * 10_000 + k), Options())
            if isinstance(found, Failure) and found.kind not in ("busy", "crash", "time", "overtime"):
                print(f"valid program failed: {found.kind}: {found.message[:200]}")
            took = time.perf_counter() - t0
            with lock:
                answers.append(took)
                if not isinstance(found, Failure):
                    latencies.append(took)
                else:
                    counts["busy" if found.kind == "busy" else "other"] += 1
            time.sleep(1.0)

    def killer() -> None:
        while time.monotonic() + (kill_every or 0) < stop:
            time.sleep(kill_every or 0)
            found = pool_workers()
            if found:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(random.choice(found), signal.SIGKILL)

    threads = [threading.Thread(target=runaway, args=(f"r{i}",)) for i in range(RUNAWAY_SESSIONS if hostile else 0)]
    threads += [threading.Thread(target=valid, args=(f"v{i}",)) for i in range(VALID_SESSIONS)]
    threads += [threading.Thread(target=killer)] if kill_every else []
    for t in threads:
        t.start()
        time.sleep(0.05)
    for t in threads + presses:
        t.join()
    return latencies, counts["busy"], counts["other"], answers


def pool_workers() -> list[int]:
    """The pids of this process's pool workers: children of its children (the forkserver's)."""
    me = os.getpid()
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isascii() and entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            parents[int(entry)] = int(stat.rpartition(")")[2].split()[1])
    servers = {pid for pid, parent in parents.items() if parent == me}
    return [pid for pid, parent in parents.items() if parent in servers]


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def report(name: str, latencies: list[float], busy: int, other: int,
           answers: list[float]) -> tuple[float, float, float]:
    p50, p95 = pct(latencies, 0.5), pct(latencies, 0.95)
    total = len(latencies) + busy + other
    print(f"{name:<28} valid sent {total:3d}  ok {len(latencies):3d} ({len(latencies) / max(total, 1):.0%})"
          f"  busy {busy:3d} ({busy / max(total, 1):.0%})"
          f"  other failures {other:2d}  p50 {p50:6.2f} s  p95 {p95:6.2f} s"
          f"  mean {statistics.fmean(latencies) if latencies else float('nan'):6.2f} s"
          f"  p95 of all sent (a 'busy' answer at the time it took) {pct(answers, 0.95):6.2f} s")
    return p50, p95, pct(answers, 0.95)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="load per arm (then in-flight jobs finish)")
    parser.add_argument("--time-limit", type=float, default=service.TIME_LIMIT_S)
    parser.add_argument("--impatient", type=float, default=None, metavar="S",
                        help="runaway sessions press Run on a new runaway every S seconds without waiting")
    parser.add_argument("--arms", choices=("both", "fair", "alone"), default="both",
                        help="fair: only the FairRunner arm; alone: the valid sessions alone, then under load")
    parser.add_argument("--kill-every", type=float, default=None, metavar="S",
                        help="under load, SIGKILL a random pool worker every S seconds")
    parser.add_argument("--valid", choices=("seed", "mlp"), default="seed",
                        help="the valid sessions' program: the seed program, or a small MLP")
    parser.add_argument("--bombs", choices=("sized", "red-team"), default="sized",
                        help="red-team: the red team's bombs, which allocate GiBs where sizes are not checked")
    args = parser.parse_args()
    global BOMBS, VALID
    if args.bombs == "red-team":
        BOMBS = RED_TEAM_BOMBS
    if args.valid == "mlp":
        VALID = VALID_MLP
    how = f"a new one every {args.impatient:g} s" if args.impatient else "the next when the last ends"
    kills = f", a worker killed every {args.kill_every:g} s" if args.kill_every else ""
    print(f"{RUNAWAY_SESSIONS} runaway sessions ({how}), {VALID_SESSIONS} valid sessions (one {args.valid} program "
          f"a second), {args.seconds:g} s per arm, worker time limit {args.time_limit:g} s{kills}")
    results = {}
    arms = {"both": ("main: pool called directly", "ours: FairRunner"), "fair": ("ours: FairRunner",),
            "alone": ("alone: FairRunner, no load", "ours: FairRunner")}[args.arms]
    for name in arms:
        with replace(service.SETTINGS, time_limit=args.time_limit).start() as pool:
            pool.warm_up()
            if name.startswith("main"):
                results[name] = report(name, *load(lambda session, pool=pool: pool, args.seconds, args.impatient,
                                                   kill_every=args.kill_every))
            else:
                fair = FairRunner(pool)
                results[name] = report(name, *load(fair.for_session, args.seconds, args.impatient,
                                                   hostile=not name.startswith("alone"),
                                                   kill_every=None if name.startswith("alone") else args.kill_every))
    if len(results) == 2 and args.arms == "both":
        (m50, m95, _), (o50, o95, _) = results.values()
        print(f"ratio main/ours: p50 {m50 / o50:.1f}x, p95 {m95 / o95:.1f}x")
    if len(results) == 2 and args.arms == "alone":
        (a50, a95, a_all), (o50, o95, o_all) = results.values()
        print(f"ratio under load/alone: p50 {o50 / a50:.1f}x, p95 {o95 / a95:.1f}x, "
              f"p95 of all sent {o_all / a_all:.1f}x")


if __name__ == "__main__":
    main()
