# SPDX-License-Identifier: MIT
# Causal prefill throughput (RoVE) vs n for every ISA and thread count, log-log, with the
# measured single-core FMA peaks as horizontal lines (multiply by the thread count).
load PLOTS.'/common.gp'
if (words(ISA_FILES) == 0) { print "prefill_gflops.png: no prefill data"; exit }
set output OUT.'/prefill_gflops.png'
set title sprintf("Causal prefill throughput (RoVE; 2 n^2 d heads FLOPs) per ISA\n%s - %s", ISA_SHAPE, MACHINE) noenhanced
set logscale x 2
set logscale y 10
set xlabel "sequence length n (tokens)"
set ylabel "GFLOP/s"
set format x "%g"
set format y "%g"
plot for [i=1:words(ISA_FILES)] file(ISA_FILES, i) u 1:5 w lp lc i lw 2 pt 7 \
       t sp(word(ISA_TITLES, i)) noenhanced, \
     for [j=1:words(PEAK_VALUES)] real(word(PEAK_VALUES, j)) w l lc rgb 'gray40' dt j+1 lw 1.5 \
       t sp(word(PEAK_TITLES, j)).sprintf(" (%.0f)", real(word(PEAK_VALUES, j))) noenhanced
