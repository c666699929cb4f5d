#!/usr/bin/perl

# The spawner: one root process for all workers, forked by the master,
# kept across a reload.  A stopped spawner holds starts back without
# stopping any worker; a keeper killed outright leaves nothing of its
# session behind (the spawner ends every process of its uid); nginx
# started as root refuses a config that would run programs as the workers.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Test::More;
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::Procs qw(alive stat_of all_pids titled);
use Test::Nginx::PtyAPI qw(api_call);
use Time::HiRes qw(time);

plan(skip_all => 'needs root') if $> != 0;

my $t = pty_nginx(workers => 2);
$t->skip_all_if(Test::Nginx::valgrind(), 'process titles under valgrind');
# the nginx -t below, refused on purpose
$t->allow_log(qr/programs would run as the workers' user/);
$t->plan(14)->run();

my $port = $t->port(8080);
# the master forks it, and it takes its title after that
my ($spawner) = $t->wait_until(sub {
    (grep { spawner_of_test($_) } titled('pty spawner', all_pids()))[0] },
    10);
ok($spawner, 'a spawner runs');
is(uid_of($spawner), 0, 'as root');
is((stat("/proc/$spawner/mem"))[4], 0, 'not dumpable (root\'s anyway)');

sub spares {
    grep { (stat_of($_) // {})->{ppid} == $spawner }
        titled('pty spare keeper', all_pids());
}
$t->wait_until(sub { spares() >= 2 }, 5);
my @spares = spares();
ok(@spares >= 2, 'it holds a spare for each worker');
is(uid_of($spares[0]), uid_of(($t->worker_pids)[0]),
    'a spare keeper runs as the workers');

# stopped, it holds a start back; the worker answers everything else
kill 'STOP', $spawner;
my (@ids);
for (1 .. 4) {
    my ($st, $r) = api_call($port, '/pty/start',
        { command => q{echo STAR''TED; exec sleep 3000}, wait_ms => 0 });
    push @ids, $r->{id} if $st == 200;
}
my $t0 = time;
my ($st, $r) = api_call($port, '/pty/list', {});
cmp_ok(time - $t0, '<', 0.5, 'list answers at once while the spawner is '
    . 'stopped');
ok((grep { $_->{state} eq 'starting' } @{$r->{sessions} // []}),
    'a start waits for it');
kill 'CONT', $spawner;
ok($t->wait_until(sub {
    my (undef, $l) = api_call($port, '/pty/list', {});
    4 == grep { $_->{state} eq 'running' } @{$l->{sessions} // []};
}, 10), 'continued, it serves every waiting start');

# a keeper killed outright: its program is ended by uid
my ($prog) = $t->wait_until(sub { (procs_running('sleep 3000'))[0] }, 5);
my $keeper = stat_of($prog)->{ppid};
kill 'KILL', $keeper;
ok($t->wait_until(sub { !alive($prog) }, 5),
    'the program of a SIGKILLed keeper is ended too');

# the same spawner after a reload
ok($t->reload, 'reload');
my ($again) = grep { spawner_of_test($_) } titled('pty spawner', all_pids());
is($again, $spawner, 'the spawner is kept');
(undef, $r) = api_call($port, '/pty/start', {
    command => q{echo RE''LOADED}, wait_for => 'RELOADED' });
ok($r && $r->{matched}, 'it serves the new workers');

# root, no program user: refused at configuration time
my $conf = $t->read_file('nginx.conf');
$conf =~ s/pty_user_range[^;]*;//;
$t->write_file('bad.conf', $conf);
my ($status, $out) = $t->test_config('bad.conf');
isnt($status, 0, 'nginx -t fails without pty_user as root');
like($out, qr/programs would run as the workers' user; set "pty_user"/,
    'and says which directive to set');

$t->stop();

sub uid_of {
    my ($pid) = @_;
    open my $fh, '<', "/proc/$pid/status" or return -1;
    while (my $l = <$fh>) { return $1 if $l =~ /^Uid:\s+(\d+)/ }
    return -1;
}

# spawners of other tests may run beside: ours holds this test's error log
# (a keeper the spawner has just forked still carries its title: the
# spawner is the one whose parent is not a spawner)
sub spawner_of_test {
    my ($pid) = @_;
    my $log = readlink("/proc/$pid/fd/2") // '';
    my $ppid = (stat_of($pid) // {})->{ppid} // 0;
    return index($log, $t->testdir) == 0
        && !titled('pty spawner', $ppid);
}
