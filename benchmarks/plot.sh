#!/usr/bin/env bash
# plot.sh RESULTS_DIR [OUT_DIR]: draws the PNG plots of benchmarks/README.md with gnuplot from
# the CSV files that benchmarks/run_experiments.sh records:
#   numa01.csv, numa02.csv  numa01_02 --csv        -> numa01_locality.png, numa02_locality.png
#   amr.csv                 amr --csv              -> amr_locality.png, amr_time.png
#   next_touch_chunk.csv    pages,ms per iteration -> next_touch_chunk.png
# A missing CSV skips its plot (and says so). OUT_DIR defaults to RESULTS_DIR.
set -euo pipefail
if [ $# -lt 1 ] || [ $# -gt 2 ] || [ ! -d "$1" ]; then
    echo "usage: $0 RESULTS_DIR [OUT_DIR]" >&2
    exit 2
fi
in=$1
out=${2:-$1}
mkdir -p "$out"
command -v gnuplot >/dev/null || { echo "plot.sh: gnuplot is missing (apt-get install gnuplot-nox)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
made=0

# Splits rows `tag,KEY,...` of FILE by the field KEY_FIELD into $tmp/KEY.csv; prints the keys.
split_by() { # FILE FIELD
    awk -F, -v f="$2" -v d="$tmp" '{ print > (d "/" $f ".csv"); if (!seen[$f]++) keys = keys " " $f } END { print keys }' "$1"
}

# Locality over passes, one line per strategy.
for test in numa01 numa02; do
    csv=$in/$test.csv
    if [ ! -s "$csv" ]; then echo "plot.sh: no $csv, $test plot skipped"; continue; fi
    rm -f "$tmp"/*.csv
    keys=$(split_by "$csv" 2)
    plots=()
    for k in $keys; do plots+=("'$tmp/$k.csv' using 3:(\$6*100) with linespoints pointsize 0.5 title '$k'"); done
    gnuplot <<EOF
set terminal pngcairo noenhanced size 900,500
set output '$out/${test}_locality.png'
set datafile separator ','
set title '$test: pages on the writer''s node after each pass'
set xlabel 'pass'
set ylabel 'local pages (%)'
set yrange [0:105]
set key bottom right
plot $(IFS=,; echo "${plots[*]}")
EOF
    made=$((made + 1))
done

# AMR: locality at the end of each phase and phase time, per strategy and runtime.
csv=$in/amr.csv
if [ -s "$csv" ]; then
    awk -F, '{ print > ("'"$tmp"'/amr_" $2 "_" $3 ".csv") }' "$csv"
    loc=()
    tim=()
    for f in "$tmp"/amr_*.csv; do
        name=$(basename "$f" .csv | sed 's/^amr_//; s/_/ /')
        loc+=("'$f' using 4:(\$7*100) with linespoints title '$name'")
        tim+=("'$f' using 4:(\$8*1000) with linespoints title '$name'")
    done
    for what in locality time; do
        if [ $what = locality ]; then ylabel='owner-local pages at phase end (%)'; yr='set yrange [0:105]'; series=("${loc[@]}")
        else ylabel='phase time (ms)'; yr='set yrange [0:*]'; series=("${tim[@]}"); fi
        gnuplot <<EOF
set terminal pngcairo noenhanced size 900,500
set output '$out/amr_$what.png'
set datafile separator ','
set title 'amr: blocks re-partitioned at every phase (runtime, strategy)'
set xlabel 'phase'
set ylabel '$ylabel'
$yr
set xtics 1
set key outside right
plot $(IFS=,; echo "${series[*]}")
EOF
        made=$((made + 1))
    done
else
    echo "plot.sh: no $csv, AMR plots skipped"
fi

# Next-touch cost against chunk size.
csv=$in/next_touch_chunk.csv
if [ -s "$csv" ]; then
    gnuplot <<EOF
set terminal pngcairo noenhanced size 700,450
set output '$out/next_touch_chunk.png'
set datafile separator ','
set title 'affinity_on_next_touch: 16 MiB moved there and back, against chunk size'
set xlabel 'chunk (pages per fault and move_pages call)'
set ylabel 'ms per iteration'
set logscale x 2
set yrange [0:*]
plot '$csv' using 1:2 with linespoints notitle
EOF
    made=$((made + 1))
else
    echo "plot.sh: no $csv, chunk-size plot skipped"
fi
echo "plot.sh: $made plot(s) in $out"
