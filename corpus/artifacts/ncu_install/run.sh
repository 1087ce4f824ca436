#!/bin/bash
# corpusN: capture the installed Nsight Compute's facts and profile ncu_probe. Runs on the H200 machine.
D=$OUT/w; mkdir -p $D; cd "$(dirname "$0")"
T0=$(date +%s); t() { echo "[t=$(( $(date +%s) - T0 ))s] $*" | tee -a $D/steps.txt; }
NCU=$(which ncu); NCUDIR=$(dirname "$(readlink -f "$NCU")")
t "ncu=$NCU dir=$NCUDIR"
{ ncu --version; echo; nvcc --version; echo; nvidia-smi; nvidia-smi -q -d CLOCK; uname -a; which dcgmi nv-hostengine dcgm-exporter; } > $D/env.txt 2>&1
ncu --list-sets > $D/list_sets.txt 2>&1; ncu --list-sections > $D/list_sections.txt 2>&1
ncu --list-rules > $D/list_rules.txt 2>&1; ncu --list-chips > $D/list_chips.txt 2>&1; ncu --help > $D/help.txt 2>&1
ls -la $NCUDIR/sections > $D/sections_ls.txt 2>&1; mkdir -p $D/sec; cp -r $NCUDIR/sections/. $D/sec/ 2>/dev/null
ls -la $NCUDIR $NCUDIR/extras $NCUDIR/docs >> $D/sections_ls.txt 2>&1
for c in gh100 gb100; do ncu --query-metrics --chip $c > $D/q_$c.txt 2>&1; done
ncu --query-metrics-mode suffix --metrics l1tex__data_bank_conflicts_pipe_lsu_mem_shared,lts__t_sectors,dram__bytes_read,sm__throughput,smsp__average_warp_latency_per_inst_issued --chip gh100 > $D/q_suffix_gh100.txt 2>&1
t "queries done"
./ncu_probe > $D/plain_run.txt 2>&1 || { t "carried binary failed, rebuilding"; nvcc -O3 -gencode arch=compute_90a,code=sm_90a -lineinfo ncu_probe.cu -o ncu_probe > $D/build.txt 2>&1; ./ncu_probe > $D/plain_run.txt 2>&1; }
t "plain run rc=$?"
timeout 90 ncu --set full --import-source yes --clock-control none -c 16 -f -o $D/full ./ncu_probe > $D/ncu_full_log.txt 2>&1
t "full rc=$?"
ncu --import $D/full.ncu-rep --page raw --csv --print-units base > $D/full_raw.csv 2>&1
ncu --import $D/full.ncu-rep --page details --csv --print-units base > $D/full_details.csv 2>&1
t "exports done"
awk 'NR>3{print $1}' $D/q_gh100.txt | grep -E '^(l1tex__data_bank_(conflicts|reads|writes)|l1tex__data_pipe_lsu_wavefronts|l1tex__t_(requests|sectors)_pipe_lsu|l1tex__m_|smsp__inst_executed_op_|sm__icc|smsp__icc|sm__imc|smsp__imc|lts__t_sectors_srcunit_tex_op_|sm__pipe_tensor|sm__inst_executed_pipe_tensor|smsp__inst_executed_pipe_(lsu|uniform|tma)|smsp__warp_issue_stalled_|smsp__pcsamp_sample_count|l1tex__lsuin_requests|l1tex__texin)' | grep -v -E 'pct|ratio|throughput' | sort -u > $D/extra_names.txt
L=$(sed 's/$/.sum/' $D/extra_names.txt | paste -sd, -)
t "extra names: $(wc -l < $D/extra_names.txt)"
timeout 60 ncu --clock-control none -c 16 --metrics "$L" --csv --print-units base ./ncu_probe > $D/extra_raw.csv 2> $D/extra_err.txt
t "extra rc=$?"
for m in kernel application; do timeout 15 ncu --clock-control none --replay-mode $m --section SpeedOfLight --section MemoryWorkloadAnalysis -k regex:k_copy -c 1 ./ncu_probe > $D/replay_$m.txt 2>&1; t "replay $m rc=$?"; done
timeout 15 ncu --clock-control none --replay-mode range --section SpeedOfLight ./ncu_probe r > $D/replay_range.txt 2>&1; t "replay range rc=$?"
timeout 15 ncu --clock-control none --replay-mode app-range --section SpeedOfLight ./ncu_probe r > $D/replay_apprange.txt 2>&1; t "replay app-range rc=$?"
timeout 15 ncu --clock-control none --set full -k regex:k_copy -c 1 ./ncu_probe > $D/passes_full.txt 2>&1; t "passes full rc=$?"
rm -f $D/full.ncu-rep.tmp; ls -la $D > $D/ls.txt
tar czf $OUT/bundle.tgz -C $OUT w && rm -rf $D/sec $D/q_gh100.txt $D/q_gb100.txt $D/full_raw.csv $D/full_details.csv $D/help.txt
cp $D/steps.txt $OUT/steps.txt; t "end"; ls -la $OUT
