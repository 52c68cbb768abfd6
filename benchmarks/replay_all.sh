#!/usr/bin/env bash
# Every GeneticSampler benchmark of BENCHMARKS.md, in order; each step appends to its own file
# under benchmarks/results/ and skips runs already there, so it can be stopped and restarted.
# At most 2 processes (this machine is shared), lowered priority.
set -euo pipefail
cd "$(dirname "$0")/.."
R=benchmarks/results
mkdir -p "$R"
run="nice -n 10 python benchmarks/replay.py"

# single objective: every sampler once to 400 evaluations per seed (budgets read off the curve)
$run run --out $R/replay_so.jsonl.gz --samplers genetic,random,tpe,tpe_mv,tpe_indep,nsga2,qmc,qmc_default \
  --seeds 50 --budget 400 --jobs 2
# restarts on stagnation: the setting before the default and the default (GeneticSampler variants)
$run run --out $R/replay_so_restarts.jsonl.gz \
  --samplers 'genetic:stall=3+epoch=4,genetic:stall=3+epoch=4+explore=0.25+eglobal=0.75' --seeds 50 --budget 400 --jobs 2
# issue 10 (search quality): variants compared on tuning seeds 100-119 only, then the chosen
# default on seeds 0-49 (never looked at while choosing); see BENCHMARKS.md
$run run --out $R/replay_tuning.jsonl.gz --seed0 100 --seeds 20 --budget 400 --jobs 2 --samplers \
  'genetic:sur=knn+cands=16,genetic:sur=mix+cands=64+top=4+mixg=1000000,genetic:sur=mix+cands=64+top=2+mixg=1000000,genetic:sur=mix+cands=128+top=4+mixg=1000000,genetic:sur=mix+cands=64+top=4+stall=0+mixg=1000000,genetic:sur=mix+cands=64+top=4+gamma=0.25+mixg=1000000,genetic:fw=3.0+mixg=1000000,genetic:fw=10.0+mixg=1000000,genetic:mixg=4+kc=64,genetic:mixg=8+kc=64,genetic:mixg=8+kc=16'
$run run --out $R/replay_so_surrogate.jsonl.gz --samplers genetic --seeds 50 --budget 400 --jobs 2
# issue 10, third round (local search): tuning rounds on seeds 100-119, then the default on 0-49.
# The tuning rows were made while local search was off by default: the prefix P restores that.
P='genetic:lss=0+lsd=1+lsr=0.5+lsre=1+mixg=8+kc=16'
$run run --out $R/replay_tuning_ls_rerun.jsonl.gz --seed0 100 --seeds 20 --budget 400 --jobs 2 --samplers \
  "$P+lss=0.5,$P+lss=0.5+lsd=2+lsr=0.85,$P+lss=0.5+lsd=2+lsr=0.85+lsre=0,$P+lss=0.5+lsd=2+lsr=0.85+lsre=0+ls=0.25,$P+lss=0.5+lsd=2+lsr=1.0,$P+lss=0.5+lsd=2+lsr=0.85+lsre=2+stall=2,$P+g0=8,$P+fill=1"
$run run --out $R/replay_so_local.jsonl.gz --samplers genetic --seeds 50 --budget 400 --jobs 2
python benchmarks/replay.py report --results "$R/replay_so.jsonl.gz#random,tpe,tpe_indep,nsga2,qmc,qmc_default" \
  "$R/replay_so_surrogate.jsonl.gz@before" $R/replay_so_local.jsonl.gz
$run timing --dataset gemm_RTX_3090 --samplers 'genetic,genetic:lss=0,nsga2' --trials 1000 --repeat 3 --out $R/timing_local.jsonl
# (since the fifth round, two-gene moves sooner: the fourth round's genetic rows below need ls2=0 in front,
# e.g. 'genetic:ls2=0+lsfix=0'; the third round's rows with P are unaffected: no local search)
# issue 10, fourth round (Sobol generation 0, breeding inside generation 0, repair moves); the tuning rows were
# made while the repair moves were off by default: lsfix=0 in front restores that
$run run --out $R/replay_tuning_start.jsonl.gz --seed0 100 --seeds 20 --budget 400 --jobs 2 --samplers \
  'genetic:lsfix=0,genetic:lsfix=0+g0s=1,genetic:lsfix=0+g0b=0.5,genetic:lsfix=0+g0b=0.25,genetic:lsfix=0+lsfix=1,genetic:lsfix=0+g0s=1+g0b=0.5,genetic:lsfix=0+g0b=0.5+lsfix=1,genetic:lsfix=0+g0s=1+g0b=0.5+lsfix=1,genetic:lsfix=0+lsfix=1+ls=0.1,genetic:lsfix=0+g0b=0.5+lsfix=1+ls=0.1'
