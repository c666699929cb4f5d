#!/usr/bin/perl

# Two workers, slow readers on the worker that does not own the terminal,
# a flood: each time one falls out of the ring it gets PTY_OUTPUT_LAGGED
# and then its Keyframe (made by the owner worker, which goes on
# appending Output meanwhile) before any other frame: no Output, Resize
# or MembershipChanged comes between them, sequences keep growing, and
# what the Keyframe and the Output after it hold reaches the end.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use MIME::Base64 qw(decode_base64);
use Test::More;
use Time::HiRes qw(sleep);
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::PtyAPI qw(api_call);
use Test::Nginx::PtyExt;
use Test::Nginx::PtyWS qw(decode_output);

# a ring that cannot grow, small send buffers: slow readers lag again and
# again
my $t = pty_nginx(workers => 2, reuseport => 1, listen_opts => 'sndbuf=16k',
    extra_loc => 'pty_ring_size 64k; pty_ring_max_size 64k; '
        . 'pty_replay_buffer_frames 1; pty_ws_send_buffer 16k;');
$t->run();

my ($status, $s, undef, $h) = api_call($t->port(8080), '/pty/start', {
    command => 'read -p go? x; for i in 1 2 3 4 5 6; do seq 1 150000; '
        . 'done; echo DO""NE',
    wait_ms => 0 });
is($status, 200, 'session started');
my $owner = $h->{'x-pty-worker'};
ok($owner, "owned by worker $owner");

my $ctl = attach($t, $s);
$ctl->recv_json(5);
join_flush($ctl);

# four observers served by the other worker, with small receive windows
my @slow;
for (1 .. 400) {
    last if @slow >= 4;
    my $ws = Test::Nginx::PtyWS->connect(port => $t->port(8080),
        path => $s->{attach_path}, rcvbuf => 4096);
    if (($ws->response_header('X-Pty-Worker') // $owner) eq $owner) {
        $ws->close;
        next;
    }
    $ws->recv_json(5);
    join_flush($ws, role => 'observer');
    push @slow, { ws => $ws, frames => [] };
}
is(scalar @slow, 4, 'four observers on the worker that does not own it');

send_input($ctl, "\r");

# round robin, a few frames each, a pause now and then: they fall behind
my $done = 0;
for my $round (1 .. 100000) {
    last if $done == @slow;
    for my $c (grep { !$_->{done} } @slow) {
        for (1 .. 12) {
            my $m = $c->{ws}->recv_json(10);
            if (!$m || $m->{op} eq 'binding_goodbye') {
                $c->{done} = 1;
                $done++;
                last;
            }
            push @{$c->{frames}}, $m if $m->{op} eq 'pty.session_frame';
        }
    }
    sleep 0.02 if $round % 4 == 0;
}

# the controller read nothing all along: it lagged too, and ends the same
my @cf = $ctl->recv_until(sub { $_[0]{op} eq 'binding_goodbye' }, 30,
    'the controller gets to goodbye');
is(scalar(grep { kind($_) eq 'Closed' } @cf), 1, 'the controller: one Closed');

my $lags = 0;
for my $k (0 .. $#slow) {
    my @f = @{$slow[$k]{frames}};
    my @lag = grep { kind($f[$_]) eq 'Error'
        && $f[$_]{payload}{code} eq 'PTY_OUTPUT_LAGGED' } 0 .. $#f;
    $lags += @lag;
    my @bad = grep { $_ == $#f || kind($f[$_ + 1]) ne 'Keyframe' } @lag;
    ok(!@bad, "observer $k: each of its " . scalar(@lag)
        . ' PTY_OUTPUT_LAGGED is followed by a Keyframe')
        or diag(join ', ', map { "LAG $f[$_]{sequence}, then "
            . ($_ < $#f ? kind($f[$_ + 1]) . " $f[$_ + 1]{sequence} "
                . ($f[$_ + 1]{payload}{code} // '')
                        : 'nothing') } @bad);
    my @seq = seqs(@f);
    ok(!(grep { $seq[$_] <= $seq[$_ - 1] } 1 .. $#seq),
        "observer $k: sequences strictly increase");
    is(scalar(grep { kind($_) eq 'Closed' } @f), 1, "observer $k: one Closed");

    # from its last Keyframe on, the screen reaches the end marker
    my ($last) = grep { kind($f[$_]) eq 'Keyframe' } reverse 0 .. $#f;
    like(defined $last ? decode_base64($f[$last]{payload}{snapshot})
        . decode_output(@f[$last + 1 .. $#f]) : '', qr/DONE/,
        "observer $k: its last Keyframe and what follows reach the end");
}
cmp_ok($lags, '>=', 4, "the observers lagged ($lags times)");

$t->done_testing();
