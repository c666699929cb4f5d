#!/usr/bin/perl

# Fan-out benchmark: one busy session watched by many clients over two
# workers.  Run with `make bench` (after run.pl) or on its own; prints a
# table.
#
#   single      one controller alone: wsfanout with no observer
#   fan-out     the controller and FANOUT_OBSERVERS observers (32), spread
#               evenly over the two workers; each client's rate as a ratio
#               to the single rate of the same pair (A/B alternated)
#   sweep       1, 2, 4, 8, 16, 32 observers, one run each after a single
#               run of its own: the rate per observer by number of
#               observers, and its ratio to that single rate
#               (FANOUT_SWEEP: the counts, comma-separated; empty skips it)
#
# Also the workers' CPU time per run (single and fan-out), a figure the
# machine's other load changes far less than the rates.
#
# Every run is "read x; cat FILE" at 120x30, FILE BENCH_MIB (32) MiB of
# text, with a 16 MiB ring and `listen ... sndbuf=4m`; wsfanout checks
# that every client got the controller's bytes, exactly, with no Error
# frame and one Closed.  FANOUT_TSV=file also writes
# the sweep as tab-separated values (observers, min and median MB/s, ratio).

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../lib";

use Test::More;
use Test::Nginx;
use Test::Nginx::Pty;

use lib $FindBin::Bin;
use BenchStats qw(median mmm);
use BenchPlot qw(svg_lines);

my $root = "$FindBin::Bin/../..";
my $wsfanout = "$root/build/wsfanout";
my $runs = $ENV{BENCH_RUNS} // 3;
my $mib = $ENV{BENCH_MIB} // 32;
my $observers = $ENV{FANOUT_OBSERVERS} // 32;
my @sweep = split /,/, $ENV{FANOUT_SWEEP} // '1,2,4,8,16,32';

-x $wsfanout or die "build t/bench first (make bench)\n";

# A fixed socket send buffer: with the kernel's autotuning, a few clients
# of one worker often fell behind the others until they left the ring
# (PTY_OUTPUT_LAGGED, and the run does not count); with a fixed buffer that
# became rarer, not gone: spurious tail loss probes on loopback cut some
# connections' congestion windows (docs/PERFORMANCE.md).  FANOUT_LISTEN
# replaces it (' ' for the kernel's defaults).  A ring of 16 MiB: a client
# this shared machine holds back for a moment must not fall out of it.
my $t = pty_nginx(workers => 2, reuseport => 1, zone => '256m',
    listen_opts => $ENV{FANOUT_LISTEN} // 'sndbuf=4m',
    extra_loc => 'pty_closed_linger 1s; pty_max_observers 64; '
        . 'pty_ring_size 16m;');
$t->run();

my $file = $t->testdir . '/plain.txt';
make_input($file);

# the workers' CPU time per run, which the machine's other load does not
# change much: what serving the clients costs
my $master = $t->read_file('nginx.pid') // die "no nginx.pid\n";
chomp $master;
my @workers = split ' ', `ps -o pid= --ppid $master`;
my $hz = `getconf CLK_TCK` || 100;
my ($cpu_one, $cpu_fan) = ([], []);

my (@single, @ratio_min, @ratio_med, @fan_min, @fan_med);

for (1 .. $runs) {
    my ($one) = fanout(0, $cpu_one);
    my @all = fanout($observers, $cpu_fan);
    push @single, $one;
    push @fan_min, (sort { $a <=> $b } @all)[0];
    push @fan_med, median(@all);
    push @ratio_min, $fan_min[-1] / $one;
    push @ratio_med, $fan_med[-1] / $one;
}

# each count paired with a single run of its own
my @rows;
for my $n (@sweep) {
    my ($one) = fanout(0);
    my @all = fanout($n);
    shift @all;     # the controller
    push @rows, [$n, (sort { $a <=> $b } @all)[0], median(@all),
        median(@all) / $one];
}

$t->stop();
done_testing();

if ($ENV{FANOUT_TSV}) {
    open my $fh, '>', $ENV{FANOUT_TSV} or die "$ENV{FANOUT_TSV}: $!\n";
    print $fh "observers\tmin_mbs\tmedian_mbs\tratio\n";
    printf $fh "%d\t%.1f\t%.1f\t%.2f\n", @$_ for @rows;
    close $fh;
}

my $target = 0.5;
print "\n";
printf "%-30s %-16s %-16s %-16s %-7s %s\n", 'figure', 'single MB/s',
    'per-client MB/s', 'ratio', 'target', 'result';
