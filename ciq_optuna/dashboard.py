"""``ciq-optuna dashboard``: optuna-dashboard on a study storage, and ACF files as Optuna artifacts.

The dashboard reads the storage through :class:`ciq_optuna.dashboard_view.DashboardView`
(objectives named on every trial, one attribute per metric, each control once, one Best Trial per
Pareto point); ``tune`` writes a study note (:func:`write_study_note`) that says how to read it.

The dashboard listens on 127.0.0.1 unless another address is asked for; it has no
authentication, so a non-loopback address prints a warning.

Where artifacts live (one rule for the writer, :func:`upload_acf`, and the dashboard):

1. ``$CIQ_OPTUNA_ARTIFACTS`` when set (use a shared directory when workers run on several
   machines);
2. for a SQLite storage ``/path/study.db``: the directory ``/path/study.db-artifacts`` next to it;
3. for a database server (PostgreSQL): ``./ciq-optuna-artifacts`` in the current directory.

The chosen directory is also recorded in the study user attribute ``artifact_dir`` by
:func:`upload_acf`, so a dashboard started elsewhere can be pointed at it (``--artifacts``).
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import os
import sys
import uuid
from pathlib import Path

import optuna
from optuna.artifacts import FileSystemArtifactStore

from ciq_optuna.cli.types import QUIET, add_verbosity_arguments, configure_logging, port
from ciq_optuna.dashboard_view import DashboardView, pareto_points, study_note
from ciq_optuna.errors import EXIT_USER_ERROR, CiqError
from ciq_optuna.study._optuna import set_dashboard_pareto_front, storage_of, study_id_of, trial_id_of
from ciq_optuna.study.storage import (
    DEFAULT_STORAGE_FILE,
    redact,
    resolve_storage,
    scrub,
    sqlite_path,
    storage_url,
)

#: Environment variable naming the artifact directory (overrides the rule above).
ARTIFACTS_ENV = "CIQ_OPTUNA_ARTIFACTS"
#: Artifact directory for server databases when $CIQ_OPTUNA_ARTIFACTS is not set.
SERVER_ARTIFACT_DIR = Path("ciq-optuna-artifacts")
#: Study user attribute recording where the study's artifacts were written.
ARTIFACT_DIR_ATTR = "artifact_dir"
#: MIME type of an uploaded ACF (TOML text).
ACF_MIMETYPE = "application/toml"
#: optuna-dashboard's study system attribute prefix for artifacts of finished trials.
DASHBOARD_TRIAL_ARTIFACT_PREFIX = "dashboard:artifacts:"


def artifact_dir(storage_url_or_path: str | os.PathLike) -> Path:
    """The artifact directory for a storage URL or SQLite file path (see the module docstring)."""
    env = os.environ.get(ARTIFACTS_ENV)
    if env:
        return Path(env).resolve()
    url = storage_url(str(storage_url_or_path), default_path=DEFAULT_STORAGE_FILE)
    path = sqlite_path(url)
    if path is not None:
        path = path.resolve()
        return path.with_name(path.name + "-artifacts")
    return SERVER_ARTIFACT_DIR.resolve()


def artifact_store(storage_url_or_path: str | os.PathLike) -> FileSystemArtifactStore:
    """The artifact store matching a storage (the directory is created if missing)."""
    directory = artifact_dir(storage_url_or_path)
    directory.mkdir(parents=True, exist_ok=True)
    return FileSystemArtifactStore(str(directory))


def _url_of(study: optuna.Study) -> str:
    """The storage URL behind a study (RDB storages, possibly wrapped in Optuna's cache)."""
    storage = storage_of(study)
    storage = getattr(storage, "_backend", storage)
    url = getattr(storage, "url", None)
    if not url:
        raise CiqError("ACF artifacts need an RDB storage (SQLite or PostgreSQL)")
    return str(url)


def upload_acf(
    study: optuna.Study, trial: optuna.trial.FrozenTrial | optuna.trial.Trial, path: str | os.PathLike
) -> str:
    """Attach the ACF file at ``path`` to ``trial`` as an artifact; returns the artifact id.

    The file is copied into the study's artifact store (:func:`artifact_dir`); the dashboard
    started with the same storage lists it under the trial, downloadable. A running trial gets
    it through ``optuna.artifacts.upload_artifact``. A finished trial (the usual case: the ACF is
    written after the search) can no longer be changed, so the artifact is recorded in the
    study under optuna-dashboard's per-trial key ``dashboard:artifacts:<trial_id>:<id>``, which
    the dashboard shows on the trial (``optuna.artifacts.get_all_artifact_meta`` does not see it).
    """
    url = _url_of(study)
    store = artifact_store(url)
    directory = str(artifact_dir(url))
    if study.user_attrs.get(ARTIFACT_DIR_ATTR) != directory:
        study.set_user_attr(ARTIFACT_DIR_ATTR, directory)
    state = trial.state if isinstance(trial, optuna.trial.FrozenTrial) else None
    if state is None or not state.is_finished():
        return optuna.artifacts.upload_artifact(
            artifact_store=store,
            file_path=str(path),
            study_or_trial=trial,
            storage=storage_of(study),
            mimetype=ACF_MIMETYPE,
            encoding="utf-8",
        )
    artifact_id = str(uuid.uuid4())
    with open(path, "rb") as handle:
        store.write(artifact_id, handle)
    meta = {
        "artifact_id": artifact_id,
        "filename": Path(path).name,
        "mimetype": ACF_MIMETYPE,
        "encoding": "utf-8",
    }
    key = f"{DASHBOARD_TRIAL_ARTIFACT_PREFIX}{trial_id_of(trial)}:{artifact_id}"
    storage_of(study).set_study_system_attr(study_id_of(study), key, json.dumps(meta))
    return artifact_id


def trial_artifacts(study: optuna.Study, trial: optuna.trial.FrozenTrial) -> list[dict]:
    """Artifact metadata attached to ``trial`` by either route of :func:`upload_acf`."""
    prefix = f"{DASHBOARD_TRIAL_ARTIFACT_PREFIX}{trial_id_of(trial)}:"
    found = [
        json.loads(v)
        for k, v in storage_of(study).get_study_system_attrs(study_id_of(study)).items()
        if k.startswith(prefix)
    ]
    found += [json.loads(v) for k, v in trial.system_attrs.items() if k.startswith("artifacts:")]
    return found


def write_study_note(study: optuna.Study, acf_names: dict[int, str] | None = None) -> None:
    """Write the study note the dashboard shows on the study page (:func:`study_note`): the
    objectives, the winner or Pareto points with named values and ACF files, how to read it."""
    from optuna_dashboard import save_note

    save_note(study, study_note(study, acf_names))


def is_loopback(host: str) -> bool:
    """Whether ``host`` only accepts connections from this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def add_dashboard_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the options of ``ciq-optuna dashboard`` to ``parser``."""
    parser.add_argument(
        "storage",
        nargs="?",
        default=None,
        help="storage URL or SQLite file (default: $CIQ_OPTUNA_STORAGE, else ./ciq-optuna.db)",
    )
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default 127.0.0.1; the dashboard has no authentication)",
    )
    parser.add_argument("--port", type=port, default=8080, help="port to listen on (default 8080)")
    parser.add_argument(
        "--as-stored",
        action="store_true",
        help="show ciq-optuna studies as stored (no objective names, metrics blob, .passed genes)",
    )
    parser.add_argument(
        "--artifacts",
        default=None,
        metavar="DIR",
        help="artifact directory (default: $CIQ_OPTUNA_ARTIFACTS, else next to a SQLite file, "
        "else ./ciq-optuna-artifacts)",
    )


