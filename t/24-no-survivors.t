#!/usr/bin/perl

# Nothing a session started outlives it: a job that calls setsid(), and one
# that ignores SIGHUP and SIGTERM, are found (the keeper is their
# subreaper), signalled and, after the grace, killed, both when the
# session is killed and when nginx stops.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Test::More;
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::PtyAPI qw(api_call);

my $t = pty_nginx();
$t->plan(7)->run();

my $port = $t->port(8080);

sub stubborn {
    my ($tag) = @_;
    my @names = ("sleep 1101$tag", "sleep 1102$tag", "sleep 1103$tag");
    my (undef, $s) = api_call($port, '/pty/start', {
        command => "setsid bash -c 'exec $names[0]' & "
            . "( trap '' HUP TERM; exec $names[1] ) & "
            . "echo REA''DY; exec $names[2]",
        wait_for => 'READY' });
    return ($s, @names);
}

my ($s, @jobs) = stubborn("1$$");
ok($s && $s->{matched}, 'a session with a setsid job and a stubborn one');
ok($t->wait_until(sub { !grep { !procs_running($_) } @jobs }, 5),
    'all three run');

my ($st) = api_call($port, '/pty/kill', { id => $s->{id} });
is($st, 200, 'kill');
ok($t->wait_until(sub { !grep { procs_running($_) } @jobs }, 10),
    'none is left after the kill, the stubborn one included')
    or diag(join ' ', map { "$_: " . join(',', procs_running($_)) } @jobs);

# the same tree, left running when nginx stops
my ($s2, @jobs2) = stubborn("2$$");
ok($s2 && $s2->{matched}, 'a second one');
ok($t->wait_until(sub { !grep { !procs_running($_) } @jobs2 }, 5),
    'all three run');

$t->stop();

ok($t->wait_until(sub { !grep { procs_running($_) } @jobs2 }, 10),
    'none outlives nginx')
    or diag(join ' ', map { "$_: " . join(',', procs_running($_)) } @jobs2);
