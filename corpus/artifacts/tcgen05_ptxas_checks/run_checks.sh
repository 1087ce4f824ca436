#!/usr/bin/env bash
# Assembles small PTX probes with ptxas and prints ACCEPT or the first error line for each.
# Facts the corpusB pages quote about what ptxas 13.0 accepts for tcgen05 on sm_100a / sm_103a.
set -u
TMP=$(mktemp -d)
probe() {   # probe NAME TARGET BODY
  local name=$1 target=$2 body=$3
  cat > "$TMP/$name.ptx" <<PTX
.version 8.8
.target $target
.address_size 64
.visible .entry k(.param .u32 p, .param .u64 q) {
  .reg .b32 %r<140>;
  .reg .b32 %t;
  .reg .b64 %d<2>;
  .reg .b16 %h;
  .reg .pred %p;
  .reg .f32 %f<3>;
  ld.param.u32 %t, [p];
  mov.f32 %f1, 0f3F800000;
  mov.f32 %f2, %f1;
  ld.param.u64 %d0, [q];
  mov.b64 %d1, 0;
  mov.b16 %h, 3;
  setp.ne.u32 %p, %t, 0;
  $body
  ret;
}
PTX
  local out
  if out=$(ptxas -arch="$target" "$TMP/$name.ptx" -o "$TMP/$name.cubin" 2>&1); then
    echo "$name [$target]: ACCEPT"
  else
    echo "$name [$target]: REJECT: $(echo "$out" | grep -m1 error | sed 's/^.*error *: *//')"
  fi
}
probe ld_16x256b_x1   sm_100a 'tcgen05.ld.sync.aligned.16x256b.x1.b32 {%r0,%r1,%r2,%r3}, [%t];'
probe ld_16x256b_x64  sm_100a 'tcgen05.ld.sync.aligned.16x256b.x64.b32 {%r0,%r1,%r2,%r3}, [%t];'
probe ld_red_sm100a   sm_100a 'tcgen05.ld.red.sync.aligned.32x32b.x2.max.u32 {%r0,%r1}, %r2, [%t];'
probe ld_red_sm103a   sm_103a 'tcgen05.ld.red.sync.aligned.32x32b.x2.max.u32 {%r0,%r1}, %r2, [%t];'
probe cp_64x128b_none sm_100a 'tcgen05.cp.cta_group::1.64x128b [%t], %d0;'
probe cp_64x128b_w2   sm_100a 'tcgen05.cp.cta_group::1.64x128b.warpx2::02_13 [%t], %d0;'
probe cp_32x128b_none sm_100a 'tcgen05.cp.cta_group::1.32x128b [%t], %d0;'
probe cp_32x128b_w4   sm_100a 'tcgen05.cp.cta_group::1.32x128b.warpx4 [%t], %d0;'
probe mix_cta_groups  sm_100a 'tcgen05.cp.cta_group::1.128x256b [%t], %d0;
  tcgen05.cp.cta_group::2.128x256b [%t], %d0;'
probe alloc_48        sm_100a 'tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%t], 48;'
probe alloc_16        sm_100a 'tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%t], 16;'
probe alloc_1024      sm_100a 'tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%t], 1024;'
probe alloc_32        sm_100a 'tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%t], 32;'
probe commit_mask_imm sm_100a 'tcgen05.commit.cta_group::2.mbarrier::arrive::one.shared::cluster.multicast::cluster.b64 [%d0], 3;'
probe commit_mask_reg sm_100a 'tcgen05.commit.cta_group::2.mbarrier::arrive::one.shared::cluster.multicast::cluster.b64 [%d0], %h;'
probe mma_nvfp4_4x    sm_100a 'tcgen05.mma.cta_group::1.kind::mxf4nvf4.block_scale.scale_vec::4X [%t], %d0, %d1, %t, [%t], [%t], %p;'
probe mma_block16     sm_100a 'tcgen05.mma.cta_group::1.kind::mxf4nvf4.block_scale.block16 [%t], %d0, %d1, %t, [%t], [%t], %p;'
probe mma_mxf8_1x     sm_100a 'tcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale [%t], %d0, %d1, %t, [%t], [%t], %p;'
probe mma_mxf8_2x     sm_100a 'tcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale.scale_vec::2X [%t], %d0, %d1, %t, [%t], [%t], %p;'
probe cvt_ue8m0_rp    sm_100a 'cvt.rp.satfinite.ue8m0x2.f32 %h, %f1, %f2;'
probe cvt_e2m1_rs     sm_100a 'cvt.rs.satfinite.e2m1x4.f32 %h, {%f1, %f2, %f1, %f2}, %t;'
rm -rf "$TMP"
