"""The space model: loading and checking space files, genes, conditions, and the way back."""

from __future__ import annotations

import optuna
import pytest

from ciq_optuna.errors import CiqError
from ciq_optuna.space.app import Const, IntRange
from ciq_optuna.space.compiler_space import CompilerSpace
from ciq_optuna.space.controls import NOT_PASSED
from ciq_optuna.space.files import available_spaces, find_space
from ciq_optuna.space.search import SearchSpace

SPACE = """
schema = 1
name = "ptxas"
compiler = "ptxas"
cuda = "13.0"
version = 1
description = "test space"

[[control]]
name = "opt_level"
flag = "-O{value}"
kind = "choice"
values = [0, 1, 2, 3]
default = 3
not_passed = true
description = "optimisation level"

[[control]]
name = "fast_compile"
flag = "--Ofast-compile={value}"
kind = "choice"
values = ["min", "mid", "max"]
default = "0"
not_passed = true
description = "fast compile"
when = { opt_level = "not_passed" }

[[control]]
name = "maxrregcount"
flag = "--maxrregcount={value}"
kind = "int"
low = 16
high = 256
step = 8
default = 255
not_passed = true
description = "register cap"

[[control]]
name = "maxntid"
flag = "--maxntid={value}"
kind = "int"
low = 32
high = 1024
log = true
default = 1024
not_passed = true
description = "threads"
when = { maxrregcount = "not_passed" }

[[control]]
name = "override"
flag = "--override-directive-values"
kind = "switch"
default = false
description = "override"
when_any = [{ maxrregcount = "passed" }, { maxntid = "passed" }]

[[control]]
name = "fmad"
flag = "--fmad={value}"
kind = "bool"
default = true
description = "fused multiply-add"
archs = ["sm_80+"]

[[conflict]]
when = { opt_level = [0, 2, 3], fast_compile = ["min", "mid"] }
effect = "error"
message = "Conflicting options"
"""


@pytest.fixture()
def space() -> CompilerSpace:
    return CompilerSpace.from_text(SPACE)


def _random_configs(space: CompilerSpace, n: int, seed: int = 0):
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=seed))
    for _ in range(n):
        trial = study.ask()
        config = space.suggest(trial)
        study.tell(trial, 0.0)
        yield trial, config


def test_genes_cover_every_control_state(space: CompilerSpace) -> None:
    genes = space.distributions()
    assert set(genes) == {
        "ptxas.opt_level",
        "ptxas.fast_compile",
        "ptxas.maxrregcount.passed",
        "ptxas.maxrregcount",
        "ptxas.maxntid.passed",
        "ptxas.maxntid",
        "ptxas.override",
        "ptxas.fmad",
    }
    assert NOT_PASSED in genes["ptxas.opt_level"].choices
    assert genes["ptxas.maxntid"].choices == (32, 64, 128, 256, 512, 1024)
    assert isinstance(genes["ptxas.maxrregcount"], optuna.distributions.IntDistribution)


def test_suggest_respects_conditions_and_round_trips(space: CompilerSpace) -> None:
    seen_not_passed = seen_children = 0
    for trial, config in _random_configs(space, 300):
        if config["opt_level"] != NOT_PASSED:
            assert "fast_compile" not in config
        if config["maxrregcount"] != NOT_PASSED:
            assert "maxntid" not in config
        if "override" in config:
            seen_children += 1
            assert config["maxrregcount"] != NOT_PASSED or config.get("maxntid", NOT_PASSED) != NOT_PASSED
        seen_not_passed += config["opt_level"] == NOT_PASSED
        assert not [c for c in space.conflicts_in(config) if c.effect == "error"]
        assert space.config_from_params(trial.params) == config
        assert space.params_from_config(config) == trial.params
    assert seen_not_passed > 0 and seen_children > 0


def test_render_in_file_order_and_not_passed_omitted(space: CompilerSpace) -> None:
    config = {"opt_level": 2, "maxrregcount": 64, "override": True, "fmad": False}
    assert space.render(config) == ["-O2", "--maxrregcount=64", "--override-directive-values", "--fmad=false"]
    assert space.render({"opt_level": NOT_PASSED, "maxrregcount": NOT_PASSED, "fmad": True}) == [
        "--fmad=true"
    ]


def test_baseline_passes_only_what_has_no_not_passed_state(space: CompilerSpace) -> None:
    base = space.baseline()
    assert space.render(base) == ["--fmad=true"]
    assert space.satisfying_config("override", True)["maxrregcount"] != NOT_PASSED
    assert space.satisfying_config("fast_compile", "min")["opt_level"] == NOT_PASSED


def test_complete_rejects_inconsistent_configs(space: CompilerSpace) -> None:
    with pytest.raises(CiqError, match="conditions do not hold"):
        space.complete({"opt_level": 3, "fast_compile": "min"})
    with pytest.raises(CiqError, match="not one of"):
        space.complete({"opt_level": 7})
    with pytest.raises(CiqError, match="no control"):
        space.complete({"nonsense": 1})


