"""The space validator against the real ptxas 13.0: it catches broken space files."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import pytest

from ciq_optuna.compilers import CompilerNotFoundError, get_compiler
from ciq_optuna.errors import CiqError
from ciq_optuna.space.check import (
    builtin_reference_kernel,
    check_space,
    format_space_list,
    reachable_error_conflicts,
)
from ciq_optuna.space.compiler_space import CompilerSpace

SPACES = Path(__file__).resolve().parent.parent / "spaces"

HEADER = """schema = 1
name = "ptxas"
compiler = "ptxas"
cuda = "{cuda}"
version = 1
description = "test space"
"""

MAXRREGCOUNT = """
[[control]]
name = "maxrregcount"
flag = "--maxrregcount={value}"
kind = "int"
low = 32
high = 128
step = 32
default = 255
not_passed = true
description = "register cap"
"""


@pytest.fixture(scope="module")
def ptxas():
    try:
        return get_compiler("ptxas", release="13.0")
    except CompilerNotFoundError as exc:
        pytest.skip(f"ptxas 13.0 not installed: {exc}")


def write_space(tmp_path: Path, body: str, cuda: str = "13.0") -> CompilerSpace:
    path = tmp_path / f"ptxas-{cuda}.toml"
    path.write_text(HEADER.format(cuda=cuda) + body)
    return CompilerSpace.load(path)


@pytest.mark.parametrize("quick", [False, True])
def test_misspelled_flag_is_reported_and_fails_the_verdict(tmp_path: Path, ptxas, quick: bool) -> None:
    space = write_space(
        tmp_path,
        MAXRREGCOUNT
        + """
[[control]]
name = "typo"
flag = "--maxregcount={value}"
kind = "choice"
values = [64]
default = 255
not_passed = true
description = "misspelled maxrregcount"
""",
    )
    report = check_space(space, ptxas, arch="sm_90a", progress=False, quick=quick)
    assert not report.ok and report.exit_code == 1
    assert [(c.control, c.value) for c in report.rejected] == [("typo", 64)]
    assert "maxregcount" in report.rejected[0].message
    table = report.format_table()
    assert "verdict: FAILED" in table and "typo=64: rejected" in table
    assert all(c.accepted for c in report.checks if c.control == "maxrregcount")


def test_rejected_value_of_a_valid_flag(tmp_path: Path, ptxas) -> None:
    space = write_space(
        tmp_path,
        """
[[control]]
name = "def_load_cache"
flag = "-dlcm={value}"
kind = "choice"
values = ["cg", "ld"]
default = "none"
not_passed = true
description = "ld is not a cache operator"
""",
    )
    report = check_space(space, ptxas, arch="sm_90a", progress=False)
    assert [c.value for c in report.rejected] == ["ld"]
    assert "Invalid default cache modifier" in report.rejected[0].message


def test_reports_which_controls_change_the_code(tmp_path: Path, ptxas) -> None:
    """--maxrregcount changes the reference kernel; --split-compile (threads only) does not."""
    space = write_space(
        tmp_path,
        MAXRREGCOUNT
        + """
[[control]]
name = "split_compile"
flag = "--split-compile={value}"
kind = "int"
low = 1
high = 4
default = 1
not_passed = true
description = "compiler threads"
""",
    )
    report = check_space(space, ptxas, arch="sm_90a", progress=False)
    assert report.ok, report.format_table()
    assert report.changing_controls() == ["maxrregcount"]
    assert [c.value for c in report.checks if c.control == "maxrregcount"] == [32, 96, 128]
    assert "split_compile" in report.format_table()


CONFLICTING = """
[[control]]
name = "opt_level"
flag = "-O{value}"
kind = "choice"
values = [3]
default = 3
not_passed = true
description = "level"

[[control]]
name = "fast_compile"
flag = "--Ofast-compile={value}"
kind = "choice"
values = ["min"]
default = "0"
not_passed = true
description = "fast compile"
"""


def test_conditions_that_allow_an_error_conflict_are_reported(tmp_path: Path) -> None:
    space = write_space(
        tmp_path,
        CONFLICTING
        + """
