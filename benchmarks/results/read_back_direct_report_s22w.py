"""Profiled ``read_trials`` CPU per trial of one's own, and trials built per such trial, per run
of ``read_back_direct_s22w.sh`` (median over the 4 workers of each run).

    python benchmarks/results/read_back_direct_report_s22w.py [PROFILE_DIR]
"""

import glob
import pstats
import statistics
import sys

where = sys.argv[1] if len(sys.argv) > 1 else "/tmp/s22w/dprof"
for run in ["base1", "new1", "new2", "base2"]:
    per_trial, built = [], []
    for go in sorted(glob.glob(f"{where}/{run}-*-w4.*-go-*.prof")):
        st = pstats.Stats(go).stats
        k = sum(v[0] for (f, _, n), v in st.items() if n == "_run_trial" and f.endswith("_optimize.py"))
        cum = sum(v[3] for key, v in st.items() if key[2] == "read_trials" and "ciq_optuna" in key[0])
        made = sum(
            cv[0]
            for key, v in st.items()
            if key[2] == "__init__" and key[0].endswith("_frozen.py")
            for caller, cv in v[4].items()
            if caller[2] == "read_trials"
        )
        per_trial.append(1000 * cum / k)
        built.append(made / k)
    print(run, "read_trials profiled CPU ms per own trial (median over workers):", round(statistics.median(per_trial), 2),
          [round(x, 2) for x in per_trial], "trials built per own trial:", round(statistics.median(built), 2))
