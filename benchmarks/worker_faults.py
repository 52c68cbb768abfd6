"""Many workers on PostgreSQL under faults: SIGKILLed workers and a database outage (docs/workers.md).

    python benchmarks/worker_faults.py [--objective stencil|sleep] [--workers 15] [--budget 300]
        [--kill 4] [--outage 30] [--seed 1]

Starts a throw-away PostgreSQL server (tests/conftest.py's PostgresServer), then

- ``stencil``: one real ``ciq-optuna tune`` of examples/stencil/stencil.sm_90a.ptx (ptxas,
  minimise registers, ``--no-simplify``) plus W ``ciq-optuna worker`` processes;
- ``sleep``: W worker processes of the cheap ``test-sleep`` objective (tests/test_workers_objectives.py).

One worker runs with the test hook ``CIQ_OPTUNA_TEST_PAUSE_IN_PLAN_LOCK`` and is SIGKILLed while it
sleeps inside the planning lock; ``--kill - 1`` others are SIGKILLed when the study reaches random
fractions of the budget; with ``--outage S`` the server is stopped for S seconds when a third of
the budget is done. Then every process still alive must exit by itself. Prints one JSON line: the
exit status and exit time (seconds after the budget was met) of each process, and the study's
counts (counted trials, RUNNING/WAITING left, duplicate configurations).
"""

from __future__ import annotations

import argparse
import atexit
import collections
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import optuna

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from ciq_optuna.study.budget import budget_status  # noqa: E402
from ciq_optuna.study.leases import TEST_PAUSE_ENV  # noqa: E402
from ciq_optuna.study.storage import STORAGE_ENV, resolve_storage  # noqa: E402

KERNEL = REPO / "examples" / "stencil" / "stencil.sm_90a.ptx"
WORKER_SCRIPT = REPO / "tests" / "test_workers_objectives.py"


def _counts(storage, name: str) -> dict:
    """The study's budget counts, or None while the database is away."""
    try:
        study = optuna.load_study(study_name=name, storage=storage)
        return budget_status(study)
    except Exception:
        return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objective", choices=("stencil", "sleep"), default="stencil")
    parser.add_argument("--workers", type=int, default=15)
    parser.add_argument("--budget", type=int, default=300)
    parser.add_argument(
        "--kill", type=int, default=4, help="workers SIGKILLed (one inside the planning lock)"
    )
    parser.add_argument("--outage", type=float, default=0.0, help="seconds the database is stopped")
    parser.add_argument(
        "--heartbeat", type=int, default=None, help="workers' heartbeat (default: tune's, 10 s)"
    )
    parser.add_argument("--exit-within", type=float, default=180.0, help="seconds allowed after the budget")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)

    from conftest import PostgresServer

    server = PostgresServer(fast=True).start()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        return _scenario(args, rng, server)
    finally:
        server.stop()


