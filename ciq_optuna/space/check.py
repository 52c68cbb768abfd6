"""Check a compiler space file against an installed compiler (``ciq-optuna spaces check``).

A space file is data written by hand; this is its test against reality. For one architecture
the validator compiles a small reference kernel shipped with the package:

- once with no flags (the baseline),
- for every control and every value worth trying (each choice, both booleans, the low, middle
  and high value of an int range), with the fewest parent settings that make the control
  active, to see that the compiler accepts the flag and whether the code changes against the
  same command line without that control,
- once for every ``[[conflict]]``: an ``error`` one must really fail, an ``ignored`` one compile.

It also checks that the file's ``cuda`` is the compiler's release, and, without compiling,
that no configuration the conditions allow runs into an ``error`` conflict. ``quick=True``
replaces the per-value compiles by a few combined command lines (acceptance only).
"""

from __future__ import annotations

import itertools
import re
import tempfile
import time
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from ciq_optuna.compilers import Compiler
from ciq_optuna.errors import CiqError
from ciq_optuna.space.compiler_space import CompilerSpace, Conflict
from ciq_optuna.space.controls import Control, parse_arch

__all__ = [
    "ConflictCheck",
    "FlagCheck",
    "SpaceReport",
    "check_space",
    "format_space_list",
    "builtin_reference_kernel",
    "reachable_error_conflicts",
]

#: Seconds one compile of the reference kernel may take before it counts as failed.
COMPILE_TIMEOUT_S = 120.0

#: Compiles run side by side (the compilers are single-threaded processes).
DEFAULT_JOBS = 2

#: Architectures for which a reference PTX is shipped; others use the closest lower one.
_PTX_ARCHS = ("sm_75", "sm_80", "sm_90a")


# -- results ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class FlagCheck:
    """One value of one control tried on the compiler.

    ``flags`` is the whole command line tried (parents included), ``reference_flags`` the same
    without this control. ``changed`` is None when either compile failed.
    """

    control: str
    value: Any
    flags: tuple[str, ...]
    reference_flags: tuple[str, ...]
    accepted: bool
    changed: bool | None
    message: str = ""


@dataclass(frozen=True)
class ConflictCheck:
    """A declared conflict tried on the compiler: ``confirmed`` when the compiler behaved as declared
    (an ``error`` conflict failed to compile; an ``ignored`` one compiled)."""

    when: Mapping[str, Any]
    effect: str
    flags: tuple[str, ...]
    confirmed: bool
    message: str = ""


