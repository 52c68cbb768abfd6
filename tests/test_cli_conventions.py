"""Conventions every ``ciq-optuna`` subcommand shares: ``-q``/``-v``, and exit status 2 with one
line for a user mistake. The commands run in this process (``main(argv)``), except where a real
tune shows what ``-q`` and ``-v`` print."""

from __future__ import annotations

import logging
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import optuna
import pytest
from installed_ptxas import PTXAS

from ciq_optuna.cli import _leaf_parsers, build_parser, main
from ciq_optuna.errors import EXIT_USER_ERROR

REPO = Path(__file__).resolve().parents[1]
KERNEL = REPO / "examples" / "sgemm" / "sgemm.sm_80.ptx"
COMMANDS = ("tune", "tune-all", "worker", "dashboard", "validate", "acf", "spaces", "store", "check", "explain")


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    """main() sets the root log level and Optuna's (as the command line does): undo it."""
    level, optuna_level = logging.getLogger().level, optuna.logging.get_verbosity()
    yield
    logging.getLogger().setLevel(level)
    optuna.logging.set_verbosity(optuna_level)


def test_every_subcommand_takes_q_and_v() -> None:
    parser = build_parser()
    top = next(a for a in parser._actions if a.dest == "command")
    assert set(COMMANDS) <= set(top.choices)
    leaves = _leaf_parsers(parser)
    assert len(leaves) >= len(COMMANDS)
    for leaf in leaves:
        options = {s for a in leaf._actions for s in a.option_strings}
        assert {"-q", "--quiet", "-v", "--verbose"} <= options, leaf.prog


def test_q_and_v_together_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["acf", "show", "x.acf", "-q", "-v"])
    assert exc.value.code == EXIT_USER_ERROR
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not allowed with argument" in err[0]


def _user_errors(tmp: Path) -> dict[str, list[str]]:
    missing_db = str(tmp / "nope.db")
    return {
        "tune": ["tune", str(tmp / "nope.ptx"), "--arch", "sm_80", "--minimize", "registers", "--trials", "2"],
        "tune-all": ["tune-all", str(tmp / "nope.toml")],
        "worker": ["worker", "--storage", missing_db, "--study", "x"],
        "dashboard": ["dashboard", missing_db],
        "validate": ["validate", str(tmp / "nope.acf"), "--kernel", str(KERNEL)],
        "acf": ["acf", "show", str(tmp / "nope.acf")],
        "spaces": ["spaces", "show", "nope-9.9"],
        "store": ["store", "add", str(tmp / "nope.acf"), "--kernel", str(KERNEL), "--store", str(tmp / "st")],
        "check": ["check", str(tmp / "no-store")],
        "explain": ["explain", str(tmp / "nope.acf")],
    }


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("flag", [[], ["-q"], ["-v"]])
def test_a_user_mistake_is_one_line_and_status_2_in_every_subcommand(
    command: str, flag: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    argv = _user_errors(tmp_path)[command] + flag
    try:
        status = main(argv)
    except SystemExit as exc:  # argparse
        status = exc.code
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert status == EXIT_USER_ERROR, (argv, out, err)
    assert len(lines) == 1 and lines[0].startswith("ciq-optuna") and ": error: " in lines[0], err
    assert "Traceback" not in out + err


def _tune(tmp_path: Path, *flags: str) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "ciq_optuna.cli", "tune", str(KERNEL), "--arch", "sm_80"]
    argv += ["--minimize", "registers", "--trials", "3", "--no-simplify", "--storage", f"sqlite:///{tmp_path / 't.db'}"]
    return subprocess.run([*argv, *flags], cwd=tmp_path, capture_output=True, text=True, timeout=300)


@pytest.mark.skipif(PTXAS is None, reason="no ptxas installed")
def test_tune_q_prints_results_only_and_v_a_line_per_trial(tmp_path: Path) -> None:
    (tmp_path / "q").mkdir()
    quiet = _tune(tmp_path / "q", "-q")
    assert quiet.returncode == 0, quiet.stderr
    assert quiet.stderr == "", "-q: no progress bar, notes or warnings"
    assert "to run" not in quiet.stdout and "wrote " in quiet.stdout and "baseline" in quiet.stdout

    (tmp_path / "v").mkdir()
    verbose = _tune(tmp_path / "v", "-v")
    assert verbose.returncode == 0, verbose.stderr
    per_trial = [line for line in verbose.stderr.splitlines() if "Trial " in line and " finished with " in line]
    assert len(per_trial) == 3, verbose.stderr
    assert "to run" in verbose.stdout and "wrote " in verbose.stdout

    (tmp_path / "n").mkdir()
    normal = _tune(tmp_path / "n")
    assert normal.returncode == 0, normal.stderr
    assert " finished with " not in normal.stderr and "to run" in normal.stdout
