"""``ciq-optuna validate`` entry points (gpu/cli.py) on the CPU: arguments, user errors, and the
pipeline down to the GPU boundary with the real nvcc."""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path

import pytest

from ciq_optuna.acf import Acf, write_acf
from ciq_optuna.errors import CiqError
from ciq_optuna.gpu import KernelLaunch
from ciq_optuna.gpu.cli import add_validate_arguments, load_launch, run_validate

ROOT = Path(__file__).resolve().parents[1]
GEMM = ROOT / "examples" / "gpu" / "nvcc_gemm"


def _parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="ciq-optuna validate")
    add_validate_arguments(parser)
    return parser.parse_args(list(argv))


def _acf(path: Path, flags: list[str]) -> Path:
    return write_acf(
        path,
        Acf(
            compiler="ptxas",
            compiler_version="13.0.88",
            arch="sm_90a",
            flags=flags,
            controls={},
            space={"name": "ptxas", "version": 1},
            objectives=[{"metric": "time_ms", "direction": "minimize"}],
        ),
    )


def test_defaults_follow_the_validation_rules():
    args = _parse("a.acf", "b.acf", "--launch", "m:x", "--kernel", "k.cu")
    assert args.acfs == [Path("a.acf"), Path("b.acf")]
    assert (args.sessions, args.repeats, args.warmup) == (3, 200, 50)
    assert (args.alpha, args.correction, args.min_improvement, args.min_effect) == (0.05, "holm", 0.01, 0.2)
    assert args.lock_clocks is None and not args.no_l2_flush
    assert _parse("a.acf", "--launch", "m:x", "--kernel", "k", "--lock-clocks").lock_clocks == 0
    assert _parse("a.acf", "--launch", "m:x", "--kernel", "k", "--lock-clocks", "1500").lock_clocks == 1500


def test_load_launch_from_a_file_and_its_errors(tmp_path):
    launch = load_launch(f"{GEMM / 'gemm_launch.py'}:gemm_launch")
    assert isinstance(launch, KernelLaunch) and launch.kernel == "sgemm"
    assert launch.grid == (2048 // 64, 2048 // 64)
    with pytest.raises(CiqError, match="expected MODULE:NAME"):
        load_launch("no_colon")
    with pytest.raises(CiqError, match="file not found"):
        load_launch(f"{tmp_path / 'x.py'}:f")
    with pytest.raises(CiqError, match="cannot import 'no_such_mod_ciq'"):
        load_launch("no_such_mod_ciq:f")
    with pytest.raises(CiqError, match="has no 'nothing'"):
        load_launch(f"{GEMM / 'gemm_launch.py'}:nothing")
    with pytest.raises(CiqError, match="is a int, not a ciq_optuna.gpu.KernelLaunch"):
        load_launch(f"{GEMM / 'gemm_launch.py'}:TILE")


def test_missing_acf_is_one_line_exit_2(tmp_path, capsys):
    rc = run_validate(
        _parse(str(tmp_path / "nope.acf"), "--launch", "m:x", "--kernel", str(GEMM / "sgemm.cu"))
    )
    err = capsys.readouterr().err
    assert rc == 2
    assert err.strip() == f"ciq-optuna validate: error: ACF not found: {tmp_path / 'nope.acf'}"


@pytest.mark.skipif(
    importlib.util.find_spec("cupy") is not None, reason="cupy is installed: tested on the GPU"
)
def test_without_a_gpu_validate_compiles_then_stops_with_one_line(tmp_path, capsys):
    acf = _acf(tmp_path / "cand.acf", ["-O3"])
    args = _parse(
        str(acf),
        "--launch",
        f"{GEMM / 'gemm_launch.py'}:gemm_launch",
        "--kernel",
        str(GEMM / "sgemm.cu"),
        "--sessions",
        "1",
        "--timeout",
        "120",
    )
    rc = run_validate(args)
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2
    assert (
        err[-1] == "ciq-optuna validate: error: runtime measurement needs cupy: pip install 'ciq-optuna[gpu]'"
    )
    assert not (tmp_path / "cand.validation.json").exists()
