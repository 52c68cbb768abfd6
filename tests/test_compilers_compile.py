"""Ptxas and Nvcc adapters on the real compilers (CUDA 13.0 in /usr/local/cuda, 13.5 from the
pip wheels): results, options files, -Xptxas, failures that fail one compile, not the caller."""

from __future__ import annotations

from pathlib import Path

import pytest

from ciq_optuna.compilers import (
    Nvcc,
    Ptxas,
    code_hash,
    compiler_for_source,
    first_error_line,
    get_compiler,
    list_compilers,
    render_options_file,
    run_command,
    xptxas_arg,
)
from ciq_optuna.compilers.cubin import tkinfo_text
from ciq_optuna.compilers.locate import CompilerInfo
from ciq_optuna.errors import CiqError

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
DATA = Path(__file__).parent / "data" / "ptxas_output" / "src"
STENCIL_PTX = EXAMPLES / "stencil" / "stencil.sm_90a.ptx"
STENCIL_CU = EXAMPLES / "stencil" / "stencil.cu"
RELEASES = ["13.0", "13.5"]


def _compiler(name: str, release: str):
    if not any(i.release == release for i in list_compilers(name)):
        pytest.skip(f"{name} {release} not installed (13.5: pip install 'ciq-optuna[cuda]')")
    return get_compiler(name, release=release)


@pytest.fixture(params=RELEASES)
def ptxas(request) -> Ptxas:
    return _compiler("ptxas", request.param)


@pytest.fixture(params=RELEASES)
def nvcc(request) -> Nvcc:
    return _compiler("nvcc", request.param)


def _fake(tmp_path: Path, name: str, script: str) -> CompilerInfo:
    path = tmp_path / name
    path.write_text("#!/bin/sh\n" + script + "\n")
    path.chmod(0o755)
    return CompilerInfo(name=name, path=path, version="0.0.0", release="0.0")


def test_ptxas_result(ptxas, tmp_path):
    out = tmp_path / "sub" / "k.cubin"
    res = ptxas.compile(STENCIL_PTX, "sm_90a", ["--maxrregcount=32"], output=out, timeout=120)
    assert res.ok and res.error is None and res.returncode == 0
    assert res.command == [
        str(ptxas.info.path),
        "-v",
        "-arch=sm_90a",
        "--maxrregcount=32",
        "-o",
        str(out),
        str(STENCIL_PTX),
    ]
    assert res.cubin == out.read_bytes() and res.cubin_path == out
    assert res.code_hash == code_hash(res.cubin) and len(res.raw_sha256) == 64
    assert res.compile_time > 0 and res.compiler == ptxas.info
    f = res.functions["stencil25_3d"]
    assert f.is_entry and f.registers == 32 and f.spill_stores > 0 and f.arch == "sm_90a"
    assert list(res.entries) == ["stencil25_3d"]


def test_nvcc_result_with_xptxas(nvcc, tmp_path):
    flags = ["--use_fast_math", "-Xptxas", xptxas_arg(["-O1", "--maxrregcount=40"])]
    res = nvcc.compile(STENCIL_CU, "sm_80", flags, output=tmp_path / "k.cubin", timeout=300)
    assert res.ok, res.error
    assert res.command[:5] == [str(nvcc.info.path), "-cubin", "-arch=sm_80", "-Xptxas", "-v"]
    # Both flags reached ptxas: the '=' survived nvcc's comma split.
    assert res.entries["stencil25_3d"].registers == 40
    assert "-maxrregcount 40 -O 1" in tkinfo_text(res.cubin)


@pytest.mark.parametrize(
    "flags",
    [
        ["-O1", "--maxrregcount=40", "--register-usage-level=7"],
        ["--Ofast-compile=min", "-dlcm=cg", "--allow-expensive-optimizations=true"],
    ],
)
@pytest.mark.parametrize("verbose", [True, False])
def test_ptxas_options_file_gives_identical_bytes(ptxas, tmp_path, flags, verbose):
    direct = ptxas.compile(STENCIL_PTX, "sm_90a", flags, output=tmp_path / "a.cubin", verbose=verbose)
    optf = tmp_path / "flags.opt"
    optf.write_text(render_options_file(flags))
    via_file = ptxas.compile(
        STENCIL_PTX, "sm_90a", [], output=tmp_path / "b.cubin", options_file=optf, verbose=verbose
    )
    assert direct.ok and via_file.ok
    assert direct.cubin == via_file.cubin
    assert "--options-file" in via_file.command


