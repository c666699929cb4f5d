#!/usr/bin/perl

# The worker keeps a spare keeper that its keeper forker forked ahead, and
# asks the forker for the next after each start.  A forker that does not
# answer (here: stopped) costs no start the spare serves.  The next start
# waits for it, but the worker does not: it serves every other call
# meanwhile.  After a bounded wait the forker is killed and the worker
# forks that start's keeper itself (the forker knew nothing of the
# session, so no second keeper can meet it), and a new forker is started.
# A start killed while it waits never runs its program, one whose worker
# dies while it waits is closed by the next worker, and one whose worker
# exits (a reload) is started as it exits and runs on under the next.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Test::More;
use Time::HiRes qw(time);
use IO::Socket::INET;
use IO::Select;

use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::Procs qw(alive stat_of children titled wait_forker);
use Test::Nginx::PtyAPI qw(api_call parse_response);
use Test::Nginx::PtyWS qw(json_encode json_decode session_frame_kind);

my $t = pty_nginx(workers => 1,
    # the workers' own keeper forker: see t/25 for the spawner's
    extra_http => 'pty_user off;');
# the alert, and nginx's own line on the killed forker (its child); the
# master's on the killed worker
$t->allow_log(qr/the keeper forker did not answer in 2 s/,
    qr/unknown process \d+ exited on signal 9/,
    qr/worker process \d+ exited on signal 9/);
# the forker and the spares are found by their process titles, which
# nginx cannot set when it runs under valgrind
$t->skip_all_if(Test::Nginx::valgrind(), 'process titles under valgrind');
$t->plan(26)->run();

my $port = $t->port(8080);
my $dir = $t->testdir;

my ($worker) = $t->worker_pids;
my $forker = wait_forker($t, $worker);
ok($forker, 'the worker has a keeper forker');

my $s = start_session($t, 'echo before-$((6*7))');
ok($s->{id}, 'a start through the forker');

# the spare forked after that start is the worker's before the forker stops
ok(wait_spare($forker), 'the forker forked the next spare');
select undef, undef, undef, 0.2;
kill 'STOP', $forker;

my $t0 = time;
my ($st, $r) = api_call($port, '/pty/start', { command => 'echo spare-$((6*7))',
    wait_for => 'spare-42', wait_ms => 5000 });
my $took = time - $t0;
ok($st == 200 && $r->{matched}, 'the spare serves a start while the forker '
    . 'is stopped');
cmp_ok($took, '<', 1, sprintf('without waiting for it (%.2f s)', $took));

# the next start waits for the forker; the worker goes on serving
$t0 = time;
my $pending = send_call('start', { command => 'echo stuck-$((6*7))',
    wait_for => 'stuck-42', wait_ms => 5000 });
