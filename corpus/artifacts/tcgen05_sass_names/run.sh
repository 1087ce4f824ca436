#!/usr/bin/env bash
# Build the probe for sm_100a and list the tcgen05-related SASS opcodes per kernel (compile only, no GPU needed).
# CUOBJDUMP: any cuobjdump that reads sm_100 cubins (CUDA 12.8+); default: the one on PATH.
set -euo pipefail
cd "$(dirname "$0")"
nvcc --version | tail -2
nvcc -arch=sm_100a -cubin -o /tmp/tcgen05_sass.cubin tcgen05_sass.cu
"${CUOBJDUMP:-cuobjdump}" -sass /tmp/tcgen05_sass.cubin | awk '/Function :/ {print; next} /UTC|LDTM|STTM/ {for (i = 1; i <= NF; i++) if ($i ~ /^(UTC|LDTM|STTM)/) {sub(/;$/, "", $i); print "    " $i}}' | uniq