def test_verbose_is_recorded_in_the_cubin(ptxas, tmp_path):
    """ptxas writes -v into the tkinfo note: same code, different bytes."""
    v = ptxas.compile(STENCIL_PTX, "sm_90a", ["-O1"], output=tmp_path / "v.cubin")
    q = ptxas.compile(STENCIL_PTX, "sm_90a", ["-O1"], output=tmp_path / "q.cubin", verbose=False)
    assert v.cubin != q.cubin and v.code_hash == q.code_hash
    assert q.functions == {} and "-v" not in q.command


def test_nvcc_options_file_gives_identical_bytes(nvcc, tmp_path):
    flags = ["--use_fast_math", "-Xptxas", xptxas_arg(["-O1", "--maxrregcount=40"])]
    direct = nvcc.compile(STENCIL_CU, "sm_90a", flags, output=tmp_path / "a.cubin", timeout=300)
    optf = tmp_path / "flags.opt"
    optf.write_text(render_options_file(flags))
    via_file = nvcc.compile(
        STENCIL_CU, "sm_90a", [], output=tmp_path / "b.cubin", options_file=optf, timeout=300
    )
    assert direct.ok and via_file.ok
    assert direct.cubin == via_file.cubin


def test_options_file_escapes_whitespace_and_backslash(ptxas, tmp_path):
    out = tmp_path / "dir with space" / "k\\1.cubin"
    out.parent.mkdir()
    optf = tmp_path / "o.opt"
    optf.write_text(render_options_file(["-arch=sm_90a", "-o", str(out)]))
    res = run_command([str(ptxas.info.path), "--options-file", str(optf), str(STENCIL_PTX)], timeout=120)
    assert res.ok, res.stderr
    assert out.is_file()


def test_render_options_file_format_and_refusals():
    text = render_options_file(["-O3", "--maxrregcount=64", "a b", "c\\d", "--maxntid=128,1,1"])
    assert text == "-O3\n--maxrregcount=64\na\\ b\nc\\\\d\n--maxntid=128,1,1\n"
    assert render_options_file([]) == ""
    for bad in ['a"b', "a\nb", ""]:
        with pytest.raises(CiqError, match="cannot be written to an options file"):
            render_options_file([bad])


def test_xptxas_arg():
    assert xptxas_arg(["-O1", "--maxrregcount=40", "-dlcm=cg"]) == "-O1,--maxrregcount=40,-dlcm=cg"
    assert xptxas_arg(["--maxntid=128,1,1", "-O1"]) == "--maxntid=128\\,1\\,1,-O1"
    for bad in ["a b", "a\\b", ""]:
        with pytest.raises(CiqError, match="-Xptxas"):
            xptxas_arg([bad])


def test_xptxas_comma_inside_a_flag_reaches_ptxas(nvcc, tmp_path):
    flags = ["-Xptxas", xptxas_arg(["--maxntid=128,1,1", "-O1"])]
    direct = nvcc.compile(
        STENCIL_CU, "sm_90a", flags, output=tmp_path / "a.cubin", timeout=300, verbose=False
    )
    assert direct.ok, direct.error
    assert "-maxntid 128,1,1" in tkinfo_text(direct.cubin)
    optf = tmp_path / "flags.opt"
    optf.write_text(render_options_file(flags))
    via_file = nvcc.compile(
        STENCIL_CU, "sm_90a", [], output=tmp_path / "b.cubin", options_file=optf, timeout=300, verbose=False
    )
    assert via_file.ok and via_file.cubin == direct.cubin


def test_broken_ptx_fails_with_first_error_line(ptxas, tmp_path):
    res = ptxas.compile(DATA / "broken.sm_90a.ptx", "sm_90a", [], output=tmp_path / "x.cubin")
    assert not res.ok and res.cubin is None and res.code_hash is None
    assert res.error.endswith("line 8; error : Arguments mismatch for instruction 'mov'")
    assert res.report.errors[-1] == "Ptx assembly aborted due to errors"


def test_conflicting_options_fail_with_fatal_line(ptxas, tmp_path):
    res = ptxas.compile(STENCIL_PTX, "sm_90a", ["-O2", "--Ofast-compile=max"], output=tmp_path / "x.cubin")
    assert not res.ok
    assert (
        res.error == "ptxas fatal : Conflicting options -opt-level=<1,2,3> and --Ofast-compile=max specified"
    )


def test_unknown_arch_fails_the_compile(ptxas, tmp_path):
    res = ptxas.compile(STENCIL_PTX, "sm_91", [], output=tmp_path / "x.cubin")
    assert not res.ok and "sm_91" in res.error


