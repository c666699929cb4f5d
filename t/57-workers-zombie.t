#!/usr/bin/perl

# A worker killed but not yet reaped by the master (a zombie: here the
# master is stopped) is gone for the module: its session is taken over by
# the next worker a client's input reaches, and its clients leave the
# membership, without waiting for the master to reap it.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Test::More;
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::PtyWS qw(session_frame_kind);
use Test::Nginx::PtyAPI qw(api_call);

my $t = pty_nginx(workers => 2, reuseport => 1);
$t->allow_log(qr/exited on signal 9/);
$t->plan(5)->run();

my $master = $t->read_file('nginx.pid');
$master =~ s/\s+//g;
ok($master, 'the master\'s pid');

my ($st, $s, $body, $h) = api_call($t->port(8080), '/pty/start',
    { command => 'exec cat', wait_ms => 0 });
my $owner = worker_of($h);

# a controller on the other worker, an observer on the owner
my @c = attach_workers($t, $s, 2);
my ($ctl) = grep { $_->[2] != $owner } @c;
my ($doomed) = grep { $_->[2] == $owner } @c;
ok($ctl && $doomed, 'a client on each worker');
# the first to join a fresh session controls it
join_session($ctl->[0], role => 'controller', label => 'ctl');
join_session($doomed->[0], role => 'observer', label => 'doomed');

kill 'STOP', $master;
END { kill 'CONT', $master if $master }

kill 'KILL', $owner;
ok($t->wait_until(sub { state_of($owner) eq 'Z' }, 5),
    'the owner is a zombie');

send_input($ctl->[0], "zombie-$$\n");
my ($m, $out) = (undef, '');
$ctl->[0]->recv_until(sub {
    my $k = session_frame_kind($_[0]) // '';
    $out .= Test::Nginx::PtyWS::decode_output($_[0]) if $k eq 'Output';
    $m = $_[0]{payload} if $k eq 'MembershipChanged';
    return $out =~ /zombie-$$/ && $m
        && !grep { ($_->{label} // '') eq 'doomed' } @{$m->{observers}};
}, 10);
like($out, qr/zombie-$$/, 'the input reached the program through a new owner');
ok($m && !grep({ ($_->{label} // '') eq 'doomed' } @{$m->{observers}}),
    'the zombie\'s client left the membership');

kill 'CONT', $master;
$t->stop();

sub state_of {
    open my $fh, '<', "/proc/$_[0]/stat" or return '';
    my $l = <$fh> // '';
    return $l =~ /\) (\S)/ ? $1 : '';
}
