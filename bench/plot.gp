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
set key top left box opaque
set grid
plot sweep using 1:2 with linespoints lw 2 pt 7 title "debugfs, kvm_stat's way", \
     sweep using 1:3 with linespoints lw 2 pt 5 title "kvmstats, one pread per fd", \
     sweep using 1:4 with linespoints lw 2 pt 9 title "kvmstats, READ\\_BATCH", \
     sweep using 1:5 with linespoints lw 2 pt 13 dt 2 title "native fds in their VMM (bound)"

unset logscale
set format y "%g"
set title "KVMSTATS\\_LIST\\_VMS, 64 VMs among idle processes"
set xlabel "open fds on the host"
set ylabel "ms per call (TCG)"
set xtics auto
set key top left box opaque
set yrange [0:*]
f(x) = a + b * x
a = 1; b = 0.0001
fit f(x) list using 3:4 via a, b
plot list using 3:4 with points pt 7 ps 1.2 title "measured (median)", \
     list using 3:4:(sprintf("%d procs", $2)) with labels offset 0,1 notitle, \
     f(x) with lines lw 2 dt 2 title "least-squares line"
unset multiplot
