"""``ciq-optuna explain`` with the real compilers: a PTX ACF from a tune (study available) and a .cu ACF."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from ciq_optuna.acf import Acf, write_acf
from ciq_optuna.cli import main
from ciq_optuna.compilers.base import get_compiler
from ciq_optuna.errors import CiqError
from ciq_optuna.explain import OPCODE_CLASSES, binary_tool, explain, sass_mix
from ciq_optuna.objectives.metrics import compile_metrics
from ciq_optuna.space.compiler_space import CompilerSpace
from ciq_optuna.space.files import find_space
from ciq_optuna.store import Store
from ciq_optuna.study.metadata import file_sha256
from ciq_optuna.tune import TuneConfig, tune

ROOT = Path(__file__).resolve().parents[1]

try:
    PTXAS = get_compiler("ptxas", release="13.0")
    NVCC = get_compiler("nvcc", release="13.0")
except CiqError:
    PTXAS = NVCC = None
pytestmark = pytest.mark.skipif(
    PTXAS is None or binary_tool() is None, reason="needs ptxas/nvcc 13.0 and cuobjdump"
)


def _metrics(compiler, kernel: Path, arch: str, flags: list[str]) -> tuple[dict[str, float], Path]:
    out = Path(tempfile.mkdtemp()) / "k.cubin"
    res = compiler.compile(kernel, arch, flags, output=out)
    assert res.ok, res.error
    return compile_metrics(res), out


def _tune_registers(kernel: Path, **options):
    """A seeded sm_80 register tune of ``kernel`` with the real ptxas 13.0."""
    config = TuneConfig(
        kernel=kernel,
        arch="sm_80",
        minimize=["registers"],
        seed=1,
        compiler_path=str(PTXAS.info.path),
        progress=False,
        **options,
    )
    return tune(config)


def test_explain_a_ptx_acf_from_the_store_with_its_study(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CIQ_OPTUNA_STORAGE", raising=False)
    kernel = tmp_path / "stencil.sm_80.ptx"
    shutil.copy(ROOT / "examples" / "stencil" / kernel.name, kernel)
    result = _tune_registers(kernel, trials=12, store=tmp_path / "store")
    (entry,) = Store(tmp_path / "store").scan().entries
    assert entry.acf.flags, "the search found nothing to explain"
    base, base_cubin = _metrics(PTXAS, kernel, "sm_80", [])
    tuned, tuned_cubin = _metrics(PTXAS, kernel, "sm_80", entry.acf.flags)
    ex = explain(entry.acf, kernel, PTXAS, study=result.study)
    assert ex.metrics["registers"] == (base["registers"], tuned["registers"])
    assert ex.metrics["spill-bytes"] == (base["spill-bytes"], tuned["spill-bytes"])
    tool = binary_tool()
    b, t = sass_mix(base_cubin, tool), sass_mix(tuned_cubin, tool)
    assert ex.sass["total"] == (b["total"], t["total"]) and b["total"] > 100
    assert sum(v[1] for k, v in ex.sass.items() if k != "total") == t["total"]
    assert (ex.sass["local load"][1] > 0) == (tuned["spill-loads"] > 0)
    assert [a.control for a in ex.attributions] == list(entry.acf.controls["ptxas"])
    assert any("study trial" in a.source for a in ex.attributions)

    assert main(["explain", str(entry.path), "--compiler-path", str(PTXAS.info.path)]) == 0
    out = capsys.readouterr().out
    for section in ("ptxas -v metrics", "SASS instruction mix", "each control's share"):
        assert section in out
    assert "local load" in out and "registers *" in out


def test_explain_a_cu_acf_compiles_each_control(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    kernel = tmp_path / "stencil.cu"
    shutil.copy(ROOT / "examples" / "stencil" / "stencil.cu", kernel)
    space = CompilerSpace.load(find_space("nvcc", "13.0")).for_arch("sm_80")
    config = space.complete({"maxrregcount": 32})
    flags = space.render(config)
    base, _ = _metrics(NVCC, kernel, "sm_80", [])
    tuned, _ = _metrics(NVCC, kernel, "sm_80", flags)
    acf = Acf(
        compiler="nvcc",
        compiler_version=NVCC.info.version,
        arch="sm_80",
        flags=flags,
        controls={"nvcc": space.passed(config)},
        space={"spaces": [space.identity]},
        objectives=[{"name": "registers", "direction": "minimize", "value": tuned["registers"]}],
        kernel={"name": kernel.name, "sha256": file_sha256(kernel)},
    )
    path = write_acf(tmp_path / "stencil.sm_80.acf", acf)
    assert main(["explain", str(path), "--kernel", str(kernel), "--compiler-path", str(NVCC.info.path)]) == 0
    out = capsys.readouterr().out
    change = tuned["registers"] - base["registers"]
    assert change < 0
    (row,) = [ln.split() for ln in out.splitlines() if ln.strip().startswith("maxrregcount")]
    assert row[1:4] == ["32", f"{change:+g}", f"{-change:+g}"]
    assert "study not used (the ACF records no study)" in out
    assert set(OPCODE_CLASSES) >= {
        "local load",
        "local store",
        "shared load",
        "global load",
        "fma (float)",
        "branch",
    }


def test_explain_refuses_another_kernel(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    kernel = tmp_path / "k.ptx"
    kernel.write_text((ROOT / "examples" / "stencil" / "stencil.sm_80.ptx").read_text() + "\n")
    space = CompilerSpace.load(find_space("ptxas", "13.0")).for_arch("sm_80")
    acf = Acf(
        compiler="ptxas",
        compiler_version=PTXAS.info.version,
        arch="sm_80",
        flags=[],
        controls={},
        space={"spaces": [space.identity]},
        objectives=[],
        kernel={
            "name": "stencil.sm_80.ptx",
            "sha256": file_sha256(ROOT / "examples/stencil/stencil.sm_80.ptx"),
        },
    )
    path = write_acf(tmp_path / "a.acf", acf)
    assert main(["explain", str(path), "--kernel", str(kernel)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not the kernel this ACF was tuned for" in err[0]


def test_explain_finds_the_kernel_of_a_tuned_acf_without_kernel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """``tune`` records only the kernel's name in the ACF: explain looks beside the ACF, in the
    working directory, then where the ACF's study recorded the kernel, and checks the sha256."""
    monkeypatch.delenv("CIQ_OPTUNA_STORAGE", raising=False)
    src, out, elsewhere = tmp_path / "src", tmp_path / "out", tmp_path / "elsewhere"
    for d in (src, out, elsewhere):
        d.mkdir()
    kernel = src / "my stencil.sm_80.ptx"
    shutil.copy(ROOT / "examples" / "stencil" / "stencil.sm_80.ptx", kernel)
    acf = out / "my stencil.sm_80.acf"
    _tune_registers(kernel, trials=8, storage=f"sqlite:///{tmp_path / 'study.db'}", acf=acf)
    header = acf.read_text()
    assert "$(ciq-optuna acf flags 'my stencil.sm_80.acf')" in header  # quoted for the shell
    assert "-o 'my stencil.sm_80.opts'" in header
    explain_it = ["explain", str(acf), "--compiler-path", str(PTXAS.info.path)]
    monkeypatch.chdir(elsewhere)
    assert main(explain_it) == 0, capsys.readouterr().err  # the study's recorded path
    assert "ptxas -v metrics" in capsys.readouterr().out
    assert main([*explain_it, "--no-study"]) == 0, capsys.readouterr().err
    capsys.readouterr()

    moved = elsewhere / kernel.name
    kernel.rename(moved)
    assert main(explain_it) == 0, capsys.readouterr().err  # in the working directory
    capsys.readouterr()
    moved.rename(out / kernel.name)
    monkeypatch.chdir(tmp_path)
    assert main(explain_it) == 0, capsys.readouterr().err  # beside the ACF
    capsys.readouterr()

    (out / kernel.name).write_text((ROOT / "examples" / "stencil" / "stencil.sm_80.ptx").read_text() + "\n")
    assert main(explain_it) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not the kernel this ACF was tuned for" in err[0]
    (out / kernel.name).unlink()
    assert main(explain_it) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "pass --kernel PATH" in err[0]