my $t1 = time;
($st, $r) = api_call($port, '/pty/list', {});
my $list_took = time - $t1;
my ($stuck) = grep { $_->{command} =~ /stuck/ } @{$r->{sessions} // []};
ok($stuck && $stuck->{state} eq 'starting',
    'while a start waits for the stopped forker, list shows it starting');
cmp_ok($list_took, '<', 0.5, sprintf('and answers at once (%.2f s)',
    $list_took));

($st, $r) = read_answer($pending);
$took = time - $t0;
ok($st == 200 && $r->{matched}, 'the waiting start runs: the worker forks '
    . 'its keeper') or diag(explain $r);
ok($took > 1.5 && $took < 10, sprintf('after the bounded wait (%.1f s)',
    $took));

ok($t->wait_until(sub { !alive($forker) }, 5), 'the stopped forker was '
    . 'killed');

# a new forker, a second later, with its spare
my ($again) = $t->wait_until(sub {
    (grep { $_ != $forker } titled('pty keeper forker',
                                   children($worker)))[0] }, 5);
my $spare = $again && wait_spare($again);
ok($spare, 'a new forker is started, with a spare');

($st, $r) = api_call($port, '/pty/start', { command => 'echo after-$((6*7))',
    wait_for => 'after-42', wait_ms => 5000 });
ok($st == 200 && $r->{matched}, 'the next start works');
ok(wait_spare($again, $spare), '... served by its spare: it forks the next');

# a start killed while it waits: no program runs for it
kill 'STOP', $again;
($st, $r) = api_call($port, '/pty/start', { command => 'sleep 1', wait_ms => 0 });
my $marker = "$dir/never-ran";
($st, $r) = api_call($port, '/pty/start', { command => "touch $marker",
    wait_ms => 0 });
is($r->{state}, 'starting', 'the next start waits for the stopped forker');
my $waiting = $r->{id};

# a join before its keeper came: the blank screen, not an Error
my ($wj, undef, @flush) = attach_join($t, $r, role => 'observer');
ok((grep { (session_frame_kind($_) // '') eq 'Keyframe' } @flush)
    && !(grep { (session_frame_kind($_) // '') eq 'Error' } @flush),
    'a join while it starts gets a Keyframe (of the blank screen) at once')
    or diag(explain \@flush);
$wj->close;
($st, $r) = api_call($port, '/pty/kill', { id => $waiting });
ok($st == 200 && $r->{state} eq 'exited' && $r->{closed_reason} eq 'killed',
    'kill ends it at once, as killed') or diag(explain $r);
ok($t->wait_until(sub { !alive($again) }, 5), 'the forker is killed at its '
    . 'deadline');
ok(!-e $marker, 'and no keeper ran the killed start');

# a worker killed while a start waits: the next worker closes the session
my ($third) = $t->wait_until(sub {
    (grep { $_ != $forker && $_ != $again }
        titled('pty keeper forker', children($worker)))[0] }, 5);
$spare = $third && wait_spare($third);
kill 'STOP', $third if $third;
($st, $r) = api_call($port, '/pty/start', { command => 'sleep 1', wait_ms => 0 });
($st, $r) = api_call($port, '/pty/start', { command => "touch $marker",
    wait_ms => 0 });
$waiting = $r->{id};
is($r->{state}, 'starting', 'a third forker stopped: a start waits');
my $dead = $worker;
kill 'KILL', $dead;
($worker) = $t->wait_until(sub { my @w = $t->worker_pids;
    @w == 1 && $w[0] != $dead ? $w[0] : undef }, 10);
my ($closed) = $t->wait_until(sub {
    my ($st, $r) = api_call($port, '/pty/list', {});
    my ($x) = grep { $_->{id} eq $waiting } @{$r->{sessions} // []};
    $x && $x->{state} eq 'exited' ? $x : undef }, 10);
ok($closed && $closed->{closed_reason} eq 'error',
    'the next worker closes the session its dead worker was starting')
    or diag(explain $closed);
ok(!-e $marker, 'and it never ran');
kill 'CONT', $third if $third;
ok($t->wait_until(sub { !alive($third) }, 5), 'the dead worker\'s forker, '
    . 'let run again, ends');

# a reload while a start waits: the old worker forks its keeper as it
# exits, and the new worker takes the running session over
my $fourth = wait_forker($t, $worker, 5);
$spare = $fourth && wait_spare($fourth);
kill 'STOP', $fourth if $fourth;
($st, $r) = api_call($port, '/pty/start', { command => 'sleep 1', wait_ms => 0 });
($st, $r) = api_call($port, '/pty/start', { command => 'echo reloaded-$((6*7)); '
    . 'exec sleep 100', wait_ms => 0 });
$waiting = $r->{id};
is($r->{state}, 'starting', 'a fourth forker stopped: a start waits');
ok($t->reload, 'reload');
($st, $r) = api_call($port, '/pty/read', { id => $waiting,
    wait_for => 'reloaded-42', wait_ms => 5000 });
ok($st == 200 && $r->{matched} && $r->{state} eq 'running',
    'it runs, read through the new worker') or diag(explain $r);
kill 'CONT', $fourth if $fourth;
ok($t->wait_until(sub { !alive($fourth) }, 5), 'the old forker ends');

###############################################################################

# a call whose answer is read later
sub send_call {
    my ($name, $body) = @_;
    my $c = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port,
        Proto => 'tcp') or die "connect: $!";
    my $json = json_encode($body);
    print $c "POST /pty/$name HTTP/1.1\r\nHost: localhost\r\n"
        . "Connection: close\r\nContent-Type: application/json\r\n"
        . 'Content-Length: ' . length($json) . "\r\n\r\n" . $json;
    return $c;
}

sub read_answer {
    my ($c) = @_;
    my $raw = '';
    my $sel = IO::Select->new($c);
    while ($sel->can_read(20)) {
        last unless sysread($c, $raw, 65536, length $raw);
    }
    my ($status, undef, $body) = parse_response($raw);
    return ($status, (eval { json_decode($body) } // {}));
}

# the spare the forker holds, once it is there (and is not $not)
sub wait_spare { Test::Nginx::Procs::wait_spare($t, @_) }
