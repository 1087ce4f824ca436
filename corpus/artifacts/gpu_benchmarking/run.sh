#!/bin/bash
# Runs gpu_bench and samples SM clock and power with nvidia-smi while the sustained GEMM loop runs.
# Clocks are NOT locked (the lent machine's settings are left as they are); the samples record what they were.
set -e
cd "$(dirname "$0")"
nvcc -O3 -arch=sm_90 gpu_bench.cu -lcublas -o /tmp/gpu_bench
nvidia-smi --query-gpu=name,memory.total,power.limit,power.default_limit,clocks.max.sm,clocks.max.mem,clocks.sm,clocks.mem,ecc.mode.current,mig.mode.current --format=csv
nvidia-smi -q -d CLOCK | sed -n '1,60p'
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active --format=csv -lms 200 > "${OUT:-/tmp}/smi_samples.csv" &
SMI=$!
/tmp/gpu_bench "${1:-3000}"
kill $SMI
