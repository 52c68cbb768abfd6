"""Queries a PostgreSQL ``ciq-optuna tune`` sends per trial, counted by the server.

    PYTHONPATH=<tree> nice -n 10 python benchmarks/pg_statements.py [--trials 20]

A PostgreSQL 15 server (tests/conftest.py's PostgresServer) logs every query of the study's
database (``log_statement = all``); the real ``tune`` (stencil example, sm_90a, as
``benchmarks/overhead.py`` runs it) runs 10 trials, then ``--trials`` more. The second run's
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

from ciq_optuna.study.storage import resolve_storage  # noqa: E402
from ciq_optuna.tune import TuneConfig, tune  # noqa: E402

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

        def config(trials: int) -> TuneConfig:
            return TuneConfig(
                kernel=REPO / "examples" / "stencil" / "stencil.sm_90a.ptx", arch="sm_90a",
                minimize=["spill-bytes"], trials=trials, progress=False, simplify=False, screen=False,
                workdir=work, acf=work / "t.acf", study_name="t", seed=1,
            )

        tune(config(10), storage=storage)
        time.sleep(0.5)
        start = server.logfile.stat().st_size
        tune(config(10 + args.trials), storage=storage)
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
