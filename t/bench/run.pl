#!/usr/bin/perl

# Benchmarks: ratios measured in one run against the raw PTY rate of the
# same machine.  Run with `make bench`; prints a table.
#
#   throughput  A/B alternated pairs: rawpty (forkpty + read) and one
#               pty-ws/v1 client receiving and decoding every Output frame,
#               for several kinds of content at 120x30
#   echo        one keystroke as pty.session_input until its Output echo
#   keyframe    build/screenbench keyframe: one snapshot of a full screen
#
# Latency figures (the second half of this file):
#   echo, 1 worker    the echo on an nginx of one worker (the rows above
#                     run two: a client may be served across workers)
#   echo under flood  the echo while another session of the same worker
#                     floods `yes` to a client draining it
#   attach            connect + upgrade + join until the Keyframe, on a
#                     session with a full 120x30 screen
#   start             POST /pty/start until its wait_for mark appears,
#                     against forkpty() of the same `bash -lc` (ptylat)
# Plots (BENCH_PLOTS=0 skips them) are written as SVG into docs/img.
# BENCH_ONLY runs some sections only, a comma-separated list of
# throughput, echo, keyframe, echo1, flood, attach, start (or latency:
# the last four), e.g. BENCH_ONLY=start.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../lib";

use Test::More;
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::PtyAPI qw(api_call);

use lib $FindBin::Bin;
use BenchStats qw(median mmm);
use BenchPlot qw(svg_bars svg_lines cdf);

my $root = "$FindBin::Bin/../..";
my $rawpty = "$root/build/rawpty";
my $wsbench = "$root/build/wsbench";
my $runs = $ENV{BENCH_RUNS} // 3;
my $mib = $ENV{BENCH_MIB} // 64;
my %only = map { $_ eq 'latency' ? (echo1 => 1, flood => 1, attach => 1,
    start => 1) : ($_ => 1) } split /,/, $ENV{BENCH_ONLY} // '';

-x $rawpty && -x $wsbench or die "build t/bench first (make bench)\n";

# ended sessions give their memory back at once; every figure runs with
# the replay ring's default retention (it grows to keep 1000 frames)
my $t = pty_nginx(zone => '256m',
    extra_loc => 'pty_closed_linger 1s;');
$t->run();

my $dir = $t->testdir;
make_inputs($dir) if want('throughput');

my %content = (
    'plain text' => "cat $dir/plain.txt",
    'colour ls -lR' => "cat $dir/colour.txt",
    'CJK/emoji' => "cat $dir/cjk.txt",
    'TUI repaint' => "cat $dir/tui.txt",
    "yes ''" => "yes '' | head -c " . ($mib << 20),
);

my @rows;

for my $name ('plain text', 'colour ls -lR', 'CJK/emoji', 'TUI repaint',
    "yes ''")
{
    last unless want('throughput');

    my (@raw, @ws, @ratio);
    for (1 .. $runs) {
        my ($rb, $rs) = split ' ', `$rawpty 120 30 "$content{$name}"`;
        my $s = start_session($t, "read x; $content{$name}",
            cols => 120, rows => 30);
        my ($wb, $ws) = split ' ',
            `$wsbench throughput @{[$t->port(8080)]} $s->{attach_path}`;
        push @raw, $rb / $rs / 1e6;
        push @ws, $wb / $ws / 1e6;
        push @ratio, $ws[-1] / $raw[-1];
        ok($wb >= $rb * 0.99, "$name: every byte arrived ($wb of $rb)");
    }
    push @rows, [$name, \@raw, \@ws, \@ratio,
        $name eq 'plain text' ? 0.85 : 0.5];
}

# Keyframe cost: a snapshot of a full screen, worst content per geometry
my %kf;
for my $run (1 .. (want('keyframe') ? $runs : 0)) {
    for (split /\n/, `$root/build/screenbench keyframe`) {
        my ($what, $geo, $us) = split ' ';
        next unless defined $us && $us =~ /^[\d.]+$/;
        push @{$kf{$geo}{$run}}, $us;
    }
}

