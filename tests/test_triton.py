"""The Triton front end with the real Triton and the real ptxas it runs, ahead of time (no GPU).

Compiles the three example kernels for sm_90a and sm_80, checks that every compile really
recompiles with its flags, tunes one kernel's meta-parameters and ptxas controls jointly, and
reproduces the ACF's code hash through the run-time apply helper.
"""

from __future__ import annotations

import contextlib
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import optuna
import pytest

from ciq_optuna.acf import read_acf
from ciq_optuna.cli import main
from ciq_optuna.compilers.base import Ptxas
from ciq_optuna.compilers.cubin import code_hash
from ciq_optuna.compilers.triton import TritonCompiler, load_kernel, triton_ptxas
from ciq_optuna.errors import CiqError
from ciq_optuna.objectives.factory import objective_from_study
from ciq_optuna.triton_acf import apply_acf, compile_config, config_text

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "triton"
KERNELS = {
    "matmul": f"{EXAMPLES / 'matmul.py'}:matmul_kernel",
    "attention": f"{EXAMPLES / 'attention.py'}:attention_fwd_kernel",
    "rmsnorm": f"{EXAMPLES / 'rmsnorm.py'}:rmsnorm_kernel",
}
RMSNORM = KERNELS["rmsnorm"]

#: The ptxas each tested Triton release bundles, per target: (release, program). Triton 3.9 runs
#: ptxas-blackwell from sm_90 on, Triton 3.6 only from sm_100 on.
BUNDLED_PTXAS = {
    "3.9.0": {"sm_90a": ("13.4", "ptxas-blackwell"), "sm_80": ("12.9", "ptxas")},
    "3.6.0": {"sm_90a": ("12.8", "ptxas"), "sm_80": ("12.8", "ptxas")},
}


def bundled_ptxas(arch: str) -> tuple[str, str]:
    """The installed Triton's bundled ptxas for ``arch``: (release, program name)."""
    import triton

    if triton.__version__ not in BUNDLED_PTXAS:
        pytest.skip(f"Triton {triton.__version__} is not one of the tested releases {sorted(BUNDLED_PTXAS)}")
    return BUNDLED_PTXAS[triton.__version__][arch]

BAD_KERNELS = """
import triton
import triton.language as tl


@triton.jit
def copy_kernel(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst + offs, tl.load(src + offs, mask=offs < n), mask=offs < n)


@triton.jit
def fp8_dot_kernel(a, b, c, BLOCK: tl.constexpr):
    r = tl.arange(0, BLOCK)
    x = tl.load(a + r[:, None] * BLOCK + r[None, :])
    y = tl.load(b + r[:, None] * BLOCK + r[None, :])
    tl.store(c + r[:, None] * BLOCK + r[None, :], tl.dot(x, y))


def not_a_kernel():
    pass


CIQ_OPTUNA = {
    "copy_kernel": {
        "signature": {"src": "*fp32:16", "dst": "*fp32:16", "n": "i32"},
        "space": {"BLOCK": [256, 1000], "num_warps": [4, 2]},
    },
    "fp8_dot_kernel": {
        "signature": {"a": "*fp8e4nv", "b": "*fp8e4nv", "c": "*fp32"},
        "constants": {"BLOCK": 64},
    },
}
"""


@pytest.fixture()
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CIQ_OPTUNA_STORAGE", raising=False)
    return tmp_path


@pytest.fixture()
def bad_file(tmp_path: Path) -> Path:
    path = tmp_path / "bad_kernels.py"
    path.write_text(BAD_KERNELS)
    return path


def _compiler(ref: str, arch: str) -> TritonCompiler:
    return TritonCompiler(triton_ptxas(arch), load_kernel(ref))


@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
@pytest.mark.parametrize("name", sorted(KERNELS))
def test_example_kernels_compile_for_the_target(name: str, arch: str, tmp_path: Path) -> None:
    compiler = _compiler(KERNELS[name], arch)
    result = compiler.compile(None, arch, [], output=tmp_path / "k.cubin")
    assert result.ok, result.error
    (stats,) = result.entries.values()
    assert stats.arch == arch and stats.registers > 0
    assert f".target {arch}" in result.ptx
    assert result.cubin_path.read_bytes() == result.cubin
    # Triton's bundled ptxas for the target (e.g. Triton 3.9: 12.9 below sm_90, ptxas-blackwell 13.4 from sm_90)
    assert compiler.info.release == bundled_ptxas(arch)[0]


