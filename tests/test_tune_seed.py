"""A tune with a seed is repeatable: two runs with the same seed, each in its own folder and
study, run the same trials, compile the same ones and skip the same ones (real ptxas 13.0)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from ciq_optuna.tune import TuneConfig, tune

ROOT = Path(__file__).resolve().parents[1]
PTXAS_13_0 = Path("/usr/local/cuda/bin/ptxas")
STENCIL = ROOT / "examples" / "stencil" / "stencil.sm_90a.ptx"
pytestmark = pytest.mark.skipif(not PTXAS_13_0.exists(), reason="needs CUDA 13.0's ptxas")

# Controls of the ptxas 13.0 space that do not depend on others; several do not change the
# stencil's code, so the binary-aware sampler predicts repeats and skips their compiles.
KEEP = {"opt_level", "fmad", "optimize_float_atomics", "force_load_cache", "force_store_cache", "disable_optimizer_constants"}


def _space(path: Path) -> Path:
    controls = (ROOT / "spaces" / "ptxas-13.0.toml").read_text().split("\n[[conflict]]")[0]
    head, *blocks = controls.split("[[control]]\n")
    kept = [b for b in blocks if re.search(r'^name = "(\w+)"', b, re.M).group(1) in KEEP]
    path.write_text(head + "".join("[[control]]\n" + b for b in kept))
    return path


def _trials(folder: Path, space: Path, seed: int) -> list[tuple[Any, ...]]:
    folder.mkdir()
    result = tune(
        TuneConfig(
            kernel=STENCIL,
            arch="sm_90a",
            minimize=["registers"],
            trials=TRIALS,
            seed=seed,
            spaces=[space],
            compiler_path=str(PTXAS_13_0),
            storage=f"sqlite:///{folder / 's.db'}",
            acf=folder / "best.acf",
            workdir=folder / "w",
            progress=False,
        )
    )
    attrs = ("skipped_compile", "predicted_from", "skip_compile", "binary_hash")
    return [
        (t.number, t.state, sorted(t.params.items()), t.values, [t.user_attrs.get(a) for a in attrs])
        for t in sorted(result.study.get_trials(deepcopy=False), key=lambda t: t.number)
    ]


TRIALS = 24


def test_two_tunes_with_the_same_seed_run_the_same_trials(tmp_path: Path) -> None:
    space = _space(tmp_path / "space.toml")
    first = _trials(tmp_path / "a", space, seed=3)
    assert any(row[4][0] for row in first), "no compile was skipped: the binary-aware path went untested"
    assert _trials(tmp_path / "b", space, seed=3) == first
