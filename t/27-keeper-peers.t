#!/usr/bin/perl

# A keeper waits for a connected peer's secret in its poll loop, not in a
# blocking wait: peers that connect to its socket and say nothing do not
# keep it from serving its owner (a kill) or its child (the exit).

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Socket qw(AF_UNIX SOCK_SEQPACKET SOCK_NONBLOCK);
use Time::HiRes qw(time);
use Test::More;
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::PtyAPI qw(api_call);

my $t = pty_nginx();
$t->plan(7)->run();

# peers of the workers' user or root pass the uid check: this test is one
sub hold {
    my ($id, $n) = @_;
    my @held;
    for (1 .. $n) {
        socket(my $s, AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK, 0) or die;
        connect($s, pack('Sa*', AF_UNIX, "\0ngx_pty_keeper/$id")) or last;
        push @held, $s;
    }
    return @held;
}

# the owner's kill is served while silent peers are connected
my $s = start_session($t, 'sleep 1027');
my ($ws) = attach_join($t, $s);
ok($t->wait_until(sub { procs_running('sleep 1027') }, 5), 'program runs');

my @held = hold($s->{session_id}, 3);
is(scalar @held, 3, 'three silent peers connected');

my $t0 = time();
my ($st) = api_call($t->port(8080), '/pty/kill', { id => $s->{id} });
is($st, 200, 'kill answered');
my $closed = wait_kind($ws, 'Closed', 20);
is($closed && $closed->{payload}{reason}, 'killed', 'Closed killed');
cmp_ok(time() - $t0, '<', 4, 'the kill was not held by the silent peers');
close $_ for @held;

# the child's own exit is reported while silent peers are connected
$s = start_session($t, 'read x; exit 3');
($ws) = attach_join($t, $s);
@held = hold($s->{session_id}, 3);
$t0 = time();
send_input($ws, "go\n");
$closed = wait_kind($ws, 'Closed', 20);
is($closed && $closed->{payload}{exit_code}, 3, 'Closed with the exit code');
cmp_ok(time() - $t0, '<', 4, 'the exit was not held by the silent peers');
close $_ for @held;

$t->stop();
