# Plots of one `cgn-bench sim` workload for the benchmark report (scripts/bench-report.sh).
# Reads the tables of `cgn-bench sim --plot-data PREFIX`; writes one SVG.
#   gnuplot -e "prefix='dir/conversation'; out='dir/conversation.svg'; title='...'" bench/plots.gp
# PREFIX-headline.dat: policy ttft_p50 ttft_p90 ttft_p99 itl_p50_ms itl_p90_ms hit_rate
#                      hit_over_ideal goodput imbalance error_pct shed_pct ideal_hit_rate
# PREFIX-sweep.dat:    one block per policy (gnuplot index): utilisation rate ttft_p50 ttft_p90
#                      ttft_p99 hit_rate goodput
if (!exists("prefix")) prefix = 'conversation'
if (!exists("out")) out = prefix . '.svg'
if (!exists("title")) title = prefix
head = prefix . '-headline.dat'
sweep = prefix . '-sweep.dat'

set terminal svg size 1500,450 dynamic noenhanced font 'sans,11' background '#ffffff'
set output out
set multiplot layout 1,3 title title

# Policy names in file order (first column of the headline table).
policies = system(sprintf("awk '!/^#/ {printf \"%%s \", $1}' '%s'", head))
ideal = real(system(sprintf("awk '!/^#/ {print $13; exit}' '%s'", head)))
npol = words(policies)

# 1. TTFT p50 / p90 / p99 per policy at the headline level (log scale).
set title 'TTFT at the headline level'
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set logscale y
set ylabel 'seconds (log)'
set yrange [0.05:*]
set grid ytics
set key top left
set xtics rotate by -30
plot head using 2:xtic(1) title 'p50', '' using 3 title 'p90', '' using 4 title 'p99'
unset logscale y
set yrange [*:*]
set xtics norotate

# 2. TTFT p90 against the offered rate (the 0.5 / 0.85 / 1.0 sweep).
set title 'TTFT p90 over the sweep'
set style data linespoints
set logscale y
set ylabel 'TTFT p90, s (log)'
set xlabel 'offered rate, req/s'
set key top left
set arrow 1 from graph 0, first 2 to graph 1, first 2 nohead dashtype 2 lc rgb '#888888'
set label 1 'SLO 2 s' at graph 0.02, first 2.3 tc rgb '#666666'
plot for [i=0:npol-1] sweep index i using 2:4 title word(policies, i+1) lw 2 pt 7
unset arrow 1
unset label 1
unset logscale y
unset xlabel

# 3. Prefix hit rate per policy against the ideal-node bound.
set title 'prefix hit rate (engine-reported)'
set style data histograms
set style histogram clustered gap 1
set ylabel 'hit rate, %'
stats head using 7 nooutput
top = STATS_max > ideal ? STATS_max : ideal
set yrange [0:120*top]
set key top right
set arrow 2 from graph 0, first 100*ideal to graph 1, first 100*ideal nohead lw 2 dashtype 2 lc rgb '#cc0000'
set label 2 sprintf('ideal node %.1f%%', 100*ideal) at graph 0.55, first 100*ideal*1.04 tc rgb '#cc0000'
set xtics rotate by -30
plot head using (100*$7):xtic(1) title 'hit rate' lc rgb '#4477aa'

unset multiplot
