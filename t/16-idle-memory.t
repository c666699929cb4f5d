#!/usr/bin/perl

# Memory of idle sessions (docs/PERFORMANCE.md, "Memory"): a shell at its
# prompt takes a few KiB of the zone, not the rings' full sizes; the rings
# grow when output comes, the scrollback up to pty_scrollback_size with
# what it lost counted as missed; everything comes back when sessions end.
# The figures come from the API's status call and /proc.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Test::More;
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::PtyExt qw(SHELL);
use Test::Nginx::PtyAPI qw(api_call);
use Time::HiRes qw(sleep time);

my $n = 50;
my $zone_max = 16 * 1024;        # of the 128 KiB a session may cost
my $module_max = 128 * 1024;

my $t = pty_nginx(workers => 2, reuseport => 1, zone => '32m',
    extra_loc => 'pty_closed_linger 100ms;');
$t->run();

my @workers = $t->worker_pids;
my $base = status();
is($base->{sessions}{total}, 0, 'status: no sessions yet');
cmp_ok($base->{zone}{size}, '>', 30 << 20, 'status: the zone size');
is($base->{zone}{used} + $base->{zone}{free}, $base->{zone}{size},
    'status: used + free = size');
my $anon0 = 0;
$anon0 += rss_anon($_) for @workers;

my @ids;
for my $i (1 .. $n) {
    my ($st, $r) = api_call($t->port(8080), '/pty/start', { command => SHELL,
        cols => 120, rows => 30, wait_for => 'ready$ ', wait_ms => 10000 });
    last unless $st == 200 && $r->{matched};
    push @ids, $r->{id};
}
is(scalar @ids, $n, "$n shells at their prompt");

my $idle = status();
is($idle->{sessions}{total}, $n, "status: $n sessions");
is($idle->{sessions}{running}, $n, "status: $n running");
my $zone = ($idle->{zone}{used} - $base->{zone}{used}) / $n;
cmp_ok($zone, '<=', $zone_max, sprintf('zone per idle session: %.1f KiB',
    $zone / 1024));
my $bufs = ($idle->{buffers}{ring} + $idle->{buffers}{scrollback}
    + $idle->{buffers}{inbox}) / $n;
cmp_ok($bufs, '<=', 8192, sprintf('rings and inbox per idle session: '
    . '%.1f KiB, not their full sizes', $bufs / 1024));

my $anon = 0;
$anon += rss_anon($_) for @workers;
my $worker = ($anon - $anon0) / $n;
cmp_ok($zone + $worker, '<=', $module_max, sprintf('zone + worker per idle '
    . 'session: %.1f KiB (worker %.1f)', ($zone + $worker) / 1024,
    $worker / 1024));

# output makes one session's rings grow; the scrollback stops at its size
my ($st, $r) = api_call($t->port(8080), '/pty/write', { id => $ids[0],
    input => 'seq 1 70000; echo E""ND', submit => \1, wait_ms => 0 });
is($st, 200, 'a session prints 400 KB');
my $grown = wait_until(sub {
    my $s = status();
    $s->{buffers}{scrollback_used} - $idle->{buffers}{scrollback_used}
        >= 256 * 1024 - 4096 ? $s : undef;
});
ok($grown, 'its scrollback grew');
is($grown->{buffers}{scrollback} - $idle->{buffers}{scrollback},
    256 * 1024 - 1024, 'to pty_scrollback_size and no further');
cmp_ok($grown->{buffers}{ring} - $idle->{buffers}{ring}, '>', 64 * 1024,
    'its frame ring grew');

# what the scrollback could not keep is counted, the rest is read: once
# all of it is printed (read shows the screen and takes nothing), or a
# reader keeping up with a slow machine's seq would miss nothing
ok(wait_until(sub {
    my (undef, $sc) = api_call($t->port(8080), '/pty/read', { id => $ids[0] });
    ($sc->{screen} // '') =~ /^END$/m }), 'the program printed it all');
my ($missed, $out) = (0, '');
for (1 .. 40) {
    ($st, $r) = api_call($t->port(8080), '/pty/write', { id => $ids[0],
        wait_for => 'END', wait_ms => 5000 });
    last unless $st == 200;
    $missed += $r->{missed};
    $out .= $r->{output};
    last if $out =~ /^END$/m && !$r->{more};
}
like($out, qr/^70000\nEND$/m, 'the API reads to the end');
cmp_ok($missed, '>', 0, "what was overwritten is reported missed ($missed)");
unlike($out, qr/^1\n2\n3\n/m, 'the start of it is gone');

# everything comes back
for my $id (@ids) {
    ($st) = api_call($t->port(8080), '/pty/kill', { id => $id });
    $st == 200 or last;
}
my $end = wait_until(sub {
    my $s = status();
    $s->{sessions}{total} == 0 ? $s : undef;
});
ok($end, 'every session gone');
is($end && $end->{zone}{used}, $base->{zone}{used},
    'the zone is as it was before the sessions');
is($end && $end->{buffers}{ring} + $end->{buffers}{scrollback}, 0,
    'no ring left');

$t->done_testing();

sub status {
    my ($st, $r) = api_call($t->port(8080), '/pty/status', {});
    die "status: " . ($st // 'no answer') . "\n" unless $st && $st == 200;
    return $r;
}

sub rss_anon {
    my ($pid) = @_;
    open my $fh, '<', "/proc/$pid/status" or return 0;
    while (my $line = <$fh>) {
        return $1 * 1024 if $line =~ /^RssAnon:\s+(\d+)/;
    }
    return 0;
}

sub wait_until {
    my ($cond, $timeout) = @_;
    my $deadline = time + ($timeout // 10);
    while (time < $deadline) {
        my $r = $cond->();
        return $r if $r;
        sleep 0.05;
    }
    return undef;
}
