"""The fault table: a tune on the stencil example through a ptxas wrapper that injects faults.

The wrapper is a small Python script around the real ptxas. ``--version`` and ``--help`` go to
the real ptxas (``exec``), so ``--compiler-path`` accepts it; every compile takes the next fault
of a plan file (one per line, ``healthy`` once the plan is used up) and logs it:

- ``hang``: starts a helper process, then sleeps (killed by the compile timeout);
- ``crash``: compiles, then kills itself with SIGSEGV;
- ``no-cubin``: compiles elsewhere, prints the real ``-v`` and exits 0 without the cubin;
- ``garbage-v``: writes the real cubin, prints garbage instead of the ``-v`` report;
- ``truncated-v``: writes the real cubin, stops the ``-v`` report before the ``Used`` line;
- ``other-function``: writes the real cubin, renames the kernel in the ``-v`` report;
- ``other-arch``: prints the real ``-v`` report, writes a cubin for another architecture.

Run ``python benchmarks/fault_table.py [--trials 40] [--seed 0]``: it prints, per fault, the
trials injected, failed and completed, and the best registers count (the trial and whether it
was healthy), then checks the best against a compile of its flags by the real ptxas.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STENCIL = ROOT / "examples" / "stencil" / "stencil.sm_80.ptx"
ARCH = "sm_80"
#: The architecture ``other-arch`` compiles for instead.
OTHER_ARCH = "sm_90"
FAULTS = ("hang", "crash", "no-cubin", "garbage-v", "truncated-v", "other-function", "other-arch")

_WRAPPER = r'''#!{python}
"""ptxas with injected faults (written by benchmarks/fault_table.py)."""
import json, os, re, signal, subprocess, sys, tempfile, time
from pathlib import Path

CONFIG = json.loads(Path({config!r}).read_text())
REAL = CONFIG["real"]
argv = sys.argv[1:]
if "-o" not in argv:  # --version, --help: the real ptxas answers
    os.execv(REAL, [REAL, *argv])

import fcntl
with open(CONFIG["log"], "a+") as log:
    fcntl.flock(log, fcntl.LOCK_EX)
    log.seek(0)
    index = sum(1 for _ in log)
    plan = Path(CONFIG["plan"]).read_text().split()
    fault = plan[index] if index < len(plan) else "healthy"
    log.write(f"{{index}} {{fault}}\n")

out = argv[argv.index("-o") + 1]


def real(args, output):
    a = list(args)
    a[a.index("-o") + 1] = output
    return subprocess.run([REAL, *a], capture_output=True, text=True)


if fault == "healthy":
    os.execv(REAL, [REAL, *argv])
if fault == "hang":
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)", CONFIG["marker"]])
    time.sleep(3600)
if fault == "crash":
    real(argv, out)
    sys.stderr.write("ptxas info    : Compiling entry function\n")
    sys.stderr.flush()
    os.kill(os.getpid(), signal.SIGSEGV)
if fault == "no-cubin":
    with tempfile.TemporaryDirectory() as tmp:
        res = real(argv, os.path.join(tmp, "elsewhere.cubin"))
    sys.stderr.write(res.stderr)
    sys.exit(0)
if fault == "other-arch":
    res = real(argv, out + ".asked")
    os.unlink(out + ".asked")
    other = [re.sub(r"^-arch=.*", "-arch=" + CONFIG["other_arch"], a) for a in argv]
    real(other, out)
    sys.stderr.write(res.stderr)
    sys.exit(0)
res = real(argv, out)
text = res.stderr
if fault == "garbage-v":
    text = "\x7fELF?? ptxas ###\nregister file: ~~~~\n@@ used ?? barriers @@\n"
elif fault == "truncated-v":
    text = "".join(line for line in text.splitlines(True) if "Used" not in line and "Compile time" not in line)
elif fault == "other-function":
    names = re.findall(r"Compiling entry function '([^']+)'", text)
    for name in names:
        text = text.replace(name, name + "_other")
sys.stderr.write(text)
sys.exit(res.returncode)
'''


def write_wrapper(folder: Path, real_ptxas: str | Path, plan: list[str]) -> Path:
    """Write the fault-injecting wrapper (``folder/ptxas``) that follows ``plan``; returns its path.

    Its compile log is ``folder/faults.log`` (one ``index fault`` line per compile).
    """
    folder.mkdir(parents=True, exist_ok=True)
    config = folder / "config.json"
    config.write_text(
        json.dumps(
            {
                "real": str(real_ptxas),
                "plan": str(folder / "plan.txt"),
                "log": str(folder / "faults.log"),
                "marker": f"ciq-fault-helper:{folder}",
                "other_arch": OTHER_ARCH,
            }
        )
    )
    (folder / "plan.txt").write_text("\n".join(plan) + "\n")
    wrapper = folder / "ptxas"
    wrapper.write_text(_WRAPPER.format(python=sys.executable, config=str(config)))
    wrapper.chmod(0o755)
    return wrapper


def compile_log(folder: Path) -> list[str]:
    """The fault of every compile the wrapper ran, in order."""
    log = folder / "faults.log"
    return [line.split()[1] for line in log.read_text().splitlines()] if log.exists() else []


def leftover_processes(marker: str) -> list[int]:
    """Pids of live processes whose command line holds ``marker`` (from /proc)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if marker in cmdline and state != "Z":
            pids.append(int(entry.name))
    return pids


