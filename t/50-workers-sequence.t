#!/usr/bin/perl

# Four workers, one session: clients served by four different workers see
# the same frames with the same sequence numbers in the same order, while
# the program floods output.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Test::More;
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::PtyWS qw(session_frame_kind decode_output);
use Time::HiRes qw(sleep);

my $t = pty_nginx(workers => 4, reuseport => 1);
$t->run();

is(scalar $t->worker_pids, 4, 'four workers');

# the output starts on a keystroke, once everyone is listening
my $s = start_session($t, 'stty -echo; read x; '
    . 'for i in $(seq 1 3000); do echo "line $i"; done; echo done; '
    . 'exec sleep 60');

my @c = attach_workers($t, $s, 4);
is(scalar @c, 4, 'clients on four different workers');

my $i = 0;
for my $c (@c) {
    join_session($c->[0], role => $i++ ? 'observer' : 'controller');
}

send_input($c[0][0], "\r");

my @streams;
for my $c (@c) {
    my $out = '';
    my @f = $c->[0]->recv_until(sub {
        $out .= decode_output($_[0]);
        $out =~ /^done\r$/m }, 30);
    push @streams, [grep { defined $_->{sequence} } @f];
}

for my $k (0 .. 3) {
    my @seq = map { $_->{sequence} } @{$streams[$k]};
    ok(!(grep { $seq[$_] <= $seq[$_ - 1] } 1 .. $#seq),
        "worker $c[$k][2]: sequence strictly increasing, no duplicates ("
        . scalar(@seq) . ' frames)');
}

# frames for everyone (not a client's own RoleAssigned, Keyframe, Error)
# must be the same on every worker from the last join on
sub shared {
    my ($from, @f) = @_;
    return join "\n", map {
        $_->{sequence} . ' ' . (session_frame_kind($_) // '?') . ' '
            . ($_->{payload}{data} // '')
    } grep {
        $_->{sequence} > $from
            && (session_frame_kind($_) // '') =~ /^(?:Output|Resize|Closed)$/
    } @f;
}

my $from = 0;
for my $st (@streams) {
    my ($first_out) = grep { (session_frame_kind($_) // '') eq 'Output' }
        @$st;
    $from = $first_out->{sequence} - 1
        if $first_out && $first_out->{sequence} - 1 > $from;
}

my $ref = shared($from, @{$streams[0]});
my @lines = $ref =~ /\n/g;
ok(@lines > 10, 'many Output frames compared (' . scalar(@lines) . ')');
for my $k (1 .. 3) {
    ok(shared($from, @{$streams[$k]}) eq $ref,
        "worker $c[$k][2] saw the frames worker $c[0][2] saw");
}

my $text = join '', map { decode_output($_) } @{$streams[1]};
my @n = $text =~ /^line (\d+)\r$/mg;
is(scalar @n, 3000, 'an observer on another worker got every line');
ok(!(grep { $n[$_] != $_ + 1 } 0 .. $#n), 'in order');

# nothing polls: with the program asleep and four clients attached, each
# worker stays blocked in epoll_wait.  Counted in wake-ups (context
# switches of /proc/PID/status) and in time on a CPU (/proc/PID/schedstat,
# in ns), not in clock ticks: a tick is charged whole to whoever runs when
# it strikes, so a few short wake-ups on a busy machine can cost several.
# A sleeping worker wakes about never in 2 s and runs for microseconds; a
# 10 ms timer wakes it 200 times, and a loop that never sleeps (an event
# posted again each turn) runs for far more than 100 ms on any machine.
sleep 0.5;
my %before = map { ($_, [wakeups($_), oncpu($_)]) } $t->worker_pids;
is(scalar keys %before, 4, 'four workers to watch');
sleep 2;
for my $pid (sort keys %before) {
    my $n = (wakeups($pid) // 1e9) - $before{$pid}[0];
    my $ms = ((oncpu($pid) // 1e12) - $before{$pid}[1]) / 1e6;
    ok($n <= 10 && $ms < 100, sprintf('idle: worker %d woke %d times '
        . 'and ran %.1f ms in 2 s', $pid, $n, $ms));
}

$t->done_testing();

sub wakeups {
    my ($pid) = @_;
    my $n;
    open my $f, '<', "/proc/$pid/status" or return;
    while (my $l = <$f>) {
        $n += $1 if $l =~ /^(?:non)?voluntary_ctxt_switches:\s+(\d+)/;
    }
    return $n;
}

sub oncpu {
    my ($pid) = @_;
    open my $f, '<', "/proc/$pid/schedstat" or return;
    return (split ' ', <$f> // '')[0];
}
