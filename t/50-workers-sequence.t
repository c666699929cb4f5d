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

# nothing polls: with the program asleep and four clients attached, the
# workers use no CPU (clock ticks of /proc/PID/stat, 10 ms each)
sleep 0.5;
my %before = map { $_ => cpu($_) } $t->worker_pids;
sleep 2;
my $used = 0;
$used += cpu($_) - $before{$_} for keys %before;
ok($used <= 2, "idle: four workers used $used ticks in 2 s");

$t->done_testing();

sub cpu {
    my ($pid) = @_;
    open my $f, '<', "/proc/$pid/stat" or return 0;
    my @f = split / /, (<$f> =~ s/^.*\) //r);
    return $f[11] + $f[12];
}
