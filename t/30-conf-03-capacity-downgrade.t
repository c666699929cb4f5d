#!/usr/bin/perl

# pty-extensions/v1 section 9, scenario 3: the (max_controllers + 1)-th
# controller request is downgraded to observer with an explicit
# RoleAssigned; max_observers caps observers with a clear refusal;
# pty.request_role promotes once there is room, and demotes.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Test::More;
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::PtyExt;

my $t = pty_nginx(extra_loc => 'pty_max_controllers 2; pty_max_observers 2;');
$t->plan(19)->run();

my $s = start_session($t, SHELL);

sub joined {
    my (%o) = @_;
    my $ws = attach($t, $s);
    $ws->recv_json(5);
    return ($ws, join_flush($ws, %o));
}

# the first joiner controls even when it asks to observe
my ($a, @fa) = joined(role => 'observer', label => 'a');
is($fa[0]{payload}{role}, 'controller', 'fresh session: first is controller');

my ($b, @fb) = joined(role => 'controller', label => 'b');
is($fb[0]{payload}{role}, 'controller', 'second controller fits (max 2)');
ok(!$fb[0]{payload}{downgraded}, 'not downgraded');

my ($c, @fc) = joined(role => 'controller', label => 'c');
is($fc[0]{payload}{role}, 'observer', 'third controller request: observer');
is($fc[0]{payload}{downgraded}, JSON::PP::true(), 'downgraded: true')
    if eval { require JSON::PP; 1 };
like($fc[0]{payload}{reason}, qr/max_controllers=2/, 'with a reason');
is_deeply([map { $_->{label} } @{$fc[1]{payload}{controllers}}], [qw/a b/],
    'membership: a and b control');
is_deeply([map { $_->{label} } @{$fc[1]{payload}{observers}}], ['c'],
    'membership: c observes');

send_input($c, "echo x\r");
is($c->recv_op('Error', 5)->{payload}{code}, 'PERMISSION_DENIED',
    'the downgraded observer cannot type');

my ($d, @fd) = joined(role => 'observer', label => 'd');
is($fd[0]{payload}{role}, 'observer', 'second observer fits (max 2)');

# the third observer is refused, with a binding Error that says why
my $e = attach($t, $s);
$e->recv_json(5);
$e->send_json({ op => 'pty.join_session', payload => { role => 'observer' },
    extensions => [EXT_URI] });
my $err = $e->recv_op('Error', 5);
is($err->{payload}{code}, 'RATE_LIMITED', 'observer limit: RATE_LIMITED');
like($err->{payload}{message}, qr/max_observers=2/, 'message names the cap');

# request_role: no room while a and b control
$c->send_op('pty.request_role', { role => 'controller' });
my $ra = wait_kind($c, 'RoleAssigned', 5);
is_deeply([@{$ra->{payload}}{qw/role downgraded/}],
    ['observer', JSON::PP::true()], 'promotion refused: still observer');

# b demotes itself in place: RoleAssigned to b, MembershipChanged to all
$b->send_op('pty.request_role', { role => 'observer' });
my @f = $b->recv_until(sub { kind($_[0]) eq 'MembershipChanged'
    && !grep { $_->{label} eq 'b' } @{$_[0]{payload}{controllers}} }, 5);
@f = without_output(@f);
@f = @f[-2, -1] if @f >= 2;
is_deeply([map { kind($_) } @f],
    [qw/RoleAssigned MembershipChanged/], 'demotion: RoleAssigned, then '
    . 'MembershipChanged');
is($f[-2]{payload}{role}, 'observer', 'b observes now');

# now c fits
$c->send_op('pty.request_role', { role => 'controller' });
@f = $c->recv_until(sub { kind($_[0]) eq 'MembershipChanged'
    && grep { $_->{label} eq 'c' } @{$_[0]{payload}{controllers}} }, 5);
my ($r) = grep { kind($_) eq 'RoleAssigned' } @f;
is($r->{payload}{role}, 'controller', 'c promoted');
send_input($c, "echo PROMOTED\$((1+1))\r");
like(read_output($c, qr/PROMOTED2/), qr/PROMOTED2/, 'c can type now');

# leave + join also changes role: b leaves, rejoins as controller? a and c
# control, so b is downgraded again
$b->send_op('pty.leave_session', {});
$b->recv_op('binding_goodbye', 5);
my ($b2, @fb2) = joined(role => 'controller', label => 'b');
is($fb2[0]{payload}{role}, 'observer', 'rejoin while full: observer');

# a RoleAssigned goes only to its own connection
my @others = grep { kind($_) eq 'RoleAssigned'
    && $_->{payload}{client_id} ne $fa[0]{payload}{client_id} }
    $a->json_seen;
is(scalar @others, 0, 'a never saw another client\'s RoleAssigned');
