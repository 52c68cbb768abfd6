"""Minimise the spill stores of the example attention kernel by searching ptxas controls.

The shape of CompileIQ's ``examples/compilers/ptxas_example/ptx_spill.py``: the objective writes
the candidate with ``save_compiler_config`` and compiles it with ``ptxas -v``. Two changes:
the imports, and the ptxas command line, which applies the candidate with ``--options-file``
where CompileIQ used ``--apply-controls`` (ciq-optuna's candidates are open options files).

Needs ptxas (CUDA 13.0+, no GPU). ``PTX_SPILL_GENERATIONS`` / ``PTX_SPILL_POOL`` shrink the run
(the test suite uses them).
"""

import os
import re
import subprocess
import tempfile
from pathlib import Path

from ciq_optuna.compileiq.ciq import Search
from ciq_optuna.compileiq.search_spaces.compilers import PtxasSearchSpace
from ciq_optuna.compileiq.types import INVALID_SCORE, SearchConfiguration
from ciq_optuna.compileiq.utils.helpers import save_compiler_config

PTX_FILE = Path(__file__).resolve().parents[1] / "attention" / "attention.sm_90a.ptx"
ARCH = "sm_90a"
PTXAS = os.environ.get("PTXAS", "ptxas")


def get_ptxas_version():
    out = subprocess.run([PTXAS, "--version"], capture_output=True, text=True, check=True).stdout
    return re.search(r"release (\d+\.\d+)", out).group(1)


def spill_stores(acf_hex, ptx_file, arch):
    with tempfile.TemporaryDirectory() as tmp:
        acf = os.path.join(tmp, "controls.acf")
        save_compiler_config(acf, acf_hex)
        cmd = [
            PTXAS,
            "-v",
            f"-arch={arch}",
            "--options-file",
            acf,
            str(ptx_file),
            "-o",
            os.path.join(tmp, "k.cubin"),
        ]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
        except Exception:
            return INVALID_SCORE
        if proc.returncode != 0:
            return INVALID_SCORE
        spills = re.findall(r"(\d+) bytes spill stores", proc.stdout + proc.stderr)
        if not spills:
            return INVALID_SCORE
        return sum(int(s) for s in spills)


if __name__ == "__main__":
    search_config = SearchConfiguration(
        generations=int(os.environ.get("PTX_SPILL_GENERATIONS", 5)),
        pool_size=int(os.environ.get("PTX_SPILL_POOL", 32)),
    )
    search = Search(
        objective_function=lambda acf: spill_stores(acf, PTX_FILE, ARCH),
        search_space=PtxasSearchSpace(version=get_ptxas_version()),
        search_config=search_config,
    )
    result = search.start(num_workers=4, task_timeout=60)
    print(result.get_results())
    best = result.get_best_result()
    print(
        f"best: {best['score_1']} bytes of spill stores with: {bytes.fromhex(best['params']).decode() or '(no flags)'}"
    )
    save_compiler_config("best_compiler_controls.acf", best["params"])
    print(
        "saved best_compiler_controls.acf; apply it with: ptxas --options-file best_compiler_controls.acf ..."
    )
