#!/usr/bin/perl

# pty-extensions/v1 section 9, scenario 4: every join, leave, role change
# and disconnect produces one MembershipChanged, to every attached client,
# with the same sequence.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Test::More;
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::PtyExt;

my $t = pty_nginx(extra_loc => 'pty_max_controllers 2;');
$t->plan(10)->run();

my $s = start_session($t, 'cat');
my %ws;

sub joined {
    my ($label, $role) = @_;
    my $ws = attach($t, $s);
    $ws->recv_json(5);
    my @f = join_flush($ws, role => $role, label => $label);
    $ws{$label} = $ws;
    return $f[1];
}

# the next MembershipChanged each listed client gets: same frame for all
sub next_mc {
    my (@who) = @_;
    my @mc = map {
        my @f = $ws{$_}->recv_until(sub {
            kind($_[0]) eq 'MembershipChanged' }, 5);
        $f[-1];
    } @who;
    my %seq = map { ($_->{sequence} // -1) => 1 } @mc;
    return (scalar(keys %seq) == 1 ? $mc[0] : undef);
}

sub names {
    my ($mc) = @_;
    return join ' ', map { join(',', map { $_->{label} }
        @{$mc->{payload}{$_}}) } qw/controllers observers/;
}

joined('a', 'controller');
my $mc = joined('b', 'observer');
is(names($mc), 'a b', 'b joins: its flush shows a controlling, b observing');
is(names(next_mc('a')), 'a b', 'a is told of b');

joined('c', 'observer');
is(names(next_mc('a', 'b')), 'a b,c', 'c joins: a and b are told, same frame');

$ws{b}->send_op('pty.request_role', { role => 'controller' });
is(names(next_mc('a', 'b', 'c')), 'a,b c', 'b promoted: everyone is told');

$ws{c}->send_op('pty.leave_session', {});
is(names(next_mc('a', 'b', 'c')), 'a,b ', 'c leaves: everyone, c included');
$ws{c}->recv_op('binding_goodbye', 5);

$ws{b}->disconnect;
is(names(next_mc('a')), 'a ', 'b disconnects: a is told');

# every MembershipChanged a got carried client ids and labels
my @all = grep { kind($_) eq 'MembershipChanged' } $ws{a}->json_seen;
is(scalar @all, 6, 'a got one MembershipChanged per change, no more');
ok(!(grep { grep { $_->{client_id} !~ /^c-\d+$/ }
    (@{$_->{payload}{controllers}}, @{$_->{payload}{observers}}) } @all),
    'every member has a client_id');
my @seq = seqs(@all);
ok(!(grep { $seq[$_] <= $seq[$_ - 1] } 1 .. $#seq), 'in sequence order');

# RoleAssigned frames: each client got only its own
my $mine = grep { kind($_) eq 'RoleAssigned' } $ws{a}->json_seen;
is($mine, 1, 'a got exactly one RoleAssigned, its own');
