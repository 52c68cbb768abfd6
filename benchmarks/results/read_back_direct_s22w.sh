#!/bin/bash
# base, new, new, base: tune_workers --profile, 4 PG workers at ~1000 trials
cd /work/wt/s22w
for run in base1 new1 new2 base2; do
  case $run in base*) root=/tmp/s22w_base;; *) root=/work/wt/s22w;; esac
  PYTHONPATH=$root nice -n 19 /work/venv/bin/python benchmarks/tune_workers.py --fill-cache /tmp/s22w/fill.db \
    --storage postgresql --sizes 1000 --workers 4 --chunk 24 --profile /tmp/s22w/dprof/$run > /tmp/s22w/dprof/$run.txt 2>&1
done
