#!/usr/bin/perl

# What the archive (pty_archive) and redaction (pty_redact) cost, as
# ratios measured in one run:
#
#   throughput  one pty-ws/v1 client receiving BENCH_MIB MiB of plain text
#               from an nginx with the archive, or with redaction (the
#               built-in patterns), against the same from an nginx with
#               neither, alternated; and whether the archive kept up
#               (every frame stored, no gap)
#   worker CPU  what the workers' threads (the archive's pool among them)
#               spent per MiB of it, the archive's until it has stored it;
#               and SQLite alone storing as many bytes the same way
#               (build/sqlfloor), the floor of what storing costs
#   echo        the keystroke echo p50 with each and with neither
#   zone        zone pages in use after 1,000 short sessions have ended,
#               with and without it
#
# Run with `make bench-archive`; prints a table.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../lib";

use Test::More;
use Time::HiRes qw(time sleep);
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::PtyAPI qw(api_call);

use lib $FindBin::Bin;
use BenchStats qw(median mmm);

my $root = "$FindBin::Bin/../..";
my $wsbench = "$root/build/wsbench";
my $runs = $ENV{BENCH_RUNS} // 3;
my $mib = $ENV{BENCH_MIB} // 64;

my $sqlfloor = "$root/build/sqlfloor";

-x $wsbench && -x $sqlfloor
    or die "build t/bench first (make bench-archive)\n";

# one port for both: each figure restarts nginx with or without it
my $t = pty_nginx(zone => '256m',
    extra_http => '@ARCHIVE@',
    extra_loc => 'pty_closed_linger 1s; @REDACT@');
my $dir = $t->testdir;
mkdir("$dir/arch");
chmod(0777, "$dir/arch");
my $conf = $t->read_file('nginx.conf');

# 0: neither, 1: the archive, 2: redaction
sub nginx_with {
    my ($mode) = @_;
    $t->stop() if $t->is_running;
    (my $c = $conf) =~ s{\@ARCHIVE\@}{$mode == 1
        ? "pty_archive $dir/arch/pty.db keep_closed=1h;" : ''}e;
    $c =~ s{\@REDACT\@}{$mode == 2 ? 'pty_redact on;' : ''}ge;
    $t->write_file('nginx.conf', $c);
    $t->run();
}

open(my $fh, '>', "$dir/plain.txt") or die;
my $line = join(' ', map { "word$_" } 1 .. 12) . "\n";
print $fh $line x int(($mib << 20) / length $line);
close $fh;

# CPU seconds of the workers, every thread (the archive's pool too)
sub workers_cpu {
    my $sum = 0;
    for my $pid ($t->worker_pids) {
        for my $stat (glob "/proc/$pid/task/*/stat") {
            open(my $fh, '<', $stat) or next;
            my $line = <$fh>;
            # past the command's parentheses: utime and stime are 12, 13
            my @f = split ' ', substr($line, rindex($line, ')') + 2);
            $sum += $f[11] + $f[12];
        }
    }
    return $sum / 100;
}

my (%rate, %ratio, %last, %cpu, %cpu_ratio);
for my $run (1 .. $runs) {
    for my $arch (0, 1, 2) {
        nginx_with($arch);
        my $s = start_session($t, "read x; cat $dir/plain.txt",
            cols => 120, rows => 30);
        my $before = workers_cpu();
        my ($b, $secs) = split ' ',
            `$wsbench throughput @{[$t->port(8080)]} $s->{attach_path}`;
        if ($arch == 1) {
            # the writer's last batches come after the client has it all
            my $d = time + 30;
            my ($st, $j);
            while (time < $d) {
                ($st, $j) = api_call($t->port(8080), '/pty/transcript',
                    { id => $s->{id}, limit => 0 });
                last if $st == 200 && $j->{state} eq 'exited';
                sleep 0.05;
            }
        }
        push @{$cpu{$arch}}, (workers_cpu() - $before) * 1000 / $mib;
        push @{$rate{$arch}}, $b / $secs / 1e6;
        $last{$arch} = $s;
    }
    push @{$ratio{$_}}, $rate{$_}[-1] / $rate{0}[-1] for 1, 2;
    push @{$cpu_ratio{$_}}, $cpu{$_}[-1] / $cpu{0}[-1] for 1, 2;
    # the floor: SQLite alone storing as many bytes the same way
    my $floor = `$sqlfloor $dir/arch/floor.db $mib`;
    chomp $floor;
    push @{$cpu{floor}}, $floor;
}

