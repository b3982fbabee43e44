# SPDX-License-Identifier: MIT
# Gated linear attention (chunked, selective angles, RoVE rotations) against causal softmax
# attention (RoVE) over the same n: time vs n, log-log. GLA solid, softmax dashed; a slope
# of 1 is linear growth, 2 quadratic.
load PLOTS.'/common.gp'
if (words(GLA_FILES) == 0) { print "gla_vs_softmax.png: no gla data"; exit }
set output OUT.'/gla_vs_softmax.png'
set title sprintf("GLA (solid) vs softmax attention (dashed), 12x64, causal\n%s", MACHINE) noenhanced
set logscale x 2
set logscale y 10
set xlabel "sequence length n (tokens)"
set ylabel "time per forward (ms)"
set format x "%g"
set format y "%g"
plot for [i=1:words(GLA_FILES)] file(GLA_FILES, i) u 1:2 w lp lc i lw 2 pt 7 \
       t 'GLA, '.sp(word(GLA_TITLES, i)) noenhanced, \
     for [i=1:words(GLA_FILES)] file(GLA_FILES, i) u 1:3 w lp lc i dt 2 lw 1.5 pt 6 \
       t 'softmax, '.sp(word(GLA_TITLES, i)) noenhanced