def test_every_compile_recompiles_with_its_flags(tmp_path: Path) -> None:
    compiler = _compiler(RMSNORM, "sm_80")
    a1 = compiler.compile(None, "sm_80", [], output=tmp_path / "a1.cubin")
    a2 = compiler.compile(None, "sm_80", [], output=tmp_path / "a2.cubin")
    b = compiler.compile(None, "sm_80", ["-O0"], output=tmp_path / "b.cubin")
    assert a1.ok and a2.ok and b.ok
    assert a1.code_hash == a2.code_hash
    assert b.code_hash != a1.code_hash and b.cubin != a1.cubin
    # ptxas ran each time (its -v report came back), i.e. no compile was served from a cache
    assert all(r.entries for r in (a1, a2, b))
    assert b.options["ptx_options"] == "-O0" and a1.options["ptx_options"] == ""


def test_a_cache_dir_serves_a_kernel_compiled_before(tmp_path: Path) -> None:
    """The GPU runtime measure's compiler: the same arm twice is loaded from its Triton cache the
    second time (no ptxas run, so no -v report), with the same binary; other flags still compile."""
    cache = tmp_path / "cache"
    compiler = TritonCompiler(triton_ptxas("sm_80"), load_kernel(RMSNORM), cache_dir=cache)
    first = compiler.compile(None, "sm_80", [], output=tmp_path / "a1.cubin")
    again = compiler.compile(None, "sm_80", [], output=tmp_path / "a2.cubin")
    other = compiler.compile(None, "sm_80", ["-O1"], output=tmp_path / "b.cubin")
    assert first.ok and again.ok and other.ok
    assert first.entries and not again.entries and other.entries
    assert again.code_hash == first.code_hash and other.code_hash != first.code_hash
    assert again.compiled is not None and any(cache.iterdir())
    root = compiler._cache_root
    del compiler
    assert not root.exists()  # the per-compile cache root goes with its compiler


def test_report_belongs_to_the_binary_triton_loads(tmp_path: Path) -> None:
    """Recompiling Triton's PTX with ptxas as Triton calls it gives the same code and registers."""
    compiler = _compiler(RMSNORM, "sm_90a")
    flags = ["-O1"]
    result = compiler.compile(None, "sm_90a", flags, output=tmp_path / "t.cubin")
    assert result.ok
    ptx = tmp_path / "k.ptx"
    ptx.write_text(result.ptx)
    triton_prefix = ["-lineinfo", "--regAllocOptLevel=2"]  # Triton 3.9 with FP fusion enabled
    again = Ptxas(compiler.info).compile(ptx, "sm_90a", triton_prefix + flags, output=tmp_path / "p.cubin")
    assert again.ok, again.error
    assert code_hash(again.cubin, skip_debug=True) == result.code_hash
    assert next(iter(again.entries.values())).registers == next(iter(result.entries.values())).registers


def test_code_hash_does_not_depend_on_where_the_kernel_file_is(tmp_path: Path) -> None:
    moved = tmp_path / "elsewhere" / "rmsnorm.py"
    moved.parent.mkdir()
    shutil.copyfile(EXAMPLES / "rmsnorm.py", moved)
    here = _compiler(RMSNORM, "sm_80").compile(None, "sm_80", [], output=tmp_path / "a.cubin")
    there = _compiler(f"{moved}:rmsnorm_kernel", "sm_80").compile(
        None, "sm_80", [], output=tmp_path / "b.cubin"
    )
    assert here.cubin != there.cubin  # the line info names the file...
    assert here.code_hash == there.code_hash  # ...and the code hash leaves it out


def test_a_candidate_triton_rejects_fails_alone(bad_file: Path, tmp_path: Path) -> None:
    compiler = _compiler(f"{bad_file}:copy_kernel", "sm_80")
    good = compiler.compile(None, "sm_80", [], output=tmp_path / "a.cubin")
    bad = compiler.compile(
        None, "sm_80", [], output=tmp_path / "b.cubin", app={"BLOCK": 1000, "num_warps": 4}
    )
    assert good.ok
    assert not bad.ok and "power of 2" in bad.error and "\n" not in bad.error
    flags = compiler.compile(None, "sm_80", ["--no-such-option"], output=tmp_path / "c.cubin")
    assert not flags.ok and "no-such-option" in flags.error and "\n" not in flags.error