printf "%-30s %-16s %-16s %-16s %-7s %s\n",
    "fan-out $observers obs, min client", mmm(\@single), mmm(\@fan_min),
    mmm(\@ratio_min, '%.2f'), ">=$target",
    median(@ratio_min) >= $target ? 'pass' : 'FAIL';
printf "%-30s %-16s %-16s %-16s %-7s %s\n",
    "fan-out $observers obs, median", mmm(\@single), mmm(\@fan_med),
    mmm(\@ratio_med, '%.2f'), ">=$target",
    median(@ratio_med) >= $target ? 'pass' : 'FAIL';
printf "%-30s %-16s %-16s\n", 'workers CPU s per run, single',
    mmm($cpu_one, '%.2f'), '';
printf "%-30s %-16s %-16s\n", "workers CPU s per run, $observers obs",
    mmm($cpu_fan, '%.2f'), '';
print "\n(min/median/max over $runs runs, $mib MiB of text each, 120x30, "
    . "2 workers)\n\n";

printf "%-10s %-18s %-18s %s\n", 'observers', 'min MB/s', 'median MB/s',
    'median / single (paired)';
printf "%-10d %-18.1f %-18.1f %.2f\n", @$_ for @rows;

# the plot: MB/s per observer (median) by number of observers, against
# the single client's median
my ($max) = sort { $b <=> $a } median(@single), map { $_->[2] } @rows;
$max ||= 1;
print "\nthroughput by number of observers (MB/s per observer, median)\n";
printf "%-8s |%-50s %.1f\n", 'single', '=' x (median(@single) / $max * 50),
    median(@single);
printf "%-8s |%-50s %.1f\n", "$_->[0] obs", '#' x ($_->[2] / $max * 50),
    $_->[2] for @rows;

# the same as SVG (BENCH_PLOTS=0 skips it)
if (@rows && ($ENV{BENCH_PLOTS} // 1)) {
    svg_lines("$root/docs/img/fanout.svg",
        title => 'Fan-out: MB/s per client by number of observers',
        xlabel => 'observers (2 workers)', ylabel => 'MB/s per client',
        series => [
            { name => 'observer (median)',
              points => [ map { [ $_->[0], $_->[2] ] } @rows ] },
            { name => 'single client',
              points => [ map { [ $_->[0], median(@single) ] } @rows ] },
        ]);
    print "plot written to docs/img/fanout.svg\n";
}

# one run: the controller and $n observers; each client's MB/s, the
# controller first
sub fanout {
    my ($n, $cpu) = @_;
    my $s = start_session($t, "read x; cat $file", cols => 120, rows => 30);
    my $ticks = ticks();
    my @out = `$wsfanout @{[$t->port(8080)]} $s->{attach_path} $n 2 2>&1`;
    my $rc = $? >> 8;
    push @$cpu, (ticks() - $ticks) / $hz if $cpu;
    my (@rates, %workers, $got);
    for (@out) {
        my ($role, $pid, $bytes, $secs) =
            /^(controller|observer) (\d+) (\d+) ([\d.]+)/ or next;
        push @rates, $secs > 0 ? $bytes / $secs / 1e6 : 0;
        $workers{$pid}++;
        $got //= $bytes;
    }
    # every byte of the file (the tty adds a CR to every line)
    ok($rc == 0 && @rates == $n + 1 && $got >= -s $file,
        "$n observers: every client got every byte")
        or diag(join '', grep { !/^(controller|observer) / } @out);
    ok($n < 1 || keys %workers == 2, "$n observers: both workers serve")
        or diag(join '', @out);
    return @rates ? @rates : (0) x ($n + 1);
}

# user + system clock ticks of the workers
sub ticks {
    my $sum = 0;
    for my $pid (@workers) {
        open my $fh, '<', "/proc/$pid/stat" or next;
        my @f = split ' ', (<$fh> =~ s/^.*\) //r);
        $sum += $f[11] + $f[12];
    }
    return $sum;
}



sub make_input {
    my ($path) = @_;
    my $size = $mib << 20;
    my @words = qw/lorem ipsum dolor sit amet consectetur adipiscing elit sed
        do eiusmod tempor incididunt ut labore et dolore magna aliqua/;

    open my $fh, '>', $path or die "$path: $!\n";
    my ($n, $i) = (0, 0);
    while ($n < $size) {
        my $line = join(' ', map { $words[($i * 7 + $_) % @words] } 0 .. 14);
        $i++;
        print $fh "$line\n";
        $n += length($line) + 1;
    }
    close $fh;
}
