#!/usr/bin/perl

# The spare keeper (docs/ARCHITECTURE.md, "Processes"): the worker holds one
# keeper its keeper forker forked ahead, idle; a start hands it the session
# and the forker forks the next.  Each start is served by the spare that
# waited for it, with the settings of its own location; the spare holds
# nothing of nginx's and its program only its terminal.  Starts faster
# than spares wait for the forker, they never fork the worker.  A spare or
# forker that is killed costs no start, and none of them outlives a reload
# or a stop.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Test::More;
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::Procs qw(alive stat_of all_pids children titled
    wait_forker);
use Test::Nginx::PtyAPI qw(api_call);

my $t = pty_nginx(workers => 1, extra_http => <<'HTTP');
    # the workers' own keeper forker: see t/25 for the spawner's
    pty_user off;
    server {
        listen 127.0.0.1:%%PORT_8081%%;

        location /other/ {
            pty_api;
            pty_env SPARE_TEST=other;
            pty_shell /usr/bin/bash;
        }
    }
HTTP
# the worker's alert and nginx's line on the killed forker (its child),
# the master's on the killed worker
$t->allow_log(qr/the keeper forker is gone; the worker forks keepers/,
    qr/unknown process \d+ exited on signal 9/,
    qr/worker process \d+ exited on signal 9/);
# the forker and the spares are found by their process titles, which
# nginx cannot set when it runs under valgrind
$t->skip_all_if(Test::Nginx::valgrind(), 'process titles under valgrind');
$t->plan(40)->run();

my $port = $t->port(8080);

my ($worker) = $t->worker_pids;
my $forker = wait_forker($t, $worker);
ok($forker, 'the worker has a keeper forker');
# not dumpable (the worker is not, and a fork inherits it): /proc/PID/mem
# is then root's, not the workers' user's
is((stat("/proc/$forker/mem"))[4], 0, 'the forker is not dumpable');

my $spare = wait_spare($forker);
ok($spare, 'the forker holds a spare keeper');
is(stat_of($spare)->{ppid}, $forker, 'the spare is the forker\'s child');
is(getsid_of($spare), $spare, 'it leads a session of its own');

# the spare's descriptors: stdio, its control socket, a signalfd, a pidfd,
# the terminal and the two lines to the child it forked ahead.  It has
# its title before it has made them: a loaded machine shows it between
# and its child closes what it inherited only after the fork
$t->wait_until(sub {
    my %u = unix_inodes();
    my ($c) = children($spare);
    (grep { kind($_->[1], \%u) eq 'ptmx' } fds($spare)) && $c
        && join(' ', sort map { kind($_->[1], \%u) } fds($c))
           eq 'pipe pts pts pts unix';
}, 10);
my @fds = fds($spare);
my %unix = unix_inodes();
is(join(' ', sort map { kind($_->[1], \%unix) } grep { $_->[0] > 2 } @fds),
    'pidfd pipe ptmx signalfd unix unix', "the spare holds nothing of the "
    . "worker's (" . join(' ', map { "$_->[0]:$_->[1]" } @fds) . ')');
my ($waiting) = children($spare);
ok($waiting, 'the spare forked its program\'s process ahead');
is(join(' ', sort map { kind($_->[1], \%unix) } fds($waiting)),
    'pipe pts pts pts unix', 'which holds its terminal and the lines to the '
    . 'spare only');

# a start is served by the spare that waited for it
my $keeper = start_keeper(101);
is($keeper, $spare, 'a start is served by the spare');
is(program(prog(101)), $waiting, 'its program is the process forked ahead');
is_deeply([map { $_->[0] } fds(program(prog(101)))], [0, 1, 2],
    'its program holds only its terminal');

# consecutive starts: each gets the fresh spare forked after the last
my @keepers = ($keeper);
for my $n (102 .. 104) {
    my $next = wait_spare($forker, $keepers[-1]);
    my $k = start_keeper($n);
    ok($k && $k == $next && !grep({ $_ == $k } @keepers),
        "start $n: served by a fresh spare ($k)");
    push @keepers, $k;
}

