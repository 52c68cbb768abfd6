"""The isolated evaluation runner: results, errors, crashes and hangs fail one call, not the caller."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from ciq_optuna.errors import CiqError
from ciq_optuna.gpu.errors import CorrectnessError, EvaluationCrashed
from ciq_optuna.gpu.isolate import run_isolated


def _add(a, b, *, scale=1):
    return (a + b) * scale, os.getpid(), os.getsid(0)


def _raise_ciq():
    raise CorrectnessError("wrong result: output 0 differs")


def _raise_other():
    raise ZeroDivisionError("division by zero in the kernel wrapper")


def _segfault():
    os.kill(os.getpid(), signal.SIGSEGV)


def _hang_with_grandchild(pidfile):
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    with open(pidfile, "w") as f:
        f.write(str(child.pid))
    time.sleep(120)


def test_returns_the_result_from_a_fresh_process_in_its_own_session():
    value, pid, sid = run_isolated(_add, 2, 3, scale=10, timeout=60)
    assert value == 50
    assert pid != os.getpid() and sid == pid


def test_ciq_errors_keep_their_type_and_message():
    with pytest.raises(CorrectnessError, match="output 0 differs"):
        run_isolated(_raise_ciq, timeout=60)


def test_other_exceptions_become_one_line_failures():
    with pytest.raises(EvaluationCrashed, match="ZeroDivisionError: division by zero") as info:
        run_isolated(_raise_other, timeout=60)
    assert isinstance(info.value, CiqError)


def test_a_crash_fails_the_call_not_the_caller():
    with pytest.raises(EvaluationCrashed, match="killed by SIGSEGV"):
        run_isolated(_segfault, timeout=60)
    assert run_isolated(_add, 1, 1, timeout=60)[0] == 2


def test_timeout_kills_the_whole_process_group(tmp_path):
    pidfile = tmp_path / "grandchild.pid"
    with pytest.raises(EvaluationCrashed, match="timed out after 5 s"):
        run_isolated(_hang_with_grandchild, str(pidfile), timeout=5)
    grandchild = int(pidfile.read_text())
    for _ in range(50):
        try:
            os.kill(grandchild, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        pytest.fail(f"grandchild {grandchild} survived the timeout")
