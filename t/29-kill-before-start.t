#!/usr/bin/perl

# A session killed before its keeper has read the start (docs/TESTING.md,
# t/30-conf-10): the spare keeper that took it is asked to stop while the
# start still waits in its socket.  The session ends "killed", as any kill
# does, not "error": the keeper went before it ran anything, and the
# worker, which had asked for the kill, must not read that as a keeper
# that died.  A machine too busy to run the spare at once made this happen
# by itself; stopping the spare makes the same order every time.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Test::More;
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::Procs qw(alive wait_forker wait_spare);
use Test::Nginx::PtyAPI qw(api_call);

# the worker's own keeper forker holds the spare (t/19)
my $t = pty_nginx(workers => 1, extra_http => 'pty_user off;');
$t->skip_all_if(Test::Nginx::valgrind(), 'process titles under valgrind');
$t->plan(6)->run();

my $port = $t->port(8080);
my ($worker) = $t->worker_pids;
my $forker = wait_forker($t, $worker);
my $spare = $forker ? wait_spare($t, $forker) : undef;
ok($spare, 'the worker has a spare keeper');

# the start goes into the stopped spare's socket, unread
kill 'STOP', $spare;
my (undef, $s) = api_call($port, '/pty/start',
    { command => 'sleep 100', wait_ms => 0 });
ok($s && $s->{id}, 'the start is answered while the spare is stopped');

# the kill's SIGTERM waits in the stopped spare with the start
my ($status) = api_call($port, '/pty/kill', { id => $s->{id} });
is($status, 200, 'the kill is taken');
kill 'CONT', $spare;

my $gone = $t->wait_until(sub { !alive($spare) }, 10);
ok($gone, 'the spare is gone');

my $info = $t->wait_until(sub {
    my (undef, $l) = api_call($port, '/pty/list', {});
    my ($e) = grep { $_->{id} eq $s->{id} && !$_->{running} }
        @{ $l->{sessions} // [] };
    $e;
}, 10);
is($info && $info->{closed_reason}, 'killed',
    'the session ends "killed", not "error"')
    or diag explain [$info, [$t->error_log_lines()]];
ok(!$t->grep_error_log(qr/\[(error|crit|alert|emerg)\]/),
    'no error logged')
    or diag explain [$t->error_log_lines()];
