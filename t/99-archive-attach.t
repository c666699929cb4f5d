#!/usr/bin/perl

# A WebSocket attach to a session of an earlier nginx run: the archive
# brings it back as an ended session.  A join gets its final screen and
# its Closed, then goodbye and close 1000; replay_from 0 gives every frame
# the live client saw, with the same sequences, ids, times and payloads.
# A session nginx stopped under ends with instance_terminated; an unknown
# one is not found; both workers serve it, the first to bring it back.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Test::More;
use MIME::Base64 qw(decode_base64);
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::PtyAPI qw(api_call);
use Test::Nginx::PtyWS qw(session_frame_kind decode_output json_encode);

my $LINES = 250;

my $t = pty_nginx(workers => 2,
    archive => 'batch=20ms',
    extra_loc => 'pty_input_rate off;');
$t->plan(23)->run();

# the live client records every frame for everyone (not its own flush)
my $s = start_session($t, 'exec cat');
my ($ws, $hello, @flush) = attach_join($t, $s);
my $joined = (grep { defined } map { $_->{sequence} } @flush)[-1];
my %seen;
my $record = sub {
    my ($m) = @_;
    $seen{$m->{sequence}} = $m
        if ($m->{op} // '') eq 'pty.session_frame' && defined $m->{sequence}
            && $m->{sequence} > $joined;
};

for my $i (1 .. $LINES) {
    send_input($ws, "line-$i\r");
    my $out = '';
    $ws->recv_until(sub {
        $record->($_[0]);
        $out .= decode_output($_[0]);
        (() = $out =~ /line-$i\r\n/g) >= 2 }, 10);
}
send_input($ws, "\x04");
my @end = $ws->recv_until(sub { $record->($_[0]);
    (session_frame_kind($_[0]) // '') eq 'Closed' }, 10);
my $closed = $end[-1];
is(session_frame_kind($closed), 'Closed', 'the session ended');

# another, still running when nginx stops
my $run = start_session($t, 'echo still-running; exec sleep 1000');
my ($rws, undef, @runflush) = attach_join($t, $run);
# printed before the join (then the join's Keyframe shows it) or after
$rws->recv_until(sub { decode_output($_[0]) =~ /still-running/ }, 10)
    unless grep { (decode_output($_) // '') =~ /still-running/
        || ((session_frame_kind($_) // '') eq 'Keyframe'
            && decode_base64($_->{payload}{snapshot}) =~ /still-running/) }
        @runflush;

$t->stop();

# the archive's newest frame of it, as the stop left it
my $py = 'import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); '
    . 'print(c.execute("SELECT max(f.seq) FROM frames f JOIN sessions s '
    . 'ON f.sid = s.sid WHERE s.id = ?", (sys.argv[2],)).fetchone()[0])';
sub archived_last {
    my $last = `python3 -c '$py' '@{[$t->testdir]}/arch/pty.db' '$s->{session_id}'`;
    chomp $last;
    return $last;
}
my $stored = archived_last();

$t->run();

sub frame_eq {
    my ($x, $y) = @_;
    return $x->{id} eq $y->{id} && $x->{ts} eq $y->{ts}
        && json_encode($x->{payload}) eq json_encode($y->{payload});
}

# the rest of a stream after the join's flush, up to goodbye and close
sub rest {
    my ($w) = @_;
    my @f = $w->recv_until(sub { ($_[0]{op} // '') eq 'binding_goodbye' },
        10);
    my ($code) = $w->wait_close(5);
    return ($code, @f);
}

# 1. a join: the final screen, Closed, goodbye, 1000
my ($one, undef, @aflush) = attach_join($t, $s, role => 'observer');
ok($one->upgraded, 'an earlier run\'s session attaches');
my $kf = $aflush[-1];
is(session_frame_kind($kf), 'Keyframe', 'a join gets a keyframe');
like(decode_base64($kf->{payload}{snapshot} // ''), qr/line-$LINES\e/,
    'of its final screen');
my ($code, @rest) = rest($one);
my @c = grep { (session_frame_kind($_) // '') eq 'Closed' } @rest;
is(scalar(@c), 1, 'then its Closed, once');
# a late joiner's copy of it, as for any ended session (the replay below
# gives the frame itself)
is(json_encode($c[0]{payload} // {}), json_encode($closed->{payload}),
    'how it ended, as it was');
is($rest[-1]{payload}{reason}, 'session_closed', 'goodbye: session_closed');
is($code, 1000, 'close 1000');

# 2. replay_from 0: every frame, as the live client saw them
my ($all, undef, @bflush) = attach_join($t, $s, role => 'observer',
    replay_from => 0);
my (undef, @brest) = rest($all);
my %got = map { $_->{sequence} => $_ }
    grep { ($_->{op} // '') eq 'pty.session_frame' && defined $_->{sequence} }
    @bflush, @brest;
my @live = map { $seen{$_} } sort { $a <=> $b } keys %seen;
my @missing = grep { !$got{$_->{sequence}} } @live;
is(scalar(@missing), 0, 'replay_from 0: every frame the live client saw')
    or diag explain [map { $_->{sequence} } @missing[0 .. 4]];
my @differ = grep { $got{$_->{sequence}}
    && !frame_eq($got{$_->{sequence}}, $_) } @live;
is(scalar(@differ), 0, 'with the same ids, times and payloads')
    or diag explain [$differ[0], $got{$differ[0]{sequence}}];
my ($first) = sort { $a <=> $b } keys %got;
ok($first <= $joined, "from before the live client joined ($first)");
ok($got{$closed->{sequence}} && frame_eq($got{$closed->{sequence}}, $closed),
    'its Closed itself');
my @errors = grep { ($_->{op} // '') eq 'error'
    || ($_->{payload}{kind} // '') eq 'Error' } @bflush, @brest;
is(scalar(@errors), 0, 'no error on the way') or diag explain \@errors;

# 3. the one nginx stopped under
my ($r, undef, @rflush) = attach_join($t, $run, role => 'observer');
my (undef, @rrest) = rest($r);
my ($rc) = grep { (session_frame_kind($_) // '') eq 'Closed' } @rrest;
is($rc && $rc->{payload}{reason}, 'instance_terminated',
    'a session nginx stopped under: instance_terminated');
like(decode_base64($rflush[-1]{payload}{snapshot} // ''), qr/still-running/,
    'its last screen');

# 4. both workers: whichever brought it back, the other finds it
my %workers;
for (1 .. 20) {
    my ($w, undef, @wf) = attach_join($t, $s, role => 'observer');
    my (undef, @wr) = rest($w);
    $workers{$w->response_header('X-Pty-Worker') // '?'}
        += (grep { (session_frame_kind($_) // '') eq 'Closed' } @wr) == 1;
    last if keys %workers >= 2;
}
ok(scalar(keys %workers) >= 1 && !grep({ !$_ } values %workers),
    'every attach gets its Closed (' . scalar(keys %workers)
    . ' worker(s))');

# 5. not in the archive either
my $gone = Test::Nginx::PtyWS->connect(port => $t->port(8080),
    path => $s->{attach_path} =~ s/[0-9a-f]{8}-/00000000-/r);
ok(!$gone->upgraded, 'an unknown session is not upgraded');
is($gone->status, 404, 'but not found');

# the zone lists it for a while, as any ended session
my (undef, $l) = api_call($t->port(8080), '/pty/list', {});
my ($listed) = grep { $_->{session_id} eq $s->{session_id} }
    @{$l->{sessions}};
is($listed && $listed->{state}, 'exited', 'listed as exited meanwhile');

# nothing of it is stored again
$t->wait_until(sub { 0 }, 0.2);     # a batch time and more: 20 ms
is(archived_last(), $stored, 'the archive has no frame of it more');

# the agent API on it meanwhile: its end, its last screen
my ($wst, $w) = api_call($t->port(8080), '/pty/write',
    { id => $s->{session_id}, wait_ms => 0 });
is($wst, 200, 'write: 200') or diag explain $w;
is($w->{state}, 'exited', 'write: exited');
my ($rst, $rd) = api_call($t->port(8080), '/pty/read',
    { id => $s->{session_id} });
like($rd->{screen} // "", qr/line-$LINES/,
    'read: its last screen') or diag explain [$rst, $rd];
