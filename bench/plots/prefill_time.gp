# SPDX-License-Identifier: MIT
# Causal prefill: time per forward vs n, RoVE (solid) and RoPE (dashed), log-log, with an
# n^2 slope through the largest 1-thread RoVE point.
load PLOTS.'/common.gp'
if (words(TIME_FILES) == 0) { print "prefill_time.png: no prefill data"; exit }
set output OUT.'/prefill_time.png'
set title sprintf("Causal prefill time vs n: RoVE (solid) and plain RoPE (dashed)\n%s - %s", TIME_SHAPE, MACHINE) noenhanced
set logscale x 2
set logscale y 10
set xlabel "sequence length n (tokens)"
set ylabel "time per forward (ms)"
set format x "%g"
set format y "%g"
plot for [i=1:words(TIME_FILES)] file(TIME_FILES, i) u 1:2 w lp lc i lw 2 pt 7 ps 1.1 \
       t 'RoVE, '.sp(word(TIME_TITLES, i)) noenhanced, \
     for [i=1:words(TIME_FILES)] file(TIME_FILES, i) u 1:3 w lp lc i dt 2 lw 2 pt 6 ps 1.4 \
       t 'RoPE, '.sp(word(TIME_TITLES, i)) noenhanced, \
     DATA.'/nsq.dat' u 1:2 w l lc rgb 'black' dt 3 lw 1.5 t 'slope n^2'