@pytest.mark.parametrize(
    ("ref", "message"),
    [
        (
            "{bad}:missing_kernel",
            "kernel 'missing_kernel' not found (@triton.jit functions here: copy_kernel, fp8_dot_kernel)",
        ),
        ("{bad}:not_a_kernel", "is not a @triton.jit function"),
        ("{examples}/matmul.py", "name the Triton kernel as PATH.py:KERNEL_NAME"),
        ("{dir}/nope.py:copy_kernel", "kernel file not found"),
    ],
)
def test_bad_kernel_names_are_one_line_errors(bad_file: Path, ref: str, message: str) -> None:
    with pytest.raises(CiqError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_kernel(ref.format(bad=bad_file, dir=bad_file.parent, examples=EXAMPLES))


def test_missing_signature_is_a_user_error(tmp_path: Path) -> None:
    path = tmp_path / "k.py"
    path.write_text(BAD_KERNELS.replace('"n": "i32"', '"m": "i32"'))
    with pytest.raises(CiqError, match=r"names \['m'\], which are not runtime arguments"):
        load_kernel(f"{path}:copy_kernel")
    path.write_text(BAD_KERNELS.replace(', "n": "i32"', ""))
    with pytest.raises(CiqError, match="lacks the type of n"):
        load_kernel(f"{path}:copy_kernel")
    path.write_text(BAD_KERNELS.split("CIQ_OPTUNA")[0])
    with pytest.raises(CiqError, match="no signature for 'copy_kernel'"):
        load_kernel(f"{path}:copy_kernel")


def _run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def _contents(path: Path) -> list[str]:
    """The database's contents as SQL: unlike the file's bytes, independent of when SQLite moves
    committed pages from the write-ahead log into the file (on the last connection's close)."""
    with contextlib.closing(sqlite3.connect(path)) as conn:
        return list(conn.iterdump())


def test_cli_user_errors_leave_the_study_intact(
    workdir: Path, bad_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["tune", f"{bad_file}:copy_kernel", "--arch", "sm_80", "--minimize", "registers", "--trials", "6"]
    code, _, _ = _run_cli([*argv, "--quiet", "--no-screen"], capsys)
    assert code == 0
    db = _contents(workdir / "ciq-optuna.db")
    cases = [
        (f"{bad_file}:fp8_dot_kernel", "sm_80", "does not compile"),  # a kernel the target cannot run
        (f"{bad_file}:copy_kernel", "sm_90", "use --arch sm_90a"),
        (f"{bad_file}:copy_kernel", "sm_999", "unknown architecture 'sm_999' for ptxas"),
        (f"{bad_file}:nothing", "sm_80", "kernel 'nothing' not found"),
    ]
    for ref, arch, message in cases:
        code, _, err = _run_cli(["tune", ref, "--arch", arch, "--minimize", "registers", "--quiet"], capsys)
        assert code == 2, err
        assert err.startswith("ciq-optuna: error: ") and message in err and err.count("\n") == 1, err
    assert _contents(workdir / "ciq-optuna.db") == db
    study = optuna.load_study(
        study_name=f"copy_kernel-sm_80-ptxas{bundled_ptxas('sm_80')[0]}-registers", storage="sqlite:///ciq-optuna.db"
    )
    failed = [t for t in study.trials if t.state == optuna.trial.TrialState.FAIL]
    assert all("power of 2" in t.user_attrs["error"] for t in failed)  # BLOCK=1000 fails its trial only


def test_triton_not_installed_is_one_line(workdir: Path) -> None:
    """Triton's absence simulated by blocking its import in a child process (sys.modules[...] = None)."""
    code = (
        "import sys; sys.modules['triton'] = None\n"
        "from ciq_optuna.cli import main\n"
        f"sys.exit(main(['tune', {RMSNORM!r}, '--arch', 'sm_80', '--minimize', 'registers']))\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 2
    assert (
        res.stderr.strip() == "ciq-optuna: error: Triton is not installed: pip install 'ciq-optuna[triton]'"
    )
    assert not (workdir / "ciq-optuna.db").exists()


def test_python_dash_m_runs_a_triton_tune(workdir: Path) -> None:
    """``python -m ciq_optuna.cli``: the isolated compiles re-import ``__main__`` and must not rerun the CLI."""
    res = subprocess.run(
        [sys.executable, "-m", "ciq_optuna.cli", "tune", RMSNORM, "--arch", "sm_80", "--minimize", "registers",
         "--trials", "2", "--no-simplify", "-q"],
        capture_output=True, text=True, timeout=300, cwd=workdir,
    )
    assert res.returncode == 0, res.stderr
    assert "Traceback" not in res.stderr
    assert (workdir / "rmsnorm_kernel.sm_80.acf").exists()


def test_joint_tune_writes_an_acf_the_apply_helper_reproduces(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [
        "tune",
        RMSNORM,
        "--arch",
        "sm_90a",
        "--minimize",
        "registers",
        "--trials",
        "32",
        "--seed",
        "3",
        "--no-simplify",
        "--quiet",
    ]
    code, out, err = _run_cli(argv, capsys)
    assert code == 0, err
    study = optuna.load_study(
        study_name=f"rmsnorm_kernel-sm_90a-ptxas{bundled_ptxas('sm_90a')[0]}-registers",
        storage="sqlite:///ciq-optuna.db",
    )
    complete = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert len(complete) >= 32
    baseline = next(t for t in complete if t.user_attrs.get("baseline"))
    assert baseline.params["BLOCK_N"] == 1024 and baseline.params["num_warps"] == 4
    assert baseline.user_attrs["flags"] == []
    # one study searched both: meta-parameters and ptxas controls vary across its trials
    assert len({t.params["BLOCK_N"] for t in complete}) > 1
    assert len({t.params["num_warps"] for t in complete}) > 1
    assert len({tuple(t.user_attrs["flags"]) for t in complete}) > 3
    meta = study.user_attrs["ciq_optuna"]
    release, program = bundled_ptxas("sm_90a")
    assert meta["kind"] == "triton" and meta["compiler"]["version"].startswith(release)
    assert meta["compiler"]["path"].endswith("/" + program)

    acf = read_acf(workdir / "rmsnorm_kernel.sm_90a.acf")
    import triton

    assert acf.triton["version"] == triton.__version__ and acf.triton["kernel"] == "rmsnorm_kernel"
    assert acf.triton["ptx_options"] == " ".join(acf.flags)
    assert acf.objectives[0]["value"] <= acf.objectives[0]["baseline"]
    kernel = load_kernel(RMSNORM)
    config = apply_acf(acf, kernel.fn)
    _, hash_ = compile_config(kernel, config, "sm_90a")
    assert hash_ == acf.binary["code_sha256"]
    text = config_text(acf)
    assert "triton.Config({'BLOCK_N': " in text and f"'ptx_options': {acf.triton['ptx_options']!r}" in text

    code, out, _ = _run_cli(
        ["acf", "verify", "rmsnorm_kernel.sm_90a.acf", str(EXAMPLES / "rmsnorm.py")], capsys
    )
    assert code == 0 and out.startswith("OK: ")

    # resume: the budget is spent; a worker rebuilds the same objective from the study's metadata
    code, out, _ = _run_cli(argv[:-1], capsys)
    assert code == 0 and "0 to run" in out
    objective = objective_from_study(study)
    assert type(objective).__name__ == "TritonObjective"
    assert objective.space.baseline_params()["BLOCK_N"] == 1024


def test_apply_helper_refuses_another_kernel(
    workdir: Path, bad_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _run_cli(
        [
            "tune",
            RMSNORM,
            "--arch",
            "sm_80",
            "--minimize",
            "registers",
            "--trials",
            "2",
            "--quiet",
            "--no-simplify",
        ],
        capsys,
    )
    assert code == 0, err
    acf = read_acf(workdir / "rmsnorm_kernel.sm_80.acf")
    with pytest.raises(CiqError, match="this ACF is for kernel 'rmsnorm_kernel', not 'copy_kernel'"):
        apply_acf(acf, load_kernel(f"{bad_file}:copy_kernel").fn)


class FakeDeviceArray:
    """A stand-in for a cupy array (no GPU here): only its device pointer is read."""

    def __init__(self, ptr: int) -> None:
        self.data = type("Memory", (), {"ptr": ptr})()


def test_runtime_launch_description_and_arguments_without_a_gpu(tmp_path: Path) -> None:
    from ciq_optuna.gpu.triton_runtime import kernel_arguments, launch_description

    path = tmp_path / "k.py"
    hook = (
        "\n\ndef launch(meta, seed):\n"
        "    return {'args': {'src': meta['src'], 'dst': meta['dst'], 'n': 4096}, 'grid': (4096 // meta['BLOCK'],),"
        " 'outputs': ['dst']}\n"
        "CIQ_OPTUNA['copy_kernel']['launch'] = launch\n"
    )
    path.write_text(BAD_KERNELS + hook)
    kernel = load_kernel(f"{path}:copy_kernel")
    src, dst = FakeDeviceArray(0x1000), FakeDeviceArray(0x2000)
    desc = launch_description(kernel, {"BLOCK": 256, "num_warps": 4, "src": src, "dst": dst}, seed=0)
    assert desc["grid"] == (16, 1, 1) and desc["outputs"] == ["dst"] and desc["rtol"] == 1e-2
    assert kernel_arguments(kernel, {"BLOCK": 256}, desc["args"]) == [0x1000, 0x2000, 4096, 256]
    with pytest.raises(CiqError, match="launch\\(\\) gives no value for n"):
        kernel.launch = lambda meta, seed: {"args": {"src": 1, "dst": 2}, "grid": (1,), "outputs": ["dst"]}
        launch_description(kernel, {"BLOCK": 256}, 0)


def test_runtime_objective_without_cupy_is_one_line(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("triton")
    try:
        import cupy  # noqa: F401

        pytest.skip("cupy is installed: this checks the message where it is not")
    except ImportError:
        pass
    code, _, err = _run_cli(
        ["tune", RMSNORM, "--arch", "sm_80", "--minimize", "time_ms", "--trials", "2", "--quiet"], capsys
    )
    assert code == 2
    assert "needs cupy: pip install 'ciq-optuna[gpu]'" in err and err.count("\n") == 1
