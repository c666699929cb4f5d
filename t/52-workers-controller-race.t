#!/usr/bin/perl

# Four workers, 20 clients spread over them, all asking for the single
# controller slot at once: exactly one gets it, the other 19 are
# downgraded, and the membership lists all 20.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Test::More;
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::PtyWS qw(session_frame_kind);

my $t = pty_nginx(workers => 4, reuseport => 1);
$t->run();

my $s = start_session($t, 'exec sleep 60');

# the first join of a fresh session controls it: give the slot back first
my ($first) = attach_join($t, $s, role => 'observer', label => 'first');
$first->send_op('pty.request_role', { role => 'observer' });
my $ra = wait_kind($first, 'RoleAssigned');
is($ra->{payload}{role}, 'observer', 'the slot is free again');

my (@ws, %workers);
for my $i (1 .. 20) {
    my $ws = attach($t, $s);
    $ws->recv_json(5);
    $workers{worker_of($ws)}++;
    push @ws, $ws;
}
ok(keys %workers >= 3, 'the 20 clients are on ' . (keys %workers)
    . ' workers');

# all the joins go out before any answer is read
my $i = 0;
join_session($_, role => 'controller', label => 'racer ' . $i++,
    no_wait => 1) for @ws;

my (@roles, %ids);
for my $ws (@ws) {
    my $r = wait_kind($ws, 'RoleAssigned');
    push @roles, $r->{payload}{role} // 'none';
    $ids{$r->{payload}{client_id}} = 1;
}

is(scalar(grep { $_ eq 'controller' } @roles), 1, 'one controller');
is(scalar(grep { $_ eq 'observer' } @roles), 19, '19 downgraded');

# the last MembershipChanged everyone agrees on lists all of them
my $m;
$first->recv_until(sub {
    return 0 unless (session_frame_kind($_[0]) // '') eq 'MembershipChanged';
    $m = $_[0]{payload};
    return @{$m->{controllers}} + @{$m->{observers}} == 21;
}, 10);
is(scalar @{$m->{controllers}}, 1, 'membership: one controller');
is(scalar @{$m->{observers}}, 20, 'membership: 20 observers');
is(scalar(grep { $ids{$_->{client_id}} } @{$m->{controllers}},
    @{$m->{observers}}), 20, 'every racer is listed');

$t->done_testing();