$run run --out $R/replay_tuning_start2.jsonl.gz --seed0 100 --seeds 20 --budget 400 --jobs 2 --samplers \
  'genetic:lsfix=0+g0b=0.25+lsfix=1,genetic:lsfix=0+g0b=0.25+g0s=1,genetic:lsfix=0+g0b=0.25+g0s=1+lsfix=1,genetic:lsfix=0+g0b=0.35,genetic:lsfix=0+g0b=0.15,genetic:lsfix=0+lsfix=2,genetic:lsfix=0+g0b=0.25+lsfix=2,genetic:lsfix=0+g0b=0.25+g0s=1+lsfix=2'
$run run --out $R/replay_tuning_start3.jsonl.gz --seed0 120 --seeds 30 --budget 400 --jobs 2 --samplers \
  'genetic:lsfix=0,genetic:lsfix=0+g0b=0.35+lsfix=1,genetic:lsfix=0+g0b=0.25+g0s=1+lsfix=1'
python benchmarks/replay.py report --results $R/replay_tuning_start3.jsonl.gz --loo 'genetic;genetic:g0b=0.35+lsfix=1;genetic:g0b=0.25+g0s=1+lsfix=1'
$run run --out $R/replay_tuning_start4.jsonl.gz --seed0 120 --seeds 30 --budget 400 --jobs 2 --samplers 'genetic:lsfix=0+lsfix=1'
$run run --out $R/replay_tuning_start5.jsonl.gz --seed0 150 --seeds 30 --budget 400 --jobs 2 --samplers 'genetic:lsfix=0,genetic:lsfix=0+lsfix=1'
$run run --out $R/replay_so_start.jsonl.gz --seeds 50 --budget 400 --jobs 2 --samplers 'genetic:g0b=0.25+g0s=1+lsfix=1'
python benchmarks/replay.py report --results "$R/replay_so.jsonl.gz#random,tpe,tpe_indep,nsga2,qmc,qmc_default" \
  $R/replay_so_local.jsonl.gz $R/replay_so_start.jsonl.gz
$run run --out $R/replay_so_repair.jsonl.gz --samplers genetic --seeds 50 --budget 400 --jobs 2
python benchmarks/replay.py report --results "$R/replay_so.jsonl.gz#random,tpe,tpe_indep,nsga2,qmc,qmc_default" \
  "$R/replay_so_local.jsonl.gz@before" $R/replay_so_repair.jsonl.gz
$run timing --dataset gemm_RTX_3090 --samplers 'genetic,genetic:lsfix=0,nsga2' --trials 1000 --repeat 3 --out $R/timing_repair.jsonl
# fifth round: two-gene moves sooner (ls2; `genetic:ls2=0` is the fourth round's default, named `genetic` in the tuning files)
$run run --out $R/replay_tuning_r5a.jsonl.gz --seed0 200 --seeds 40 --budget 400 --jobs 2 --samplers \
  'genetic:ls2=0,genetic:ls2=0+lsw=0.5,genetic:ls2=0+lsw=1.0,genetic:ls2=0.5,genetic:ls2=0.25,genetic:lsw=0.5+ls2=0.5,genetic:ls2=0+lsfix=2'
$run run --out $R/replay_tuning_r5b.jsonl.gz --seed0 240 --seeds 60 --budget 400 --jobs 2 --samplers 'genetic:ls2=0,genetic:ls2=0.5,genetic:ls2=0+lsfix=2'
python benchmarks/replay.py report --results $R/replay_tuning_r5b.jsonl.gz --loo 'genetic;genetic:ls2=0.5;genetic:lsfix=2'
$run run --out $R/replay_so_two.jsonl.gz --samplers genetic --seeds 50 --budget 400 --jobs 2
python benchmarks/replay.py report --results "$R/replay_so.jsonl.gz#random,tpe,tpe_indep,nsga2,qmc,qmc_default" \
  "$R/replay_so_repair.jsonl.gz@before" $R/replay_so_two.jsonl.gz