def test_nvcc_front_end_error(nvcc, tmp_path):
    res = nvcc.compile(DATA / "syntax_error.cu", "sm_90a", [], output=tmp_path / "x.cubin", timeout=300)
    assert not res.ok
    assert res.error.endswith('error: identifier "undefined_thing" is undefined')


def test_timeout_fails_the_compile(ptxas, tmp_path):
    attention = EXAMPLES / "attention" / "attention.sm_90a.ptx"
    res = ptxas.compile(attention, "sm_90a", [], output=tmp_path / "x.cubin", timeout=0.01)
    assert not res.ok and res.timed_out
    assert res.error == "ptxas timed out after 0.01 s"


def test_crash_fails_the_compile(tmp_path):
    compiler = Ptxas(_fake(tmp_path, "ptxas", "kill -SEGV $$"))
    res = compiler.compile(STENCIL_PTX, "sm_90a", [], output=tmp_path / "x.cubin")
    assert not res.ok and res.error == "ptxas killed by signal 11 (SIGSEGV)"


def test_success_without_output_fails_the_compile(tmp_path):
    compiler = Ptxas(_fake(tmp_path, "ptxas", "exit 0"))
    res = compiler.compile(STENCIL_PTX, "sm_90a", [], output=tmp_path / "x.cubin")
    assert not res.ok and res.error == "ptxas exited with status 0 but wrote no x.cubin"


def test_stale_output_is_not_reused(tmp_path):
    out = tmp_path / "x.cubin"
    out.write_bytes(b"old")
    compiler = Ptxas(_fake(tmp_path, "ptxas", "exit 0"))
    assert not compiler.compile(STENCIL_PTX, "sm_90a", [], output=out).ok


def test_garbage_output_fails_the_compile(tmp_path):
    out = tmp_path / "x.cubin"
    compiler = Ptxas(_fake(tmp_path, "ptxas", f"echo garbage > {out}"))
    res = compiler.compile(STENCIL_PTX, "sm_90a", [], output=out)
    assert not res.ok and res.error.startswith("not a valid cubin")


def test_exit_status_without_error_line(tmp_path):
    compiler = Ptxas(_fake(tmp_path, "ptxas", "echo something odd >&2; exit 3"))
    res = compiler.compile(STENCIL_PTX, "sm_90a", [], output=tmp_path / "x.cubin")
    assert res.error == "ptxas exited with status 3: something odd"


def test_user_errors_raise(tmp_path):
    ptxas = get_compiler("ptxas")
    with pytest.raises(CiqError, match="input file not found"):
        ptxas.compile(tmp_path / "missing.ptx", "sm_90a", [], output=tmp_path / "x.cubin")
    with pytest.raises(CiqError, match=r"ptxas compiles \.ptx files, not stencil\.cu"):
        ptxas.compile(STENCIL_CU, "sm_90a", [], output=tmp_path / "x.cubin")
    with pytest.raises(CiqError, match="options file not found"):
        ptxas.compile(
            STENCIL_PTX, "sm_90a", [], output=tmp_path / "x.cubin", options_file=tmp_path / "no.opt"
        )
    with pytest.raises(CiqError, match="unknown compiler 'clang'"):
        get_compiler("clang")


def test_compiler_for_source():
    assert isinstance(compiler_for_source(STENCIL_PTX), Ptxas)
    assert isinstance(compiler_for_source(STENCIL_CU), Nvcc)
    with pytest.raises(CiqError, match="expected a .ptx, .cu file"):
        compiler_for_source("kernel.py")


def test_supported_archs(ptxas, nvcc):
    for compiler in (ptxas, nvcc):
        archs = compiler.supported_archs()
        assert {"sm_80", "sm_90a", "sm_100a"} <= set(archs)
        assert all(a.startswith("sm_") for a in archs)
        compiler.check_arch("sm_90a")
        with pytest.raises(CiqError, match="unknown architecture 'sm_91'"):
            compiler.check_arch("sm_91")
        with pytest.raises(CiqError, match="unknown architecture"):
            compiler.check_arch("compute_90")


def test_first_error_line():
    assert (
        first_error_line("ptxas info : x\nptxas fatal   : boom\nfoo.cu(3): error: bad\n")
        == "foo.cu(3): error: bad"
    )
    assert first_error_line("ptxas fatal   :   boom  \n") == "ptxas fatal : boom"
    assert first_error_line("all fine\n") is None