@dataclass
class SpaceReport:
    """What :func:`check_space` found; ``ok`` is the verdict, :meth:`format_table` the printout."""

    space_name: str
    space_version: int
    space_path: str
    space_cuda: str
    compiler: str
    compiler_release: str
    compiler_path: str
    arch: str
    kernel: str
    quick: bool = False
    baseline_error: str = ""
    checks: list[FlagCheck] = field(default_factory=list)
    conflicts: list[ConflictCheck] = field(default_factory=list)
    reachable_conflicts: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    undeclared_conflicts: list[str] = field(default_factory=list)
    skipped_controls: list[str] = field(default_factory=list)
    compiles: int = 0
    seconds: float = 0.0

    @property
    def cuda_matches(self) -> bool:
        return self.space_cuda == self.compiler_release

    @property
    def rejected(self) -> list[FlagCheck]:
        """Values whose flags the compiler refused."""
        return [c for c in self.checks if not c.accepted]

    @property
    def unconfirmed_conflicts(self) -> list[ConflictCheck]:
        """Declared ``error`` conflicts that compiled anyway."""
        return [c for c in self.conflicts if c.effect == "error" and not c.confirmed]

    @property
    def ok(self) -> bool:
        """True when every flag was accepted, the release matches, the baseline compiles and the
        declared error conflicts are real and unreachable."""
        return (
            self.cuda_matches
            and not self.baseline_error
            and not self.rejected
            and not self.unconfirmed_conflicts
            and not self.reachable_conflicts
            and not self.undeclared_conflicts
        )

    @property
    def exit_code(self) -> int:
        return 0 if self.ok else 1

    def controls(self) -> list[str]:
        """Names of the checked controls, in file order."""
        return list(dict.fromkeys(c.control for c in self.checks))

    def changing_controls(self) -> list[str]:
        """Controls for which at least one value changed the reference kernel's code."""
        return [n for n in self.controls() if any(c.changed for c in self.checks if c.control == n)]

    def problems(self) -> list[str]:
        """One line per reason the verdict is not OK."""
        out = []
        if not self.cuda_matches:
            out.append(
                f"the space is for CUDA {self.space_cuda} but the compiler is release {self.compiler_release}"
            )
        if self.baseline_error:
            out.append(f"the reference kernel does not compile without flags: {self.baseline_error}")
        for c in self.rejected:
            out.append(f"{c.control}={_fmt(c.value)}: rejected ({' '.join(c.flags)}): {c.message}")
        for c in self.unconfirmed_conflicts:
            out.append(
                f"conflict {_fmt_when(c.when)} is declared an error but compiled ({' '.join(c.flags)})"
            )
        for message, config in self.reachable_conflicts:
            out.append(f"the conditions allow an error conflict ({message}): {_fmt_when(config)}")
        for line in self.undeclared_conflicts:
            out.append(f"allowed combination fails (undeclared conflict): {line}")
        return out

    def format_table(self) -> str:
        """A plain-text report: one row per control, then conflicts and the verdict."""
        lines = [
            f"space {self.space_name} v{self.space_version} (CUDA {self.space_cuda}, {self.space_path})",
            f"compiler {self.compiler} {self.compiler_release} ({self.compiler_path}), arch {self.arch}",
            f"reference kernel: {self.kernel}",
            "",
        ]
        rows = [("control", "values tried", "accepted", "changes code")]
        for name in self.controls():
            mine = [c for c in self.checks if c.control == name]
            changed = [_fmt(c.value) for c in mine if c.changed]
            accepted = sum(c.accepted for c in mine)
            effect = (
                "not measured (quick)" if self.quick else ("yes: " + " ".join(changed)) if changed else "no"
            )
            rows.append(
                (
                    name,
                    " ".join(_fmt(c.value) for c in mine),
                    f"{accepted}/{len(mine)}",
                    effect,
                )
            )
        widths = [max(len(r[i]) for r in rows) for i in range(3)]
        for r in rows:
            lines.append("  ".join(r[i].ljust(widths[i]) for i in range(3)) + "  " + r[3])
        if self.skipped_controls:
            lines.append(f"not for {self.arch}: {', '.join(self.skipped_controls)}")
        lines.append("")
        errors = [c for c in self.conflicts if c.effect == "error"]
        ignored = [c for c in self.conflicts if c.effect == "ignored"]
        lines.append(
            f"conflicts: {sum(c.confirmed for c in errors)}/{len(errors)} declared errors fail to compile, "
            f"{sum(c.confirmed for c in ignored)}/{len(ignored)} declared ignored ones compile; "
            f"error conflicts reachable through the conditions: {len(self.reachable_conflicts)}"
        )
        if self.quick:
            lines.append(f"acceptance only (quick); {self.compiles} compiles in {self.seconds:.1f} s")
        else:
            lines.append(
                f"{len(self.changing_controls())} of {len(self.controls())} controls change the reference "
                f"kernel's code; {self.compiles} compiles in {self.seconds:.1f} s"
            )
        problems = self.problems()
        lines += [f"problem: {p}" for p in problems]
        lines.append("verdict: OK" if not problems else f"verdict: FAILED ({len(problems)} problem(s))")
        return "\n".join(lines)


def _fmt(value: Any) -> str:
    if value is True:
        return "true"
    if value is False:
        return "false"
    return str(value)


