"""Capture real ``ptxas -v`` / ``nvcc -Xptxas -v`` outputs as parser fixtures.

Run from anywhere: ``python tests/data/ptxas_output/capture.py``. For every case and every
installed compiler release it writes ``<case>.<tool>-<release>.txt`` (stderr then stdout, as the
compiler printed them) and records the commands in ``index.json``. Commands run in ``src/``
with relative input paths, so file names in messages do not depend on the checkout.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from ciq_optuna.compilers.locate import list_compilers
from ciq_optuna.compilers.process import run_command

HERE = Path(__file__).resolve().parent
SRC = HERE / "src"
EXAMPLES = "../../../../examples"

# (case, tool, arch, input relative to src/, extra flags)
CASES: list[tuple[str, str, str, str, list[str]]] = [
    ("sgemm_sm80", "ptxas", "sm_80", f"{EXAMPLES}/sgemm/sgemm.sm_80.ptx", []),
    ("sgemm_sm90a", "ptxas", "sm_90a", f"{EXAMPLES}/sgemm/sgemm.sm_90a.ptx", []),
    (
        "sgemm_sm90a_maxrreg_ignored",
        "ptxas",
        "sm_90a",
        f"{EXAMPLES}/sgemm/sgemm.sm_90a.ptx",
        ["--maxrregcount=64"],
    ),
    (
        "sgemm_sm90a_override_spills",
        "ptxas",
        "sm_90a",
        f"{EXAMPLES}/sgemm/sgemm.sm_90a.ptx",
        ["--override-directive-values", "--maxrregcount=16", "--warn-on-spills"],
    ),
    ("sgemm_sm80_ptx_to_sm120", "ptxas", "sm_120", f"{EXAMPLES}/sgemm/sgemm.sm_80.ptx", []),
    (
        "attention_sm90a_warnings",
        "ptxas",
        "sm_90a",
        f"{EXAMPLES}/attention/attention.sm_90a.ptx",
        ["--warn-on-spills", "--warn-on-local-memory-usage"],
    ),
    ("stencil_sm80", "ptxas", "sm_80", f"{EXAMPLES}/stencil/stencil.sm_80.ptx", []),
    (
        "stencil_sm90a_O0_rul",
        "ptxas",
        "sm_90a",
        f"{EXAMPLES}/stencil/stencil.sm_90a.ptx",
        ["-O0", "--register-usage-level=5"],
    ),
    (
        "stencil_sm90a_conflict",
        "ptxas",
        "sm_90a",
        f"{EXAMPLES}/stencil/stencil.sm_90a.ptx",
        ["-O2", "--Ofast-compile=max"],
    ),
    ("devfuncs_sm90a", "ptxas", "sm_90a", "devfuncs.sm_90a.ptx", []),
    ("devfuncs_sm80_relocatable", "ptxas", "sm_80", "devfuncs.sm_80.ptx", ["-c"]),
    ("textures_sm80", "ptxas", "sm_80", "textures.sm_80.ptx", []),
    ("broken_sm90a", "ptxas", "sm_90a", "broken.sm_90a.ptx", []),
    ("devfuncs_nvcc_sm90a", "nvcc", "sm_90a", "devfuncs.cu", []),
    ("stencil_nvcc_sm80", "nvcc", "sm_80", f"{EXAMPLES}/stencil/stencil.cu", []),
    ("syntax_error_nvcc", "nvcc", "sm_90a", "syntax_error.cu", []),
    ("devfuncs_sm90a_split_compile", "ptxas", "sm_90a", "devfuncs.sm_90a.ptx", ["--split-compile=2"]),
]

# Cases for options that only newer releases have: (case, minimum CUDA release).
MIN_RELEASE = {"devfuncs_sm90a_verbose2": "13.5"}
CASES.append(("devfuncs_sm90a_verbose2", "ptxas", "sm_90a", "devfuncs.sm_90a.ptx", ["--verbose2"]))


def command(tool: str, arch: str, source: str, flags: list[str], out: str) -> list[str]:
    """The argv of one case, as the adapters in ciq_optuna.compilers build it."""
    if Path(tool).name == "ptxas":
        return [tool, "-v", f"-arch={arch}", *flags, "-o", out, source]
    return [tool, "-cubin", f"-arch={arch}", "-Xptxas", "-v", *flags, "-o", out, source]


def main() -> None:
    index = []
    with tempfile.TemporaryDirectory() as tmp:
        for tool in ("ptxas", "nvcc"):
            for info in list_compilers(tool):
                for case, case_tool, arch, source, flags in CASES:
                    if case_tool != tool:
                        continue
                    minimum = MIN_RELEASE.get(case)
                    if minimum and tuple(map(int, info.release.split("."))) < tuple(
                        map(int, minimum.split("."))
                    ):
                        continue
                    argv = command(tool, arch, source, flags, "out.cubin")
                    real = command(str(info.path), arch, source, flags, f"{tmp}/out.cubin")
                    res = run_command(real, timeout=120, cwd=SRC)
                    name = f"{case}.{tool}-{info.release}.txt"
                    (HERE / name).write_text(res.stderr + res.stdout)
                    index.append(
                        {"file": name, "version": info.version, "command": argv, "returncode": res.returncode}
                    )
                    print(f"{name}: exit {res.returncode}")
    (HERE / "index.json").write_text(json.dumps(index, indent=1) + "\n")


if __name__ == "__main__":
    main()
