#!/usr/bin/perl

# Task events replay like any frame (conformance scenarios 4, 5 and 8 for
# tasks): a client that saw a streaming task's updates up to sequence N
# disconnects, reconnects with SubscribeToTask and replay_from N and gets
# N+1..M, the terminal update last; a replay_from older than the ring is
# REPLAY_OUT_OF_RANGE; a joined pty-extensions client sees the same
# TaskStatusUpdate frames, in one strictly increasing sequence with the
# terminal's output.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Test::More;
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::PtyExt;
use Test::Nginx::PtyA2A;

my $t = pty_nginx(extra_loc => 'pty_ring_size 64k; '
    . 'pty_replay_buffer_frames 100; pty_ring_max_size 128k;');
$t->plan(17)->run();

my $s = start_session($t, SHELL, wait_for => 'ready$ ', wait_ms => 10000);

# a joined observer of everything
my $ext = attach($t, $s);
$ext->recv_json(5);
join_flush($ext);

my $a = attach($t, $s);
$a->recv_json(5);

# a task printing in three steps; the client leaves after the first update
my $id = $a->send_op('SendStreamingMessage', { message => a2a_message(
    'echo ONE; sleep 0.5; echo TWO; sleep 0.5; echo THREE', submit => 1,
    wait_for => 'THREE') }, service_parameters => { trace_id => 'tr-a' });
my $acc = $a->recv_match(sub { ($_[0]{id} // '') eq $id }, 5);
my $tid = $acc->{payload}{task_id};
my $first = $a->recv_op('TaskStatusUpdate', 5);
my $n = $first->{sequence};
ok($n, "first update at sequence $n");
$a->disconnect;

# it ends while nobody follows it
my @all = until_terminal($ext, $tid, 15);
my $m = $all[-1]{sequence};
is(task_state($all[-1]{payload}{task}), 'completed',
    'the joined client saw the task end');
my @deltas = map { join '', map { $_->{text} } @{$_->{payload}{delta}{parts}
    // []} } @all[0 .. $#all - 1];
my ($two) = grep { $deltas[$_] =~ /^TWO$/m } 0 .. $#deltas;
ok(defined $two && join('', @deltas[0 .. $two]) !~ /^THREE$/m,
    'output deltas as the program prints, before the end') or diag explain \@deltas;

# reconnect, replay from N
my $b = attach($t, $s);
$b->recv_json(5);
$id = $b->send_op('SubscribeToTask', { task_id => $tid }, replay_from => 0 + $n);
$acc = $b->recv_match(sub { ($_[0]{id} // '') eq $id }, 5);
is($acc->{op}, 'SubscribeToTask.Accepted', 'resubscribed') or diag explain $acc;
cmp_ok($acc->{payload}{current_sequence}, '>=', $m, 'current_sequence');
my @re = until_terminal($b, $tid, 5);
is_deeply([map { $_->{sequence} } @re],
    [grep { $_ > $n } map { $_->{sequence} } @all],
    'replay: every update after N, with its original sequence');
is($re[-1]{sequence}, $m, 'the terminal update last');
like(task_output($re[-1]{payload}{task}), qr/ONE.*TWO.*THREE/s,
    'its artifact holds the output');
is($re[-1]{service_parameters}{trace_id}, 'tr-a',
    'replayed with the trace of the task\'s sender');
is($re[-1]{id}, $all[-1]{id}, 'the same frame id as live');

# sequence: strictly increasing on the joined client, tasks and output
my @seq = map { $_->{sequence} // () } $ext->json_seen;
ok(!grep({ $seq[$_] <= $seq[$_ - 1] } 1 .. $#seq),
    'one strictly increasing sequence across tasks and output');

# push the task's frames out of the ring, then ask for them
$id = $b->send_op('SendMessage', { message => a2a_message(
    'for i in $(seq 1 300); do seq 1 100; sleep 0.002; done; echo DONE',
    submit => 1, wait_for => 'DONE', wait_ms => 8000) });
my $big = $b->recv_match(sub { ($_[0]{id} // '') eq $id
    && $_[0]{op} eq 'SendMessage.Response' }, 30);
my $text = task_output($big->{payload}{task});
cmp_ok(length $text, '>', 20000, 'the answer has the output read');
$b->send_op('GetTask', { task_id => $big->{payload}{task}{id} // '' });
my $g = $b->recv_op('GetTask.Response', 5)->{payload}{task};
ok(is_terminal($g) && task_output($g) =~ /^\[\d+ bytes cut\]/,
    'too big for the ring: stored with the output\'s end');
my $c = attach($t, $s);
$c->recv_json(5);
$id = $c->send_op('SubscribeToTask', { task_id => $tid }, replay_from => 1);
my $e = $c->recv_match(sub { ($_[0]{id} // '') eq $id }, 5);
ok($e->{op} eq 'Error' && $e->{payload}{code} =~
    /^(REPLAY_OUT_OF_RANGE|TASK_NOT_FOUND)$/, 'stale: ' . ($e->{payload}{code} // $e->{op}));

# a task still in the ring, with a stale replay_from
$id = $c->send_op('SendMessage', { message => a2a_message('true',
    submit => 1, wait_for => 'ready$ ') });
my $r = $c->recv_match(sub { ($_[0]{id} // '') eq $id }, 10);
$id = $c->send_op('SubscribeToTask', { task_id => $r->{payload}{task}{id} },
    replay_from => 1);
$e = $c->recv_match(sub { ($_[0]{id} // '') eq $id }, 5);
is($e->{payload}{code}, 'REPLAY_OUT_OF_RANGE', 'REPLAY_OUT_OF_RANGE');
ok($e->{payload}{a2a_error}{name}, 'a2a_error populated');

is($b->invalid_frames + $c->invalid_frames + $ext->invalid_frames, 0,
    'every frame matched the schema');
