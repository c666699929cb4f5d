#!/usr/bin/perl

# The worker asks its keeper forker for each session's keeper and waits for
# the answer: a forker that does not answer (here: stopped) costs one start
# a bounded wait and an error, never the worker.  The forker is killed, and
# the worker forks keepers itself from then on.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Test::More;
use Time::HiRes qw(time);

use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::PtyAPI qw(api_call);

my $t = pty_nginx(workers => 1);
# the alert, and nginx's own line on the killed forker (its child)
$t->allow_log(qr/the keeper forker did not answer in 2 s/,
    qr/unknown process \d+ exited on signal 9/);
$t->plan(7)->run();

my $port = $t->port(8080);

my ($worker) = $t->worker_pids;
my ($forker) = grep { procs_titled($_, 'pty keeper forker') }
    children($worker);
ok($forker, 'the worker has a keeper forker');

my $s = start_session($t, 'echo before-$((6*7))');
ok($s->{id}, 'a start through the forker');

kill 'STOP', $forker;

my $t0 = time;
my ($st, $r) = api_call($port, '/pty/start', { command => 'echo stuck',
    wait_ms => 0 });
my $took = time - $t0;
ok($st >= 500 || (($r->{closed_reason} // '') eq 'error' && !$r->{running}),
    "a start while the forker is stopped fails (closed: error)")
    or diag(explain $r);
cmp_ok($took, '<', 10, sprintf('within the bounded wait (%.1f s)', $took));

ok($t->wait_until(sub { !kill 0, $forker
    or (Test::Nginx::_proc_stat($forker) // {})->{state} eq 'Z' }, 5),
    'the stopped forker was killed');

($st, $r) = api_call($port, '/pty/start', { command => 'echo after-$((6*7))',
    wait_for => 'after-42', wait_ms => 5000 });
ok($st == 200 && $r->{matched}, 'the next start works (the worker forks)');
is(scalar $t->worker_pids, 1, 'the same worker serves on');

sub children {
    my ($ppid) = @_;
    return grep { (Test::Nginx::_proc_stat($_) // {})->{ppid} == $ppid }
        map { m{/(\d+)$} } glob '/proc/[0-9]*';
}

sub procs_titled {
    my ($pid, $title) = @_;
    open my $fh, '<', "/proc/$pid/cmdline" or return 0;
    my $c = do { local $/; <$fh> } // '';
    return index($c, $title) >= 0;
}
