"""The ACF store with the real ptxas: tune --store, exact-key lookup, refusals, damaged and duplicate entries."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest
from installed_ptxas import PTXAS_130, PTXAS_135

from ciq_optuna.acf import read_acf
from ciq_optuna.cli import main
from ciq_optuna.store import Store, StoreError, lookup
from ciq_optuna.tune import TuneConfig, tune

ROOT = Path(__file__).resolve().parents[1]
STENCIL = ROOT / "examples" / "stencil" / "stencil.sm_80.ptx"


pytestmark = pytest.mark.skipif(PTXAS_130 is None, reason="no ptxas 13.0 installed")


@pytest.fixture(scope="module")
def tuned_once(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory after one small tune of the stencil into a store with ptxas 13.0."""
    root = tmp_path_factory.mktemp("tuned")
    kernel = root / "kernels" / "stencil.sm_80.ptx"
    kernel.parent.mkdir()
    shutil.copy(STENCIL, kernel)
    store = root / "kernels" / "acf-store"
    config = TuneConfig(
        kernel=kernel,
        arch="sm_80",
        minimize=["registers"],
        trials=10,
        seed=3,
        compiler_path=str(PTXAS_130.path),
        progress=False,
        store=store,
        storage=f"sqlite:///{root / 'ciq-optuna.db'}",
        acf=root / "stencil.acf",
    )
    result = tune(config)
    assert result.store_path is not None and result.store_path.is_file()
    return root


