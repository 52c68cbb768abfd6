"""read_cubin_info on real cubins of ptxas 13.0 and 13.5 agrees with what ``-v`` reports; a report
that disagrees with the cubin is refused with one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from ciq_optuna.compilers import Nvcc, Ptxas
from ciq_optuna.compilers.base import report_disagreement
from ciq_optuna.compilers.cubin import CubinError
from ciq_optuna.compilers.cubin_info import CubinInfo, read_cubin_info
from ciq_optuna.compilers.locate import list_compilers
from ciq_optuna.compilers.ptxas_output import parse_ptxas_output

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
DATA = ROOT / "tests" / "data" / "ptxas_output"

# (input, arch, flags): entry kernels, device functions (-c keeps them), a register limit
CASES = [
    (EXAMPLES / "stencil" / "stencil.sm_80.ptx", "sm_80", []),
    (EXAMPLES / "stencil" / "stencil.sm_90a.ptx", "sm_90a", ["-O0"]),
    (EXAMPLES / "sgemm" / "sgemm.sm_90a.ptx", "sm_90a", ["--override-directive-values", "--maxrregcount=16"]),
    (EXAMPLES / "sgemm" / "sgemm.sm_80.ptx", "sm_120", []),
    (DATA / "src" / "devfuncs.sm_80.ptx", "sm_80", ["-c"]),
    (DATA / "src" / "devfuncs.sm_90a.ptx", "sm_90a", []),
]


def _compiler(cls: type, name: str, release: str):
    found = [i for i in list_compilers(name) if i.release == release]
    if not found:
        pytest.skip(f"{name} {release} not installed")
    return cls(found[0])


@pytest.mark.parametrize("release", ["13.0", "13.5"])
@pytest.mark.parametrize(("source", "arch", "flags"), CASES, ids=lambda v: getattr(v, "name", None))
def test_cubin_agrees_with_the_report(
    tmp_path: Path, release: str, source: Path, arch: str, flags: list[str]
) -> None:
    res = _compiler(Ptxas, "ptxas", release).compile(source, arch, flags, output=tmp_path / "o.cubin")
    assert res.ok, res.error
    info = res.cubin_info
    assert info.sm == int(arch[3:].rstrip("a"))
    assert sorted(info.entries) == sorted(res.entries) and info.entries
    assert {n: info.registers[n] for n in info.entries} == {n: f.registers for n, f in res.entries.items()}
    for name, stats in res.functions.items():  # device functions kept by -c have a count too
        if stats.registers is not None:
            assert info.registers[name] == stats.registers


def test_nvcc_cubin_agrees_with_the_report(tmp_path: Path) -> None:
    res = _compiler(Nvcc, "nvcc", "13.0").compile(
        EXAMPLES / "stencil" / "stencil.cu", "sm_80", [], output=tmp_path / "o.cubin"
    )
    assert res.ok, res.error
    assert res.cubin_info.entries == ["stencil25_3d"] and res.cubin_info.registers["stencil25_3d"] == 56


def _report(name: str):
    return parse_ptxas_output((DATA / name).read_text())


def test_disagreements_are_one_line_each() -> None:
    report = _report("stencil_sm80.ptxas-13.0.txt")
    good = CubinInfo(sm=80, entries=["stencil25_3d"], registers={"stencil25_3d": 56})
    assert report_disagreement("ptxas", "sm_80", report, good) is None
    cases = {
        "ptxas wrote a cubin for sm_90, not the requested sm_80": CubinInfo(90, ["stencil25_3d"], {}),
        "ptxas -v reported 56 registers for 'stencil25_3d', the cubin holds 40": CubinInfo(
            80, ["stencil25_3d"], {"stencil25_3d": 40}
        ),
        "ptxas -v reported entry function(s) 'stencil25_3d' but the cubin holds 'other'; first unexpected "
        "output line: \"ptxas info : Compiling entry function 'stencil25_3d' for 'sm_80'\"": CubinInfo(
            80, ["other"], {}
        ),
    }
    for expected, cubin in cases.items():
        assert report_disagreement("ptxas", "sm_80", report, cubin) == expected
    assert report_disagreement("ptxas", "sm_90a", report, CubinInfo(90, ["stencil25_3d"], {})) == (
        "ptxas -v reported entry function 'stencil25_3d' for 'sm_80', not the requested sm_90a"
    )


def test_parsed_fields_and_unexpected_line() -> None:
    report = _report("stencil_sm80.ptxas-13.5.txt")
    assert report.entries["stencil25_3d"].parsed_fields() == [
        "registers",
        "barriers",
        "stack_frame",
        "spill_stores",
        "spill_loads",
        "cumulative_stack",
        "shared_memory",
        "textures",
        "surfaces",
        "samplers",
        "compile_time_ms",
        "constant_memory",
    ]
    assert report.unexpected_line().startswith(
        "no unexpected output line; the output ends with 'ptxas info    : Compile time = "
    )
    garbage = parse_ptxas_output("ptxas info    : 0 bytes gmem\n\x00\x01 garbage\nmore\n")
    assert garbage.unexpected_line() == "first unexpected output line: '\\x00\\x01 garbage'"
    assert parse_ptxas_output("").unexpected_line() == "the compiler printed nothing"


def test_not_an_elf_is_a_cubin_error() -> None:
    with pytest.raises(CubinError, match="not a valid cubin"):
        read_cubin_info(b"\x7fELF garbage")