# per-session settings arrive with the start: size, environment, shell
my ($st, $r) = api_call($t->port(8081), '/other/start', {
    command => 'echo "size=$(stty size) env=$SPARE_TEST sh=$BASH"',
    cols => 91, rows => 27, wait_for => 'sh=\S+', wait_ms => 5000 });
like($r->{output} // '', qr{size=27 91 env=other sh=/usr/bin/bash},
    'another location: its size, environment and shell');
($st, $r) = api_call($port, '/pty/start', {
    command => 'echo "size=$(stty size) env=${SPARE_TEST-unset} sh=$BASH"',
    cols => 100, rows => 40, wait_for => 'sh=\S+', wait_ms => 5000 });
like($r->{output} // '', qr{size=40 100 env=unset sh=/bin/bash},
    'the first location: its own');

# a burst, each start right after the last one's answer, before its keeper
# reported: the starts after the first wait for the forker's next spare,
# and none is forked from the worker
my @burst = map { (api_call($port, '/pty/start', {
    command => 'exec ' . prog($_), wait_ms => 0 }))[0] } 111 .. 115;
is(join(',', @burst), '200,200,200,200,200', 'a burst of 5 starts');
my @bk = map { my $n = $_; my ($p) = $t->wait_until(sub {
    program(prog($n)) }, 5); $p ? stat_of($p)->{ppid} : 0 } 111 .. 115;
is(scalar(grep { $_ && stat_of($_)->{ppid} == $forker } @bk), 5,
    'each by a keeper of the forker\'s');
push @keepers, @bk;

# a spare killed while it waits: the next start still gets a keeper
$spare = wait_spare($forker, $keepers[-1]);
kill 'KILL', $spare;
ok($t->wait_until(sub { !kill 0, $spare }, 5), 'the spare is killed (and '
    . 'reaped: it is the forker\'s)');
($st, $r) = api_call($port, '/pty/start', { command => 'echo after-$((6*7))',
    wait_for => 'after-42', wait_ms => 5000 });
ok($st == 200 && $r->{matched}, 'a start after the spare died');
ok(!zombies($worker, $forker), 'no zombie left to the worker or forker');

# the spare's other ends: its waiting child dies, or it gets a signal; it
# reaps the child and goes, and a start after it still gets a keeper
for my $case (['child', 'its waiting child killed'], ['TERM', 'SIGTERM'],
              ['HUP', 'SIGHUP'])
{
    my ($how, $what) = @$case;
    $spare = wait_spare($forker, $spare);
    my ($child) = children($spare);
    kill $how eq 'child' ? 'KILL' : $how, $how eq 'child' ? $child : $spare;
    ok($t->wait_until(sub { !alive($spare) && !alive($child) }, 5),
        "$what: the spare and its child are gone");
    ($st, $r) = api_call($port, '/pty/start', {
        command => "echo $how-\$((6*7))", wait_for => "$how-42",
        wait_ms => 5000 });
    ok($st == 200 && $r->{matched}, "$what: the next start runs");
}
ok(!zombies($worker, $forker), '... and no zombie is left');

# a reload: the old worker's forker and spare go, the new worker has its own
my @old = ($forker, wait_spare($forker));
$t->reload();
ok($t->wait_until(sub { !grep { alive($_) } @old }, 10),
    'reload: the old forker and spare are gone');
($worker) = $t->wait_until(sub { my @w = $t->worker_pids;
    @w == 1 && $w[0] != $old[0] ? $w[0] : undef }, 10);
($forker) = $worker ? titled('pty keeper forker', children($worker)) : ();
ok($forker && wait_spare($forker), 'the new worker has a forker and a spare');
ok(program(prog(101)), 'the sessions run on');

# a worker killed outright: its forker and spare see their sockets end and
# go with it; its replacement has its own
my @crashed = ($forker, wait_spare($forker));
my $dead = $worker;
kill 'KILL', $dead;
ok($t->wait_until(sub { !grep { alive($_) } @crashed }, 10),
    'a killed worker\'s forker and spare are gone');
