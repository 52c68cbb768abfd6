"""Queries a PostgreSQL ``ciq-optuna tune`` sends per trial, counted by the server.

    PYTHONPATH=<tree> nice -n 10 python benchmarks/pg_statements.py [--trials 20]

A PostgreSQL 15 server (tests/conftest.py's PostgresServer) logs every query of the study's
database (``log_statement = all``); the real ``tune`` (stencil example, sm_90a, as
``benchmarks/tune_workers.py`` runs it) runs 10 trials, then ``--trials`` more. The second run's
queries (one round trip each, BEGIN and COMMIT included; a multi-statement query counts once) are
counted per trial by text, numbers masked; the run's start-up queries are spread over its trials.
"""

from __future__ import annotations

import argparse
import collections
import logging
import re
import sys
import tempfile
import time
from pathlib import Path

import optuna
import sqlalchemy as sa

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(1, str(REPO / "tests"))

from tune_workers import _config  # noqa: E402  (the tune of tune_workers.py and overhead.py)

from ciq_optuna.study.storage import resolve_storage  # noqa: E402
from ciq_optuna.tune import tune  # noqa: E402

_LOGGED = re.compile(r"LOG:  (?:statement|execute [^:]*): (.*?)(?=\n\S|\Z)", re.S)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20)
    args = parser.parse_args()
    from conftest import PostgresServer

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    logging.getLogger("ciq_optuna").setLevel(logging.ERROR)
    work = Path(tempfile.mkdtemp(prefix="ciq-pg-statements-"))
    server = PostgresServer().start()
    try:
        engine = sa.create_engine(server.url())
        with engine.connect() as conn:
            conn.execute(sa.text("ALTER DATABASE ciq SET log_statement = 'all'"))
            conn.commit()
        engine.dispose()
        storage = resolve_storage(server.url(), default_path=work / "x.db")

        tune(_config(10, work, 1), storage=storage)
        time.sleep(0.5)
        start = server.logfile.stat().st_size
        tune(_config(10 + args.trials, work, 1), storage=storage)
        time.sleep(0.5)
        logged = server.logfile.read_text(errors="replace")[start:]
        counts = collections.Counter(
            re.sub(r"\d+", "N", " ".join(m.group(1).split()))[:100] for m in _LOGGED.finditer(logged)
        )
        print(f"# {' '.join(sys.argv)}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
        print(f"queries per trial: {sum(counts.values()) / args.trials:.2f}")
        for text, n in counts.most_common():
            print(f"{n / args.trials:6.2f}  {text}")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
