"""Rerun stored replay runs and compare their trial results exactly (for changes meant to keep
every proposal, also of variants that ``same_proposals.py`` does not run).

Usage: ``python replay_recheck.py RESULTS.jsonl.gz --seeds 6400:6404``; exits 1 on a difference.
``--stored VARIANT --as genetic``: rerun only VARIANT's rows, with the sampler ``genetic`` (a
variant made the default gives the trials the variant gave).
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
    parser.add_argument("--stored", help="only the rows of this sampler")
    parser.add_argument("--as", dest="rerun_as", help="with --stored: rerun its rows with this sampler instead")
    args = parser.parse_args(argv)
    if not Path(args.results).is_file():
        parser.error(f"no results file at {args.results}")
    if args.rerun_as and not args.stored:
        parser.error("--as needs --stored")
    lo, hi = args.seeds
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    warnings.simplefilter("ignore")
    spaces: dict[str, replay.Space] = {}
    same = differ = 0
    for r in replay._load_rows([args.results]):
        if not lo <= r["seed"] < hi or r["n_objectives"] != 1 or args.stored not in (None, r["sampler"]):
            continue
        space = spaces.setdefault(r["dataset"], replay.load_space(r["dataset"]))
        sampler = replay.build_sampler(args.rerun_as or r["sampler"], r["seed"])
        out, _ = replay.replay(space, sampler, len(r["results"]))
        if out == r["results"]:
            same += 1
        else:
            differ += 1
            print(f"differs: {r['dataset']} {r['sampler']} seed {r['seed']}")
    print(f"{same} of {same + differ} runs identical" if same + differ else "no single-objective runs with those seeds (and --stored)")
    return 1 if differ or not same else 0


if __name__ == "__main__":
    sys.exit(main())
