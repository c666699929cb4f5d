#!/usr/bin/perl

# Clients of one worker share the frames it serializes: a controller and
# three observers of a flood of several hundred frames (more than the
# worker keeps built, so some are served from what another client had
# built and some are built again) each get every line in order, the same
# Output frames under the same sequences, and one Closed.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Test::More;
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::PtyExt;
use Test::Nginx::PtyWS qw(decode_output);

# the ring keeps the whole flood, however many reads it took: the observers
# read it after the controller (and are not read for that long: no Ping)
my $t = pty_nginx(extra_loc => 'pty_ring_size 16m; pty_ring_max_size 32m; '
    . 'pty_ws_ping_interval 600s;');
$t->plan(1 + 4 * 4)->run();

my $lines = 300000;
my $s = start_session($t, "read -p go? x; seq 1 $lines; echo DO\"\"NE");

my $ctl = attach($t, $s);
$ctl->recv_json(5);
my @seen = join_flush($ctl, replay_from => 0);

my @obs;
for (1 .. 3) {
    my $ws = attach($t, $s);
    $ws->recv_json(5);
    join_flush($ws, role => 'observer');
    push @obs, $ws;
}

go($ctl, @seen);

my (%frames, @order);
for my $c (['controller', $ctl], map { ["observer $_", $obs[$_ - 1]] } 1 .. 3) {
    my ($name, $ws) = @$c;
    my @f = $ws->recv_until(sub { kind($_[0]) eq 'Closed' }, 60,
        "$name gets to Closed");
    my @nums = decode_output(@f) =~ /^(\d+)\r$/mg;
    is(scalar @nums, $lines, "$name: all $lines lines");
    ok(!(grep { $nums[$_] != $_ + 1 } 0 .. $#nums), "$name: in order");
    ok(!(grep { kind($_) eq 'Error' } @f), "$name: no Error frame");
    $frames{$name} = [map { [$_->{sequence}, $_->{payload}{data}] }
        grep { kind($_) eq 'Output' } @f];
    push @order, $name;
}

# from the first frame everyone was owed (the prompt may have come to
# the controller only), the same frames, byte for byte, the same sequences
my ($from) = sort { $b <=> $a } map { $frames{$_}[0][0] // 0 } @order;
my %text = map { my $n = $_; ($n => join ',', map { "$_->[0]:$_->[1]" }
    grep { $_->[0] >= $from } @{$frames{$n}}) } @order;
for my $name (@order) {
    ok($text{$name} eq $text{controller},
        "$name: the controller's Output frames") or diag("$name differs");
}

cmp_ok(scalar @{$frames{controller}}, '>', 256,
    'more Output frames than a worker keeps built');
