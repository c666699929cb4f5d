#!/usr/bin/perl

# nginx's master killed outright (SIGKILL: no exit_master hook runs).  The
# keepers watch the master, so every session's program ends with it, and
# the spare keepers go too; the workers, which nginx leaves running, see
# their sessions close, and their forkers end with them.  Nothing of the
# module outlives nginx.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Test::More;

use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::Procs qw(alive stat_of all_pids children titled
    wait_spare);
use Test::Nginx::PtyAPI qw(api_call);

my $t = pty_nginx(workers => 2,
    # the workers' own keeper forkers: see t/25 for the spawner's
    extra_http => 'pty_user off;');
# the forker and the spares are found by their process titles, which
# nginx cannot set when it runs under valgrind
$t->skip_all_if(Test::Nginx::valgrind(), 'process titles under valgrind');
$t->plan(8)->run();

my $port = $t->port(8080);
my $master = $t->master_pid;
my @workers = $t->worker_pids;
is(scalar @workers, 2, 'two workers');

my (@ids, @progs);
for my $n (1 .. 4) {
    my ($st, $r) = api_call($port, '/pty/start', {
        command => 'exec ' . prog($n), wait_ms => 0 });
    push @ids, $r->{id} if $st == 200;
    my ($p) = $t->wait_until(sub { program(prog($n)) }, 5);
    push @progs, $p if $p;
}
is(scalar @progs, 4, 'four sessions run their programs');

my @keepers = map { stat_of($_)->{ppid} } @progs;
my @forkers = map { titled('pty keeper forker', children($_)) } @workers;
my @spares = grep { $_ } map { wait_spare($t, $_) } @forkers;
ok(@forkers == 2 && @spares == 2, 'each worker has a forker and a spare');

kill 'KILL', $master;
ok($t->wait_until(sub { !alive($master) }, 5), 'the master is killed');

ok($t->wait_until(sub { !grep { alive($_) } @progs, @keepers }, 10),
    'every program and keeper ends with it');
ok($t->wait_until(sub { !grep { alive($_) } @spares }, 10),
    'and every spare keeper');

# the workers nginx left serve on; they saw each session close
my ($closed) = $t->wait_until(sub {
    my ($st, $r) = api_call($port, '/pty/list', {});
    my %want = map { $_ => 1 } @ids;
    my @mine = grep { $want{$_->{id}} } @{$r->{sessions} // []};
    (@mine == 4 && !grep { $_->{state} ne 'exited' } @mine) ? 1 : undef
}, 10);
ok($closed, 'the orphaned workers list the four sessions as exited');

kill 'QUIT', @workers;
ok($t->wait_until(sub { !grep { alive($_) } @workers, @forkers }, 10),
    'the workers quit, and their forkers with them');

###############################################################################

# a program of this test's own: no other test runs it
sub prog { "sleep $_[0]1$$" }

sub program {
    my ($cmd) = @_;
    my @p = grep { Test::Nginx::_cmdline($_) eq $cmd && alive($_) }
        all_pids();
    return $p[0];
}