def run_dashboard_command(args: argparse.Namespace) -> int:
    """Run ``ciq-optuna dashboard`` until interrupted; returns the exit status."""
    url = storage_url(args.storage, default_path=DEFAULT_STORAGE_FILE)
    shown = redact(url)
    path = sqlite_path(url)
    if path is not None and not path.is_file():
        print(f"ciq-optuna dashboard: error: no such storage file: {path}", file=sys.stderr)
        return EXIT_USER_ERROR
    try:
        storage = resolve_storage(url, default_path=DEFAULT_STORAGE_FILE, heartbeat_interval=None)
    except CiqError as exc:
        print(f"ciq-optuna dashboard: error: {scrub(str(exc), url)}", file=sys.stderr)
        return EXIT_USER_ERROR
    directory = Path(args.artifacts).resolve() if args.artifacts else artifact_dir(url)
    directory.mkdir(parents=True, exist_ok=True)
    if not is_loopback(args.host) and getattr(args, "verbosity", 0) != QUIET:
        print(
            f"ciq-optuna dashboard: warning: listening on {args.host}: the dashboard has no "
            "authentication; anyone who can reach this port can read and change the studies",
            file=sys.stderr,
        )
    print(
        f"ciq-optuna dashboard: http://{args.host}:{args.port}/ (storage {shown}, artifacts {directory})",
        file=sys.stderr,
        flush=True,
    )
    from optuna_dashboard import run_server

    if not getattr(args, "as_stored", False):
        set_dashboard_pareto_front(pareto_points)
        storage = DashboardView(storage)
    try:
        run_server(
            storage, host=args.host, port=args.port, artifact_store=FileSystemArtifactStore(str(directory))
        )
    except OSError as exc:
        print(
            f"ciq-optuna dashboard: error: cannot listen on {args.host}:{args.port}: {exc.strerror}",
            file=sys.stderr,
        )
        return EXIT_USER_ERROR
    except KeyboardInterrupt:
        return 0
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m ciq_optuna.dashboard``: the same as ``ciq-optuna dashboard``."""
    parser = argparse.ArgumentParser(prog="ciq-optuna dashboard", description=__doc__.splitlines()[0])
    add_dashboard_arguments(parser)
    add_verbosity_arguments(parser)
    args = parser.parse_args(argv)
    configure_logging(args.verbosity, "ciq-optuna dashboard")
    return run_dashboard_command(args)


if __name__ == "__main__":
    sys.exit(main())
