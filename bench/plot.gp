# SPDX-License-Identifier: GPL-2.0-only
#
# docs/performance.svg from kvmstats-bench's data files and bench/tool-cost's.
# gnuplot -e "sweep='...'; list='...'; vlist='...'; lone='...'; growth='...'; host='...'; out='...'; kernel='...'" bench/plot.gp
#   growth: vcpus, then ratios (guest; see kvmstats-bench.c write_data)
#   host:   vcpus, export Ir per vCPU ratio, top Ir per vCPU ratio, RSS per vCPU ratio (bench/report)

set terminal svg size 1200,900 dynamic enhanced font 'sans,11' background rgb 'white'
set output out
set multiplot layout 2,2 title sprintf("kvmstats-bench on %s (QEMU TCG: absolute times are emulated; compare the lines)", kernel)
set grid
set key box opaque

# 1. Cost per unit against size, as a ratio to the smallest size.
set title "Cost per unit, as a ratio to 1 VM x 4 vCPUs (flat: linear)"
set xlabel "vCPUs (4 a VM)"
set ylabel "cost per vCPU (VM) / the same at 4 vCPUs"
set logscale x
set xtics (4, 64, 256, 1000)
set yrange [0:3.2]
set key top left font ',9'
plot growth using 1:2 with linespoints lw 2 pt 7 title "READ\\_BATCH sweep, per vCPU (guest)", \
     growth using 1:5 with linespoints lw 1 pt 6 dt 2 title "  control: the same 5 files again", \
     growth using 1:3 with linespoints lw 1 pt 5 title "one pread per fd, per vCPU (guest)", \
     host using 1:2 with linespoints lw 2 pt 11 title "export per scrape, per vCPU (host, instructions)", \
     host using 1:3 with linespoints lw 2 pt 13 title "top per refresh, per vCPU (host, instructions)", \
     host using 1:4 with linespoints lw 1 pt 4 title "export RSS, per vCPU (host)", \
     1.5 with lines lw 1 dt 3 lc rgb "red" title "1.5x"
unset logscale
set autoscale y

# 2. The host sweep, absolute.
set title "Host sweep: every VM and vCPU data block"
set xlabel "VMs (4 vCPUs each)"
set ylabel "time per sweep, us (TCG)"
set logscale xy
set xtics (1, 4, 16, 64, 250)
set format y "10^{%T}"
set key bottom right font ',10'
plot sweep using 1:2 with linespoints lw 2 pt 7 title "debugfs, kvm\\_stat's way", \
     sweep using 1:3 with linespoints lw 2 pt 5 title "kvmstats, one pread per fd", \
     sweep using 1:4 with linespoints lw 2 pt 9 title "kvmstats, READ\\_BATCH", \
     sweep using 1:5 with linespoints lw 2 pt 13 dt 2 title "native fds, each VMM re-reading its own", \
     sweep using 1:6 with linespoints lw 2 pt 11 dt 2 title "native fds, the VMMs in turn", \
     sweep using 1:7 with linespoints lw 2 pt 15 dt 2 title "native fds, all read by one process"
unset logscale
set format y "%g"

# 3. LIST_VMS against VMs.
set title "LIST\\_VMS against VMs"
set xlabel "VMs"
set ylabel "ms per call (TCG)"
set xtics auto
# Room above the lines for the key.
set autoscale xy
stats vlist using 4 nooutput name "V"
stats lone using 2 nooutput name "L"
set yrange [0:1.5 * V_max]
set y2range [0:1.5 * L_max]
set y2label "us per call (TCG)"
set y2tics
set ytics nomirror
set key top left font ',9'
plot vlist using 1:4 with linespoints lw 2 pt 7 title "LIST\\_VMS, a VM per VMM, processes fixed: median (ms)", \
     vlist using 1:5 with linespoints lw 1 pt 6 title "  the same, fastest call (ms)", \
     lone using 1:2 axes x1y2 with linespoints lw 2 pt 9 title "LIST\\_PIDFD of one VMM holding them all: median (us, right)"
unset y2label
unset y2tics
set ytics mirror

# 4. LIST_VMS against processes.
set title "LIST\\_VMS against processes, 250 VMs"
set xlabel "open fds on the host, thousands"
set ylabel "ms per call (TCG)"
set yrange [0:*]
set key bottom right font ',10'
plot list using ($3/1000):4 with linespoints lw 2 pt 7 title "median of 101 calls", \
     list using ($3/1000):5 with linespoints lw 1 pt 6 title "fastest of 101 calls", \
     list using ($3/1000):4:($2 >= 1000 ? sprintf("%d procs", $2) : "") with labels offset 0,1 font ',9' notitle
unset multiplot