($worker) = $t->wait_until(sub { my @w = $t->worker_pids;
    @w == 1 && $w[0] != $dead ? $w[0] : undef }, 10);
($forker) = $worker ? titled('pty keeper forker', children($worker)) : ();
ok($forker && wait_spare($forker),
    'its replacement has a forker and a spare');

# the forker killed: the spare the worker holds serves, then the worker
# forks keepers itself until a new forker is started (a second later)
$spare = wait_spare($forker);
kill 'KILL', $forker;
ok($t->wait_until(sub { !grep { $_ == $forker } children($worker) }, 5),
    'the forker is killed and reaped');
is(start_keeper(105), $spare, 'the spare outlives its forker and serves the '
    . 'next start');
my $own = start_keeper(106);
ok($own && alive($own), 'the next start gets a keeper without the forker');
my ($again) = $t->wait_until(sub {
    (grep { $_ != $forker } titled('pty keeper forker',
                                   children($worker)))[0] }, 5);
ok($again && wait_spare($again), 'a new forker is started, with a spare');
$spare = wait_spare($again);
is(start_keeper(107), $spare, 'its spare serves the next start');
is(scalar $t->worker_pids, 1, 'the same worker serves on');

# stop: no forker, spare, keeper or program of this nginx is left
my @ours = (@old, @crashed, $forker, $again, $spare, $own, @keepers,
    map { program(prog($_)) } 101 .. 107, 111 .. 115);
$t->stop();
ok($t->wait_until(sub { !grep { alive($_) } @ours }, 10),
    'stop: no forker, spare, keeper or program is left');

###############################################################################

# a program of this test's own: no other test runs it
sub prog { "sleep $_[0]$$" }

# starts prog($n); the keeper that runs it: the parent of the program
sub start_keeper {
    my ($n) = @_;
    my ($st, $r) = api_call($port, '/pty/start', {
        command => 'exec ' . prog($n), wait_ms => 0 });
    return undef unless $st == 200;
    my ($prog) = $t->wait_until(sub { program(prog($n)) }, 5);
    return $prog ? stat_of($prog)->{ppid} : undef;
}

sub program {
    my ($cmd) = @_;
    my @p = grep { (stat_of($_) // {})->{state} ne 'Z' } procs_running($cmd);
    return $p[0];
}

sub getsid_of {
    open my $fh, '<', "/proc/$_[0]/stat" or return;
    my $l = <$fh> // '';
    $l =~ s/^.*\) //;
    return (split ' ', $l)[3];
}

# zombies left to a process of ours (orphans go to init, which this
# machine's may not reap: those are not nginx's to reap)
sub zombies {
    my %ours = map { $_ => 1 } @_;
    return grep { my $s = stat_of($_);
        $s && $s->{state} eq 'Z' && $ours{$s->{ppid}} } all_pids();
}

# what a descriptor is, by its link
sub kind {
    my ($link, $unix) = @_;
    return $link =~ /^socket:\[(\d+)\]/ ? ($unix->{$1} ? 'unix' : 'socket')
        : $link =~ /^anon_inode:\[(\w+)\]/ ? $1
        : $link =~ /^pipe:/ ? 'pipe'
        : $link eq '/dev/ptmx' ? 'ptmx'
        : $link =~ m{^/dev/pts/} ? 'pts' : $link;
}

sub unix_inodes {
    open my $fh, '<', '/proc/net/unix' or return;
    return map { (split ' ')[6] => 1 } grep { !/^Num/ } <$fh>;
}

# [fd, what it is] of a process
sub fds {
    my ($pid) = @_;
    return map { [ m{/(\d+)$}, readlink($_) // '?' ] }
        sort { ($a =~ m{(\d+)$})[0] <=> ($b =~ m{(\d+)$})[0] }
        glob "/proc/$pid/fd/*";
}

# the spare the forker holds, once it is there (and is not $not)
sub wait_spare { Test::Nginx::Procs::wait_spare($t, @_) }
