"""Triton kernels in the ACF store with the real Triton 3.9 and its ptxas (ahead of time, no GPU).

A small tune-all (rmsnorm, the cheap kernel, on sm_80 then sm_90a, which warm-starts from the
sm_80 entry's meta-parameters and flags) fills a store; lookup returns the flags and the Triton
config for exactly that kernel, Triton and ptxas; a second run only reports; ``check`` reproduces
the entries, reports them stale with another ptxas or Triton; ``explain`` shows the metrics, SASS
mix and each control's and meta-parameter's share.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import optuna
import pytest
from installed_ptxas import PTXAS_130

from ciq_optuna.acf import read_acf, write_acf
from ciq_optuna.cli import main
from ciq_optuna.store import Store, lookup

triton = pytest.importorskip("triton")

ROOT = Path(__file__).resolve().parents[1]
MANIFEST = """
store = "acf-store"
trials = 4
seed = 0

[[kernel]]
path = "rmsnorm.py:{name}"
archs = {archs}
minimize = ["registers"]
"""


@pytest.fixture()
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CIQ_OPTUNA_STORAGE", raising=False)
    shutil.copy(ROOT / "examples" / "triton" / "rmsnorm.py", tmp_path / "rmsnorm.py")
    (tmp_path / "manifest.toml").write_text(
        MANIFEST.format(name="rmsnorm_kernel", archs='["sm_80", "sm_90a"]')
    )
    return tmp_path


def _trials(db: Path) -> int:
    return sum(s.n_trials for s in optuna.get_all_study_summaries(f"sqlite:///{db}"))


def test_triton_entry_lookup_check_and_explain(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from ciq_optuna.compilers.triton import triton_ptxas

    argv = ["tune-all", "manifest.toml", "--quiet"]
    assert main(argv) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1] == "2 tuned, 0 in store, 0 failed"
    store = Store(repo / "acf-store")
    entries = {e.acf.arch: e for e in store.scan().entries}
    assert sorted(entries) == ["sm_80", "sm_90a"]
    entry = entries["sm_80"]
    acf = entry.acf
    # the sm_90a tune started from the sm_80 winner: its meta-parameters and (translated) flags
    study = optuna.load_study(
        study_name=f"rmsnorm_kernel-sm_90a-ptxas{entries['sm_90a'].acf.compiler_version[:4]}-registers",
        storage="sqlite:///ciq-optuna.db",
    )
    warm = sorted((t for t in study.trials if "warm_start" in t.user_attrs), key=lambda t: t.number)
    assert warm and Path(warm[0].user_attrs["warm_start"]).resolve() == entry.path.resolve()
    assert {k: warm[0].params[k] for k in acf.application} == acf.application
    ptxas = triton_ptxas("sm_80")
    assert entry.key.variant == f"triton {triton.__version__} rmsnorm_kernel"
    assert (entry.key.compiler, entry.key.compiler_version) == ("ptxas", ptxas.version)
    assert store.kernel_path(entry).resolve() == (repo / "rmsnorm.py").resolve()

    # lookup: the flags and the Triton config, for this kernel, Triton and ptxas only
    ref = f"{repo / 'rmsnorm.py'}:rmsnorm_kernel"
    tuning = lookup(ref, "sm_80", store=store)
    assert tuning is not None and tuning.flags == acf.flags
    assert tuning.application == acf.application
    for name, value in acf.application.items():
        assert {**tuning.triton["constexprs"], **tuning.triton["options"]}[name] == value
    assert tuning.triton["ptx_options"] == " ".join(acf.flags)
    assert lookup(ref, "sm_90a", store=store).path == entries["sm_90a"].path  # its own ptxas
    assert lookup(ref, "sm_86", store=store) is None
    assert lookup(ref, "sm_80", ("ptxas", "13.0.88"), store=store) is None
    assert lookup(ref, "sm_80", store=store, variant="triton 3.8.0 rmsnorm_kernel") is None
    edited = repo / "edited" / "rmsnorm.py"
    edited.parent.mkdir()
    edited.write_text((repo / "rmsnorm.py").read_text() + "\n# edited\n")
    assert lookup(f"{edited}:rmsnorm_kernel", "sm_80", store=store) is None

    # a second run only reports; the entry is not rewritten
    trials, stored = _trials(repo / "ciq-optuna.db"), entry.path.read_bytes()
    assert main(argv) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1] == "0 tuned, 2 in store, 0 failed"
    assert _trials(repo / "ciq-optuna.db") == trials and entry.path.read_bytes() == stored
    # adding it again without --force is refused in one line
    tuned_acf = repo / ".ciq-optuna" / "tune-all" / "rmsnorm_kernel.sm_80.registers.acf"
    assert main(["store", "add", str(tuned_acf), "--kernel", ref, "--store", "acf-store"]) == 2
    assert "already holds a tuning" in capsys.readouterr().err
    assert entry.path.read_bytes() == stored

    # check with the same Triton and ptxas: the recorded binary, no worse than the baseline
    assert main(["check", "acf-store", "--json"]) == 0
    rows = {r["arch"]: r for r in json.loads(capsys.readouterr().out)["results"]}
    assert all(r["status"] == "reproduced" and not r["stale"] for r in rows.values())
    row = rows["sm_80"]
    assert row["objectives"][0]["tuned"] == acf.objectives[0]["value"]
    assert row["objectives"][0]["default"] == acf.objectives[0]["baseline"]
    if PTXAS_130 is not None:  # another ptxas under the same Triton: other code
        assert main(["check", "acf-store", "--json", "--compiler-path", str(PTXAS_130.path)]) == 1
        row = {r["arch"]: r for r in json.loads(capsys.readouterr().out)["results"]}["sm_80"]
        assert row["installed"].startswith(f"ptxas {PTXAS_130.version}") and row["stale"]
        assert row["status"] in ("changed binary", "worse than default")

    # explain: metrics of the baseline and of the tuning as recorded, SASS mix, one row per change
    assert main(["explain", str(entry.path), "--no-study"]) == 0
    out = capsys.readouterr().out
    registers = next(line.split() for line in out.splitlines() if line.strip().startswith("registers *"))
    assert float(registers[2]) == acf.metrics["baseline"]["registers"]
    assert float(registers[3]) == acf.metrics["best"]["registers"]
    assert "SASS instruction mix" in out and "meta-parameters:" in out
    section = out.split("each control's share")[1].splitlines()
    changed = [k for k, v in acf.application.items() if v != (1024 if k == "BLOCK_N" else 4)]
    for name in changed + list(acf.controls.get("ptxas", {})):
        assert any(line.split()[:1] == [name] for line in section), (name, out)

    # an entry tuned with another Triton version is stale, with the reason
    acf.triton["version"] = "3.8.0"
    write_acf(entry.path, acf)
    assert main(["check", "acf-store"]) == 1
    out = capsys.readouterr().out
    assert "triton changed" in out and "tuned with Triton 3.8.0" in out
    assert read_acf(entry.path).triton["version"] == "3.8.0"  # nothing rewritten


def test_manifest_naming_a_missing_triton_kernel_is_one_line(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (repo / "manifest.toml").write_text(MANIFEST.format(name="no_such_kernel", archs='["sm_80"]'))
    assert main(["tune-all", "manifest.toml", "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "no_such_kernel" in err and "rmsnorm_kernel" in err
    assert not (repo / "acf-store").exists()
