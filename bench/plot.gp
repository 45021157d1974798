# SPDX-License-Identifier: GPL-2.0-only
#
# docs/performance.svg from kvmstats-bench's sweep.dat and list.dat.
# gnuplot -e "sweep='...'; list='...'; out='...'; kernel='...'" bench/plot.gp

set terminal svg size 1100,460 dynamic enhanced font 'sans,11' background rgb 'white'
set output out
set multiplot layout 1,2 title sprintf("kvmstats-bench on %s (QEMU TCG: absolute times are emulated; compare the lines)", kernel)

set title "Host sweep: every VM and vCPU data block"
set xlabel "VMs (4 vCPUs each)"
set ylabel "time per sweep, us (TCG)"
set logscale xy
set xtics (1, 4, 16, 64)
set format y "10^{%T}"
set key bottom right box opaque
set grid
plot sweep using 1:2 with linespoints lw 2 pt 7 title "debugfs, kvm\\_stat's way", \
     sweep using 1:3 with linespoints lw 2 pt 5 title "kvmstats, one pread per fd", \
     sweep using 1:4 with linespoints lw 2 pt 9 title "kvmstats, READ\\_BATCH", \
     sweep using 1:5 with linespoints lw 2 pt 13 dt 2 title "native fds, read by their own VMM"

unset logscale
set format y "%g"
set title "KVMSTATS\\_LIST\\_VMS, 64 VMs among idle processes"
set xlabel "open fds on the host, thousands"
set ylabel "ms per call (TCG)"
set xtics auto
set key bottom right box opaque
set yrange [0:*]
set fit quiet
set fit logfile "/dev/null"
f(x) = a + b * x
a = 1; b = 0.3
fit f(x) list using ($3/1000):5 via a, b
plot list using ($3/1000):4 with points pt 7 ps 1.2 title "median of 101 calls", \
     list using ($3/1000):5 with points pt 6 ps 1.2 title "fastest of 101 calls", \
     list using ($3/1000):4:($2 >= 1000 ? sprintf("%d procs", $2) : "") with labels offset 0,1 notitle, \
     f(x) with lines lw 2 dt 2 title "least-squares line (fastest)", \
     5 with lines lw 1 dt 3 lc rgb "red" title "goal at 1000 procs: 5 ms"
unset multiplot
