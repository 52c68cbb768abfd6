"""``ciq-optuna check`` on a store made by the real ptxas 13.0, checked with 13.0 and with 13.5 (pip wheels)."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import pytest
from installed_ptxas import PTXAS_130, PTXAS_135

from ciq_optuna.acf import Acf, write_acf
from ciq_optuna.cli import main
from ciq_optuna.compilers.base import Ptxas
from ciq_optuna.objectives.metrics import compile_metrics
from ciq_optuna.space.compiler_space import CompilerSpace
from ciq_optuna.space.files import find_space
from ciq_optuna.store import Store
from ciq_optuna.study.metadata import file_sha256

ROOT = Path(__file__).resolve().parents[1]


pytestmark = pytest.mark.skipif(
    PTXAS_130 is None or PTXAS_135 is None, reason="needs ptxas 13.0 and 13.5 (pip wheels)"
)


def _metrics(ptxas: Ptxas, kernel: Path, arch: str, flags: list[str]) -> tuple[str, dict[str, float]]:
    with tempfile.TemporaryDirectory() as tmp:
        res = ptxas.compile(kernel, arch, flags, output=Path(tmp) / "k.cubin")
    assert res.ok, res.error
    return res.code_hash, compile_metrics(res)


def tuned_acf(kernel: Path, arch: str, controls: dict, objective: str) -> Acf:
    """An ACF as tune writes it, for chosen controls, compiled with ptxas 13.0."""
    ptxas = Ptxas(PTXAS_130)
    space = CompilerSpace.load(find_space("ptxas", "13.0")).for_arch(arch)
    config = space.complete(controls)
    flags = space.render(config)
    code, best = _metrics(ptxas, kernel, arch, flags)
    _, base = _metrics(ptxas, kernel, arch, [])
    return Acf(
        compiler="ptxas",
        compiler_version=PTXAS_130.version,
        arch=arch,
        flags=flags,
        controls={"ptxas": space.passed(config)},
        space={"spaces": [space.identity]},
        objectives=[
            {
                "name": objective,
                "direction": "minimize",
                "value": best[objective],
                "baseline": base[objective],
            }
        ],
        metrics={"best": best, "baseline": base},
        kernel={"name": kernel.name, "sha256": file_sha256(kernel)},
        binary={"code_sha256": code},
    )


@pytest.fixture()
def store(tmp_path: Path) -> Path:
    """Three kernels' tunings made by ptxas 13.0, plus one whose kernel was edited since."""
    root = tmp_path / "store"
    st = Store(root)
    cases = [
        ("stencil", "sm_80", {"maxrregcount": 40}, "registers"),
        ("sgemm", "sm_90a", {"maxrregcount": 32}, "cubin-size"),
        ("attention", "sm_80", {"opt_level": 1}, "spill-bytes"),
    ]
    for name, arch, controls, objective in cases:
        kernel = tmp_path / f"{name}.{arch}.ptx"
        shutil.copy(ROOT / "examples" / name / kernel.name, kernel)
        st.add(tuned_acf(kernel, arch, controls, objective), kernel=kernel)
    edited = tmp_path / "stencil.sm_90a.ptx"
    shutil.copy(ROOT / "examples" / "stencil" / edited.name, edited)
    st.add(tuned_acf(edited, "sm_90a", {"maxrregcount": 40}, "registers"), kernel=edited)
    edited.write_text(edited.read_text() + "\n// edited after tuning\n")
    return root


def _check(store: Path, ptxas, capsys: pytest.CaptureFixture) -> tuple[int, dict[str, dict]]:
    code = main(["check", str(store), "--json", "--compiler-path", str(ptxas.path)])
    doc = json.loads(capsys.readouterr().out)
    return code, {r["entry"].split("/")[0] + "." + r["arch"]: r for r in doc["results"]}