@pytest.fixture()
def tuned(tuned_once: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """(kernel, store): a fresh copy of the tuned store for one test."""
    shutil.copytree(tuned_once, tmp_path, dirs_exist_ok=True)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CIQ_OPTUNA_STORAGE", raising=False)
    return tmp_path / "kernels" / "stencil.sm_80.ptx", tmp_path / "kernels" / "acf-store"


def test_tune_store_lookup_returns_only_exact_matches(tuned: tuple[Path, Path], tmp_path: Path) -> None:
    kernel, store = tuned
    (entry,) = Store(store).scan().entries
    assert entry.path.relative_to(store).parts[:3] == ("stencil", "sm_80", f"ptxas-{PTXAS_130.version}")
    assert (store / entry.acf.kernel["path"]).resolve() == kernel.resolve()
    found = lookup(kernel, "sm_80", PTXAS_130, store=store)
    assert found is not None and found.flags == entry.acf.flags
    assert lookup(kernel, "sm_80", ("ptxas", PTXAS_130.version), store=store, objective="registers")
    assert lookup(kernel, "sm_80", PTXAS_130, store=store, objective="spill-bytes") is None
    assert lookup(kernel, "sm_90a", PTXAS_130, store=store) is None
    assert lookup(kernel, "sm_80", ("ptxas", "13.0.1"), store=store) is None
    if PTXAS_135 is not None:
        assert lookup(kernel, "sm_80", PTXAS_135, store=store) is None
    edited = tmp_path / "edited.sm_80.ptx"
    edited.write_text(kernel.read_text() + "\n// edited\n")
    assert lookup(edited, "sm_80", PTXAS_130, store=store) is None


def test_an_existing_key_is_not_overwritten_without_force(
    tuned: tuple[Path, Path], capsys: pytest.CaptureFixture
) -> None:
    kernel, store = tuned
    (entry,) = Store(store).scan().entries
    before = entry.path.read_bytes()
    argv = [
        "tune",
        str(kernel),
        "--arch",
        "sm_80",
        "--minimize",
        "registers",
        "--trials",
        "12",
        "--compiler-path",
        str(PTXAS_130.path),
        "--store",
        str(store),
        "--quiet",
        "--study",
        "other",
    ]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "already holds a tuning" in err[0] and "--force" in err[0]
    assert entry.path.read_bytes() == before
    assert main([*argv, "--force"]) == 0
    (after,) = Store(store).scan().entries
    assert after.path == entry.path and after.acf.provenance["study"] == "other"


def test_damaged_and_duplicate_entries_get_one_line_each(
    tuned: tuple[Path, Path], capsys: pytest.CaptureFixture, caplog: pytest.LogCaptureFixture
) -> None:
    kernel, store = tuned
    (entry,) = Store(store).scan().entries
    damaged = store / "other" / "broken.acf"
    damaged.parent.mkdir()
    damaged.write_text(entry.path.read_text().replace('arch = "sm_80"', 'arch = "sm_90a"'))
    with caplog.at_level(logging.WARNING, logger="ciq_optuna"):
        assert lookup(kernel, "sm_80", PTXAS_130, store=store).flags == entry.acf.flags
    assert "broken.acf" in caplog.text
    copy = store / "copy.acf"
    shutil.copy(entry.path, copy)
    with pytest.raises(StoreError, match="two entries for one key"):
        lookup(kernel, "sm_80", PTXAS_130, store=store)
    capsys.readouterr()
    assert main(["store", "list", "--store", str(store)]) == 1
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("error:")]
    assert len(lines) == 2
    assert any("two entries for one key" in ln and "copy.acf" in ln for ln in lines)
    assert any("broken.acf" in ln and "checksum" in ln for ln in lines)
    assert (
        main(
            [
                "store",
                "lookup",
                str(kernel),
                "--arch",
                "sm_80",
                "--store",
                str(store),
                "--compiler-path",
                str(PTXAS_130.path),
            ]
        )
        == 2
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("ciq-optuna: error: two entries for one key")
    assert read_acf(entry.path).flags == entry.acf.flags


def test_store_add_refuses_the_wrong_kernel_and_multi_objective_tunes(
    tuned: tuple[Path, Path], tmp_path: Path
) -> None:
    kernel, store = tuned
    (entry,) = Store(store).scan().entries
    other = tmp_path / "other.ptx"
    other.write_text(kernel.read_text() + "\n")
    with pytest.raises(StoreError, match="not the kernel this ACF was tuned for"):
        Store(store).add(read_acf(entry.path), kernel=other, force=True)
    config = TuneConfig(
        kernel=kernel,
        arch="sm_80",
        minimize=["registers", "spill-bytes"],
        trials=4,
        compiler_path=str(PTXAS_130.path),
        progress=False,
        store=store,
    )
    with pytest.raises(StoreError, match="several objectives needs --pareto-pick"):
        tune(config)


def test_tune_store_with_several_objectives_stores_the_picked_pareto_point(
    tuned: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    kernel, store = tuned
    # registers against cubin size: a front of two points with this seed and budget
    base = ["tune", str(kernel), "--arch", "sm_80", "--minimize", "registers", "--maximize", "cubin-size"]
    base += ["--trials", "8"]
    base += ["--seed", "1", "--compiler-path", str(PTXAS_130.path), "--storage", "sqlite:///multi.db"]
    base += ["--store", str(store), "--quiet"]
    before = {p: p.read_bytes() for p in Store(store).files()}
    # bad input, before any trial: no pick, a bad pick, a pick without --store
    for extra, message in (
        ([], "needs --pareto-pick"),
        (["--pareto-pick", "best"], "'first' or a trial number"),
    ):
        assert main(base + extra) == 2
        assert message in capsys.readouterr().err
    assert main(base[:-3] + ["--quiet", "--pareto-pick", "first"]) == 2
    assert "give --store DIR too" in capsys.readouterr().err
    assert not Path("multi.db").exists()

    assert main(base + ["--pareto-pick", "first"]) == 0
    out = capsys.readouterr().out
    points = sorted(Path("stencil.sm_80.pareto").glob("trial-*.acf"), key=lambda p: int(p.stem[6:]))
    first = out.split("the front's first point, trial ")[1].split(":")[0]
    new = [e for e in Store(store).scan().entries if e.path not in before]
    (entry,) = new
    assert entry.key.objectives == ("min-registers", "max-cubin-size")
    assert entry.acf.provenance["trial"] == int(first)
    assert all(p.read_bytes() == b for p, b in before.items())  # the one-objective entry is untouched

    # an explicit trial: not on the front -> one line, nothing replaced; on the front -> replaced (--force)
    stored = entry.path.read_bytes()
    assert main(base + ["--pareto-pick", "9999", "--force"]) == 2
    assert "trial 9999 is not on the Pareto front" in capsys.readouterr().err
    assert entry.path.read_bytes() == stored
    other = next(p for p in points if int(p.stem[6:]) != int(first))
    assert main(base + ["--pareto-pick", other.stem[6:], "--force"]) == 0
    (entry,) = [e for e in Store(store).scan().entries if e.path not in before]
    assert entry.acf.provenance["trial"] == int(other.stem[6:])
    assert entry.acf.flags == read_acf(other).flags