# the last session of the archive's nginx: all of it stored, no gap?
nginx_with(1);
my ($st, $j);
my $deadline = time + 30;
while (time < $deadline) {
    ($st, $j) = api_call($t->port(8080), '/pty/transcript',
        { id => $last{1}{id}, limit => 0 });
    last if $st == 200 && $j->{state} eq 'exited';
    sleep 0.2;
}
ok($st == 200, 'the archive has the session');
is($j->{gaps}, 0, 'the archive kept up: no gap');

my (%echo, %echo_ratio, %zone);
for my $run (1 .. $runs) {
    for my $arch (0, 1, 2) {
        nginx_with($arch);
        my $s = start_session($t, 'cat', cols => 120, rows => 30);
        my @lat = sort { $a <=> $b } split /\n/,
            `$wsbench echo @{[$t->port(8080)]} $s->{attach_path} 2000`;
        push @{$echo{$arch}}, $lat[int(@lat / 2)];
    }
    push @{$echo_ratio{$_}}, $echo{$_}[-1] / $echo{0}[-1] for 1, 2;
}

for my $arch (0, 1) {
    nginx_with($arch);

    # zone use after 1,000 sessions that ended
    for (1 .. 1000) {
        api_call($t->port(8080), '/pty/start',
            { command => 'echo done', wait_ms => 0 });
    }
    my $d = time + 60;
    my $z;
    while (time < $d) {
        (undef, $z) = api_call($t->port(8080), '/pty/status', {});
        last if ($z->{sessions}{running} // 2) <= 1;
        sleep 0.5;
    }
    sleep 2;     # the linger (1 s) and the archive's last batch
    (undef, $z) = api_call($t->port(8080), '/pty/status', {});
    $zone{$arch} = $z->{zone}{used};
}

$t->stop();
done_testing();

print "\n";
printf "%-34s %-16s %-16s %-16s %-18s %s\n", 'figure', 'neither',
    'archive', 'redaction', 'archive ratio', 'redaction ratio';
printf "%-34s %-16s %-16s %-16s %-18s %s\n", 'throughput MB/s, plain text',
    mmm($rate{0}), mmm($rate{1}), mmm($rate{2}),
    mmm($ratio{1}, '%.2f'), mmm($ratio{2}, '%.2f');
printf "%-34s %-16s %-16s %-16s %-18s %s\n", 'worker CPU, ms per MiB',
    mmm($cpu{0}, '%.1f'), mmm($cpu{1}, '%.1f'), mmm($cpu{2}, '%.1f'),
    mmm($cpu_ratio{1}, '%.2f'), mmm($cpu_ratio{2}, '%.2f');
printf "%-34s %-16s %-16s\n", 'SQLite alone, CPU ms per MiB', '',
    mmm($cpu{floor}, '%.1f');
printf "%-34s %-16s %-16s %-16s %-18s %s\n", 'echo p50 (us)',
    mmm($echo{0}), mmm($echo{1}), mmm($echo{2}),
    mmm($echo_ratio{1}, '%.2f'), mmm($echo_ratio{2}, '%.2f');
printf "%-34s %-16s %-16s\n", 'zone used after 1,000 ended (KiB)',
    sprintf('%.0f', $zone{0} / 1024), sprintf('%.0f', $zone{1} / 1024);
print "(targets: throughput ratios >= 0.90)\n";
print "\n(min/median/max over $runs runs, $mib MiB each, 120x30)\n";
