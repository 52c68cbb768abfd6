"""``ciq-optuna tune KERNEL --arch sm_90a --minimize spill-bytes``."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

from ciq_optuna.cli.types import NORMAL, VERBOSE, positive_float, positive_int
from ciq_optuna.objectives.metrics import COMPILE_METRICS


def _metric_list(text: str) -> list[str]:
    return [m.strip() for m in text.split(",") if m.strip()]


def register(sub: argparse._SubParsersAction) -> None:
    metrics = ", ".join(COMPILE_METRICS)
    p = sub.add_parser(
        "tune",
        help="search compiler controls for a kernel and write the best ACF",
        description=(
            "Tune the compiler controls of KERNEL (.ptx through ptxas, .cu through nvcc). The study is "
            "stored in SQLite (ciq-optuna.db) unless --storage says otherwise; running the same command "
            "again resumes it. --trials is the study's total budget. "
            f"Compile metrics: {metrics}."
        ),
    )
    p.add_argument("kernel", type=Path, help="the kernel: a .ptx (ptxas) or .cu (nvcc) file")
    p.add_argument("--arch", required=True, help="target architecture, e.g. sm_80 or sm_90a")
    p.add_argument(
        "--minimize",
        type=_metric_list,
        action="extend",
        default=[],
        metavar="METRIC[,METRIC]",
        help="metric(s) to minimise; several metrics make a multi-objective (Pareto) search",
    )
    p.add_argument(
        "--maximize",
        type=_metric_list,
        action="extend",
        default=[],
        metavar="METRIC[,METRIC]",
        help="metric(s) to maximise",
    )
    p.add_argument(
        "--trials",
        type=positive_int,
        default=64,
        help="total trials of the study's search (default 64); simplifying the winner adds at most "
        "one trial per control it passes (see --no-simplify)",
    )
    p.add_argument(
        "--jobs",
        type=positive_int,
        default=1,
        help="trials evaluated in parallel in this process (default 1)",
    )
    p.add_argument(
        "--storage", help="Optuna storage URL (default sqlite:///ciq-optuna.db; or $CIQ_OPTUNA_STORAGE)"
    )
    p.add_argument("--study", dest="study_name", help="study name (default: kernel-arch-compiler-metrics)")
    p.add_argument(
        "--compiler-path", help="the ptxas or nvcc executable (default: $CUDA_HOME, PATH, pip wheels)"
    )
    p.add_argument(
        "--space",
        dest="spaces",
        type=Path,
        action="append",
        default=[],
        help="a space file to use instead of the one matching the compiler (repeatable)",
    )
    p.add_argument(
        "--measure-cmd",
        dest="measure_command",
        help="shell command measuring each new binary, e.g. './bench {cubin}'; fields: "
        "{cubin} {kernel} {arch} {flags}",
    )
    p.add_argument(
        "--measure-regex", help="regex with one group reading the metric from the command's output"
    )
    p.add_argument("--measure-name", default="measured", help="metric name of the command's value")
    p.add_argument(
        "--timeout", type=positive_float, default=120.0, help="seconds per compile and per measurement"
    )
    p.add_argument("--seed", type=int, help="sampler seed (reproducible searches)")
    p.add_argument(
        "--pool-size", type=int, help="candidates per generation (default: derived from the space)"
    )
    p.add_argument("--acf", type=Path, help="where to write the best ACF (default KERNEL.ARCH.acf)")
    p.add_argument(
        "--workdir", type=Path, help="where distinct binaries are kept (default .ciq-optuna/STUDY)"
    )
    p.add_argument(
        "--no-screen",
        dest="screen",
        action="store_false",
        help="skip the one-control changes of the baseline tried first (default: --trials/8 of them) "
        "and, with several objectives, the candidates that seek the Pareto front's corners",
    )
    p.add_argument(
        "--no-simplify",
        dest="simplify",
        action="store_false",
        help="keep the winner as found (default: drop its controls that do not help, one extra "
        "trial per passed control)",
    )
    p.add_argument(
        "--store",
        type=Path,
        help="also write the winner into this ACF store (keyed by kernel content, arch, compiler "
        "version and objective); refused if the store already holds that key, unless --force",
    )
    p.add_argument("--force", action="store_true", help="replace the store's entry for this key")
    p.add_argument(
        "--pareto-pick",
        metavar="first|TRIAL",
        help="with several objectives and --store: the Pareto point to store, 'first' (the front's "
        "first point, best on the first objective, as the summary compares) or a trial number",
    )
    p.add_argument(
        "--warm-from",
        type=Path,
        action="append",
        default=[],
        metavar="ACF",
        help="seed the search with this ACF's winner and its neighbours (repeatable); with --store, "
        "the store's entries for this kernel under another compiler version, arch or kernel "
        "version are used too",
    )
    p.add_argument(
        "--no-warm-start",
        dest="warm_start",
        action="store_false",
        help="do not seed the search from the store's other entries for this kernel",
    )
    p.add_argument(
        "--explain",
        action="store_true",
        help="after the summary, explain the winner (as 'ciq-optuna explain': metrics, SASS mix, "
        "each control's share)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ciq_optuna.objectives.work_saved import format_work_saved  # lazy, as tune: keeps --help fast
    from ciq_optuna.summary import front_text, summary_text  # lazy, as above
    from ciq_optuna.tune import TuneConfig, tune  # lazy: `ciq-optuna --help` does not load Optuna

    config = TuneConfig(
        kernel=args.kernel,
        arch=args.arch,
        minimize=args.minimize,
        maximize=args.maximize,
        trials=args.trials,
        storage=args.storage,
        study_name=args.study_name,
        compiler_path=args.compiler_path,
        spaces=args.spaces,
        measure_command=args.measure_command,
        measure_regex=args.measure_regex,
        measure_name=args.measure_name,
        timeout=args.timeout,
        jobs=args.jobs,
        seed=args.seed,
        pool_size=args.pool_size,
        acf=args.acf,
        workdir=args.workdir,
        progress=args.verbosity == NORMAL,
        log_trials=args.verbosity == VERBOSE,
        simplify=args.simplify,
        screen=args.screen,
        store=args.store,
        force=args.force,
        warm_start=args.warm_start,
        warm_from=args.warm_from,
        pareto_pick=args.pareto_pick,
    )
    result = tune(config)
    s = result.stats
    print()
    simplified = f", {s['simplification']} to simplify" if s["simplification"] else ""
    interrupted = f" ({s['interrupted']} of them interrupted by Ctrl-C or SIGTERM)" if s["interrupted"] else ""
    print(
        f"trials: {s['trials']} ({s['complete']} complete, {s['failed']} failed{interrupted}{simplified}); "
        f"distinct binaries: {s['distinct_binaries']}; measurements reused: {s['reused_measurements']}"
    )
    print(format_work_saved(s["work_saved"]))
    if result.baseline is None:
        print("(no baseline trial in this study: the compiler-default configuration did not complete)")
    metrics = list(config.minimize) + list(config.maximize)
    if len(result.study.directions) > 1:
        print(f"Pareto front: {len(result.best)} point(s), one ACF each (* = objective)")
        print(front_text(result.best, metrics, result.study))
        print()
        first = result.best[0]
        print(f"baseline (compiler defaults) vs the front's first point, trial {first.number}:")
    else:
        first = result.best[0]
        print(
            f"baseline (compiler defaults) vs best, trial {first.number}: "
            f"{' '.join(first.user_attrs.get('flags', [])) or '(no flags)'}"
        )
    print(summary_text(result.summary))
    print("(* = objective)")
    for line in result.warnings:
        print(line)
    for path in result.acf_paths:
        print(f"wrote {path}")
    if result.acf_paths and Path(config.kernel).suffix in (".ptx", ".cu"):
        print(apply_hint(result.acf_paths[0], config.kernel, config.arch))
    if result.store_path is not None:
        print(f"stored {result.store_path}")
    if args.explain and len(result.acf_paths) == 1:
        _explain(result, args)
    return 0


def _explain(result, args: argparse.Namespace) -> None:
    """The explanation of the winner, with the study's trials at hand."""
    from ciq_optuna.acf import read_acf
    from ciq_optuna.explain import compiler_for_acf, explain, format_explanation

    acf = read_acf(result.acf_paths[0])
    kernel, compiler = compiler_for_acf(acf, args.kernel, args.compiler_path)
    print()
    print(format_explanation(explain(acf, kernel, compiler, study=result.study)))


def apply_hint(acf: Path, kernel: Path, arch: str) -> str:
    """How to compile with the ACF just written, with the stock compiler."""
    tool = "nvcc -cubin" if Path(kernel).suffix == ".cu" else "ptxas"
    out = shlex.quote(str(Path(kernel).with_suffix(".cubin").name))
    a, k = shlex.quote(str(acf)), shlex.quote(str(kernel))
    return (
        f"apply it: {tool} -arch={arch} $(ciq-optuna acf flags {a}) {k} -o {out}\n"
        f"  or without Python: ciq-optuna acf export {a} -o FILE.opts, then "
        f"{tool} -arch={arch} --options-file FILE.opts {k} -o {out}"
    )