def make_plan(trials: int, per_fault: int, seed: int, hangs: int | None = None) -> list[str]:
    """One entry per compile: the baseline check and the baseline trial healthy, then ``per_fault``
    of each fault (``hangs`` hangs, which each cost a timeout) at random positions among the next
    ``trials - 1`` trials, the rest healthy."""
    slots = trials - 1
    counts = {f: per_fault for f in FAULTS} | ({"hang": hangs} if hangs is not None else {})
    faults = [f for f in FAULTS for _ in range(counts[f])]
    if len(faults) > slots:
        raise ValueError(f"{len(faults)} faults do not fit in {slots} trials")
    body = faults + ["healthy"] * (slots - len(faults))
    random.Random(seed).shuffle(body)
    return ["healthy", "healthy", *body]


def run_table(
    folder: Path,
    *,
    trials: int = 40,
    per_fault: int = 2,
    seed: int = 0,
    timeout: float = 2.0,
    hangs: int | None = None,
) -> dict:
    """Tune the stencil example through the wrapper; per fault: injected, failed, completed; the best."""
    import optuna

    from ciq_optuna.compilers import find_compiler
    from ciq_optuna.tune import TuneConfig, tune

    real = find_compiler("ptxas", release="13.0").path
    plan = make_plan(trials, per_fault, seed, hangs)
    wrapper = write_wrapper(folder / "wrapper", real, plan)
    config = TuneConfig(
        kernel=STENCIL,
        arch=ARCH,
        minimize=["registers"],
        trials=trials,
        storage=f"sqlite:///{folder / 'study.db'}",
        compiler_path=str(wrapper),
        timeout=timeout,
        seed=seed,
        acf=folder / "best.acf",
        workdir=folder / "work",
        progress=False,
    )
    result = tune(config)
    log = compile_log(folder / "wrapper")
    study = result.study
    trials_run = sorted(study.get_trials(deepcopy=False), key=lambda t: t.number)
    # compile 0 is tune's baseline check; the last one writes the ACF's plain (no -v) cubin hash;
    # a trial whose compile was skipped on a predicted binary runs no compile
    trials_run = [t for t in trials_run if not t.user_attrs.get("skipped_compile")]
    if len(log) != len(trials_run) + 2:
        raise RuntimeError(f"{len(log)} compiles for {len(trials_run)} trials: cannot match faults to trials")
    compile_of = {t.number: i + 1 for i, t in enumerate(trials_run)}  # compile 0 is the baseline check
    rows: dict[str, dict] = {}
    for t in trials_run:
        fault = log[compile_of[t.number]]
        row = rows.setdefault(fault, {"injected": 0, "failed": 0, "completed": 0, "error": "", "trials": []})
        row["injected"] += 1
        row["trials"].append(t.number)
        row["failed"] += t.state == optuna.trial.TrialState.FAIL
        row["completed"] += t.state == optuna.trial.TrialState.COMPLETE
        if t.state == optuna.trial.TrialState.FAIL and not row["error"]:
            row["error"] = t.user_attrs.get("error", "")
    best = result.best[0]
    healthy = [t.value for t in trials_run if log[compile_of[t.number]] == "healthy" and t.value is not None]
    return {
        "rows": rows,
        "best_trial": best.number,
        "best_value": best.value,
        "best_fault": log[compile_of[best.number]],
        "best_flags": best.user_attrs.get("flags", []),
        "healthy_best": min(healthy),
        "acf": result.acf_paths,
        "study": study,
        "real_ptxas": real,
        "marker": f"ciq-fault-helper:{folder / 'wrapper'}",
    }


def real_registers(real_ptxas: Path, flags: list[str]) -> int:
    """Registers of the stencil kernel compiled with ``flags`` by the real ptxas."""
    from ciq_optuna.compilers import Ptxas
    from ciq_optuna.compilers.locate import compiler_info

    with tempfile.TemporaryDirectory() as tmp:
        res = Ptxas(compiler_info("ptxas", real_ptxas)).compile(
            STENCIL, ARCH, flags, output=Path(tmp) / "o.cubin"
        )
    (entry,) = res.entries.values()
    return entry.registers


def format_table(table: dict) -> str:
    lines = [f"{'fault':<16}{'injected':>9}{'failed':>8}{'completed':>10}  first error"]
    for fault in ("healthy", *FAULTS):
        row = table["rows"].get(fault, {"injected": 0, "failed": 0, "completed": 0, "error": ""})
        example = row["error"][:110]
        lines.append(f"{fault:<16}{row['injected']:>9}{row['failed']:>8}{row['completed']:>10}  {example}")
    lines.append(
        f"best: registers {table['best_value']:g} (trial {table['best_trial']}, {table['best_fault']}); "
        f"best of the healthy trials: {table['healthy_best']:g}"
    )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=40)
    parser.add_argument("--per-fault", type=int, default=2)
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=2.0)
    parser.add_argument("--hangs", type=int, default=None, help="hang faults (default: --per-fault)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ciq-fault-table-") as tmp:
        table = run_table(
            Path(tmp),
            trials=args.trials,
            per_fault=args.per_fault,
            seed=args.seed,
            timeout=args.timeout,
            hangs=args.hangs,
        )
        print(format_table(table))
        check = real_registers(table["real_ptxas"], table["best_flags"])
        print(
            f"the real ptxas gives the best's flags {check} registers; leftover processes: "
            f"{leftover_processes(table['marker']) or 'none'}"
        )


if __name__ == "__main__":
    main()