def test_for_arch_drops_controls(space: CompilerSpace) -> None:
    assert "fmad" not in [c.name for c in space.for_arch("sm_75").controls]
    assert "fmad" in [c.name for c in space.for_arch("sm_90a").controls]
    with pytest.raises(CiqError, match="unknown architecture"):
        space.for_arch("hopper")


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (('kind = "switch"', 'kind = "toggle"'), "kind must be one of"),
        (('when = { opt_level = "not_passed" }', 'when = { later = "passed" }'), "not defined earlier"),
        (("high = 256", "high = 250"), "divisible by step"),
        (("schema = 1", "schema = 9"), "schema must be 1"),
        (("values = [0, 1, 2, 3]", "values = []"), "non-empty list"),
        (('flag = "--maxrregcount={value}"', 'flag = "--maxrregcount"'), "must contain {value}"),
        (('archs = ["sm_80+"]', 'archs = ["ampere"]'), "unknown architecture spec"),
        (('description = "threads"', 'description = "threads"\ncolour = 1'), "unknown key"),
        (("[[conflict]]", "[[conflict]]\n[conflict.x]"), "valid TOML|needs a 'when'"),
    ],
)
def test_malformed_space_files_give_clear_errors(edit: tuple[str, str], message: str) -> None:
    text = SPACE.replace(*edit)
    assert text != SPACE
    with pytest.raises(CiqError, match=message):
        CompilerSpace.from_text(text)


def test_hash_changes_with_content_not_comments(space: CompilerSpace) -> None:
    assert CompilerSpace.from_text("# note\n" + SPACE).sha256 == space.sha256
    assert CompilerSpace.from_text(SPACE.replace("low = 16", "low = 24")).sha256 != space.sha256


def test_shipped_space_files_load_and_are_found() -> None:
    files = available_spaces()
    assert {("ptxas", "13.0"), ("nvcc", "13.0"), ("ptxas", "13.5"), ("nvcc", "13.5")} <= {
        (f.compiler, f.cuda) for f in files
    }
    for f in files:
        CompilerSpace.load(f.path).for_arch("sm_90a")
    assert find_space("ptxas", "13.0.88").name == "ptxas-13.0.toml"
    with pytest.raises(CiqError, match="available: .*ptxas 13.0"):
        find_space("ptxas", "11.8")


def test_app_and_compiler_parameters_mix_in_one_trial(space: CompilerSpace) -> None:
    search = SearchSpace(
        {"tile": {"m": IntRange(16, 128, 16), "n": [1, 2]}, "stages": Const(3), "k": 7}, [space]
    )
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=3))
    trial = study.ask()
    cand = search.suggest(trial)
    assert set(cand.app) == {"tile", "stages", "k"} and cand.app["stages"] == 3 and cand.app["k"] == 7
    assert cand.app["tile"]["m"] % 16 == 0
    assert "tile.m" in trial.params and "ptxas.opt_level" in trial.params
    assert search.candidate_from_params(trial.params) == cand
    assert cand.flags["ptxas"] == space.render(cand.controls["ptxas"])
    with pytest.raises(CiqError, match="collide"):
        SearchSpace({"ptxas": {"x": [1, 2]}}, [space])


def test_one_change_configs_change_exactly_one_top_level_control(space: CompilerSpace) -> None:
    base_flags = space.render(space.baseline())
    configs = space.one_change_configs()
    flags = [space.render(c) for c in configs]
    assert flags[:4] == [
        ["-O0", "--fmad=true"],
        ["-O1", "--fmad=true"],
        ["-O2", "--fmad=true"],
        ["-O3", "--fmad=true"],
    ]
    assert ["--Ofast-compile=min", "--fmad=true"] in flags and ["--fmad=false"] in flags
    for f in flags:
        assert len(set(f) ^ set(base_flags)) in (1, 2)  # one flag added, or one value swapped
    assert not any("maxrregcount" in space.passed(c) for c in configs)  # ints are not screened


def test_a_release_without_its_own_file_gets_the_nearest_of_its_major_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    have = {(f.compiler, f.cuda) for f in available_spaces()}
    assert {("ptxas", "12.8"), ("ptxas", "13.0"), ("ptxas", "13.5"), ("nvcc", "13.0")} <= have
    assert ("ptxas", "13.1") not in have and ("ptxas", "12.4") not in have
    with caplog.at_level("WARNING", logger="ciq_optuna.space.files"):
        assert find_space("ptxas", "13.0.88").name == "ptxas-13.0.toml"
        assert not caplog.records  # its own file: no warning
        assert find_space("ptxas", "13.1").name == "ptxas-13.0.toml"  # the closest earlier release
        assert find_space("ptxas", "13.9").name == "ptxas-13.5.toml"
        assert find_space("ptxas", "12.4").name == "ptxas-12.8.toml"  # none earlier: the closest later
        assert find_space("nvcc", "13.2").name == "nvcc-13.0.toml"
    assert len(caplog.records) == 4
    assert "no space file for ptxas 13.1: using ptxas-13.0.toml" in caplog.records[0].getMessage()
    with pytest.raises(CiqError, match="no search space for ptxas 11.8"):
        find_space("ptxas", "11.8")  # another major version: no guess
