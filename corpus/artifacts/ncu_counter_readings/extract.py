"""Read the counters behind two Nsight Compute readings out of kwiki's blind4 H200 exports
(profiling/fixtures/blind4, captured 2026-12-02 with ncu --clock-control none --set full, Nsight Compute 2025.3):

1. the tensor pipe counters of FFMA-only kernels (b4_07, b4_02) against a wgmma GEMM (b4_11);
2. L2 hit rates of a GEMM that writes much more than it reads (b4_12, K = 64).

    python extract.py ../../../profiling/fixtures/blind4 > counters.csv
    python extract.py ../../../profiling/fixtures/blind4 --sass b4_07 > sass_b4_07.txt
"""

import csv
import gzip
import io
import re
import sys
from pathlib import Path

METRICS = [
    "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active",
    "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
    "sm__inst_executed_pipe_tensor_op_hmma.avg.pct_of_peak_sustained_active",
    "sm__inst_executed_pipe_tensor_op_gmma.avg.pct_of_peak_sustained_active",
    "sm__ops_path_tensor_src_bf16_dst_fp32.avg.pct_of_peak_sustained_elapsed",
    "sm__ops_path_tensor_src_fp16.avg.pct_of_peak_sustained_elapsed",
    "sm__ops_path_tensor_src_tf32_dst_fp32.avg.pct_of_peak_sustained_elapsed",
    "lts__throughput.avg.pct_of_peak_sustained_elapsed",
    "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
    "lts__t_sector_hit_rate.pct",
    "lts__t_sector_op_read_hit_rate.pct",
    "lts__t_sector_op_write_hit_rate.pct",
    "lts__t_sectors_srcunit_tex_op_read.sum",
    "lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum",
    "lts__t_sectors_srcunit_tex_op_write.sum",
]
STEMS = ["b4_02", "b4_07", "b4_11", "b4_12"]


def rows(path: Path) -> list[list[str]]:
    return list(csv.reader(io.StringIO(gzip.decompress(path.read_bytes()).decode())))


def counters(folder: Path) -> None:
    out = csv.writer(sys.stdout)
    out.writerow(["stem", "kernel", "metric", "value"])
    for stem in STEMS:
        r = rows(folder / f"{stem}.raw.csv.gz")
        head, values = r[0], r[2]
        kernel = values[head.index("Kernel Name")]
        for m in METRICS:
            if m in head:
                out.writerow([stem, kernel[:60], m, values[head.index(m)]])


def sass(folder: Path, stem: str) -> None:
    r = rows(folder / f"{stem}.source.csv.gz")
    head = r[2]
    col = head.index("Instructions Executed")
    counts: dict[str, int] = {}
    for line in r[3:]:
        if len(line) > col and (m := re.match(r"\s*(?:@!?\S+\s+)?([A-Z][A-Z0-9]*(?:\.[A-Z0-9]+)*)", line[3])):
            counts[m.group(1)] = counts.get(m.group(1), 0) + int(float(line[col].replace(",", "") or 0))
    for op, n in sorted(counts.items(), key=lambda x: -x[1]):
        print(f"{op}\t{n}")


if __name__ == "__main__":
    folder = Path(sys.argv[1])
    if "--sass" in sys.argv:
        sass(folder, sys.argv[sys.argv.index("--sass") + 1])
    else:
        counters(folder)