my @lat;
if (want('echo')) {
    my $s = start_session($t, 'cat', cols => 120, rows => 30);
    @lat = split /\n/,
        `$wsbench echo @{[$t->port(8080)]} $s->{attach_path} 2000`;
    ok(@lat == 2000, 'echo: 2000 keystrokes answered');
}

$t->stop();

my %latency = (grep { want($_) } qw(echo1 flood attach start))
    ? latency_figures() : ();
done_testing();

print "\n";
printf "%-24s %-26s %-26s %-22s %-7s %s\n", 'figure', 'raw PTY MB/s',
    'pty-ws/v1 MB/s', 'ratio', 'target', 'result';
for my $r (@rows) {
    my ($name, $raw, $ws, $ratio, $target) = @$r;
    printf "%-24s %-26s %-26s %-22s %-7s %s\n", "throughput: $name",
        mmm($raw), mmm($ws), mmm($ratio, '%.2f'), ">=$target",
        median(@$ratio) >= $target ? 'pass' : 'FAIL';
}
if (@lat) {
    my ($p50, $p99) = @lat[int(@lat * 0.5), int(@lat * 0.99)];
    printf "%-24s %-26s %-26s %-22s %-7s %s\n", 'echo p50 (us)', '', '',
        sprintf('%.0f', $p50), '<=60', $p50 <= 60 ? 'pass' : 'FAIL';
    printf "%-24s %-26s %-26s %-22s %-7s %s\n", 'echo p99 (us)', '', '',
        sprintf('%.0f', $p99), '<=150', $p99 <= 150 ? 'pass' : 'FAIL';
}
for ([ '120x30', 50 ], [ '250x80', 250 ]) {
    my ($geo, $target) = @$_;
    next unless $kf{$geo};
    # per run, the most expensive content kind
    my @worst = map { (sort { $b <=> $a } @{$kf{$geo}{$_}})[0] }
        sort keys %{$kf{$geo}};
    printf "%-24s %-26s %-26s %-22s %-7s %s\n", "keyframe $geo (us)", '',
        '', mmm(\@worst, '%.1f'), "<=$target",
        median(@worst) <= $target ? 'pass' : 'FAIL';
}
latency_rows(%latency);
print "\n(min/median/max over $runs runs, $mib MiB each, 120x30;"
    . " keyframe: the costliest of plain, colour, CJK and TUI screens)\n";

