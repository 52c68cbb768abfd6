"""Run a compiler (or any command) with a timeout that kills its whole process group.

A compiler that hangs, crashes or forks helpers must fail one trial, never the search: the
command runs in a new session, and on timeout the entire group gets SIGTERM, then SIGKILL after
a short grace period, so no grandchild (cicc, ptxas started by nvcc) survives.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from ciq_optuna.errors import CiqError

#: Seconds between SIGTERM and SIGKILL when a command times out.
TERM_GRACE_S = 1.0


class CommandNotFoundError(CiqError):
    """The executable of a command does not exist or cannot be executed."""


@dataclass(frozen=True)
class ProcessResult:
    """Outcome of one command.

    ``returncode`` is negative (``-N``) when the process was killed by signal N, as in
    :mod:`subprocess`. ``duration`` is the wall-clock time in seconds.
    """

    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    duration: float
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        """True when the command exited with status 0 before the timeout."""
        return self.returncode == 0 and not self.timed_out

    @property
    def signal(self) -> int | None:
        """The number of the signal that killed the process, or None."""
        return -self.returncode if self.returncode < 0 else None


def _group_alive(pgid: int) -> bool:
    """Whether a live (not zombie) process of group ``pgid`` remains (Linux /proc; False elsewhere)."""
    proc_dir = Path("/proc")
    if not proc_dir.is_dir():
        return False
    for entry in proc_dir.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 2 and fields[2] == str(pgid) and fields[0] != "Z":
            return True
    return False


def _await_group_exit(pgid: int, limit: float = 5.0) -> None:
    """Wait (bounded) until SIGKILL has taken effect on every process of the group."""
    deadline = time.monotonic() + limit
    while _group_alive(pgid) and time.monotonic() < deadline:
        time.sleep(0.01)


def _kill_group(proc: subprocess.Popen) -> None:
    """SIGTERM the process group of ``proc``, then SIGKILL it if it is still alive.

    Returns once no live process of the group remains (SIGKILL is delivered asynchronously; a
    loaded machine can take a moment), so a timed-out command leaves nothing running.
    """
    for sig, wait in ((signal.SIGTERM, TERM_GRACE_S), (signal.SIGKILL, None)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        if wait is None:
            _await_group_exit(proc.pid)
            break
        try:
            proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            continue
        # The leader has exited; helpers it started may still run in the group.
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            return
        _await_group_exit(proc.pid)
        return


def _drain(proc: subprocess.Popen) -> tuple[str, str]:
    """Collect what a killed command wrote; gives up if a helper that left the group holds the pipes."""
    try:
        return proc.communicate(timeout=TERM_GRACE_S * 5)
    except subprocess.TimeoutExpired:
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
        proc.wait()
        return "", ""


def run_command(
    argv: list[str],
    *,
    timeout: float,
    cwd: str | Path | None = None,
    env: dict[str, str] | None = None,
) -> ProcessResult:
    """Run ``argv`` and capture its output; never waits longer than ``timeout`` (+ grace) seconds.

    Raises :class:`CommandNotFoundError` (a :class:`CiqError`) when the executable is missing
    or not executable. A timeout is not an exception: the result has ``timed_out=True``.
    """
    argv = [str(a) for a in argv]
    start = time.monotonic()
    try:
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            text=True,
            errors="replace",
        )
    except FileNotFoundError as exc:
        raise CommandNotFoundError(f"command not found: {argv[0]}") from exc
    except PermissionError as exc:
        raise CommandNotFoundError(f"command is not executable: {argv[0]}") from exc
    timed_out = False
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        _kill_group(proc)
        stdout, stderr = _drain(proc)
    except BaseException:
        _kill_group(proc)
        _drain(proc)
        raise
    return ProcessResult(
        argv=tuple(argv),
        returncode=proc.returncode,
        stdout=stdout or "",
        stderr=stderr or "",
        duration=time.monotonic() - start,
        timed_out=timed_out,
    )