[[conflict]]
when = { opt_level = 3, fast_compile = "min" }
effect = "error"
message = "Conflicting options"
""",
    )
    found = reachable_error_conflicts(space)
    assert found == [("Conflicting options", {"opt_level": 3, "fast_compile": "min"})]


def test_undeclared_conflict_is_found_in_quick_mode(tmp_path: Path, ptxas) -> None:
    """-O3 and -Ofc=min each compile, together they are fatal: the combined check names it."""
    space = write_space(tmp_path, CONFLICTING)
    report = check_space(space, ptxas, arch="sm_90a", progress=False, quick=True)
    assert not report.rejected
    assert len(report.undeclared_conflicts) == 1 and "Conflicting options" in report.undeclared_conflicts[0]
    assert not report.ok


def test_declared_error_conflict_that_compiles_fails_the_verdict(tmp_path: Path, ptxas) -> None:
    space = write_space(
        tmp_path,
        MAXRREGCOUNT
        + """
[[control]]
name = "fmad"
flag = "--fmad={value}"
kind = "bool"
default = true
not_passed = true
when = { maxrregcount = "not_passed" }
description = "fma"

[[conflict]]
when = { maxrregcount = "passed", fmad = false }
effect = "error"
message = "not a real conflict"
""",
    )
    report = check_space(space, ptxas, arch="sm_90a", progress=False)
    assert not report.rejected and not report.reachable_conflicts
    assert [c.flags for c in report.unconfirmed_conflicts] == [("--maxrregcount=32", "--fmad=false")]
    assert not report.ok and "declared an error but compiled" in report.format_table()


def test_cuda_release_mismatch_fails(tmp_path: Path, ptxas) -> None:
    space = write_space(tmp_path, MAXRREGCOUNT, cuda="12.8")
    report = check_space(space, ptxas, arch="sm_90a", progress=False, quick=True)
    assert not report.cuda_matches and not report.ok
    assert "space is for CUDA 12.8 but the compiler is release 13.0" in report.format_table()


def test_space_of_another_compiler_is_a_user_error(ptxas) -> None:
    space = CompilerSpace.load(SPACES / "nvcc-13.0.toml")
    with pytest.raises(CiqError, match="is for nvcc, not ptxas"):
        check_space(space, ptxas, arch="sm_90a", progress=False)


def test_missing_reference_kernel_is_a_user_error(tmp_path: Path, ptxas) -> None:
    space = write_space(tmp_path, MAXRREGCOUNT)
    with pytest.raises(CiqError, match="reference kernel not found"):
        check_space(space, ptxas, arch="sm_90a", reference_kernel=tmp_path / "none.ptx", progress=False)


def test_shipped_ptxas_space_on_the_builtin_kernel(ptxas) -> None:
    """The check CI runs: every flag accepted, and the main controls change the reference code."""
    report = check_space(CompilerSpace.load(SPACES / "ptxas-13.0.toml"), ptxas, arch="sm_90a", progress=False)
    assert report.ok, report.format_table()
    changing = set(report.changing_controls())
    assert {
        "opt_level",
        "maxrregcount",
        "maxntid",
        "minnctapersm",
        "override_directive_values",
        "fmad",
    } <= changing
    assert report.kernel == "reference_kernel.sm_90a.ptx (built in)"


@pytest.mark.parametrize(
    ("compiler", "arch", "name"),
    [
        ("ptxas", "sm_90a", "reference_kernel.sm_90a.ptx"),
        ("ptxas", "sm_86", "reference_kernel.sm_80.ptx"),
        ("ptxas", "sm_100a", "reference_kernel.sm_80.ptx"),
        ("ptxas", "sm_75", "reference_kernel.sm_75.ptx"),
        ("nvcc", "sm_90a", "reference_kernel.cu"),
    ],
)
def test_builtin_reference_kernel_choice(compiler: str, arch: str, name: str) -> None:
    assert builtin_reference_kernel(compiler, arch) == name
    text = (resources.files("ciq_optuna") / "data" / name).read_text()
    if name.endswith(".ptx"):
        assert f".target {name.split('.')[1]}" in text


def test_no_reference_ptx_below_sm_75() -> None:
    with pytest.raises(CiqError, match="no built-in reference PTX for sm_70"):
        builtin_reference_kernel("ptxas", "sm_70")


def test_space_list_names_every_shipped_file() -> None:
    table = format_space_list()
    for stem in ("ptxas-13.0", "nvcc-13.0", "ptxas-13.5", "nvcc-13.5"):
        assert f"{stem}.toml" in table
