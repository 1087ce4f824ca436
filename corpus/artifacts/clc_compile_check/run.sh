#!/usr/bin/env bash
# Compile-only check of the Cluster Launch Control wrappers (CCCL cuda::ptx) for sm_100a and the SASS they lower to.
# No GPU needed; run where CUDA 13.0's nvcc and cuobjdump are installed.
set -euo pipefail
cd "$(dirname "$0")"
nvcc --version | tail -2
nvcc -arch=sm_100a -cubin -o /tmp/clc_check.cubin clc_check.cu
cuobjdump -sass /tmp/clc_check.cubin | grep -o 'UGETNEXTWORKID[^ ;]*' | sort | uniq -c
