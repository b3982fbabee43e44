# SPDX-License-Identifier: MIT
# Peak resident memory of one RoVE forward vs n (mem_probe, fresh process per n), log-log,
# against an O(n) line and the size of a single n x n fp32 score matrix.
load PLOTS.'/common.gp'
if (HAVE_MEM == 0) { print "memory.png: no mem_probe data"; exit }
set output OUT.'/memory.png'
stats DATA.'/mem.dat' u ($3 / $1) nooutput
per_token = STATS_max
set title sprintf("Peak resident memory of one causal RoVE forward (%s)\n%s", MEM_SHAPE, MACHINE) noenhanced
set logscale x 2
set logscale y 10
set xlabel "sequence length n (tokens)"
set ylabel "MiB"
set format x "%g"
set format y "%g"
plot DATA.'/mem.dat' u 1:2 w lp lc 1 lw 2 pt 7 t 'peak RSS of the process', \
     '' u 1:4 w lp lc 2 lw 2 pt 5 t 'q, k, v, out (inputs)', \
     '' u 1:3 w lp lc 3 lw 2 pt 9 t 'forward extra (workspace)', \
     '' u 1:($1 * per_token) w l lc rgb 'gray30' dt 2 lw 1.5 t 'O(n) through the workspace', \
     '' u 1:5 w l lc rgb 'red' dt 3 lw 1.5 t 'one n x n fp32 matrix (never allocated)'
