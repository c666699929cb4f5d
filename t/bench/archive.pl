#!/usr/bin/perl

# What the archive costs (pty_archive): output throughput to one client
# with and without it, in alternated pairs on the same machine (the ratio
# is what counts: target >= 0.90), the archive writer's CPU time per MiB
# stored, and the zone after 1,000 short sessions with and without it.
# Run with `make bench-archive` (BENCH_RUNS, BENCH_MIB as for run.pl).

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../lib";

use Test::More;
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::PtyAPI qw(api_call);
use Test::Nginx::PtyArchive;

use lib $FindBin::Bin;
use BenchStats qw(median mmm);

my $root = "$FindBin::Bin/../..";
my $wsbench = "$root/build/wsbench";
my $runs = $ENV{BENCH_RUNS} // 3;
my $mib = $ENV{BENCH_MIB} // 32;

-x $wsbench or die "build t/bench first (make bench)\n";

# one nginx, the archive switched on and off by reloads between runs
my $t = pty_nginx(zone => '256m', extra_loc => 'pty_closed_linger 1s;',
    extra_http => '@ARCHIVE@');
archive_dir($t);
my $tpl = $t->{_templates}{'nginx.conf'};
my %conf = (0 => $tpl =~ s/\@ARCHIVE\@//r,
    1 => $tpl =~ s{\@ARCHIVE\@}{pty_archive %%TESTDIR%%/archive/pty.db; pty_archive_max_size 4g;}r);
$t->write_file_expand('nginx.conf', $conf{1});
$t->run();
my $archive = 1;
my $cpu = 0;

sub archive {
    my ($with) = @_;
    return if $archive == $with;
    my $w = archive_writer($t);
    $cpu += cpu_seconds($w) if $w;
    $t->write_file_expand('nginx.conf', $conf{$with});
    $t->reload() or die "reload failed\n";
    $t->wait_until(sub { $with ? archive_writer($t) : !archive_writer($t) },
        20);
    $archive = $with;
}

my %content = (
    'plain text' => "seq 1 100000000 | head -c " . ($mib << 20),
    "yes ''" => "yes '' | head -c " . ($mib << 20),
);

sub throughput {
    my ($with, $cmd) = @_;
    archive($with);
    my $s = start_session($t, "read x; $cmd", cols => 120, rows => 30);
    my ($b, $secs) = split ' ',
        `$wsbench throughput @{[$t->port(8080)]} $s->{attach_path}`;
    return ($b // 0) / ($secs || 1) / 1e6;
}

sub cpu_seconds {
    my ($pid) = @_;
    open my $fh, '<', "/proc/$pid/stat" or return 0;
    my @f = split ' ', (<$fh> =~ s/^.*\) //r);
    return ($f[11] + $f[12]) / 100;
}

my @rows;
for my $name (sort keys %content) {
    my (@off, @on, @ratio);
    for (1 .. $runs) {
        push @off, throughput(0, $content{$name});
        push @on, throughput(1, $content{$name});
        push @ratio, $on[-1] / $off[-1];
    }
    push @rows, [$name, \@off, \@on, \@ratio];
}

# the writer's CPU for what it stored
archive(0);
my $stored = sql_one($t, 'SELECT sum(length(data)) FROM frames') / 2**20;

# 1,000 short sessions, each ended: what the zone keeps of them
my %zone;
for my $with (0, 1) {
    archive($with);
    my (undef, $before) = api_call($t->port(8080), '/pty/status', {});
    for my $i (1 .. 1000) {
        api_call($t->port(8080), '/pty/start', { command => "echo $i",
            wait_ms => 0 });
    }
    $t->wait_until(sub {
        my (undef, $st) = api_call($t->port(8080), '/pty/status', {});
        $st->{sessions}{running} == 0 }, 120);
    if ($with) {
        $t->wait_until(sub { sql_one($t, 'SELECT count(*) FROM sessions '
            . 'WHERE ended IS NOT NULL') >= 1000 }, 120);
    }
    my (undef, $after) = api_call($t->port(8080), '/pty/status', {});
    $zone{$with} = [$after->{zone}{used} - $before->{zone}{used},
        $after->{buffers}{ring} + $after->{buffers}{scrollback}];
}

$t->stop();
done_testing();

print "\n";
printf "%-24s %-24s %-24s %-20s %-7s %s\n", 'figure', 'without MB/s',
    'with archive MB/s', 'ratio', 'target', 'result';
for my $r (@rows) {
    my ($name, $off, $on, $ratio) = @$r;
    printf "%-24s %-24s %-24s %-20s %-7s %s\n", "throughput: $name",
        mmm($off), mmm($on), mmm($ratio, '%.2f'), '>=0.90',
        median(@$ratio) >= 0.90 ? 'pass' : 'FAIL';
}
printf "%-24s %.1f s for %.0f MiB stored: %.1f ms per MiB\n",
    'writer CPU', $cpu, $stored, $stored ? 1000 * $cpu / $stored : 0;
for my $with (0, 1) {
    printf "%-24s %.0f KiB of zone (rings and scrollbacks %.0f KiB)\n",
        '1,000 ended sessions, ' . ($with ? 'with' : 'without'),
        $zone{$with}[0] / 1024, $zone{$with}[1] / 1024;
}
print "\n(min/median/max over $runs alternated runs, $mib MiB each, "
    . "120x30)\n";
