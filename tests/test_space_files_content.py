"""The shipped space files (spaces/*.toml): they load, their conditions keep every conflict out of
reach, and the real compiler of their CUDA release accepts every flag and value."""

from __future__ import annotations

import re
from pathlib import Path

import optuna
import pytest

from ciq_optuna.compilers import CompilerNotFoundError, get_compiler
from ciq_optuna.space.check import check_space, reachable_error_conflicts
from ciq_optuna.space.compiler_space import CompilerSpace
from ciq_optuna.space.controls import NOT_PASSED

SPACES = Path(__file__).resolve().parent.parent / "spaces"
FILES = sorted(SPACES.glob("*.toml"))
IDS = [p.stem for p in FILES]


def _load(path: Path) -> CompilerSpace:
    return CompilerSpace.load(path)


def test_ptxas_and_nvcc_for_both_releases_exist() -> None:
    assert {"ptxas-13.0", "nvcc-13.0", "ptxas-13.5", "nvcc-13.5"} <= set(IDS)


@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_file_loads_and_matches_its_name(path: Path) -> None:
    space = _load(path)
    compiler, cuda = re.match(r"^([a-z0-9_]+)-(\d+\.\d+)$", path.stem).groups()
    assert (space.name, space.compiler, space.cuda) == (compiler, compiler, cuda)
    assert space.version >= 1 and space.description
    for control in space.controls:
        assert control.description and "\n" not in control.description, control.name
        assert control.default is not None, control.name
        assert control.values(), control.name


@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_no_configuration_reaches_an_error_conflict(path: Path) -> None:
    space = _load(path)
    assert [c for c in space.conflicts if c.effect == "error"], "the measured -O/-Ofc conflicts are declared"
    assert reachable_error_conflicts(space) == []


@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_random_configurations_hit_no_conflict_and_no_ignored_control(path: Path) -> None:
    """300 configurations drawn through Optuna: no declared conflict (error or ignored) is hit,
    and a control that the compiler would ignore is not passed."""
    space = _load(path)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=7))
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    seen_passed: set[str] = set()
    for _ in range(300):
        trial = study.ask()
        config = space.suggest(trial)
        study.tell(trial, 0.0)
        assert space.conflicts_in(config) == [], (config, space.render(config))
        passed = space.passed(config)
        seen_passed |= set(passed)
        if passed.get("override_directive_values"):
            assert {"maxrregcount", "maxntid", "minnctapersm"} & set(passed), config
        if "maxrregcount" in passed:
            assert not {"maxntid", "minnctapersm"} & set(passed), config
        if "register_usage_level" in passed:
            assert config.get("opt_level") != 0 and "fast_compile" not in passed, config
        space.complete(config)  # raises if a value or a condition is wrong
        assert all(f.startswith("-") for f in space.render(config))
    assert seen_passed == {c.name for c in space.controls}, "every control is reachable"


@pytest.mark.parametrize("release", ["13.0", "13.5"])
def test_nvcc_space_passes_the_ptxas_controls_through(release: str) -> None:
    """The nvcc file holds the ptxas back-end controls with the same values and conditions."""
    ptxas, nvcc = _load(SPACES / f"ptxas-{release}.toml"), _load(SPACES / f"nvcc-{release}.toml")
    for control in ptxas.controls:
        other = nvcc.control(control.name)
        assert other.values() == control.values(), control.name
        if control.name == "fmad":  # nvcc's own --fmad reaches cicc and ptxas
            continue
        assert (other.when, other.when_any) == (control.when, control.when_any), control.name
        if control.name not in ("maxrregcount", "fast_compile"):
            assert other.flag.startswith("-Xptxas="), other.flag
            assert other.flag.removeprefix("-Xptxas=") == control.flag


def _compiler_or_skip(space: CompilerSpace):
    try:
        return get_compiler(space.compiler, release=space.cuda)
    except CompilerNotFoundError as exc:
        hint = " (pip install 'ciq-optuna[cuda]')" if space.cuda != "13.0" else ""
        pytest.skip(f"{space.compiler} {space.cuda} not installed{hint}: {exc}")


@pytest.mark.parametrize(
    ("stem", "arch"),
    [("ptxas-13.0", "sm_90a"), ("ptxas-13.0", "sm_80"), ("ptxas-13.5", "sm_90a"), ("ptxas-13.5", "sm_80")]
    + [("nvcc-13.0", "sm_90a"), ("nvcc-13.5", "sm_90a")],
)
def test_real_compiler_accepts_every_flag(stem: str, arch: str) -> None:
    space = _load(SPACES / f"{stem}.toml")
    compiler = _compiler_or_skip(space)
    report = check_space(space, compiler, arch=arch, quick=True, progress=False)
    assert report.ok, report.format_table()
    tried = {(c.control, repr(c.value)) for c in report.checks}
    for control in space.for_arch(arch).controls:
        for value in control.values():
            if value is NOT_PASSED or not control.is_passed(value):
                continue
            if control.kind != "int":
                assert (control.name, repr(value)) in tried, (control.name, value)
