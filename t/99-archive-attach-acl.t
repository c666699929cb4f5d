#!/usr/bin/perl

# An earlier run's session comes back from the archive only for whom its
# access list admits: another principal gets 404, as for a live session,
# and the zone does not take the session in for that; its starter, and a
# principal it was shared with, attach and get its end.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Test::More;
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::PtyAPI qw(api_call);
use Test::Nginx::PtyAuth;
use Test::Nginx::PtyWS qw(session_frame_kind);
use Test::Nginx::PtyExt;

my $t = pty_nginx(auth => '',
    archive => 'batch=20ms',
    extra_server => AUTH_LOCATION,
    extra_loc => AUTH_ATTACH . ' pty_share observe principal=paul;');
auth_server($t, 8081);
$t->plan(7)->run();

my $port = $t->port(8080);
my $all = 'pty:observe pty:control pty:start pty:kill';
my %tok = (alice => token('alice', $all, 600), bob => token('bob', $all, 600),
    paul => token('paul', 'pty:observe', 600),
    root => token('root', 'pty:admin', 600));

sub api {
    my ($who, $call, $body) = @_;
    my ($st, $j) = api_call($port, "/pty/$call", $body,
        headers => { bearer($tok{$who}) });
    return ($st, $j);
}

my ($st0, $s) = api('alice', 'start', { command => 'echo done-42',
    wait_for => 'done-42', wait_ms => 5000 });
die "start: $st0\n" unless $st0 == 200;
$t->wait_until(sub { (api('alice', 'list', {}))[1]{sessions}[0]{state}
    eq 'exited' }, 10);
$t->stop();
$t->run();

sub in_zone {
    my (undef, $l) = api('root', 'list', {});
    return scalar grep { $_->{session_id} eq $s->{session_id} }
        @{$l->{sessions}};
}

sub attach_as {
    my ($who) = @_;
    return Test::Nginx::PtyWS->connect(port => $port,
        path => $s->{attach_path}, headers => { bearer($tok{$who}) });
}

my $ws = attach_as('bob');
is($ws->status, 404, 'another principal: 404');
is(in_zone(), 0, 'and the zone did not take it in');

for my $who (qw/alice paul/) {
    $ws = attach_as($who);
    ok($ws->upgraded, "$who attaches")
        or diag(($ws->status // 'no status') . ' ' . ($ws->response_body // ''));
    $ws->recv_json(5);
    $ws->send_json({ op => 'pty.join_session',
        payload => { role => 'observer' }, extensions => [EXT_URI] });
    my @f = $ws->recv_until(sub { ($_[0]{op} // '') eq 'binding_goodbye' },
        10);
    my ($c) = grep { (session_frame_kind($_) // '') eq 'Closed' } @f;
    is($c && $c->{payload}{exit_code}, 0, "$who: its Closed");
}
is(in_zone(), 1, 'the zone has it now');