plots(\@rows, $latency{idle_all}, $latency{flood_all})
    if ($ENV{BENCH_PLOTS} // 1) && !%only;

# a section to run: all of them unless BENCH_ONLY names some
sub want {
    my ($section) = @_;
    return !%only || $only{$section};
}



sub make_inputs {
    my ($dir) = @_;
    my $size = $mib << 20;
    my @words = qw/lorem ipsum dolor sit amet consectetur adipiscing elit sed
        do eiusmod tempor incididunt ut labore et dolore magna aliqua/;

    open my $p, '>', "$dir/plain.txt" or die;
    open my $c, '>', "$dir/colour.txt" or die;
    open my $k, '>', "$dir/cjk.txt" or die;
    my ($np, $nc, $nk, $i) = (0, 0, 0, 0);
    while ($np < $size || $nc < $size || $nk < $size) {
        my $line = join(' ', map { $words[($i * 7 + $_) % @words] } 0 .. 14);
        $i++;
        if ($np < $size) { print $p "$line\n"; $np += length($line) + 1 }
        if ($nc < $size) {
            my $l = sprintf("-rw-r--r-- 1 user user %8d Nov 30 12:00 "
                . "\e[01;3%dm%s\e[0m\n", $i, $i % 7 + 1, $words[$i % @words]);
            print $c $l; $nc += length $l;
        }
        if ($nk < $size) {
            my $l = "\x{e6}\x{bc}\x{a2}\x{e5}\x{ad}\x{97} \x{f0}\x{9f}\x{99}\x{82} "
                . "\x{e3}\x{81}\x{ab}\x{e3}\x{81}\x{bb}\x{e3}\x{82}\x{93} $line\n";
            print $k $l; $nk += length $l;
        }
    }
    close $_ for $p, $c, $k;

    # a top-like full-screen repaint: every row addressed, coloured, erased
    open my $u, '>', "$dir/tui.txt" or die;
    my $nu = 0;
    print $u "\e[?1049h\e[?25l";
    for (my $f = 0; $nu < $size; $f++) {
        my $frame = "\e[1;1H\e[44;37m frame $f\e[K\e[m";
        for my $r (2 .. 29) {
            $frame .= sprintf("\e[%d;1H\e[38;5;%dm%6d \e[1mroot\e[22m %5.1f "
                . "%-80s\e[m\e[K", $r, ($r + $f) % 256, $r * 37 + $f,
                ($r * $f % 1000) / 10, '/usr/bin/some-process --flag');
        }
        $frame .= "\e[30;1H\e[7m status \e[m\e[K";
        print $u $frame;
        $nu += length $frame;
    }
    print $u "\e[?1049l\e[?25h";
    close $u;
}


###############################################################################
# Latency figures: echo under flood, attach -> Keyframe, start -> output.

# One worker of its own: the client, the session and the flood all on the
# same event loop (with several, a client may land on a worker that does
# not own its session, and every frame crosses the doorbell).
sub latency_figures {
    my $t = pty_nginx(zone => '64m', workers => 1);
    $t->run();

    my $dir = $t->testdir;
    my $port = $t->port(8080);
    my $ptylat = "$root/build/ptylat";
    my %r;

    -x $ptylat or die "build t/bench first (make bench)\n";

    for (1 .. (want('echo1') ? $runs : 0)) {
        my $s = start_session($t, 'cat', cols => 120, rows => 30);
        my @l = split /\n/, `$wsbench echo $port $s->{attach_path} 2000`;
        api_call($port, '/pty/kill', { id => $s->{id} });
        ok(@l == 2000, 'echo, one worker: 2000 keystrokes answered');
        push @{ $r{idle_p50} }, $l[@l * 0.5];
        push @{ $r{idle_p99} }, $l[@l * 0.99];
        push @{ $r{idle_all} }, @l;
    }

    # the flood and the keystrokes share the worker's event loop
    for (1 .. (want('flood') ? $runs : 0)) {
        my $s = start_session($t, 'cat', cols => 120, rows => 30);
        my $f = start_session($t, 'read x; yes', cols => 120, rows => 30);
        open my $drain, '-|', "$wsbench throughput $port $f->{attach_path}"
            or die "wsbench: $!\n";
        select undef, undef, undef, 0.3;    # the flood is under way
        my @l = split /\n/, `$wsbench echo $port $s->{attach_path} 2000`;
        api_call($port, '/pty/kill', { id => $f->{id} });
        my ($fb, $fs) = split ' ', <$drain> // '0 1';
        close $drain;
        api_call($port, '/pty/kill', { id => $s->{id} });
        ok(@l == 2000 && $fb > 0, 'echo under flood: 2000 keystrokes '
            . 'answered while the flood was drained');
        push @{ $r{flood_p50} }, $l[@l * 0.5];
        push @{ $r{flood_p99} }, $l[@l * 0.99];
        push @{ $r{flood_rate} }, $fb / $fs / 1e6;
        push @{ $r{flood_all} }, @l;
    }

    # a full screen of 120-column lines, the program waiting for input
    if (want('attach')) {
        my ($st, $s) = api_call($port, '/pty/start', {
            command => q{for i in $(seq 1 40); do printf '%03d %0116d\n' }
                . q{$i $i; done; cat}, cols => 120, rows => 30,
            wait_for => '040 ' });
        for (1 .. $runs) {
            my @l = map { [split] } split /\n/,
                `$wsbench attach $port $s->{attach_path} 200`;
            ok(@l == 200, 'attach: 200 Keyframes received');
            push @{ $r{attach} }, $l[@l / 2][0];
            push @{ $r{attach_join} }, $l[@l / 2][1];
        }
        api_call($port, '/pty/kill', { id => $s->{id} });
    }

    # the floor runs the session's own command line in the session's
    # environment (the keeper's defaults, HOME as pty_env sets it)
    my $cmd = 'echo READY; exec sleep 30';
    my $env = "env -i HOME=$dir TERM=xterm-256color COLORTERM=truecolor "
        . 'LANG=C.UTF-8 PATH=/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:'
        . '/usr/sbin:/sbin';
    for (1 .. (want('start') ? $runs : 0)) {
        my @floor = split /\n/,
            `$env $ptylat start 10 /bin/bash -lc '$cmd'`;
        my @api = split /\n/, `$wsbench start $port 10 '$cmd' READY`;
        ok(@floor == 10 && @api == 10, 'start: 10 sessions printed READY');
        push @{ $r{start_floor} }, $floor[5];
        push @{ $r{start_api} }, $api[5];
        push @{ $r{start_ratio} }, $api[5] / $floor[5];
    }

    $t->stop();

    return %r;
}

sub latency_rows {
    my (%r) = @_;
    my $row = "%-24s %-26s %-26s %-22s %-7s %s\n";

    if ($r{idle_p50}) {
        printf $row, 'echo p50, 1 worker', '', '', mmm($r{idle_p50}),
            '<=60', median(@{ $r{idle_p50} }) <= 60 ? 'pass' : 'FAIL';
        printf $row, 'echo p99, 1 worker', '', '', mmm($r{idle_p99}),
            '<=150', median(@{ $r{idle_p99} }) <= 150 ? 'pass' : 'FAIL';
    }
    if ($r{flood_p50}) {
        printf $row, 'echo p50 under flood', '', '', mmm($r{flood_p50}),
            '', '';
        printf $row, 'echo p99 under flood', '', '', mmm($r{flood_p99}),
            '<=2000', median(@{ $r{flood_p99} }) <= 2000 ? 'pass' : 'FAIL';
    }
    if ($r{attach}) {
        printf $row, 'attach->Keyframe (us)', '', '', mmm($r{attach}),
            '<=1000', median(@{ $r{attach} }) <= 1000 ? 'pass' : 'FAIL';
        printf $row, '  of which join (us)', '', '', mmm($r{attach_join}),
            '', '';
    }
    if ($r{start_ratio}) {
        printf $row, 'start->output (us)', 'floor ' . mmm($r{start_floor}),
            'API ' . mmm($r{start_api}), mmm($r{start_ratio}, '%.2f'),
            '<=1.2', median(@{ $r{start_ratio} }) <= 1.2 ? 'pass' : 'FAIL';
    }
    printf "\n(flood: `yes` drained at %s MB/s; echo and flood in us, "
        . "2000 keystrokes a run; attach: median of 200 a run; start: "
        . "median of 10 a run)\n", $r{flood_rate} ? mmm($r{flood_rate})
        : '-';
}

###############################################################################
# Plots: SVG files in docs/img, made by t/bench/BenchPlot.pm.

sub plots {
    my ($rows, $idle, $flood) = @_;
    my $img = "$root/docs/img";

    mkdir $img;

    svg_bars("$img/throughput.svg",
        title => 'Throughput by content type (median of the runs)',
        ylabel => 'MB/s',
        groups => [ map { $_->[0] } @$rows ],
        series => [
            { name => 'raw PTY', values => [ map { median(@{ $_->[1] }) }
                @$rows ] },
            { name => 'pty-ws/v1', values => [ map { median(@{ $_->[2] }) }
                @$rows ] },
        ]);

    svg_lines("$img/echo-cdf.svg",
        title => 'Keystroke echo latency, CDF', xlabel => 'microseconds',
        ylabel => 'fraction of keystrokes', xlog => 1, ymax => 1,
        marks => [ [150, 'idle p99 target'], [2000, 'flood p99 target'] ],
        series => [
            { name => 'idle', points => cdf(@$idle) },
            { name => 'under a flood', points => cdf(@$flood) },
        ]);

    print "plots written to docs/img\n";
}
