#!/usr/bin/perl

# pty_max_age ends a session that WebSocket clients are attached to: each
# connection gets exactly one Closed "timeout", no Output after it, then
# goodbye session_closed and close 1000 -- also when the program ignores
# SIGTERM and has to be killed.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Test::More;
use Time::HiRes qw(time);
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::PtyExt;

my $t = pty_nginx(extra_loc => 'pty_max_age 1s;');
$t->plan(9)->run();

sub ending {
    my ($ws, $what) = @_;
    my @f = $ws->recv_until(sub { $_[0]{op} eq 'binding_goodbye' }, 10,
        "$what: goodbye");
    my @c = grep { kind($_) eq 'Closed' } @f;
    my $seen = 0;
    my $after = grep { $seen ||= kind($_) eq 'Closed';
        $seen && kind($_) =~ /^(Output|Resize)$/ } @f;
    my ($code) = $ws->wait_close(5);
    ok(@c == 1 && $c[0]{payload}{reason} eq 'timeout' && !$after
        && $f[-1]{payload}{reason} eq 'session_closed'
        && ($code // 0) == 1000,
        "$what: one Closed timeout, nothing after, goodbye, 1000")
        or diag(join ' ', map { kind($_) } without_output(@f));
    return $c[0] ? $c[0]{payload} : {};
}

# the client loads its frame schemas on first use: not on the clock
Test::Nginx::PtyWS::validate_frame({});

# output flows until the limit; a controller and an observer attached
my $start = time;
my $s = start_session($t, 'while :; do echo tick; sleep 0.05; done');
my ($a) = attach_join($t, $s);
my ($b) = attach_join($t, $s, role => 'observer');
my $c = ending($a, 'controller');
my $took = time - $start;
ending($b, 'observer');
ok($took >= 0.9 && $took < 4, 'ended after about 1 s')
    or diag(sprintf '%.2f s', $took);
like($c->{detail} // '', qr/max_age/, 'the detail says why')
    or diag($c->{detail});

# the program ignores SIGTERM: still one Closed timeout
$start = time;
$s = start_session($t, 'trap "" TERM HUP; while :; do sleep 0.05; done');
($a) = attach_join($t, $s);
$c = ending($a, 'SIGTERM ignored');
$took = time - $start;
ok($took >= 0.9, 'not before its time') or diag(sprintf '%.2f s', $took);
is($c->{exit_code}, 137, 'killed: 128 + SIGKILL');

# joining afterwards replays the one Closed
my $late = attach($t, $s);
$late->recv_json(5);
$late->send_json({ op => 'pty.join_session', payload => { role => 'observer' },
    extensions => [EXT_URI], replay_from => 0 });
my @f = $late->recv_until(sub { $_[0]{op} eq 'binding_goodbye' }, 5,
    'late joiner: goodbye');
is(scalar(grep { kind($_) eq 'Closed' } @f), 1, 'a late joiner: one Closed');
is((grep { kind($_) eq 'Closed' } @f)[0]{payload}{reason}, 'timeout',
    'reason timeout');
