# SPDX-License-Identifier: MIT
# Shared settings of the bench/plots/*.gp scripts. Each script is run by scripts/plot.sh as
#   gnuplot -e "DATA='dir'; OUT='dir'; PLOTS='bench/plots'" bench/plots/NAME.gp
# DATA holds the *.dat files and vars.gp written by bench/report.py.
load DATA.'/vars.gp'
set terminal pngcairo size 1100,700 font "sans,11" linewidth 1
set grid xtics ytics mxtics mytics lc rgb '#dddddd'
set key outside right top box opaque
set border lw 1.2
# Colours in pairs (dark, light): series come ISA by ISA, one per thread count (1, 2).
array LT[8] = ['#1f4e9c', '#6fa8dc', '#b22222', '#f08a5d', '#2e7d32', '#8bc34a', '#6a1b9a', '#ce93d8']
do for [i=1:8] { set linetype i lc rgb LT[i] lw 1 }
set linetype cycle 8
# Titles in vars.gp are single words with '_' for spaces (gnuplot's word lists).
sp(s) = strstrt(s, "_") ? s[1:strstrt(s, "_") - 1] . " " . sp(s[strstrt(s, "_") + 1:strlen(s)]) : s
file(list, i) = DATA.'/'.word(list, i)
