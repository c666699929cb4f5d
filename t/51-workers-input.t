#!/usr/bin/perl

# Four workers, four controllers, one on each: every line each of them
# types reaches the program, and each one's lines arrive in its order,
# whichever worker owns the terminal.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Test::More;
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::PtyWS qw(decode_output);

my $t = pty_nginx(workers => 4, reuseport => 1,
    extra_loc => 'pty_max_controllers 4;');
$t->run();

my ($st, $json, $body, $h) = Test::Nginx::PtyAPI::api_call($t->port(8080),
    '/pty/start',
    # typing must not start before the echo is off
    { command => 'stty -echo; echo READY; exec cat', wait_for => 'READY' });
is($st, 200, 'started');
my $owner = worker_of($h);
ok($owner, "owned by worker $owner");

my @c = attach_workers($t, $json, 4);
is(scalar @c, 4, 'controllers on four different workers');
join_session($_->[0], role => 'controller') for @c;

my $n = 100;
for my $i (1 .. $n) {
    for my $k (0 .. 3) {
        send_input($c[$k][0], "w$k-$i\r");
    }
}

my $out = read_output($c[0][0], qr/(?:w\d-$n\r\n.*){4}/s, 20);
my %got;
push @{$got{$1}}, $2 while $out =~ /^w(\d)-(\d+)\r$/mg;

for my $k (0 .. 3) {
    my @l = @{$got{$k} // []};
    my $where = $c[$k][2] == $owner ? 'the owner' : 'another worker';
    is(scalar @l, $n, "all $n lines from $where ($c[$k][2])");
    ok(!(grep { $l[$_] != $_ + 1 } 0 .. $#l), '... in the order sent');
}

$t->done_testing();
