#!/usr/bin/perl

# Four workers and a reload while a program prints: the session lives on
# with its scrollback and sequence, and each client of an old worker that
# reconnects to a new one with replay_from loses nothing and gets nothing
# twice.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Test::More;
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::PtyWS qw(session_frame_kind decode_output);
use Test::Nginx::PtyAPI qw(api_call);

my $t = pty_nginx(workers => 4, reuseport => 1);
$t->run();

my $s = start_session($t,
    'i=0; while :; do echo "tick $i"; i=$((i+1)); sleep 0.02; done');

my @c = attach_workers($t, $s, 4);
is(scalar @c, 4, 'clients on four workers');
join_session($_->[0]) for @c;

# some output on every client before the reload
my @text = ('') x 4;
my @last = (0) x 4;
for my $k (0 .. 3) {
    $c[$k][0]->recv_until(sub {
        $last[$k] = $_[0]{sequence} if defined $_[0]{sequence};
        $text[$k] .= decode_output($_[0]);
        $text[$k] =~ /tick \d+\r\n.*tick \d+\r\n/s }, 10);
}

my @old = $t->worker_pids;
ok($t->reload(), 'reloaded');
ok(!(grep { my $p = $_; grep { $_ == $p } $t->worker_pids } @old),
    'the old workers are gone');

# whatever came before the goodbye counts as received
for my $k (0 .. 3) {
    my @f = $c[$k][0]->recv_until(sub {
        ($_[0]{op} // '') eq 'binding_goodbye' }, 10);
    for my $f (@f) {
        $last[$k] = $f->{sequence} if defined $f->{sequence};
        $text[$k] .= decode_output($f);
    }
    is($f[-1]{payload}{reason}, 'server_shutdown',
        "client $k told to reconnect");
}

my %new = map { $_ => 1 } $t->worker_pids;
for my $k (0 .. 3) {
    my $ws = attach($t, $s);
    ok($new{worker_of($ws)}, "client $k reattached to a new worker");
    $ws->recv_json(5);
    my @f = join_session($ws, replay_from => $last[$k]);
    my @seq = grep { defined } map { $_->{sequence} } @f;
    my $target = ($text[$k] =~ /tick (\d+)\r\n(?!.*tick)/s)[0] + 40;
    my $seen = join '', map { decode_output($_) } @f;
    push @f, $ws->recv_until(sub {
        ($seen .= decode_output($_[0])) =~ /tick $target\r/ }, 10)
        unless $seen =~ /tick $target\r/;

    my @out = grep { (session_frame_kind($_) // '') eq 'Output' } @f;
    ok(!(grep { $_->{sequence} <= $last[$k] } @out),
        "client $k: replay starts after replay_from $last[$k]");
    my @os = map { $_->{sequence} } @out;
    ok(!(grep { $os[$_] <= $os[$_ - 1] } 1 .. $#os),
        "client $k: sequence strictly increasing");

    my $all = $text[$k] . join '', map { decode_output($_) } @out;
    my @n = $all =~ /^tick (\d+)\r$/mg;
    ok(@n > 40 && !(grep { $n[$_] != $n[$_ - 1] + 1 } 1 .. $#n),
        "client $k: ticks $n[0]..$n[-1] without a gap or a repeat");
}

my ($st, $list) = api_call($t->port(8080), '/pty/list', {});
is(scalar(grep { $_->{id} eq $s->{id} && $_->{state} eq 'running' }
    @{$list->{sessions}}), 1, 'the session still runs');

$t->done_testing();