$run timing --dataset gemm_RTX_3090 --samplers 'genetic,genetic:ls2=0,nsga2' --trials 1000 --repeat 3 --out $R/timing_two.jsonl
$run run --out $R/replay_tuning_r5c.jsonl.gz --seed0 200 --seeds 40 --budget 400 --jobs 2 --samplers 'genetic:g0b=0.25,genetic:g0b=0.25+g0s=1'
python benchmarks/replay.py report --results "$R/replay_so.jsonl.gz#random,tpe,tpe_indep,nsga2,qmc,qmc_default" \
  "$R/replay_so_restarts.jsonl.gz#genetic:stall=3+epoch=4+explore=0.25+eglobal=0.75" $R/replay_so_surrogate.jsonl.gz
$run timing --dataset gemm_RTX_3090 --samplers genetic,nsga2,random,tpe --trials 1000 --repeat 3 --out $R/timing_surrogate.jsonl
# multi-objective (time, compile_time)
$run run --out $R/replay_mo.jsonl.gz --objectives 2 --samplers genetic_mo,nsga2_16,random,tpe,tpe_mv,nsga2 \
  --seeds 50 --budget 400 --jobs 2
# toy problem
nice -n 10 python benchmarks/toy_genetic.py --seeds 100 --out $R/toy.json
# sampler time per trial (one process, nothing else of ours running)
$run timing --dataset gemm_RTX_3090 --samplers genetic,nsga2,random,tpe --trials 1000 --repeat 3 --out $R/timing.jsonl
$run timing --dataset gemm_RTX_3090 --samplers genetic,nsga2,random,tpe --trials 1000 --repeat 3 --out $R/timing.jsonl
$run timing --dataset gemm_RTX_3090 --samplers genetic,nsga2,random,tpe --trials 5000 --repeat 1 --out $R/timing.jsonl
# tables
python benchmarks/replay.py report --results $R/replay_so.jsonl.gz $R/replay_mo.jsonl.gz --timing $R/timing.jsonl
python benchmarks/replay.py report --results $R/replay_so.jsonl.gz $R/replay_so_restarts.jsonl.gz \
  --loo 'genetic;genetic:stall=3+epoch=4;genetic:stall=3+epoch=4+explore=0.25+eglobal=0.75'
# compile landscapes of the example kernels (real ptxas, cached) and the binary-aware replay on them
nice -n 10 python benchmarks/compile_landscape.py enumerate --jobs 2
nice -n 10 python benchmarks/compile_landscape.py replay --seeds 10
# issue 10, sixth round (s17q): early-phase knobs, development spaces seeds 300-339, held-out dedispersion seeds 0-49
$run run --out $R/replay_tuning_s17q.jsonl.gz --datasets convolution_A100,convolution_MI250X,gemm_RTX_3090 --seed0 300 --seeds 40 \
  --budget 400 --jobs 2 --samplers 'genetic,genetic:g0s=1,genetic:pf=1,genetic:g0b=0.25+pf=1,genetic:g0f=8,genetic:g0f=8+pf=1'
$run run --out $R/replay_heldout_s17q.jsonl.gz --datasets dedispersion_MI250X --seeds 50 --budget 400 --jobs 2 \
  --samplers 'genetic,genetic:pf=1,genetic:g0s=1,genetic:g0b=0.25+pf=1,genetic:g0f=8'
$run run --out $R/replay_so_s17q.jsonl.gz --datasets convolution_A100,convolution_MI250X,gemm_RTX_3090 --seeds 50 --budget 400 \
  --jobs 2 --samplers 'genetic:g0b=0.25+pf=1,genetic:g0f=8'
$run run --out $R/replay_confirm_s17q.jsonl.gz --seed0 340 --seeds 40 --budget 400 --jobs 2 --samplers 'genetic,genetic:g0b=0.25+pf=1'
