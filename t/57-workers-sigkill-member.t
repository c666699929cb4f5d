#!/usr/bin/perl

# A worker that does not own the session is killed while its client holds
# the only controller slot: the client leaves the membership and the slot
# is free again for a client of another worker.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Test::More;
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::PtyWS qw(session_frame_kind);
use Test::Nginx::PtyAPI qw(api_call);

my $t = pty_nginx(workers => 4, reuseport => 1);
$t->allow_log(qr/exited on signal 9/);
$t->run();

my ($st, $s, $body, $h) = api_call($t->port(8080), '/pty/start',
    { command => 'exec sleep 60', wait_ms => 0 });
my $owner = worker_of($h);

my @c = attach_workers($t, $s, 3, not => { $owner => 1 });
is(scalar @c, 3, 'three clients, none on the owner');

my ($ctl, $obs, $next) = @c;
join_session($ctl->[0], role => 'controller', label => 'doomed');
join_session($obs->[0], role => 'observer', label => 'watcher');
my @f = join_session($next->[0], role => 'controller', label => 'next');
my ($ra) = grep { (session_frame_kind($_) // '') eq 'RoleAssigned' } @f;
is($ra->{payload}{role}, 'observer', 'the slot is taken: downgraded');

kill 'KILL', $ctl->[2];

my $m;
$obs->[0]->recv_until(sub {
    return 0 unless (session_frame_kind($_[0]) // '') eq 'MembershipChanged';
    $m = $_[0]{payload};
    return !grep { $_->{label} eq 'doomed' } @{$m->{controllers}};
}, 10);
ok($m && !@{$m->{controllers}}, 'the killed worker\'s controller left');

$next->[0]->send_op('pty.request_role', { role => 'controller' });
$ra = wait_kind($next->[0], 'RoleAssigned');
is($ra->{payload}{role}, 'controller', 'its slot went to another client');

$t->done_testing();