def test_check_with_the_same_compiler_reproduces_and_with_13_5_reports_each_stale_entry(
    store: Path, capsys: pytest.CaptureFixture
) -> None:
    before = {p: p.read_bytes() for p in store.rglob("*.acf")}
    code, rows = _check(store, PTXAS_130, capsys)
    assert code == 1
    assert {k: r["status"] for k, r in rows.items()} == {
        "stencil.sm_80": "reproduced",
        "sgemm.sm_90a": "reproduced",
        "attention.sm_80": "reproduced",
        "stencil.sm_90a": "kernel changed",
    }
    code, rows = _check(store, PTXAS_135, capsys)
    assert code == 1
    assert all(r["stale"] and r["installed"] == f"ptxas {PTXAS_135.version}" for r in rows.values())
    # the verdicts agree with compiling each tuning and the defaults with ptxas 13.5 here
    ptxas = Ptxas(PTXAS_135)
    for key, flags, metric in [
        ("stencil.sm_80", ["--maxrregcount=40"], "registers"),
        ("sgemm.sm_90a", ["--maxrregcount=32"], "cubin-size"),
        ("attention.sm_80", ["-O1"], "spill-bytes"),
    ]:
        kernel = ROOT / "examples" / key.split(".")[0] / f"{key}.ptx"
        tuned = _metrics(ptxas, kernel, key.split(".")[1], flags)[1][metric]
        default = _metrics(ptxas, kernel, key.split(".")[1], [])[1][metric]
        expected = "worse than default" if tuned > default else "changed binary"
        assert rows[key]["status"] == expected, (key, tuned, default, rows[key])
        (obj,) = rows[key]["objectives"]
        assert (obj["tuned"], obj["default"]) == (tuned, default)
    statuses = {r["status"] for r in rows.values()}
    assert {"changed binary", "worse than default", "kernel changed"} <= statuses
    assert {p: p.read_bytes() for p in store.rglob("*.acf")} == before


