"""The CompileIQ example scripts in examples/compileiq/ run and print what CompileIQ documents."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "compileiq"
PTXAS_DIR = "/usr/local/cuda/bin"


def run(name: str, tmp_path: Path, **env: str) -> str:
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / name)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PATH": f"{os.environ.get('PATH', '')}:{PTXAS_DIR}", **env},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def row_indices(out: str) -> list[int]:
    """The row labels of a fully printed DataFrame."""
    return [int(line.split()[0]) for line in out.splitlines() if line.split() and line.split()[0].isdigit()]


def last_dict(out: str) -> dict:
    return ast.literal_eval(out.strip().splitlines()[-1])


def test_single_objective(tmp_path):
    out = run("single_objective.py", tmp_path)
    assert "[160 rows x 4 columns]" in out
    best = last_dict(out)
    assert best["score_1"] < 403 and best["score_1"] == best["params"]["x"] ** 2 + best["params"]["y"]


def test_multi_objective(tmp_path):
    out = run("multi_objective.py", tmp_path)
    assert row_indices(out) == list(range(36))  # pool 12 x 3 generations
    front = [ast.literal_eval(line) for line in out.splitlines() if line.startswith("{'metadata'")]
    assert front and all(r["score_1"] == r["params"]["x"] ** 2 + r["params"]["y"] for r in front)


def test_nested_search_space(tmp_path):
    out = run("nested_search_space.py", tmp_path)
    assert "[96 rows x 4 columns]" in out
    best = last_dict(out)
    assert set(best["params"]["level_1"]["level_2"]) == {"level_3", "b"}


def test_normalizing(tmp_path):
    out = run("normalizing.py", tmp_path)
    assert row_indices(out) == list(range(25)) and "norm_score_1" in out  # pool 12 x 2 + baseline
    baseline = [line for line in out.splitlines() if "{}" in line]
    assert len(baseline) == 1 and baseline[0].split()[-1] == "1.0"


@pytest.mark.skipif(
    shutil.which("ptxas", path=f"{os.environ.get('PATH', '')}:{PTXAS_DIR}") is None, reason="needs ptxas"
)
def test_ptx_spill(tmp_path):
    out = run("ptx_spill.py", tmp_path, PTX_SPILL_GENERATIONS="2", PTX_SPILL_POOL="6")
    assert "best:" in out and "bytes of spill stores" in out
    flags = (tmp_path / "best_compiler_controls.acf").read_text()
    assert flags in out
