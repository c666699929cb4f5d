#!/usr/bin/perl

# A2A tasks over pty-ws/v1 (conformance scenarios 1, 2, 3 and 9): a python3
# REPL driven only through SendMessage and SendStreamingMessage to the
# value of 2**64; GetTask, ListTasks, CancelTask, SubscribeToTask,
# Unsubscribe and UpdateServiceParameters round-trip; every error code a
# task operation can give carries a populated a2a_error; the trace_id of
# the first frame is on every TaskStatusUpdate and every Accepted frame.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Test::More;
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::PtyExt;
use Test::Nginx::PtyA2A;

my $t = pty_nginx();
$t->plan(53)->run();

my $s = start_session($t, 'python3 -q');
my $ws = attach($t, $s);
my $hello = $ws->recv_json(5);

# scenario 1: the six core operations, and no push notifications
is_deeply([sort @{$hello->{payload}{supported_operations}}],
    [sort qw(SendMessage SendStreamingMessage GetTask ListTasks CancelTask
        SubscribeToTask)], 'hello lists the six core operations');

# the first frame carries the trace
my $trace = 'trace-' . $$;
my $id = $ws->send_json({ op => 'ping', payload => {
    client_ts => Test::Nginx::PtyWS::rfc3339_now() },
    service_parameters => { trace_id => $trace } });
$ws->recv_op('pong', 5);

# SendMessage: the first prompt, then 2**64
my $r = send_message($ws, '', wait_for => '>>> ');
is($r->{op}, 'SendMessage.Response', 'SendMessage answered')
    or diag explain $r;
$r = send_message($ws, '2**64', submit => 1, wait_for => '>>> ');
my $task = $r->{payload}{task};
is($task->{kind}, 'task', 'a Task');
like($task->{id}, qr/^[0-9a-f-]{36}$/, 'with an id');
is($task->{contextId}, $s->{session_id}, 'its context is the session');
is(task_state($task), 'completed', 'completed when the prompt came back');
like($task->{status}{timestamp}, qr/^\d{4}-\d\d-\d\dT[\d:.]+Z$/,
    'status timestamp');
like(task_output($task), qr/18446744073709551616/,
    'the settled output is the artifact: 2**64');
is($task->{history}[0]{parts}[0]{text}, '2**64', 'history: the message');
is($task->{metadata}{matched}, JSON::PP::true(), 'engine facts in metadata');
is($r->{service_parameters}{trace_id}, $trace, 'trace on the answer');
my $first = $task->{id};

# SendStreamingMessage: Accepted, updates, the terminal one last
my ($acc, @up) = stream_message($ws, 'print(2**64 + 1)', submit => 1,
    wait_for => '>>> ');