def test_check_table_for_ci_logs_and_store_problems(store: Path, capsys: pytest.CaptureFixture) -> None:
    st = Store(store)
    entry = next(e for e in st.scan().entries if e.acf.arch == "sm_90a" and "sgemm" in str(e.path))
    (store / "dup.acf").write_bytes(entry.path.read_bytes())
    (store / "broken.acf").write_text("format = 'ciq-optuna-acf'\nformat_version = 1\n")
    edited = store.parent / "stencil.sm_90a.ptx"
    shutil.copy(ROOT / "examples" / "stencil" / edited.name, edited)
    code = main(["check", str(store), "--compiler-path", str(PTXAS_130.path)])
    out = capsys.readouterr().out.splitlines()
    assert code == 1
    rows = [ln for ln in out if ln.endswith(".acf") or ".acf " in ln]
    assert len(rows) == 6
    assert sum("STALE duplicate" in ln for ln in rows) == 2
    assert sum("STALE damaged" in ln and "broken.acf" in ln for ln in rows) == 1
    assert sum("ok    reproduced" in ln for ln in rows) == 3
    assert out[-1] == "6 entries, 3 stale"
    assert main(["check", str(store / "missing")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"ciq-optuna: error: store not found: {store / 'missing'}"]


def test_changed_binary_passes_with_allow_changed_binary(store: Path, capsys: pytest.CaptureFixture) -> None:
    for e in Store(store).scan().entries:
        if "stencil/sm_80" not in str(e.path):
            e.path.unlink()
    argv = ["check", str(store), "--compiler-path", str(PTXAS_135.path)]
    assert main(argv) == 1
    capsys.readouterr()
    assert main([*argv, "--allow-changed-binary"]) == 0
    assert "ok    changed binary" in capsys.readouterr().out


def _gpu_present() -> bool:
    from ciq_optuna.gpu.errors import GpuUnavailableError
    from ciq_optuna.gpu.harness import import_cupy

    try:
        import_cupy()
    except GpuUnavailableError:
        return False
    return True


@pytest.fixture()
def runtime_store(tmp_path: Path) -> tuple[Path, Path]:
    """(store, launch file): one stencil entry whose objectives are registers and time_ms, added
    with ``store add --launch`` (the launch file is never imported by the mocked-GPU tests)."""
    kernel = tmp_path / "stencil.sm_80.ptx"
    shutil.copy(ROOT / "examples" / "stencil" / kernel.name, kernel)
    acf = tuned_acf(kernel, "sm_80", {"maxrregcount": 40}, "registers")
    acf.objectives.append({"name": "time_ms", "direction": "minimize", "value": 1.0, "baseline": 1.1})
    write_acf(tmp_path / "tuned.acf", acf)
    launch = tmp_path / "stencil_launch.py"
    launch.write_text("def stencil_launch():\n    raise RuntimeError('needs a GPU')\n")
    store = tmp_path / "store"
    argv = ["store", "add", str(tmp_path / "tuned.acf"), "--kernel", str(kernel), "--store", str(store)]
    assert main([*argv, "--launch", f"{launch}:stencil_launch"]) == 0
    return store, launch


@pytest.mark.skipif(_gpu_present(), reason="checks the machine without a GPU")
def test_check_runtime_without_gpu_is_not_checked_and_stale_only_when_required(
    runtime_store: tuple[Path, Path], capsys: pytest.CaptureFixture
) -> None:
    store, _ = runtime_store
    argv = ["check", str(store), "--compiler-path", str(PTXAS_130.path)]
    assert main([*argv, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    (row,) = doc["results"]
    assert row["status"] == "reproduced" and not row["stale"] and doc["runtime_not_checked"] == 1
    registers, time_ms = row["objectives"]
    assert registers["checked"] and registers["name"] == "registers"
    assert time_ms == {"name": "time_ms", "checked": False, "runtime": True, "note": "not checked: no GPU"}
    assert main(argv) == 0
    out = capsys.readouterr().out.splitlines()
    assert "time_ms: not checked: no GPU" in out[2]
    assert out[-1] == "1 entry, 0 stale, 1 with a runtime objective not checked"
    assert main([*argv, "--require-runtime"]) == 1
    assert "runtime required" in capsys.readouterr().out


class _MockedGpuMeasure:
    """Stands in for GpuAcfMeasure (no GPU here): the tuning's and the defaults' times are given."""

    created: list[dict] = []
    candidate_ms = 1.0

    def __init__(self, launch, source, **options) -> None:
        self.created.append({"launch": launch, "source": Path(source), **options})

    def __call__(self, acf_path):
        from ciq_optuna.gpu.winners import Comparison

        return Comparison(baseline=[1.0, 1.01, 0.99], candidate=[self.candidate_ms] * 3)


@pytest.mark.parametrize("candidate_ms, status", [(1.2, "worse than default"), (0.8, "reproduced")])
def test_check_runtime_mocked_gpu_compares_with_the_defaults(
    runtime_store: tuple[Path, Path],
    capsys: pytest.CaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    candidate_ms: float,
    status: str,
) -> None:
    import ciq_optuna.gpu.check as gpu_check
    import ciq_optuna.gpu.cli as gpu_cli
    import ciq_optuna.gpu.validate as gpu_validate

    store, launch = runtime_store
    loaded: list[str] = []
    monkeypatch.setattr(gpu_check, "import_cupy", lambda: None)  # mocked: a GPU is present
    monkeypatch.setattr(gpu_cli, "load_launch", lambda spec: loaded.append(spec) or "launch-spec")
    monkeypatch.setattr(_MockedGpuMeasure, "created", [])
    monkeypatch.setattr(_MockedGpuMeasure, "candidate_ms", candidate_ms)
    monkeypatch.setattr(gpu_validate, "GpuAcfMeasure", _MockedGpuMeasure)
    code = main(["check", str(store), "--json", "--compiler-path", str(PTXAS_130.path), "--require-runtime"])
    (row,) = json.loads(capsys.readouterr().out)["results"]
    assert code == (1 if candidate_ms > 1.0 else 0)
    assert row["status"] == status
    # the launch the entry records, the entry's kernel and arch
    assert loaded == [f"{launch.resolve()}:stencil_launch"]
    (created,) = _MockedGpuMeasure.created
    assert created["launch"] == "launch-spec" and created["source"].name == "stencil.sm_80.ptx"
    assert created["arch"] == "sm_80"
    time_ms = row["objectives"][1]
    assert time_ms["checked"] and time_ms["tuned_ms"] == candidate_ms and time_ms["default_ms"] == 1.0
    if status == "worse than default":
        assert "time_ms: runtime 1.2 ms vs default 1 ms" in row["reason"]
