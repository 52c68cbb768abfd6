"""Warm-started re-tuning with the real ptxas: a 13.0 store entry seeds a 13.5 tune (and a neighbouring arch)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from installed_ptxas import PTXAS_130, PTXAS_135

from ciq_optuna.space.compiler_space import CompilerSpace
from ciq_optuna.space.files import find_space
from ciq_optuna.store import Store
from ciq_optuna.tune import TuneConfig, tune
from ciq_optuna.warm_start import WARM_ATTR, neighbours, translate, warm_configs

ROOT = Path(__file__).resolve().parents[1]


pytestmark = pytest.mark.skipif(
    PTXAS_130 is None or PTXAS_135 is None, reason="needs ptxas 13.0 and 13.5 (pip wheels)"
)


def test_translate_keeps_what_the_new_space_accepts_and_neighbours_step_ints() -> None:
    space = CompilerSpace.load(find_space("ptxas", "13.5")).for_arch("sm_80")
    config = translate(space, {"maxrregcount": 40, "no_such_control": True, "opt_level": 7})
    assert space.passed(config) == {"maxrregcount": 40}
    near = [space.passed(c) for c in neighbours(space, config)]
    assert {"maxrregcount": 32} in near and {"maxrregcount": 48} in near and {} in near
    grid = space.control("maxrregcount").grid()
    assert grid[grid.index(40) - 1] == 32 and grid[grid.index(40) + 1] == 48
    configs = warm_configs(space, [])
    assert configs == []


def _config(kernel: Path, arch: str, ptxas, store: Path, tmp: Path, **kw) -> TuneConfig:
    return TuneConfig(
        kernel=kernel,
        arch=arch,
        minimize=["registers"],
        trials=8,
        seed=0,
        compiler_path=str(ptxas.path),
        progress=False,
        store=store,
        storage=f"sqlite:///{tmp / 'ciq-optuna.db'}",
        acf=tmp / f"{kernel.stem}.{ptxas.release}.acf",
        **kw,
    )


def test_a_13_5_tune_starts_from_the_13_0_winner_and_its_neighbours(tmp_path: Path) -> None:
    kernels = {}
    for arch in ("sm_80", "sm_90a"):
        kernels[arch] = tmp_path / f"stencil.{arch}.ptx"
        shutil.copy(ROOT / "examples" / "stencil" / kernels[arch].name, kernels[arch])
    store = tmp_path / "store"
    old = _config(kernels["sm_80"], "sm_80", PTXAS_130, store, tmp_path, warm_start=False)
    old.trials, old.seed = 12, 1
    tune(old)
    (old_entry,) = Store(store).scan().entries
    assert old_entry.acf.flags, "the 13.0 search found no winner with flags; nothing to warm-start from"

    new = tune(_config(kernels["sm_80"], "sm_80", PTXAS_135, store, tmp_path))
    warm = [t for t in new.study.trials if WARM_ATTR in t.user_attrs]
    assert warm and all(t.user_attrs[WARM_ATTR] == str(old_entry.path) for t in warm)
    first = min(warm, key=lambda t: t.number)
    assert first.number == 1 and first.user_attrs["flags"] == old_entry.acf.flags
    assert len(warm) == max(2, 8 // 4)
    # the screening still runs after the seeds, without repeating a configuration they tried
    screening = [t for t in new.study.trials if t.user_attrs.get("screening")]
    assert len(screening) == 8 // 8
    assert min(t.number for t in screening) > max(t.number for t in warm)
    tried = [tuple(sorted(t.params.items())) for t in new.study.trials if t.number <= screening[-1].number]
    assert len(tried) == len(set(tried))

    cold = tune(
        _config(kernels["sm_80"], "sm_80", PTXAS_135, tmp_path / "other-store", tmp_path, study_name="cold")
    )
    assert not any(WARM_ATTR in t.user_attrs for t in cold.study.trials)

    neighbour = tune(_config(kernels["sm_90a"], "sm_90a", PTXAS_130, store, tmp_path))
    sources = {t.user_attrs.get(WARM_ATTR) for t in neighbour.study.trials} - {None}
    assert str(old_entry.path) in sources
