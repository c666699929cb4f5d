#!/usr/bin/perl

# A client that stops reading never slows the PTY or the other clients:
# with a 64k ring that cannot grow and a 16k send queue, a reading client
# gets the whole flood and the session ends without waiting; the stalled
# one, when it reads again, gets PTY_OUTPUT_LAGGED, a Keyframe next, then
# the rest in order, and the session's Closed and goodbye.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use MIME::Base64 qw(decode_base64);
use Test::More;
use Time::HiRes qw(time);
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::PtyExt;
use Test::Nginx::PtyWS qw(decode_output);

# the slow client comes through 8081, whose sockets keep a small send
# buffer (no autotuning): what the kernels hold stays far below the flood
my $t = pty_nginx(extra_loc => 'pty_ring_size 64k; pty_ring_max_size 64k; '
        . 'pty_replay_buffer_frames 1; pty_ws_send_buffer 16k;',
    extra_http => 'server { listen 127.0.0.1:%%PORT_8081%% sndbuf=16k; '
        . 'location /agents/ { pty_attach; pty_ws_send_buffer 16k; } }');
$t->plan(13)->run();

# 590 KB, far more than the stalled client's ring and buffers hold, in
# 100 bursts of 6 KB: a reading client keeps up even on a loaded machine
# (unpaced, a slow client there is outrun by 64 KB and rightly lags)
my $lines = 100000;
my $s = start_session($t, 'read -p go? x; for i in $(seq 0 99); do '
    . 'seq $((i*1000+1)) $((i*1000+1000)); sleep 0.01; done; echo DO""NE');

my $fast = attach($t, $s);
$fast->recv_json(5);
my @seen = join_flush($fast, replay_from => 0);

# the slow one joins, then stops reading, with a small receive buffer
my $slow = Test::Nginx::PtyWS->connect(port => $t->port(8081),
    path => $s->{attach_path}, rcvbuf => 4096);
$slow->recv_json(5);
join_flush($slow, role => 'observer');

go($fast, @seen);
my $start = time;
my $out = '';
my @f = $fast->recv_until(sub { $out .= decode_output($_[0]);
    kind($_[0]) eq 'Closed' }, 30, 'the reading client gets to Closed');
my $took = time - $start;
cmp_ok($took, '<', 15, 'the reading client is not held back')
    or diag(sprintf '%.1f s', $took);

# all of it, in order, nothing lost: the ring never dropped its frames
my @nums = $out =~ /^(\d+)\r$/mg;
is(scalar @nums, $lines, "the reading client got all $lines lines");
ok(!(grep { $nums[$_] != $_ + 1 } 0 .. $#nums), 'in order');
like($out, qr/^$lines\r\nDONE\r\n/m, 'up to the end marker');
ok(!(grep { kind($_) eq 'Error' } @f), 'and was never told it lagged');
is($f[-1]{payload}{reason}, 'normal', 'the session ended by itself');

# now the stalled client reads
my @g = $slow->recv_until(sub { $_[0]{op} eq 'binding_goodbye' }, 15,
    'the slow client gets to goodbye');
my @sf = grep { $_->{op} eq 'pty.session_frame' } @g;
my ($i) = grep { kind($sf[$_]) eq 'Error' } 0 .. $#sf;
ok(defined $i && $sf[$i]{payload}{code} eq 'PTY_OUTPUT_LAGGED',
    'the slow client is told PTY_OUTPUT_LAGGED')
    or diag(join ' ', map { kind($_) } without_output(@sf));
# a client that stays stalled may lag again: every time, a Keyframe next
my @lags = grep { kind($sf[$_]) eq 'Error' } 0 .. $#sf;
is(join(' ', map { $_ < $#sf ? kind($sf[$_ + 1]) : 'nothing' } @lags),
    join(' ', ('Keyframe') x @lags),
    'the next session frame after each lag is a Keyframe');
my @after = defined $i ? @sf[$i + 1 .. $#sf] : ();
my @seq = seqs(@after);
ok(@seq && !(grep { $seq[$_] <= $seq[$_ - 1] } 1 .. $#seq),
    'then sequences strictly increase') or diag("@seq");
is(scalar(grep { kind($_) eq 'Closed' } @sf), 1,
    'one Closed in all it got');
is(@sf ? kind($sf[-1]) : 'nothing', 'Closed', 'the last session frame');
is($g[-1]{payload}{reason}, 'session_closed', 'then goodbye session_closed');
my ($k) = grep { kind($sf[$_]) eq 'Keyframe' } reverse 0 .. $#sf;
like(join('', defined $k ? (decode_base64($sf[$k]{payload}{snapshot} // ''),
    decode_output(@sf[$k + 1 .. $#sf])) : ()), qr/DONE/,
    'the last Keyframe and what follows it reach the end');
