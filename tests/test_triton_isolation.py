"""Isolated Triton compiles: a candidate whose compile hangs or crashes Triton fails its trial only.

The kernel file below is a real ``@triton.jit`` kernel whose block size goes through a
``@triton.constexpr_function``, Python that Triton runs while it compiles: for one value it
segfaults the compiling process, for another it starts a helper process and hangs (once per
directory, so that a search pays the timeout once), for the others it counts the compile. Real
Triton, real ptxas, no GPU; the process table (/proc) is checked for what a fault left behind.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import optuna
import pytest

from ciq_optuna.compilers.triton import TritonCompiler, load_kernel, triton_ptxas
from ciq_optuna.objectives.triton import triton_compiler
from ciq_optuna.tune import TuneConfig, tune

FAULTY = """
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import triton
import triton.language as tl

HERE = Path(__file__).resolve().parent


class Faults:
    @staticmethod
    def check(block):
        if block == 128:  # a crash inside the compiler, as an LLVM segfault would be
            os.kill(os.getpid(), signal.SIGSEGV)
        if block == 512 and not (HERE / "hung").exists():  # a hang, with a helper process
            (HERE / "hung").write_text(str(os.getpid()))
            subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", str(HERE)])
            time.sleep(600)
        with open(HERE / "compiles", "a") as f:
            f.write(f"{block}\\n")
        return block


@triton.constexpr_function
def checked_block(block):
    return getattr(Faults, "check")(block)  # getattr: Triton's dependency scan accepts it


@triton.jit
def copy_kernel(src, dst, n, BLOCK: tl.constexpr):
    B: tl.constexpr = checked_block(BLOCK)
    offs = tl.program_id(0) * B + tl.arange(0, B)
    tl.store(dst + offs, tl.load(src + offs, mask=offs < n), mask=offs < n)


CIQ_OPTUNA = {
    "copy_kernel": {
        "signature": {"src": "*fp32:16", "dst": "*fp32:16", "n": "i32"},
        "space": {"BLOCK": [256, 128, 512, 1024], "num_warps": [4, 2]},
    },
}
"""


@pytest.fixture()
def faulty(tmp_path: Path) -> Path:
    folder = tmp_path / "kernels"
    folder.mkdir()
    (folder / "faulty.py").write_text(FAULTY)
    return folder


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _leftovers(marker: str, settle_s: float = 5.0) -> list[int]:
    """Pids of live processes (not zombies) whose command line holds ``marker``, looked at until
    there are none or ``settle_s`` has passed (a killed process takes a moment to die on a busy
    machine)."""
    deadline = time.monotonic() + settle_s
    while (pids := _live_with(marker)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return pids


def _live_with(marker: str) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if marker in cmdline and _alive(int(entry.name)):
            pids.append(int(entry.name))
    return pids


def _compiles(folder: Path) -> list[str]:
    path = folder / "compiles"
    return path.read_text().split() if path.exists() else []


def test_isolated_compile_is_the_in_process_binary_recompiled_each_time(faulty: Path, tmp_path: Path) -> None:
    kernel = load_kernel(f"{faulty / 'faulty.py'}:copy_kernel")
    here = TritonCompiler(triton_ptxas("sm_80"), kernel)
    apart = triton_compiler(kernel, "sm_80", None)
    assert apart.isolate and not here.isolate
    flags = ["--opt-level=0"]
    a = here.compile(None, "sm_80", flags, output=tmp_path / "a.cubin")
    b = apart.compile(None, "sm_80", flags, output=tmp_path / "b.cubin")
    c = apart.compile(None, "sm_80", flags, output=tmp_path / "c.cubin")
    assert a.ok and b.ok and c.ok, (a.error, b.error, c.error)
    assert a.code_hash == b.code_hash == c.code_hash
    assert a.ptx == b.ptx and a.dynamic_shared == b.dynamic_shared

    def usage(res: object) -> dict:  # the ptxas -v report but its time
        return {
            n: (f.registers, f.shared_memory, f.stack_frame, f.constant_memory)
            for n, f in res.report.functions.items()
        }

    assert usage(a) == usage(b) and usage(b)["copy_kernel"][0] > 0
    assert (tmp_path / "b.cubin").read_bytes() == b.cubin
    assert b.compiled is None and a.compiled is not None
    # Triton's front end ran for every compile (no cache reuse), and left no cache behind
    assert _compiles(faulty) == ["256", "256", "256"]
    assert list(apart._cache_root.iterdir()) == []
    other = apart.compile(None, "sm_80", [], output=tmp_path / "d.cubin")
    assert other.ok and other.code_hash != b.code_hash


def test_a_hang_is_killed_and_a_crash_fails_alone(faulty: Path, tmp_path: Path) -> None:
    compiler = triton_compiler(load_kernel(f"{faulty / 'faulty.py'}:copy_kernel"), "sm_80", None)

    def run(block: int) -> object:
        return compiler.compile(
            None, "sm_80", [], output=tmp_path / "k.cubin", timeout=3.0, app={"BLOCK": block, "num_warps": 4}
        )

    crash = run(128)
    assert not crash.ok and crash.error == "Triton compile crashed with signal 11 (SIGSEGV)"
    hang = run(512)
    assert not hang.ok and hang.error == "Triton compile timed out after 3.0 s"
    pid = int((faulty / "hung").read_text())
    assert not _alive(pid)  # the compiling child...
    assert _leftovers(str(faulty)) == []  # ...and the helper it started are gone
    good = run(1024)
    assert good.ok and good.cubin and _compiles(faulty) == ["1024"]


def test_faulty_candidates_fail_their_trials_and_the_search_goes_on(
    faulty: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    config = TuneConfig(
        kernel=Path(f"{faulty / 'faulty.py'}:copy_kernel"),
        arch="sm_80",
        minimize=["registers"],
        trials=10,
        storage=f"sqlite:///{tmp_path / 'db.sqlite'}",
        timeout=5.0,
        seed=1,
        progress=False,
        simplify=False,
        acf=tmp_path / "best.acf",
    )
    result = tune(config)
    trials = result.study.trials
    failed = [t for t in trials if t.state == optuna.trial.TrialState.FAIL]
    complete = [t for t in trials if t.state == optuna.trial.TrialState.COMPLETE]
    errors = {t.user_attrs.get("error") for t in failed}
    assert errors == {
        "Triton compile crashed with signal 11 (SIGSEGV)",
        "Triton compile timed out after 5.0 s",
    }
    assert all(t.params["BLOCK"] in (128, 512) for t in failed)
    assert all(t.params["BLOCK"] != 128 for t in complete) and len(complete) >= 5
    (best,) = result.best
    assert best.state == optuna.trial.TrialState.COMPLETE and best.params["BLOCK"] != 128
    assert result.acf_paths and result.acf_paths[0].exists()
    assert not _alive(int((faulty / "hung").read_text()))
    assert _leftovers(str(faulty)) == []


def test_a_kernel_file_edited_under_a_run_fails_the_compile(faulty: Path, tmp_path: Path) -> None:
    path = faulty / "faulty.py"
    compiler = triton_compiler(load_kernel(f"{path}:copy_kernel"), "sm_80", None)
    path.write_text(FAULTY.replace("tl.program_id(0) * B", "tl.program_id(0) * B * 2"))
    res = compiler.compile(None, "sm_80", [], output=tmp_path / "k.cubin")
    assert not res.ok
    assert res.error == f"Triton compile raised CiqError: {path} changed since this run loaded it"
    assert _compiles(faulty) == []
