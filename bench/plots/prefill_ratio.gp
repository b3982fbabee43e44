# SPDX-License-Identifier: MIT
# RoVE/RoPE time ratio (medians, measured alternating in one loop) vs n, per ISA and
# thread count. 1 = RoVE costs nothing extra.
load PLOTS.'/common.gp'
if (words(ISA_FILES) == 0) { print "prefill_ratio.png: no prefill data"; exit }
set output OUT.'/prefill_ratio.png'
set title sprintf("Cost of RoVE over plain RoPE: time ratio of causal prefill\n%s - %s", ISA_SHAPE, MACHINE) noenhanced
set logscale x 2
set xlabel "sequence length n (tokens)"
set ylabel "RoVE time / RoPE time"
set format x "%g"
set yrange [*<0.9:1.3<*]
plot for [i=1:words(ISA_FILES)] file(ISA_FILES, i) u 1:4 w lp lc i lw 2 pt 7 \
       t sp(word(ISA_TITLES, i)) noenhanced, \
     1 w l lc rgb 'black' dt 2 lw 1.5 t 'equal cost'
