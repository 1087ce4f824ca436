#!/bin/bash
# Compile the CUDA blocks of hw-ldmatrix, hw-mma-sync and kernel-gemm-ampere-ladder (no GPU needed) and list
# the SASS opcodes they produce. NVDISASM: any nvdisasm (here the one shipped in the triton 3.8.0 wheel).
set -e
NVDISASM=${NVDISASM:-nvdisasm}
for arch in sm_80 sm_90 sm_100; do
  for f in ldmatrix_frag mma_m16n8k16 gemm_bf16_sm80 ldmatrix_trans cpasync_variants; do
    nvcc -arch=$arch -cubin -Xptxas -v $f.cu -o $f.$arch.cubin 2> $f.$arch.ptxas.txt
    echo "== $f $arch $(grep -o 'Used [0-9]* registers' $f.$arch.ptxas.txt | head -1) $(grep -o '[0-9]* bytes spill stores' $f.$arch.ptxas.txt | head -1)"
    $NVDISASM $f.$arch.cubin 2>/dev/null | grep -oE "(LDSM|STSM|HMMA|LDGSTS|LDGDEPBAR|DEPBAR|ARRIVES|SYNCS)[A-Z0-9._]*( SB0, 0x[0-9a-f]+)?" | sort | uniq -c
  done
done
