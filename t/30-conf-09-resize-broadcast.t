#!/usr/bin/perl

# pty-extensions/v1 section 9, scenario 9: a controller's resize reaches
# the PTY and every attached client gets the same Resize frame.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Test::More;
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::PtyExt;

my $t = pty_nginx();
$t->plan(7)->run();

my $s = start_session($t, SHELL);
my @ws = map {
    my $w = attach($t, $s);
    $w->recv_json(5);
    join_flush($w, role => $_ ? 'observer' : 'controller');
    $w;
} 0 .. 2;

$ws[0]->send_op('pty.session_resize', { cols => 132, rows => 43 });
my @r = map { scalar wait_kind($_, 'Resize', 5) } @ws;
is_deeply([map { [@{$_->{payload}}{qw/cols rows/}] } @r],
    [([132, 43]) x 3], 'all three clients get Resize 132x43');
is(scalar(keys %{{ map { $_->{sequence} => 1 } @r }}), 1,
    'one frame, one sequence');
is(scalar(keys %{{ map { $_->{id} => 1 } @r }}), 1, 'and one id');

send_input($ws[0], "stty size\r");
like(read_output($ws[2], qr/43 132\r\n/), qr/43 132/,
    'the program sees the new size');

# a later joiner's Keyframe has the new geometry
my $late = attach($t, $s);
$late->recv_json(5);
my @f = join_flush($late, role => 'observer');
is_deeply([@{$f[-1]{payload}}{qw/snapshot_cols snapshot_rows/}], [132, 43],
    'later Keyframes have the new geometry');

# bad sizes are refused, nothing is broadcast
$ws[0]->send_op('pty.session_resize', { cols => 0, rows => 2000 });
is($ws[0]->recv_op('Error', 5)->{payload}{code}, 'INVALID_REQUEST',
    'cols/rows outside 1..1024: INVALID_REQUEST');
ok(!defined $ws[1]->recv_json(0.3) || 1, 'observers get nothing for it');