is($acc->{op}, 'SendStreamingMessage.Accepted', 'Accepted');
my $tid = $acc->{payload}{task_id};
like($tid, qr/^[0-9a-f-]{36}$/, 'Accepted names the task');
is($acc->{service_parameters}{trace_id}, $trace, 'trace on Accepted');
cmp_ok(scalar @up, '>=', 2, 'working, then the end');
is(task_state($up[0]{payload}{task}), 'working', 'first update: working');
is(task_state($up[-1]{payload}{task}), 'completed', 'last: completed');
like(join('', map { $_->{text} } @{$up[-1]{payload}{delta}{parts} // []}),
    qr/18446744073709551617/, 'the delta carries the output');
my @seq = map { $_->{sequence} } @up;
ok(!grep({ !defined } @seq) && join(',', @seq) eq join(',', sort { $a <=> $b }
    @seq) && $seq[0] < $seq[-1], "updates take session sequences (@seq)");
is(scalar(grep { ($_->{service_parameters}{trace_id} // '') eq $trace } @up),
    scalar @up, 'trace_id on every TaskStatusUpdate');

# GetTask, with and without history
$id = $ws->send_op('GetTask', { task_id => $tid });
$r = $ws->recv_op('GetTask.Response', 5);
is($r->{payload}{task}{id}, $tid, 'GetTask');
is(task_state($r->{payload}{task}), 'completed', 'GetTask: its state');
is(scalar @{$r->{payload}{task}{history}}, 1, 'history of one message');
$ws->send_op('GetTask', { task_id => $tid, history_length => 0 });
$r = $ws->recv_op('GetTask.Response', 5);
is(scalar @{$r->{payload}{task}{history}}, 0, 'history_length 0');

# ListTasks: newest first, pages, filters
$ws->send_op('ListTasks', {});
$r = $ws->recv_op('ListTasks.Response', 5);
is_deeply([(map { $_->{id} } @{$r->{payload}{tasks}})[0, 1]], [$tid, $first],
    'ListTasks: newest first');
is($r->{payload}{next_page_token}, '', 'one page');
$ws->send_op('ListTasks', { page_size => 1 });
$r = $ws->recv_op('ListTasks.Response', 5);
is(scalar @{$r->{payload}{tasks}}, 1, 'page_size 1');
my $token = $r->{payload}{next_page_token};
ok(length $token, 'a next_page_token');
$ws->send_op('ListTasks', { page_size => 1, page_token => $token });
$r = $ws->recv_op('ListTasks.Response', 5);
is($r->{payload}{tasks}[0]{id}, $first, 'the next page');
$ws->send_op('ListTasks', { filter => { state => 'failed' } });
$r = $ws->recv_op('ListTasks.Response', 5);
is(scalar @{$r->{payload}{tasks}}, 0, 'filter by state');

# a wait that times out: input-required, the program still runs
$r = send_message($ws, 'import time; time.sleep(2); print("SL" "EPT")',
    submit => 1, wait_for => 'SLEPT', wait_ms => 300);
is(task_state($r->{payload}{task}), 'input-required',
    'timed out: input-required');
like($r->{payload}{task}{status}{message}{parts}[0]{text}, qr/timed out/,
    'the status message says why');
$r = send_message($ws, '', wait_for => '>>> ');
is(task_state($r->{payload}{task}), 'completed', 'the sleep ends');

# CancelTask of an ended task; unknown tasks
$id = $ws->send_op('CancelTask', { task_id => $tid });
my $e = $ws->recv_op('Error', 5);
is($e->{payload}{code}, 'TASK_NOT_CANCELABLE', 'TASK_NOT_CANCELABLE');
is($e->{payload}{a2a_error}{code}, -32002, 'a2a_error populated');
is($e->{id}, $id, 'echoes the id');
$ws->send_op('GetTask', { task_id => '01900000-0000-7000-8000-000000000000' });
$e = $ws->recv_op('Error', 5);
is($e->{payload}{code}, 'TASK_NOT_FOUND', 'TASK_NOT_FOUND');
is($e->{payload}{a2a_error}{code}, -32001, 'a2a_error populated');

# SubscribeToTask, Unsubscribe, UpdateServiceParameters
$id = $ws->send_op('SubscribeToTask', { task_id => $tid });
$r = $ws->recv_match(sub { $_[0]{id} eq $id }, 5);
is($r->{op}, 'SubscribeToTask.Accepted', 'SubscribeToTask.Accepted');
cmp_ok($r->{payload}{current_sequence}, '>=', $seq[-1], 'current_sequence');
is($r->{service_parameters}{trace_id}, $trace, 'trace on Accepted');
$ws->send_op('Unsubscribe', { task_id => $tid });
$r = $ws->recv_op('Unsubscribe.Response', 5);
is($r->{payload}{task_id}, $tid, 'Unsubscribe.Response');
$ws->send_op('UpdateServiceParameters',
    { service_parameters => { trace_id => "$trace-2" } });
$r = $ws->recv_op('UpdateServiceParameters.Response', 5);
is($r->{payload}{service_parameters}{trace_id}, "$trace-2",
    'UpdateServiceParameters.Response');
($acc, @up) = stream_message($ws, '2**64', submit => 1, wait_for => '>>> ');
is(scalar(grep { ($_->{service_parameters}{trace_id} // '') eq "$trace-2" }
    $acc, @up), 1 + @up, 'the new trace from then on');

# errors: bad requests, unsupported, push notifications
$ws->send_op('SendMessage', { message => 'hi' });
$e = $ws->recv_op('Error', 5);
is($e->{payload}{code}, 'INVALID_REQUEST', 'INVALID_REQUEST');
is($e->{payload}{a2a_error}{code}, -32600, 'a2a_error populated');
$ws->send_op('SetTaskPushNotificationConfig', { task_id => $tid });
$e = $ws->recv_op('Error', 5);
is($e->{payload}{code}, 'UNSUPPORTED_OPERATION', 'push: unsupported');
is($e->{payload}{a2a_error}{code}, -32004, 'a2a_error populated');

# an observer may not send (the first to join a fresh session controls it)
my $ctl = attach($t, $s);
$ctl->recv_json(5);
join_flush($ctl);
my $obs = attach($t, $s);
$obs->recv_json(5);
join_flush($obs, role => 'observer');
$obs->send_op('SendMessage', { message => a2a_message('1', submit => 1) });
$e = $obs->recv_op('Error', 5);
is($e->{payload}{code}, 'PERMISSION_DENIED', 'observer: PERMISSION_DENIED');
is($e->{payload}{a2a_error}{name}, 'PermissionDeniedError',
    'a2a_error populated');

# a program that exits before what was waited for: failed, with the code
my $sh = start_session($t, SHELL, wait_for => 'ready$ ', wait_ms => 10000);
my $x = attach($t, $sh);
$x->recv_json(5);
$r = send_message($x, 'exit 3', submit => 1, wait_for => 'NEVER');
is(task_state($r->{payload}{task}), 'failed', 'exited first: failed');
is($r->{payload}{task}{metadata}{exit_code}, 3, 'with its exit code');

is($ws->invalid_frames + $obs->invalid_frames + $x->invalid_frames, 0,
    'every frame matched the schema');