def _scenario(args: argparse.Namespace, rng: random.Random, server) -> int:
    """Run the processes, inject the faults, print the result (see the module docstring)."""
    work = Path(tempfile.mkdtemp(prefix="ciq-faults-"))
    url = server.url()
    storage = resolve_storage(url, default_path=work / "unused.db", heartbeat_interval=None)
    env = dict(os.environ, **{STORAGE_ENV: url, "PYTHONPATH": str(REPO)})
    env.pop(TEST_PAUSE_ENV, None)
    name = "faults"
    procs: dict[str, subprocess.Popen] = {}
    logs: dict[str, Path] = {}
    t0 = time.monotonic()

    def start(label: str, argv: list[str], extra: dict[str, str] | None = None) -> None:
        logs[label] = work / f"{label}.out"
        out = open(logs[label], "w")  # noqa: SIM115 - closed by the child's exit
        procs[label] = subprocess.Popen(
            argv, cwd=work, env=dict(env, **(extra or {})), stdout=out, stderr=subprocess.STDOUT
        )

    hb = ["--heartbeat", str(args.heartbeat)] if args.heartbeat else []
    if args.objective == "stencil":
        tune = [sys.executable, "-m", "ciq_optuna.cli", "tune", str(KERNEL), "--arch", "sm_90a"]
        tune += ["--minimize", "registers", "--trials", str(args.budget), "--study", name, "--no-simplify"]
        tune += ["--quiet", "--acf", str(work / "best.acf")]
        start("tune", tune)
        while _counts(storage, name) is None:
            time.sleep(0.5)
        worker = [sys.executable, "-m", "ciq_optuna.cli", "worker", "--study", name, *hb]
    else:
        import test_workers_objectives as objectives

        objectives.create_study(
            resolve_storage(url, default_path=work / "unused.db"),
            name,
            budget=args.budget,
            pool_size=8,
            sleep=0.2,
            log=work / "evaluations.jsonl",
        )
        worker = [sys.executable, str(WORKER_SCRIPT), "--study", name, *(hb or ["--heartbeat", "2"])]
    for i in range(args.workers):
        start(f"w{i}", worker, {TEST_PAUSE_ENV: "600"} if i == 0 and args.kill else None)

    events: list[str] = []

    def note(event: str) -> None:
        events.append(event)
        print(event, file=sys.stderr, flush=True)

    import faulthandler

    faulthandler.register(signal.SIGUSR1)
    victims = [f"w{i}" for i in rng.sample(range(1, args.workers), max(args.kill - 1, 0))]
    kill_at = sorted(rng.uniform(0.1, 0.7) for _ in victims)
    outage_at = 1 / 3 if args.outage else None
    budget_met: float | None = None
    paused_killed = not args.kill

    def outage() -> None:
        note(f"{time.monotonic() - t0:.0f}s: database stopped")
        server.halt()
        time.sleep(args.outage)
        server.resume()
        note(f"{time.monotonic() - t0:.0f}s: database started again")

    outage_thread = threading.Thread(target=outage)
    exited: dict[str, float] = {}
    atexit.register(lambda: [p.kill() for p in procs.values() if p.poll() is None])
    while True:
        time.sleep(0.5)
        if not paused_killed and "inside the planning lock" in logs["w0"].read_text():
            time.sleep(1.0)
            procs["w0"].send_signal(signal.SIGKILL)
            paused_killed = True
            note(f"{time.monotonic() - t0:.0f}s: SIGKILL w0 (paused inside the planning lock)")
        counts = _counts(storage, name) if not outage_thread.is_alive() else None
        if counts is None:
            continue
        fraction = counts["done"] / max(args.budget, 1)
        while kill_at and fraction >= kill_at[0]:
            kill_at.pop(0)
            victim = victims.pop(0)
            procs[victim].send_signal(signal.SIGKILL)
            note(f"{time.monotonic() - t0:.0f}s: SIGKILL {victim} at {counts['done']} done")
        if outage_at is not None and fraction >= outage_at:
            outage_at = None
            outage_thread.start()
        if int(time.monotonic() - t0) % 10 == 0:
            print(f"{time.monotonic() - t0:.0f}s: {counts}", file=sys.stderr, flush=True)
        if budget_met is None and counts["done"] >= args.budget:
            budget_met = time.monotonic()
            note(f"{budget_met - t0:.0f}s: budget met")
        for label, proc in procs.items():
            if label not in exited and proc.poll() is not None:
                exited[label] = time.monotonic()
        alive = [p for p in procs.values() if p.poll() is None]
        if not alive or (budget_met is not None and time.monotonic() - budget_met > args.exit_within):
            break
        if budget_met is None and time.monotonic() - t0 > 3600:
            note("budget not met after 3600 s")
            break

    exits = {}
    for label, proc in procs.items():
        code = proc.poll()
        if code is None:
            proc.kill()
            proc.wait()
            code = "still running (killed by the script)"
        exits[label] = code
    if outage_thread.is_alive():
        outage_thread.join()
    study = optuna.load_study(study_name=name, storage=storage)
    trials = study.get_trials(deepcopy=False)
    states = collections.Counter(t.state.name for t in trials)
    counted = [
        t for t in trials if t.state.name in ("COMPLETE", "PRUNED") and "cancelled" not in t.user_attrs
    ]
    counted += [t for t in trials if t.state.name == "FAIL" and "error" in t.user_attrs]
    configs = collections.Counter(json.dumps(t.params, sort_keys=True) for t in counted)
    plans = collections.Counter(
        json.dumps(json.loads(t.system_attrs.get("GeneticSampler:key", "null")) or t.number, sort_keys=True)
        for t in counted
    )
    tail = {label: path.read_text().strip().splitlines()[-3:] for label, path in logs.items()}
    result = {
        "objective": args.objective,
        "workers": args.workers,
        "budget": args.budget,
        "events": events,
        "exits": exits,
        "exit_s_after_budget": {
            label: round(at - budget_met, 1)
            for label, at in exited.items()
            if budget_met and exits[label] == 0
        },
        "budget_met_s": round(budget_met - t0) if budget_met else None,
        "counted": len(counted),
        "states": dict(states),
        "duplicates": sum(n - 1 for n in configs.values()),
        # the same parameters from distinct sampler plans (conditional controls) vs the same plan
        "duplicate_plans": sum(n - 1 for n in plans.values()),
        "last_lines": tail,
        "workdir": str(work),
    }
    print(json.dumps(result, indent=1), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
