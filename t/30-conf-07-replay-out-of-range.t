#!/usr/bin/perl

# pty-extensions/v1 section 9, scenario 7: a replay_from older than the
# retained window: RoleAssigned, binding Error REPLAY_OUT_OF_RANGE, then a
# Keyframe, then live.  The ring keeps at least replay_buffer_frames.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Test::More;
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::PtyExt;
use Test::Nginx::PtyWS qw(decode_output);

# a small ring that must still keep 300 frames: it grows to hold them
my $t = pty_nginx(extra_loc => 'pty_ring_size 64k; '
    . 'pty_replay_buffer_frames 300; pty_ring_max_size 4m;');
$t->plan(11)->run();

my $s = start_session($t, SHELL);
my $ctl = attach($t, $s);
$ctl->recv_json(5);
join_flush($ctl);

# 400 paced bursts: more frames than the 300 kept (a burst is a frame or
# more, whatever the reads gather), slow enough for this client to follow;
# one process, not 800 forks, which take half a minute on a loaded machine
send_input($ctl, q#perl -e '$| = 1; for (1 .. 400) { print map("$_\n", #
    . q#1 .. 200); select undef, undef, undef, 0.005 } print "DO", "NE\n"'#
    . "\r");
read_output($ctl, qr/\nDONE\r\n.*ready\$ $/s, 60);
my @seen = seqs($ctl->json_seen);
my $last = $seen[-1];
cmp_ok($last, ">", 350, "many frames ($last)");

# stale cursor
my $ws = attach($t, $s);
$ws->recv_json(5);
my @flush = join_flush($ws, role => 'observer', replay_from => 1);
is_deeply([map { kind($_) } @flush],
    [qw/RoleAssigned Error MembershipChanged Keyframe/],
    'RoleAssigned, Error, MembershipChanged, Keyframe');
is($flush[1]{op}, 'Error', 'a binding-level Error');
is($flush[1]{payload}{code}, 'REPLAY_OUT_OF_RANGE', 'REPLAY_OUT_OF_RANGE');
ok($flush[1]{payload}{a2a_error}, 'with a2a_error');
is($flush[-1]{payload}{anchor_sequence}, (grep { kind($_) eq 'Output' }
    reverse $ctl->json_seen)[0]{sequence}, 'Keyframe anchored on the last '
    . 'Output');

# live afterwards
send_input($ctl, "echo LIVE\r");
like(read_output($ws, qr/LIVE\r\n/), qr/LIVE/, 'then live frames');

# the window still holds the last 300 frames: a cursor 290 back replays
my $ws2 = attach($t, $s);
$ws2->recv_json(5);
my $from = $last - 290;
@flush = join_flush($ws2, role => 'observer', replay_from => $from);
ok(!(grep { kind($_) eq 'Error' } @flush), 'cursor within 300: no error');
my @r = grep { $_->{sequence} < $flush[0]{sequence} } @flush[1 .. $#flush];
is($r[0]{sequence}, $from + 1, 'replay starts right after the cursor');
my %want = map { $_ => 1 } grep { $_ > $from } @seen;
is(scalar(grep { $want{$_->{sequence}} } @r), scalar(keys %want),
    'every frame the controller saw after it is replayed');
unlike($t->read_file('error.log'), qr/keeps fewer than/,
    'the ring grew instead of dropping below replay_buffer_frames');
