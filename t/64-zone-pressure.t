#!/usr/bin/perl

# Ended sessions must not keep live ones out of the zone (docs/ARCHITECTURE.md,
# "Shared zone"): an ended session with nobody joined is cut down to what a
# late reader gets (its last Keyframe, Closed, the output the API has not
# read), and when the zone is full the oldest ended sessions are forgotten
# before their pty_closed_linger is over, so that a start, a join and input
# of a live session still find room.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Test::More;
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::PtyExt;
use Test::Nginx::PtyAPI qw(api_call);

my $t = pty_nginx(workers => 2, zone => '256k',
    extra_loc => 'pty_closed_linger 5m;');
$t->run();

my $port = $t->port(8080);

# 200 short sessions back to back, each waited for until it has ended
my ($ok, $first) = (0, undef);
for my $i (1 .. 200) {
    my ($st, $r) = api_call($port, '/pty/start', { command => 'true',
        wait_ms => 5000 });
    last unless $st == 200;
    $first //= $r->{id};
    for (1 .. 50) {
        last if !$r->{running};
        ($st, $r) = api_call($port, '/pty/write', { id => $r->{id},
            wait_ms => 100 });
        last unless $st == 200;
    }
    $ok++ if $st == 200 && !$r->{running};
}
is($ok, 200, '200 short sessions started and ended');

# what the ended ones still hold: less than a new session's rings
my (undef, $zs) = api_call($port, '/pty/status', {});
my $n = $zs->{sessions}{total} || 1;
cmp_ok($zs->{buffers}{ring} / $n, '<', 2048, sprintf('ring per ended '
    . 'session: %d bytes (%d sessions lingering)',
    $zs->{buffers}{ring} / $n, $n));
cmp_ok($zs->{buffers}{scrollback} / $n, '<', 1024, sprintf('scrollback per '
    . 'ended session: %d bytes', $zs->{buffers}{scrollback} / $n));

# the newest ended one has output nobody read, and an exit code
my ($st, $r) = api_call($port, '/pty/start', {
    command => 'for i in $(seq 1 40); do echo "late line $i"; done; exit 7',
    wait_ms => 0 });
is($st, 200, 'a session that prints and exits 7');
my $late = $r;
for (1 .. 100) {
    ($st, $r) = api_call($port, '/pty/list', {});
    my ($me) = grep { $_->{id} eq $late->{id} } @{$r->{sessions} // []};
    last if $me && !$me->{running};
    select undef, undef, undef, 0.05;
}

# a live session still starts, takes input and answers
($st, $r) = api_call($port, '/pty/start', { command => 'cat',
    wait_ms => 1000 });
is($st, 200, 'a new cat session starts') or diag(explain $r);
my $cat = $r;
SKIP: {
    skip 'no cat session', 4 unless $st == 200;

    ($st, $r) = api_call($port, '/pty/write', { id => $cat->{id},
        input => 'zone-echo-1', submit => \1, wait_for => "zone-echo-1",
        wait_ms => 5000 });
    is($st, 200, 'its input is taken');
    ok($r->{matched} && $r->{output} =~ /^zone-echo-1\nzone-echo-1\n/,
        'and its output comes back') or diag(explain $r);

    # a joiner on it (membership takes zone memory too), typing
    my ($ws, $hello, @flush) = attach_join($t, $cat, role => 'controller');
    ok((grep { kind($_) eq 'Keyframe' } @flush), 'a join of it works');
    send_input($ws, "zone-echo-2\r");
    my $out = read_output($ws, qr/zone-echo-2\r\nzone-echo-2/, 5);
    like($out, qr/zone-echo-2\r\nzone-echo-2/, 'WebSocket input and output');
    $ws->close;
}

# the ended session is still there for a late reader: its Closed, exit
# code 7, its last screen and the output the API had not read
my $ws = attach($t, $late);
ok($ws->upgraded, 'attach to the ended session');
$ws->recv_json(5);
$ws->send_json({ op => 'pty.join_session', payload => { role => 'observer' },
    extensions => [EXT_URI], replay_from => 0 });
my @f = $ws->recv_until(sub { $_[0]{op} eq 'binding_goodbye' }, 5);
my @closed = grep { kind($_) eq 'Closed' } @f;
is(scalar @closed, 1, 'a late joiner gets exactly one Closed');
is($closed[0] && $closed[0]{payload}{exit_code}, 7, 'with exit code 7');
my ($kf) = grep { kind($_) eq 'Keyframe' } @f;
ok($kf, 'and a Keyframe');
$ws->close;

($st, $r) = api_call($port, '/pty/read', { id => $late->{id} });
is($st, 200, 'the API reads the ended session');
like($r->{screen} // '', qr/late line 40/, 'its last screen');
is($r->{exit_code}, 7, 'its exit code');
($st, $r) = api_call($port, '/pty/write', { id => $late->{id}, wait_ms => 0 });
like($r->{output} // '', qr/late line 1\n.*late line 40/s,
    'the output the API had not read');

# the first short session went first, ahead of its linger
($st, $r) = api_call($port, '/pty/read', { id => $first });
is($st, 404, 'the oldest ended session was forgotten early');

my $log = $t->read_file('error.log');
like($log, qr/forgotten before its pty_closed_linger: the shared zone is full/,
    'the log says why');
unlike($log, qr/\[(alert|emerg|crit)\]/, 'no alerts');

api_call($port, '/pty/kill', { id => $cat->{id} }) if $cat->{id};

$t->done_testing();
