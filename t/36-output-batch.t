#!/usr/bin/perl

# A flood's wake-ups are batched (ngx_pty_session.c): clients are told of
# its output every 64 KiB or millisecond rather than every PTY read.  The
# tail of each burst must still reach every client, on the terminal's
# worker and on another, while the program prints nothing more (no
# periodic Keyframe comes to end a batch here); and the first output
# after a quiet spell comes at once.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Test::More;
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::PtyWS qw(decode_output);
use Time::HiRes qw(time);

my $t = pty_nginx(workers => 2, reuseport => 1,
    extra_loc => 'pty_replay_buffer_frames 5000; '
        . 'pty_keyframe_interval_seconds 600; '
        . 'pty_keyframe_interval_frames 100000;');
$t->run();

my ($rounds, $lines) = (20, 3000);
my $s = start_session($t, "stty -echo; for r in \$(seq 1 $rounds); do "
    . "read x; seq 1 $lines; echo END\$r; done; exec cat");

my @c = attach_workers($t, $s, 2);
is(scalar @c, 2, 'clients on two different workers');

join_session($c[0][0], role => 'controller');
join_session($c[1][0], role => 'observer');

my %late;
for my $r (1 .. $rounds) {
    send_input($c[0][0], "\r");

    # the program then waits for a line: nothing more comes to end a batch
    for my $c (@c) {
        my $out = read_output($c->[0], qr/^END$r\r$/m, 5);
        my @nums = $out =~ /^(\d+)\r$/mg;
        $late{$c->[2]}++ unless $out =~ /^END$r\r$/m
            && @nums == $lines && $nums[-1] == $lines;
    }
}

for my $c (@c) {
    is($late{$c->[2]} // 0, 0, "worker $c->[2]: every burst whole, at once");
}

# quiet now: the next output is announced as soon as it is read
for my $i (1 .. 3) {
    my $t0 = time;
    send_input($c[0][0], "ping$i\r");
    for my $c (@c) {
        like(read_output($c->[0], qr/^ping$i\r$/m, 5), qr/ping$i/,
            "worker $c->[2]: the line after a quiet spell ($i)");
    }
    cmp_ok(time - $t0, '<', 2 * Test::Nginx::timeout_scale(),
        "line $i: both clients within 2 s");
}

$t->stop();
done_testing();
