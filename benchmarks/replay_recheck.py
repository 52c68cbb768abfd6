"""Rerun stored replay runs and compare their trial results exactly (for changes meant to keep
every proposal, also of variants that ``same_proposals.py`` does not run).

Usage: ``python replay_recheck.py RESULTS.jsonl.gz --seeds 6400:6404``; exits 1 on a difference.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import optuna

sys.path.insert(0, str(Path(__file__).resolve().parent))
import replay  # noqa: E402


def _seed_range(text: str) -> tuple[int, int]:
    lo, sep, hi = text.partition(":")
    if not sep or not lo.isdigit() or not hi.isdigit() or int(lo) >= int(hi):
        raise argparse.ArgumentTypeError(f"expected FROM:TO with FROM < TO, e.g. 6400:6404, not {text!r}")
    return int(lo), int(hi)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", help="a replay.py results file")
    parser.add_argument("--seeds", required=True, type=_seed_range, help="FROM:TO, the seeds rerun (TO excluded)")
    args = parser.parse_args(argv)
    if not Path(args.results).is_file():
        parser.error(f"no results file at {args.results}")
    lo, hi = args.seeds
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    warnings.simplefilter("ignore")
    spaces: dict[str, replay.Space] = {}
    same = differ = 0
    for r in replay._load_rows([args.results]):
        if not lo <= r["seed"] < hi or r["n_objectives"] != 1:
            continue
        space = spaces.setdefault(r["dataset"], replay.load_space(r["dataset"]))
        out, _ = replay.replay(space, replay.build_sampler(r["sampler"], r["seed"]), len(r["results"]))
        if out == r["results"]:
            same += 1
        else:
            differ += 1
            print(f"differs: {r['dataset']} {r['sampler']} seed {r['seed']}")
    print(f"{same} of {same + differ} runs identical" if same + differ else "no single-objective runs with those seeds")
    return 1 if differ or not same else 0


if __name__ == "__main__":
    sys.exit(main())
