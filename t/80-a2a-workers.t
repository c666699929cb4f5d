#!/usr/bin/perl

# Two workers serve one session's tasks: a python3 task streamed through
# one worker is followed, read and listed through another; the next task
# goes through the second worker and the first sees it; task events carry
# one session sequence whichever worker stored them.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Test::More;
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::PtyA2A;

my $t = pty_nginx(workers => 2, reuseport => 1);
$t->plan(18)->run();

my $s = start_session($t, 'python3 -q', wait_for => '>>> ',
    wait_ms => 10000);
my ($w1, $w2) = attach_workers($t, $s, 2);
my ($a, $b) = ($w1->[0], $w2->[0]);
isnt($w1->[2], $w2->[2], 'two connections, two workers');

# streamed through the first worker, followed through the second
my $id = $a->send_op('SendStreamingMessage', { message => a2a_message(
    'import time; time.sleep(1); print(2**64)', submit => 1,
    wait_for => '>>> ') }, service_parameters => { trace_id => 'tr-w1' });
my $acc = $a->recv_match(sub { ($_[0]{id} // '') eq $id }, 5);
my $tid = $acc->{payload}{task_id};
$id = $b->send_op('SubscribeToTask', { task_id => $tid });
is($b->recv_match(sub { ($_[0]{id} // '') eq $id }, 5)->{op},
    'SubscribeToTask.Accepted', 'the other worker subscribes');

my @up_a = until_terminal($a, $tid, 20);
my @up_b = until_terminal($b, $tid, 20);
is(task_state($up_a[-1]{payload}{task}), 'completed', 'completed');
like(task_output($up_b[-1]{payload}{task}), qr/18446744073709551616/,
    'the other worker\'s subscriber gets the result');
is($up_b[-1]{sequence}, $up_a[-1]{sequence}, 'the same sequence on both');
is($up_b[-1]{service_parameters}{trace_id}, 'tr-w1',
    'and the sender\'s trace');

# read from the second worker
$b->send_op('GetTask', { task_id => $tid });
my $g = $b->recv_op('GetTask.Response', 5);
is(task_state($g->{payload}{task}), 'completed', 'GetTask on the other');

# the next task through the second worker; the first lists both
my $r = send_message($b, '2**64 + 2', submit => 1, wait_for => '>>> ');
like(task_output($r->{payload}{task}), qr/18446744073709551618/,
    'SendMessage through the second worker');
cmp_ok($r->{payload}{task}{id}, 'gt', $tid, 'a newer task id');
$a->send_op('ListTasks', {});
my $l = $a->recv_op('ListTasks.Response', 5);
is_deeply([map { $_->{id} } @{$l->{payload}{tasks}}],
    [$r->{payload}{task}{id}, $tid], 'ListTasks on the first sees both');

# one sequence: each worker's updates interleave in order
$id = $a->send_op('SubscribeToTask', { task_id => $r->{payload}{task}{id} },
    replay_from => 0);
my @re = until_terminal($a, $r->{payload}{task}{id}, 5);
cmp_ok($re[-1]{sequence}, '>', $up_a[-1]{sequence},
    'later task, later sequence');
$a->send_op('GetTask', { task_id => $r->{payload}{task}{id} });
is(task_state($a->recv_op('GetTask.Response', 5)->{payload}{task}),
    'completed', 'GetTask of the second worker\'s task on the first');

# canceled through the other worker: the interrupt reaches python, the
# running worker ends its wait, one terminal update
$id = $a->send_op('SendStreamingMessage', { message => a2a_message(
    'import time; time.sleep(30); print("SL" "EPT")', submit => 1,
    wait_for => 'SLEPT', wait_ms => 25000) });
$acc = $a->recv_match(sub { ($_[0]{id} // '') eq $id }, 5);
$tid = $acc->{payload}{task_id};
my $started = time;
# (once python has read the whole line: a ^C before that is what a
# terminal makes of it, the kernel drops the line's unread rest, and
# python takes the next input as the line's end)
my @up = $a->recv_until(sub { $_[0]{op} eq 'TaskStatusUpdate'
    && join('', map { $_->{text} // '' }
        @{$_[0]{payload}{delta}{parts} // []}) =~ /"EPT"\)\n/ }, 10,
    'python read the line');
$b->send_op('CancelTask', { task_id => $tid });
is(task_state($b->recv_op('CancelTask.Response', 5)->{payload}{task}),
    'canceled', 'CancelTask through the other worker');
@up = until_terminal($a, $tid, 10);
is(task_state($up[-1]{payload}{task}), 'canceled',
    'the sender\'s stream ends canceled');
# (waiting for the answer, not for ">>> ": on a loaded machine the line
# can be typed before python has printed the interrupt's own prompt,
# which then comes after the input and would end the wait)
$r = send_message($a, '2**64 + 3', submit => 1,
    wait_for => '18446744073709551619', timeout => 10);
like(task_output($r->{payload}{task}), qr/KeyboardInterrupt.*18446744073709551619/s,
    'python was interrupted and takes the next task at once')
    or diag explain [$r->{payload}{task}{status}, $r->{payload}{task}{metadata},
        time - $started, \@up];
cmp_ok(time - $started, '<', 20, 'long before 30 s');
$a->send_op('ListTasks', { filter => { state => 'completed' } });
$l = $a->recv_op('ListTasks.Response', 5);
ok(!grep({ $_->{id} eq $tid } @{$l->{payload}{tasks}}),
    'the canceled task did not complete after all');

is($a->invalid_frames + $b->invalid_frames, 0,
    'every frame matched the schema');
