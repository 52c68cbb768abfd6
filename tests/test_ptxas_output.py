"""Parsing ptxas -v output: real outputs of ptxas/nvcc 13.0 and 13.5 (fixtures), the real
compilers run now, and a few hand-written lines for variants older releases print."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from ciq_optuna.compilers.locate import list_compilers
from ciq_optuna.compilers.ptxas_output import parse_ptxas_output

DATA = Path(__file__).parent / "data" / "ptxas_output"
INDEX = json.loads((DATA / "index.json").read_text())
EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
RELEASES = ("13.0", "13.5")


def _fixture(case: str, tool: str, release: str):
    path = DATA / f"{case}.{tool}-{release}.txt"
    if not path.is_file():
        pytest.skip(f"no fixture {path.name}")
    return parse_ptxas_output(path.read_text())


@pytest.mark.parametrize("entry", INDEX, ids=[e["file"] for e in INDEX])
def test_every_fixture_is_fully_understood(entry):
    text = (DATA / entry["file"]).read_text()
    report = parse_ptxas_output(text)
    compiled = re.findall(r"Compiling entry function '([^']+)' for '([^']+)'", text)
    assert {n: a for n, a in compiled} == {n: f.arch for n, f in report.entries.items()}
    for name, _ in compiled:
        assert report.functions[name].registers is not None
    properties = re.findall(r"Function properties for (\S+)", text)
    assert sorted(properties) == sorted(n for n, f in report.functions.items() if f.stack_frame is not None)
    assert text.count("Compile time = ") == sum(
        f.compile_time_ms is not None for f in report.functions.values()
    )
    assert all(f.extra == [] for f in report.functions.values())
    if entry["file"].startswith("syntax_error"):
        assert report.functions == {} and any("error" in line for line in report.unparsed)
    else:
        assert report.unparsed == []
    if not entry["file"].startswith("syntax_error"):  # nvcc front-end errors are not ptxas lines
        assert (entry["returncode"] == 0) == (report.errors == [])
    if entry["returncode"] == 0:
        assert report.entries and report.global_memory is not None


@pytest.mark.parametrize("release", RELEASES)
def test_sgemm_sm80_and_sm90a(release):
    f = _fixture("sgemm_sm80", "ptxas", release).functions["sgemm_128x128x8"]
    assert (f.is_entry, f.arch, f.registers, f.barriers, f.shared_memory) == (True, "sm_80", 128, 1, 16384)
    assert (f.stack_frame, f.spill_stores, f.spill_loads, f.spill_bytes, f.cumulative_stack) == (
        0,
        0,
        0,
        0,
        0,
    )
    assert f.constant_memory == {0: 400}
    assert f.compile_time_ms > 0
    g = _fixture("sgemm_sm90a", "ptxas", release).functions["sgemm_128x128x8"]
    assert (g.arch, g.registers, g.constant_memory) == ("sm_90a", 128, {})  # no cmem[0] on sm_90+
    h = _fixture("sgemm_sm80_ptx_to_sm120", "ptxas", release).entries["sgemm_128x128x8"]
    assert (h.arch, h.registers) == ("sm_120", 128)


@pytest.mark.parametrize("release", RELEASES)
def test_forced_spills_with_warnings_and_notes(release):
    report = _fixture("sgemm_sm90a_override_spills", "ptxas", release)
    f = report.entries["sgemm_128x128x8"]
    assert (f.registers, f.stack_frame, f.spill_stores, f.spill_loads) == (24, 1616, 3736, 3468)
    assert f.cumulative_stack == 1616 and f.spill_bytes == 3736 + 3468
    assert report.warnings == [
        "For profile sm_90a adjusting per thread register count of 16 to lower bound of 24",
        "Registers are spilled to local memory in function 'sgemm_128x128x8', 3736 bytes spill stores, 3468 bytes spill loads",
    ]
    assert f.warnings == report.warnings[1:]
    assert any("Overriding maximum register limit 256" in n for n in f.notes)
    ignored = _fixture("sgemm_sm90a_maxrreg_ignored", "ptxas", release)
    assert ignored.notes == [
        "Overriding global maxrregcount 64 with entry-specific value 128 computed using thread count"
    ]
    assert ignored.entries["sgemm_128x128x8"].registers == 128


@pytest.mark.parametrize("release", RELEASES)
def test_spill_warnings_belong_to_their_function(release):
    report = _fixture("attention_sm90a_warnings", "ptxas", release)
    f = report.entries["attention_fwd_d128"]
    assert (f.registers, f.stack_frame, f.spill_stores, f.spill_loads) == (255, 328, 348, 348)
    assert f.shared_memory == 4096
    assert f.warnings == [
        "Local memory used for function 'attention_fwd_d128', size of stack frame: 328 bytes",
        "Registers are spilled to local memory in function 'attention_fwd_d128', 348 bytes spill stores, 348 bytes spill loads",
    ]


@pytest.mark.parametrize("release", RELEASES)
def test_stencil_module_constants_and_option_warning(release):
    report = _fixture("stencil_sm80", "ptxas", release)
    assert report.global_memory == 0 and report.module_constant_memory == {3: 20}
    f = report.entries["stencil25_3d"]
    assert (f.registers, f.shared_memory, f.constant_memory) == (56, 3840, {0: 380})
    o0 = _fixture("stencil_sm90a_O0_rul", "ptxas", release)
    assert o0.warnings == [
        "Conflicting options '-O0' and '--register-usage-level' specified, ignoring '--register-usage-level' option"
    ]
    assert o0.entries["stencil25_3d"].registers == 62


@pytest.mark.parametrize("release", RELEASES)
def test_fatal_option_conflict(release):
    report = _fixture("stencil_sm90a_conflict", "ptxas", release)
    assert report.functions == {}
    assert report.errors == ["Conflicting options -opt-level=<1,2,3> and --Ofast-compile=max specified"]


@pytest.mark.parametrize("release", RELEASES)
def test_syntax_errors_keep_file_and_line(release):
    report = _fixture("broken_sm90a", "ptxas", release)
    assert report.errors[0] == "broken.sm_90a.ptx, line 8: Arguments mismatch for instruction 'mov'"
    assert report.errors[-1] == "Ptx assembly aborted due to errors"


@pytest.mark.parametrize("tool,case", [("ptxas", "devfuncs_sm90a"), ("nvcc", "devfuncs_nvcc_sm90a")])
@pytest.mark.parametrize("release", RELEASES)
def test_device_functions_templates_printf_recursion(tool, case, release):
    report = _fixture(case, tool, release)
    assert set(report.entries) == {
        "_Z14cluster_kernelPf",
        "local_array_kernel",
        "printf_kernel",
        "fib_kernel",
        "_Z11tmpl_kernelILi16EEvPf",
    }
    fib = report.functions["_Z3fibi"]
    assert not fib.is_entry and fib.registers is None and fib.arch is None
    assert (fib.stack_frame, fib.spill_stores, fib.spill_loads) == (24, 20, 20)
    assert report.functions["_Z6helperfi"].stack_frame == 0
    assert report.entries["printf_kernel"].cumulative_stack == 16
    assert report.entries["_Z14cluster_kernelPf"].shared_memory == 1024
    # ptxas 13.5 warns that recursion makes the stack size unknown; 13.0 does not.
    assert report.entries["fib_kernel"].stack_size_unknown == (release != "13.0")


@pytest.mark.parametrize("release", RELEASES)
def test_split_compile_prints_the_same_report(release):
    split = _fixture("devfuncs_sm90a_split_compile", "ptxas", release)
    plain = _fixture("devfuncs_sm90a", "ptxas", release)
    strip = {"compile_time_ms": None}
    assert {n: {**vars(f), **strip} for n, f in split.functions.items()} == {
        n: {**vars(f), **strip} for n, f in plain.functions.items()
    }


def test_verbose2_progress_lines_are_notes():
    report = _fixture("devfuncs_sm90a_verbose2", "ptxas", "13.5")
    assert "Processing fib_kernel" in report.notes
    assert report.entries["fib_kernel"].stack_size_unknown
    assert report.functions["_Z3fibi"].spill_stores == 20


@pytest.mark.parametrize("release", RELEASES)
def test_relocatable_device_functions_have_compile_times(release):
    report = _fixture("devfuncs_sm80_relocatable", "ptxas", release)
    fib = report.functions["_Z3fibi"]
    assert (fib.stack_frame, fib.spill_stores, fib.is_entry) == (16, 16, False)
    assert fib.compile_time_ms is not None and fib.compile_time_ms > 0
    assert report.entries["fib_kernel"].constant_memory == {0: 360}


@pytest.mark.parametrize("release", RELEASES)
def test_textures_surfaces_samplers(release):
    f = _fixture("textures_sm80", "ptxas", release).entries["tex_kernel"]
    assert (f.textures, f.surfaces, f.samplers, f.constant_memory) == (1, 1, 1, {0: 368})


@pytest.mark.parametrize("release", RELEASES)
def test_nvcc_report_matches_ptxas_fields(release):
    f = _fixture("stencil_nvcc_sm80", "nvcc", release).entries["stencil25_3d"]
    assert (f.arch, f.barriers, f.shared_memory) == ("sm_80", 1, 3840)
    assert f.registers > 0 and 0 in f.constant_memory


def test_as_metrics_is_flat():
    f = parse_ptxas_output((DATA / "stencil_sm80.ptxas-13.0.txt").read_text()).entries["stencil25_3d"]
    m = f.as_metrics()
    assert m["registers"] == 56 and m["spill_bytes"] == 0 and m["cmem[0]"] == 380
    assert json.loads(json.dumps(m)) == m


def test_older_and_unknown_variants_do_not_crash():
    text = "\n".join(
        [
            "ptxas info    : 0 bytes gmem, 8 bytes cmem[14]",
            "ptxas info    : Compile time = 1.0 ms",
            "ptxas info    : Compiling entry function '_Z3fooPf' for 'sm_52'",
            "ptxas info    : Function properties for _Z3fooPf",
            "ptxas         .     8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads",
            "ptxas info    : Used 22 registers, 328 bytes cmem[0], 12 bytes lmem, 3 widgets",
            "nvlink info   : something else",
            "ptxas info    : A message from a future release",
        ]
    )
    report = parse_ptxas_output(text)
    f = report.entries["_Z3fooPf"]
    assert (f.registers, f.barriers, f.local_memory, f.constant_memory) == (22, 0, 12, {0: 328})
    assert (f.stack_frame, f.spill_stores, f.spill_loads) == (8, 4, 4)
    assert f.extra == ["3 widgets"]
    assert report.module_constant_memory == {14: 8}
    assert "A message from a future release" in report.notes and "Compile time = 1.0 ms" in report.notes
    assert report.unparsed == ["nvlink info   : something else"]


@pytest.mark.parametrize("release", RELEASES)
def test_real_ptxas_now(release, tmp_path):
    found = [i for i in list_compilers("ptxas") if i.release == release]
    if not found:
        pytest.skip(f"ptxas {release} not installed")
    ptx = EXAMPLES / "stencil" / "stencil.sm_90a.ptx"
    cmd = [
        str(found[0].path),
        "-v",
        "-arch=sm_90a",
        "--maxrregcount=32",
        "-o",
        str(tmp_path / "o.cubin"),
        str(ptx),
    ]
    res = subprocess.run(cmd, capture_output=True, text=True, check=True)
    report = parse_ptxas_output(res.stderr + res.stdout)
    f = report.entries["stencil25_3d"]
    assert f.registers == 32 and f.spill_stores > 0 and f.stack_frame > 0 and f.compile_time_ms > 0
    assert report.unparsed == [] and f.extra == []
