# SPDX-License-Identifier: MIT
# Decode: one query against a cache of kv_len keys, time vs cache length (RoVE solid,
# RoPE dashed), log-log, with the time to read K and V at the measured read bandwidth.
load PLOTS.'/common.gp'
if (words(DEC_FILES) == 0) { print "decode_time.png: no decode data"; exit }
set output OUT.'/decode_time.png'
set title sprintf("Decode step (1 query) vs cache length: RoVE solid, RoPE dashed\n%s - %s", DEC_SHAPE, MACHINE) noenhanced
set logscale x 2
set logscale y 10
set xlabel "cache length (tokens)"
set ylabel "time per decode step (ms)"
set format x "%g"
set format y "%g"
plot for [i=1:words(DEC_FILES)] file(DEC_FILES, i) u 1:2 w lp lc i lw 2 pt 7 \
       t 'RoVE, '.sp(word(DEC_TITLES, i)) noenhanced, \
     for [i=1:words(DEC_FILES)] file(DEC_FILES, i) u 1:3 w l lc i dt 2 lw 1.5 notitle, \
     for [j=1:words(BW_FILES)] file(BW_FILES, j) u 1:2 w lp lc rgb 'gray30' dt 3 lw 1.5 \
       pt j ps 0.9 \
       t sp(word(BW_TITLES, j)) noenhanced
