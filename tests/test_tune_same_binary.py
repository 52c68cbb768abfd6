"""The silent no-op of a compiler search, on the real ptxas 13.0: when every tried flag set
compiles to the same binary, tune says so (issue 16)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from ciq_optuna.tune import TuneConfig, tune

PTXAS_13_0 = Path("/usr/local/cuda/bin/ptxas")
STENCIL = Path(__file__).resolve().parents[1] / "examples" / "stencil" / "stencil.sm_90a.ptx"
pytestmark = pytest.mark.skipif(not PTXAS_13_0.exists(), reason="needs CUDA 13.0's ptxas")

EMPTY_KERNEL = """.version 9.0
.target sm_90a
.address_size 64

.visible .entry empty_kernel()
{
\tret;
}
"""

# Two real ptxas controls that cannot change a kernel without arithmetic or atomics.
IDLE_SPACE = """schema = 1
name = "ptxas"
compiler = "ptxas"
cuda = "13.0"
version = 1
description = "controls an empty kernel does not feel"

[[control]]
name = "fmad"
flag = "--fmad={value}"
kind = "bool"
default = true
not_passed = true
archs = ["all"]
description = "Contract multiplies and adds."

[[control]]
name = "optimize_float_atomics"
flag = "--optimize-float-atomics"
kind = "switch"
default = false
archs = ["all"]
description = "Optimise floating-point atomics."
"""


def _run(tmp_path: Path, kernel: Path, spaces: list[Path]):
    return tune(
        TuneConfig(
            kernel=kernel,
            arch="sm_90a",
            minimize=["cubin-size"],
            trials=6,
            seed=0,
            spaces=spaces,
            compiler_path=str(PTXAS_13_0),
            storage=f"sqlite:///{tmp_path / 's.db'}",
            acf=tmp_path / "best.acf",
            workdir=tmp_path / "w",
            progress=False,
        )
    )


def test_one_binary_for_every_flag_set_is_reported(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    kernel = tmp_path / "empty.sm_90a.ptx"
    kernel.write_text(EMPTY_KERNEL)
    space = tmp_path / "idle.toml"
    space.write_text(IDLE_SPACE)
    with caplog.at_level(logging.WARNING, logger="ciq_optuna"):
        result = _run(tmp_path, kernel, [space])
    # Trials the sampler predicted to repeat a binary are not compiled (no binary_hash): only
    # the compiled ones say what the compiler did.
    compiled = [t for t in result.study.trials if "binary_hash" in t.user_attrs]
    flag_sets = {tuple(t.user_attrs["flags"]) for t in compiled}
    assert result.stats["distinct_binaries"] == 1 and len(flag_sets) > 1
    assert (
        f"all {len(compiled)} compiled candidates ({len(flag_sets)} different flag sets) compiled to the same binary"
        in (caplog.text)
    )


def test_a_search_that_changes_the_code_is_not_reported(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="ciq_optuna"):
        result = _run(tmp_path, STENCIL, [])
    assert result.stats["distinct_binaries"] > 1
    assert "compiled to the same binary" not in caplog.text