def _fmt_when(when: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={_fmt(v)}" for k, v in when.items())


# -- the reference kernel ---------------------------------------------------------------------


def builtin_reference_kernel(compiler: str, arch: str) -> str:
    """File name (in ``ciq_optuna/data``) of the built-in reference kernel for ``compiler`` and ``arch``.

    nvcc compiles the CUDA source; ptxas the PTX generated for ``arch``, or for the closest
    lower architecture without an ``a``/``f`` suffix (PTX for sm_80 compiles for every sm_80+
    target).
    """
    if compiler == "nvcc":
        return "reference_kernel.cu"
    number, suffix = parse_arch(arch)
    if f"sm_{number}{suffix}" in _PTX_ARCHS:
        return f"reference_kernel.sm_{number}{suffix}.ptx"
    lower = [a for a in _PTX_ARCHS if not a[-1].isalpha() and int(a[3:]) <= number]
    if not lower:
        raise CiqError(f"no built-in reference PTX for {arch} (have {', '.join(_PTX_ARCHS)}); pass a kernel")
    return f"reference_kernel.{lower[-1]}.ptx"


# -- conditions, without compiling ------------------------------------------------------------


def _configs(space: CompilerSpace, names: set[str]) -> Iterator[dict[str, Any]]:
    """Every configuration of the controls in ``names`` that the conditions allow (file order)."""
    controls = [c for c in space.controls if c.name in names]

    def walk(i: int, config: dict[str, Any]) -> Iterator[dict[str, Any]]:
        if i == len(controls):
            yield dict(config)
            return
        control = controls[i]
        if not space.is_active(control, config):
            yield from walk(i + 1, config)
            return
        for value in control.values():
            config[control.name] = value
            yield from walk(i + 1, config)
        del config[control.name]

    yield from walk(0, {})


def _ancestors(space: CompilerSpace, names: set[str]) -> set[str]:
    """``names`` and every control their conditions mention, transitively."""
    out, todo = set(), list(names)
    while todo:
        name = todo.pop()
        if name in out:
            continue
        out.add(name)
        control = space.control(name)
        for cond in (control.when, *control.when_any):
            todo.extend(cond)
    return out


def reachable_error_conflicts(space: CompilerSpace, limit: int = 200_000) -> list[tuple[str, dict[str, Any]]]:
    """Configurations the conditions allow that run into a conflict of effect ``error``.

    Enumerates the controls the error conflicts mention and their condition ancestors (a few
    dozen combinations in practice); ``limit`` bounds the walk for pathological files.
    """
    errors = [c for c in space.conflicts if c.effect == "error"]
    if not errors:
        return []
    names = _ancestors(space, {n for c in errors for n in c.when if n in {x.name for x in space.controls}})
    found: list[tuple[str, dict[str, Any]]] = []
    for config in itertools.islice(_configs(space, names), limit):
        for conflict in space.conflicts_in(config):
            if conflict.effect == "error":
                shown = {k: v for k, v in config.items() if space.control(k).is_passed(v)}
                found.append((conflict.message or _fmt_when(conflict.when), shown))
                if len(found) >= 10:
                    return found
    return found


# -- compiling --------------------------------------------------------------------------------


def _values_to_try(control: Control) -> list[Any]:
    """Each choice, both booleans, or the low, middle and high value of an int range."""
    values = [v for v in control.values() if control.is_passed(v)]
    if control.kind == "int" and len(values) > 3:
        return [values[0], values[len(values) // 2], values[-1]]
    return values


def _value_meeting(control: Control, spec: Any) -> Any:
    """A state of ``control`` that satisfies one condition entry (for building conflict configs)."""
    if spec == "passed":
        return next(v for v in control.values() if control.is_passed(v))
    if spec == "not_passed":
        return control.baseline_value()
    first = spec[0] if isinstance(spec, list) else spec
    return control.baseline_value() if first == "not_passed" else first


def _first_line(text: str) -> str:
    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip()]
    errors = [ln for ln in lines if re.search(r"\b(fatal|error)\b", ln, re.IGNORECASE)]
    return (errors or lines or ["(no message)"])[0][:300]


class _Runner:
    """Compiles one kernel with many flag lists, each distinct list once."""

    def __init__(
        self,
        compiler: Compiler,
        source: Path,
        arch: str,
        workdir: Path,
        timeout: float,
        jobs: int,
        progress: bool,
    ) -> None:
        self.compiler, self.source, self.arch = compiler, source, arch
        self.workdir, self.timeout, self.jobs, self.progress = workdir, timeout, jobs, progress
        self.results: dict[tuple[str, ...], tuple[bool, str, str | None]] = {}

    def run_all(self, flag_lists: list[tuple[str, ...]]) -> None:
        todo = list(dict.fromkeys(f for f in flag_lists if f not in self.results))
        bar = None
        if self.progress and todo:
            from tqdm import tqdm

            bar = tqdm(total=len(todo), desc="compiling", unit="compile", leave=False)
        with ThreadPoolExecutor(max_workers=max(1, self.jobs)) as pool:
            for flags, result in zip(todo, pool.map(self._compile, todo, range(len(todo))), strict=True):
                self.results[flags] = result
                if bar is not None:
                    bar.update()
        if bar is not None:
            bar.close()

    def _compile(self, flags: tuple[str, ...], index: int) -> tuple[bool, str, str | None]:
        output = self.workdir / f"c{len(self.results)}_{index}.cubin"
        result = self.compiler.compile(
            self.source, self.arch, list(flags), output=output, timeout=self.timeout, verbose=False
        )
        if not result.ok:
            return False, _first_line(result.error or result.stderr), None
        return True, "", result.code_hash


def _covering_configs(space: CompilerSpace) -> list[dict[str, Any]]:
    """Few configurations that together pass every value worth trying of every control.

    Greedy: each round walks the controls in file order and gives every active control a value
    not yet covered (else its baseline), so parents take their values first and their children
    follow once the parents are back to "not passed". The conditions hold in each configuration.
    """
    pending = {c.name: list(_values_to_try(c)) for c in space.controls}
    configs: list[dict[str, Any]] = []
    while any(pending.values()):
        config: dict[str, Any] = {}
        covered = False
        for control in space.controls:
            if not space.is_active(control, config):
                continue
            todo = pending[control.name]
            covered = covered or bool(todo)
            config[control.name] = todo.pop(0) if todo else control.baseline_value()
        if not covered:
            break
        configs.append(config)
    return configs


def _plan_one_by_one(space: CompilerSpace) -> list[tuple[Control, Any, tuple[str, ...], tuple[str, ...]]]:
    """(control, value, flags, flags without the control) for every value worth trying."""
    plan = []
    for control in space.controls:
        for value in _values_to_try(control):
            config = space.satisfying_config(control.name, value)
            reference = dict(config)
            reference[control.name] = control.baseline_value()
            plan.append((control, value, tuple(space.render(config)), tuple(space.render(reference))))
    return plan


def _check_one_by_one(space: CompilerSpace, runner: _Runner, extra: list[tuple[str, ...]]) -> list[FlagCheck]:
    plan = _plan_one_by_one(space)
    runner.run_all(extra + [f for _, _, a, b in plan for f in (a, b)])
    checks = []
    for control, value, flags, ref_flags in plan:
        ok, msg, digest = runner.results[flags]
        ref_ok, _, ref_digest = runner.results[ref_flags]
        changed = (digest != ref_digest) if ok and ref_ok else None
        checks.append(FlagCheck(control.name, value, flags, ref_flags, ok, changed, msg))
    return checks


def _check_combined(
    space: CompilerSpace, runner: _Runner, extra: list[tuple[str, ...]]
) -> tuple[list[FlagCheck], list[str]]:
    """Acceptance only, with the covering configurations; a combination that fails is retried
    one control at a time, so the report names the refused flag or the undeclared conflict."""
    configs = _covering_configs(space)
    combos = [tuple(space.render(c)) for c in configs]
    runner.run_all(extra + combos)
    found: dict[tuple[str, str], FlagCheck] = {}
    retry: dict[tuple[str, str], tuple[str, Any, tuple[str, ...]]] = {}
    failing: list[tuple[tuple[str, ...], list[tuple[str, str]]]] = []
    for config, flags in zip(configs, combos, strict=True):
        ok, msg, _ = runner.results[flags]
        keys = []
        for name, value in config.items():
            if not space.control(name).is_passed(value):
                continue
            key = (name, repr(value))
            keys.append(key)
            if ok and key not in found:
                found[key] = FlagCheck(name, value, flags, (), True, None)
            elif not ok:
                retry[key] = (name, value, tuple(space.render(space.satisfying_config(name, value))))
        if not ok:
            failing.append((flags, keys))
    runner.run_all([single for _, _, single in retry.values()])
    for key, (name, value, single) in retry.items():
        ok, msg, _ = runner.results[single]
        if key not in found or not ok:
            found[key] = FlagCheck(name, value, single, (), ok, None, msg)
    undeclared = [
        f"{' '.join(flags)}: {runner.results[flags][1]}"
        for flags, keys in failing
        if all(found[k].accepted for k in keys)
    ]
    order = {c.name: i for i, c in enumerate(space.controls)}
    checks = sorted(
        found.values(),
        key=lambda c: (order[c.control], space.control(c.control).values().index(c.value)),
    )
    return checks, undeclared


def _conflict_plan(space: CompilerSpace) -> list[tuple[Conflict, tuple[str, ...]]]:
    """One command line per declared conflict whose controls exist for this architecture."""
    names = {c.name for c in space.controls}
    plan = []
    for conflict in space.conflicts:
        if all(name in names for name in conflict.when):
            config = {n: _value_meeting(space.control(n), s) for n, s in conflict.when.items()}
            plan.append((conflict, tuple(space.render(config))))
    return plan


def check_space(
    space: CompilerSpace,
    compiler: Compiler,
    *,
    arch: str,
    reference_kernel: str | Path | None = None,
    progress: bool = True,
    quick: bool = False,
    jobs: int = DEFAULT_JOBS,
    timeout: float = COMPILE_TIMEOUT_S,
) -> SpaceReport:
    """Check ``space`` against ``compiler`` (an adapter from ``ciq_optuna.compilers.get_compiler``).

    ``reference_kernel`` defaults to the kernel shipped in ``ciq_optuna/data`` (PTX for ptxas,
    CUDA source for nvcc). ``quick`` checks only that the flags are accepted, with a handful of
    combined command lines instead of two compiles per value (no "changes code" column).
    ``jobs`` compiles run side by side. Raises CiqError when the space is for another compiler
    or the kernel file is missing; everything else lands in the report.

    >>> report = check_space(CompilerSpace.load("spaces/ptxas-13.0.toml"), get_compiler("ptxas"), arch="sm_90a")
    >>> print(report.format_table()); raise SystemExit(report.exit_code)
    """
    if compiler.name != space.compiler:
        raise CiqError(f"space {space.name!r} is for {space.compiler}, not {compiler.name}")
    local = space.for_arch(arch)
    start = time.monotonic()
    with ExitStack() as stack:
        if reference_kernel is None:
            kernel_name = builtin_reference_kernel(space.compiler, arch)
            source = stack.enter_context(
                resources.as_file(resources.files("ciq_optuna") / "data" / kernel_name)
            )
            kernel_label = f"{kernel_name} (built in)"
        else:
            source = Path(reference_kernel)
            if not source.is_file():
                raise CiqError(f"reference kernel not found: {source}")
            kernel_label = str(source)
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="ciq-spaces-check-")))
        runner = _Runner(compiler, Path(source), arch, workdir, timeout, jobs, progress)
        report = SpaceReport(
            space_name=space.name,
            space_version=space.version,
            space_path=str(space.path or "(in memory)"),
            space_cuda=space.cuda,
            compiler=compiler.name,
            compiler_release=compiler.info.release,
            compiler_path=str(compiler.info.path),
            arch=arch,
            kernel=kernel_label,
            quick=quick,
            skipped_controls=[c.name for c in space.controls if not c.applies_to(arch)],
        )
        baseline = tuple(local.render(local.baseline()))
        conflict_plan = _conflict_plan(local)
        extra = [baseline] + [flags for _, flags in conflict_plan]
        if quick:
            report.checks, report.undeclared_conflicts = _check_combined(local, runner, extra)
        else:
            report.checks = _check_one_by_one(local, runner, extra)
        base_ok, base_msg, _ = runner.results[baseline]
        report.baseline_error = "" if base_ok else base_msg
        for conflict, flags in conflict_plan:
            ok, msg, _ = runner.results[flags]
            confirmed = (not ok) if conflict.effect == "error" else ok
            report.conflicts.append(
                ConflictCheck(dict(conflict.when), conflict.effect, flags, confirmed, msg)
            )
        report.reachable_conflicts = reachable_error_conflicts(local)
        report.compiles = len(runner.results)
    report.seconds = time.monotonic() - start
    return report


# -- listing ----------------------------------------------------------------------------------


def format_space_list() -> str:
    """A table of the space files found (``ciq-optuna spaces list``)."""
    from ciq_optuna.space.files import available_spaces

    rows = [("compiler", "cuda", "name", "version", "controls", "file")]
    for f in available_spaces():
        try:
            space = CompilerSpace.load(f.path)
            rows.append(
                (f.compiler, f.cuda, space.name, str(space.version), str(len(space.controls)), str(f.path))
            )
        except CiqError as exc:
            rows.append((f.compiler, f.cuda, "?", "?", "?", f"{f.path} (malformed: {exc})"))
    if len(rows) == 1:
        return "no space files found"
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    return "\n".join(
        "  ".join(r[i].ljust(widths[i]) for i in range(len(widths))) + "  " + r[-1] for r in rows
    )
