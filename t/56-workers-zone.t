#!/usr/bin/perl

# A small zone and several workers: starting sessions until the zone is
# full gives a clear error and a log line naming pty_zone, never a crash;
# sessions that end give their memory back, so as many start again.  An
# idle session takes a few KiB of the zone: a long command line (kept in
# the zone) makes each take ~60 KiB, so that 1m fills in a few starts.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Test::More;
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::PtyAPI qw(api_call);
use Time::HiRes qw(sleep time);

my $t = pty_nginx(workers => 4, reuseport => 1, zone => '1m',
    extra_loc => 'pty_ring_size 64k; pty_ring_max_size 64k; '
        . 'pty_scrollback_size 4k; pty_closed_linger 100ms;');
$t->run();

my @workers = sort $t->worker_pids;

sub fill {
    my (@ids, $err, %by);
    for (1 .. 40) {
        my ($st, $r, $body, $h) = api_call($t->port(8080), '/pty/start',
            { command => 'exec sleep 60 #' . ('x' x 60000), wait_ms => 0 });
        if ($st != 200) { $err = [$st, $r]; last }
        push @ids, $r->{id};
        $by{$h->{'x-pty-worker'}}++;
    }
    return (\@ids, $err, scalar keys %by);
}

my ($ids, $err, $nw) = fill();
ok(@$ids >= 2, scalar(@$ids) . " sessions fit, started by $nw workers");
is($err->[0], 503, 'the next start: 503');
is($err->[1]{error}{code}, 'zone_full', 'zone_full');
ok(scalar $t->grep_error_log(qr/shared zone is full.*raise the size in "pty_zone"/),
    'the log names the directive to raise');

for my $id (@$ids) {
    my ($st) = api_call($t->port(8080), '/pty/kill', { id => $id });
    is($st, 200, "killed $id") or last;
}

# the records go after pty_closed_linger; then the zone has room again
sleep 0.5;
my ($again) = fill();
is(scalar @$again, scalar @$ids, 'as many sessions fit again');

is_deeply([sort $t->worker_pids], \@workers, 'no worker died');

api_call($t->port(8080), '/pty/kill', { id => $_ }) for @$again;

$t->done_testing();
