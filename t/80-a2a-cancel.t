#!/usr/bin/perl

# CancelTask of a running `sleep 30`: the program gets the interrupt, the
# task ends CANCELED for the canceler, for its sender (SendMessage
# answered, SendStreamingMessage's last update) and for subscribers; an
# ended task is TASK_NOT_CANCELABLE.  Task starts are paced as input
# (RATE_LIMITED), and a connection follows a bounded number of tasks.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Test::More;
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::PtyExt;
use Test::Nginx::PtyA2A;

my $t = pty_nginx(extra_loc => 'pty_input_rate 4k burst=8k;');
$t->plan(20)->run();

my $s = start_session($t, SHELL, wait_for => 'ready$ ', wait_ms => 10000);
my $sleep = 'sleep 30.' . ($$ % 1000);

my $a = attach($t, $s);
$a->recv_json(5);
my $b = attach($t, $s);
$b->recv_json(5);

my $r = send_message($a, 'true', submit => 1, wait_for => 'ready$ ');
is(task_state($r->{payload}{task}), "completed", "the shell is ready") or diag explain $r;

# a SendMessage that would wait 30 s
my $id = $a->send_op('SendMessage', { message => a2a_message(
    "$sleep; echo SL''EPT", submit => 1, wait_for => 'SLEPT',
    wait_ms => 25000) });
$t->wait_until(sub { procs_running($sleep) }, 10);
ok(scalar procs_running($sleep), "$sleep runs") or diag explain [$a->recv_until(sub {0}, 2)];

# another connection finds it working, follows it and cancels it
$b->send_op('ListTasks', { filter => { state => 'working' } });
my $l = $b->recv_op('ListTasks.Response', 5);
is(scalar @{$l->{payload}{tasks}}, 1, 'one working task');
my $tid = $l->{payload}{tasks}[0]{id};
my $sid = $b->send_op('SubscribeToTask', { task_id => $tid });
is($b->recv_match(sub { $_[0]{id} eq $sid }, 5)->{op},
    'SubscribeToTask.Accepted', 'subscribed');

my $started = time;
$b->send_op('CancelTask', { task_id => $tid });
my @f = $b->recv_until(sub { $_[0]{op} eq 'CancelTask.Response' }, 5);
is(task_state($f[-1]{payload}{task}), 'canceled', 'CancelTask: canceled');
my @up = grep { $_->{op} eq 'TaskStatusUpdate' } @f;
push @up, until_terminal($b, $tid, 5) unless @up;
is(task_state($up[-1]{payload}{task}), 'canceled',
    'the subscriber gets a final canceled update');

$r = $a->recv_match(sub { ($_[0]{id} // '') eq $id }, 5);
is($r->{op}, 'SendMessage.Response', 'the sender is answered');
is(task_state($r->{payload}{task}), 'canceled', 'with the canceled task');

$t->wait_until(sub { !procs_running($sleep) }, 10);
ok(!procs_running($sleep), 'the interrupt ended the sleep');
cmp_ok(time - $started, '<', 20, 'long before 30 s');

# the shell takes the next task at once
$r = send_message($a, 'echo AFTER$((40+2))', submit => 1,
    wait_for => 'AFTER42');
is(task_state($r->{payload}{task}), 'completed', 'next task completed');
unlike(task_output($r->{payload}{task}), qr/^SLEPT/m, 'SLEPT never printed');

# streaming: the last update is the canceled one
$id = $a->send_op('SendStreamingMessage', { message => a2a_message(
    "$sleep; echo SL''EPT", submit => 1, wait_for => 'SLEPT',
    wait_ms => 25000) });
my $acc = $a->recv_match(sub { ($_[0]{id} // '') eq $id }, 5);
is($acc->{op}, 'SendStreamingMessage.Accepted', 'streaming: Accepted');
$tid = $acc->{payload}{task_id} // '';
$t->wait_until(sub { procs_running($sleep) }, 10);
$b->send_op('CancelTask', { task_id => $tid });
is(task_state($b->recv_op('CancelTask.Response', 5)->{payload}{task}),
    'canceled', 'streaming task canceled');
@up = until_terminal($a, $tid, 5);
is(task_state(($up[-1] // {})->{payload}{task}), 'canceled',
    'its stream ends with canceled');
$b->send_op('CancelTask', { task_id => $tid });
is($b->recv_op('Error', 5)->{payload}{code}, 'TASK_NOT_CANCELABLE',
    'canceled once: TASK_NOT_CANCELABLE');

# paced as input: a burst of big tasks is refused, RATE_LIMITED
my $cat = start_session($t, 'stty -echo; cat >/dev/null');
my $c = attach($t, $cat);
$c->recv_json(5);
my $text = 'x' x 2000;
$c->send_op('SendMessage', { message => a2a_message($text, wait_ms => 0) })
    for 1 .. 100;
my ($e) = grep { $_->{op} eq 'Error' } $c->recv_until(sub {
    $_[0]{op} eq 'Error' }, 10);
is($e->{payload}{code}, 'RATE_LIMITED', 'RATE_LIMITED');
is($e->{payload}{retryable}, JSON::PP::true(), 'retryable');
ok($e->{payload}{a2a_error}{name}, 'a2a_error populated');

is($a->invalid_frames + $b->invalid_frames + $c->invalid_frames, 0,
    'every frame matched the schema');
