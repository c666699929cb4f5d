#!/usr/bin/perl

# pty_archive: every frame of a session is stored in SQLite, and after an
# nginx stop and start the transcript call gives the same frames (sequence,
# id, time and payload) as the live client saw.  A session still running
# at the stop is listed as ended by instance_terminated, its last stored
# frame the Closed that says so.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Test::More;
use JSON::PP ();
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::PtyAPI qw(api_call);
use Test::Nginx::PtyWS qw(session_frame_kind decode_output);

my $FRAMES = 5000;

my $t = pty_nginx(workers => 2,
    archive => 'batch=20ms',
    extra_loc => 'pty_input_rate off;');
$t->plan(20)->run();

my $port = $t->port(8080);

# cat echoes every line; each line and each resize is a frame of its own
my $s = start_session($t, 'exec cat');
my $quiet = start_session($t, 'exec sleep 1000');
my ($ws, $hello, @flush) = attach_join($t, $s);
my $joined = (grep { defined } map { $_->{sequence} } @flush)[-1];

my %seen;
my $record = sub {
    my ($m) = @_;
    $seen{$m->{sequence}} = $m
        if ($m->{op} // '') eq 'pty.session_frame' && defined $m->{sequence};
};
$record->($_) for @flush;

my $i = 0;
my $last = $joined;
while ($last < $joined + $FRAMES) {
    $i++;
    $ws->send_op('pty.session_resize',
        { cols => 80 + $i % 2, rows => 24 });
    send_input($ws, "l$i\r");
    # the echo, then cat's copy: the next line waits for both, or the
    # echo of one and cat's copy of the one before interleave
    my $out = '';
    my @f = $ws->recv_until(sub {
        $record->($_[0]);
        $out .= decode_output($_[0]);
        (() = $out =~ /l$i\r\n/g) >= 2 }, 10);
    last unless (() = $out =~ /l$i\r\n/g) >= 2;
    $last = (grep { defined } map { $_->{sequence} } @f)[-1] // $last;
}
ok($last >= $joined + $FRAMES, "$FRAMES frames made ($i lines)");

send_input($ws, "\x04");
my @end = $ws->recv_until(sub {
    $record->($_[0]);
    (session_frame_kind($_[0]) // '') eq 'Closed' }, 10);
is(session_frame_kind($end[-1]), 'Closed', 'the session ended');
my $closed = $end[-1]{sequence};

# what the live client saw of everyone's frames: the flush of its join
# (its RoleAssigned and Keyframe were for it alone) is left out
my @live = map { $seen{$_} } sort { $a <=> $b } grep { $_ > $joined }
    keys %seen;

$t->stop();
ok(-s $t->testdir . '/arch/pty.db', 'the archive file is there');
# programs run as other users: the file is the workers' user's alone
is(sprintf('%o', (stat($t->testdir . '/arch/pty.db'))[2] & 0777), '600',
    'mode 0600');
$t->run();

sub transcript {
    my ($id, %o) = @_;
    my @frames;
    my $from = 1;
    my $head;
    while (1) {
        my ($st, $j, $body) = api_call($port, '/pty/transcript',
            { id => $id, from => $from, limit => 2000, %o });
        return ($st, $j, $body) unless $st == 200;
        $head //= $j;
        $head->{text} //= $j->{text};
        push @frames, @{$j->{frames}};
        last unless defined $j->{next};
        $from = $j->{next};
    }
    return (200, $head, \@frames);
}

my ($st, $tr, $frames) = transcript($s->{id}, text => JSON::PP::true());
is($st, 200, 'transcript after the restart') or diag explain $tr;
my %stored = map { $_->{sequence} => $_ } @$frames;
is($tr->{state}, 'exited', 'the session is listed as exited');
is($tr->{reason}, 'normal', 'ended by itself');
is($tr->{exit_code}, 0, 'with its exit code');
is(($stored{$closed} // {})->{payload}{kind}, 'Closed', 'its Closed is stored');

my @seqs = map { $_->{sequence} } @$frames;
is_deeply(\@seqs, [sort { $a <=> $b } @seqs], 'frames in sequence order');
cmp_ok(scalar(@$frames), '>=', $FRAMES, 'at least the frames made');

my @missing = grep { !$stored{$_->{sequence}} } @live;
is(scalar(@missing), 0, 'every frame the client saw is stored')
    or diag explain [map { $_->{sequence} } @missing[0 .. 4]];
my @differ = grep { $stored{$_->{sequence}}
    && !frame_eq($stored{$_->{sequence}}, $_) } @live;
is(scalar(@differ), 0, 'with the same id, time and payload')
    or diag explain [$differ[0], $stored{$differ[0]{sequence}}];

# the terminal echoes each line, and cat prints it again
like($tr->{text}, qr/^l1\nl1\nl2\nl2\n.*\nl$i\nl$i\n$/s,
    'the settled text of its output');

my ($st2, $q, $qf) = transcript($quiet->{id});
is($qf->[-1]{payload}{kind}, 'Closed', 'a running session was ended');
is($q->{reason}, 'instance_terminated', 'by instance_terminated');

my ($st3, $none) = api_call($port, '/pty/transcript', { id => 'pty-1000000' });
is($st3, 404, 'an unknown session is not found');

# list: the zone has forgotten them, the archive lists them
my ($st4, $l) = api_call($port, '/pty/list', { archived => JSON::PP::true() });
my %listed = map { $_->{session_id} => $_ } @{$l->{sessions}};
my $mine = $listed{$s->{session_id}};
ok($mine && $mine->{archived} && $mine->{state} eq 'exited'
    && $mine->{exit_code} == 0, 'the earlier run\'s sessions are listed');
is(($listed{$quiet->{session_id}} // {})->{reason}, 'instance_terminated',
    'the one nginx went away under, as such');
my ($st5, $l2) = api_call($port, '/pty/list', {});
ok(!(grep { $_->{session_id} eq $s->{session_id} } @{$l2->{sessions}}),
    'without "archived", only the zone\'s');

sub frame_eq {
    my ($x, $y) = @_;
    return $x->{id} eq $y->{id} && $x->{ts} eq $y->{ts}
        && Test::Nginx::PtyWS::json_encode($x->{payload})
           eq Test::Nginx::PtyWS::json_encode($y->{payload});
}
