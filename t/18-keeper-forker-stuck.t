#!/usr/bin/perl

# The worker keeps a spare keeper that its keeper forker forked ahead, and
# asks the forker for the next after each start.  A forker that does not
# answer (here: stopped) costs no start the spare serves, and the next one
# a bounded wait, never the worker: the forker is killed, and the worker
# forks keepers itself from then on (the forker knew nothing of the
# session, so no second keeper can meet it).

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
# the forker and the spares are found by their process titles, which
# nginx cannot set when it runs under valgrind
$t->skip_all_if(Test::Nginx::valgrind(), 'process titles under valgrind');
$t->plan(10)->run();

my $port = $t->port(8080);

my ($worker) = $t->worker_pids;
my ($forker) = grep { procs_titled($_, 'pty keeper forker') }
    children($worker);
ok($forker, 'the worker has a keeper forker');

my $s = start_session($t, 'echo before-$((6*7))');
ok($s->{id}, 'a start through the forker');

# the spare forked after that start is the worker's before the forker stops
ok($t->wait_until(sub { grep { procs_titled($_, 'pty spare keeper') }
    children($forker) }, 5), 'the forker forked the next spare');
select undef, undef, undef, 0.2;
kill 'STOP', $forker;

my $t0 = time;
my ($st, $r) = api_call($port, '/pty/start', { command => 'echo spare-$((6*7))',
    wait_for => 'spare-42', wait_ms => 5000 });
my $took = time - $t0;
ok($st == 200 && $r->{matched}, 'the spare serves a start while the forker '
    . 'is stopped');
cmp_ok($took, '<', 1, sprintf('without waiting for it (%.2f s)', $took));

$t0 = time;
($st, $r) = api_call($port, '/pty/start', { command => 'echo stuck-$((6*7))',
    wait_for => 'stuck-42', wait_ms => 5000 });
$took = time - $t0;
ok($st == 200 && $r->{matched}, 'the next start waits for the stopped '
    . 'forker, then the worker forks its keeper') or diag(explain $r);
ok($took > 1.5 && $took < 10, sprintf('within the bounded wait (%.1f s)',
    $took));

ok($t->wait_until(sub { !kill 0, $forker
    or (Test::Nginx::_proc_stat($forker) // {})->{state} eq 'Z' }, 5),
    'the stopped forker was killed');

($st, $r) = api_call($port, '/pty/start', { command => 'echo after-$((6*7))',
    wait_for => 'after-42', wait_ms => 5000 });
ok($st == 200 && $r->{matched}, 'the next start works (the worker forks)');
is(scalar $t->worker_pids, 1, 'the same worker serves on');

sub children {
    my ($ppid) = @_;
    return grep {
        ((Test::Nginx::_proc_stat($_) // {})->{ppid} // 0) == $ppid }
        map { m{/(\d+)$} } glob '/proc/[0-9]*';
}

sub procs_titled {
    my ($pid, $title) = @_;
    open my $fh, '<', "/proc/$pid/cmdline" or return 0;
    my $c = do { local $/; <$fh> } // '';
    return index($c, $title) >= 0;
}
