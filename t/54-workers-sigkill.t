#!/usr/bin/perl

# Four workers; the one that owns a session is killed with SIGKILL.  The
# session survives: another worker takes the terminal over, the sequence
# goes on without a gap or a repeat, input still reaches the program, the
# dead worker's client leaves the membership, and the worker the master
# starts in its place serves the session too.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Test::More;
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::PtyWS qw(session_frame_kind decode_output);
use Test::Nginx::PtyAPI qw(api_call);
use Time::HiRes qw(sleep time);

my $t = pty_nginx(workers => 4, reuseport => 1);
$t->allow_log(qr/exited on signal 9/);
my $conf = $t->read_file('nginx.conf');
my $dir = $t->testdir();
$conf =~ s/^(events)/error_log $dir\/info.log info;\n\n$1/m;
$t->write_file('nginx.conf', $conf);
$t->run();

my ($s, $owner) = start_ticker($t);
ok($owner, "started, owned by worker $owner");

my @c = attach_workers($t, $s, 4);
is(scalar @c, 4, 'clients on four workers');
my @live = grep { $_->[2] != $owner } @c;
my ($dead) = grep { $_->[2] == $owner } @c;
is(scalar @live, 3, "three clients off the owner $owner");

join_session($live[0][0], role => 'controller', label => 'ctl');
join_session($_->[0], label => 'obs') for @live[1, 2], $dead;

# a little output everywhere first
my (@text, @frames);
for my $k (0 .. 2) {
    my $txt = '';
    push @{$frames[$k]}, $live[$k][0]->recv_until(sub {
        ($txt .= decode_output($_[0])) =~ /(?:tick \d+\r\n.*){3}/s }, 10);
}

my $kill_ts = Test::Nginx::PtyWS::rfc3339(time);
kill 'KILL', $owner;
my $t0 = time;

# the master starts another worker; the session is taken over
my $deadline = time + 10;
my @now;
while (time < $deadline) {
    @now = $t->worker_pids;
    last if @now == 4 && !grep { $_ == $owner } @now;
    sleep 0.05;
}
my ($respawned) = grep { my $p = $_; !grep { $_->[2] == $p } @c } @now;
ok($respawned, "worker $owner replaced by $respawned");

# output goes on: each live client sees ticks continue
my $resumed;
for my $k (0 .. 2) {
    my $txt = join '', map { decode_output($_) } @{$frames[$k]};
    my $want = (($txt =~ /tick (\d+)\r\n(?!.*tick)/s)[0] // 0) + 40;
    push @{$frames[$k]}, $live[$k][0]->recv_until(sub {
        $resumed //= time if $k == 0 && $_[0]{ts} && $_[0]{ts} gt $kill_ts
            && (session_frame_kind($_[0]) // '') eq 'Output';
        ($txt .= decode_output($_[0])) =~ /tick $want\r/ }, 15);
}
diag(sprintf 'the first Output after the kill reached a client %.0f ms '
    . 'after it (ticks every 30 ms)', 1000 * (($resumed // time) - $t0));

my $log = join '', map { $_ } $t->grep_error_log(
    qr/taking over session pty-\d+ from worker $owner/, 'info.log');
ok($log, 'another worker took the session over');

for my $k (0 .. 2) {
    my @out = grep { (session_frame_kind($_) // '') eq 'Output' }
        @{$frames[$k]};
    my @seq = map { $_->{sequence} } @out;
    ok(!(grep { $seq[$_] <= $seq[$_ - 1] } 1 .. $#seq),
        "worker $live[$k][2]: sequence strictly increasing");
    my @n = (join '', map { decode_output($_) } @out) =~ /^tick (\d+)\r$/mg;
    ok(@n > 40 && !(grep { $n[$_] != $n[$_ - 1] + 1 } 1 .. $#n),
        "worker $live[$k][2]: ticks $n[0]..$n[-1] without a gap or repeat");
}

# input from a live worker reaches the program under its new owner
send_input($live[0][0], "after the kill\r");
like(read_output($live[0][0], qr/got after the kill\r\n/),
    qr/got after the kill/, 'input reaches the program');

# the dead worker's client is gone from the membership
my $m;
my $three = sub {
    return 0 unless (session_frame_kind($_[0]) // '') eq 'MembershipChanged';
    $m = $_[0]{payload};
    return @{$m->{controllers}} + @{$m->{observers}} == 3;
};
$live[1][0]->recv_until($three, 10)
    unless grep { $three->($_) } @{$frames[1]};
is(scalar(@{$m->{controllers}}) + scalar(@{$m->{observers}}), 3,
    'the killed worker\'s member left the membership');

# the dead worker's client reconnects, now to any worker
my $last = (grep { defined } map { $_->{sequence} }
    @{$frames[1]})[-1];
my @n = $t->worker_pids;
my ($fresh) = attach_workers($t, $s, 1, not => { map { $_ => 1 }
    grep { $_ != $respawned } @n });
ok($fresh && $fresh->[2] == $respawned, 'attached to the new worker');
my @f = join_session($fresh->[0], replay_from => $last);
my $txt = join '', map { decode_output($_) } @f;
# ten ticks past the last whole one its observer saw: the replay may hold
# only the end of a tick line (a line can span two Output frames), so the
# replayed text alone can hold no whole tick to count from
my $seen = join '', map { decode_output($_) } @{$frames[1]};
my $want = (($seen =~ /tick (\d+)\r\n(?!.*tick)/s)[0] // 0) + 10;
push @f, $fresh->[0]->recv_until(sub {
    ($txt .= decode_output($_[0])) =~ /tick $want\r/ }, 10)
    unless $txt =~ /tick $want\r/;
like($txt, qr/tick $want\r/, 'the new worker serves the session')
    or stall_report();

$t->done_testing();

# what a stall looked like: does output still flow to a client of another
# worker (the program, the owner) and who took what over, by the log
sub stall_report {
    my ($other, $top) = ('', 0);
    $live[0][0]->recv_until(sub {
        $other .= decode_output($_[0]);
        $top = $1 while $other =~ /tick (\d+)\r\n/g;
        $top >= $want + 20 }, 2, 'ticks to a client of another worker');
    diag("the new worker $respawned waited for tick $want; worker "
        . "$live[0][2]'s client got up to tick $top");
    diag('the new worker\'s client got: ' . join ' ', map {
        ($_->{sequence} // '-') . ':' . (session_frame_kind($_) // $_->{op})
    } @f);
    diag($_) for $t->grep_error_log(qr/pty: /, 'info.log');
}
