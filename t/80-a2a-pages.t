#!/usr/bin/perl

# A2A tasks whose output is longer than a page (pty_api_page_size 4k):
# what is waited for is found however the pages fall (after pages, in the
# text still waiting behind a full page, after a full page with nothing
# more yet), a task whose sender goes away ends at its next page, and a
# terminal that does not take the input is INTERNAL with its a2a_error.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Test::More;
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::PtyExt;
use Test::Nginx::PtyA2A;

my $t = pty_nginx(workers => 1, extra_loc => 'pty_api_page_size 4k; pty_input_rate off; '
    . 'pty_input_max 256k;');
$t->plan(21)->run();

my $s = start_session($t, SHELL, wait_for => 'ready$ ', wait_ms => 10000);
my $a = attach($t, $s);
$a->recv_json(5);

# exactly a full page (the echoed line, then a line of "a"), nothing
# more for a second, then the awaited line: the page does not end the task
my $cmd;
for my $k (4000 .. 4100) {
    $cmd = "printf %${k}s | tr ' ' a; echo; sleep 1; echo DO''NE";
    last if length($cmd) + 1 + $k + 1 == 4096;
}
my $r = send_message($a, $cmd, submit => 1, wait_for => 'DONE',
    wait_ms => 15000);
my $task = $r->{payload}{task};
is(task_state($task), 'completed', 'a full page, then a pause: completed');
like(task_output($task), qr/^a{4000,}\nDONE$/m, 'with all of the output');
is($task->{metadata}{matched}, JSON::PP::true(), 'only once it matched');

# pages of seq, then the awaited line (its echo does not hold it)
$r = send_message($a, q{seq 1 3000; echo DO''NE}, submit => 1,
    wait_for => 'DONE', wait_ms => 15000);
$task = $r->{payload}{task};
is(task_state($task), 'completed', 'many pages: completed');
like(task_output($task), qr/^2999\n3000\nDONE$/m,
    'the artifact runs to what was waited for');
is($task->{metadata}{matched}, JSON::PP::true(), 'matched');

# streamed: each page read on from is in the working updates, in order,
# not only in the final artifact
my ($acc, @ups) = stream_message($a, q{seq 1 3000; echo DO''NE},
    submit => 1, wait_for => 'DONE', wait_ms => 15000);
my $streamed = join '', map { $_->{text} // '' }
    map { @{$_->{payload}{delta}{parts} // []} }
    grep { task_state($_->{payload}{task}) eq 'working' } @ups;
my $final = task_output($ups[-1]{payload}{task});
is(substr($final, 0, length $streamed), $streamed,
    'streamed: the updates are the artifact\'s start');
like($streamed, qr/^2000\n/m, 'with the pages read on from');

# no match within wait_ms over several pages: input-required, not
# completed
$r = send_message($a, q{seq 1 1500 | sed 's/^/cd/'; sleep 3}, submit => 1,
    wait_for => 'NEVER', wait_ms => 1500);
is(task_state($r->{payload}{task}), 'input-required',
    'no match: input-required');
like(task_output($r->{payload}{task}), qr/^cd1500$/m,
    'with the pages read');
send_message($a, '', wait_for => 'ready$ ');

# the sender goes away while its task waits: the next page is not
# waited for (the engine checks the sender's request), the task ends
my $b = attach($t, $s);
$b->recv_json(5);
my $sleep = 'sleep 30.' . ($$ % 1000);
$a->send_op('SendMessage', { message => a2a_message(
    "sleep 1; seq 1 3000; $sleep", submit => 1, wait_for => 'NEVER',
    wait_ms => 25000) });
my $tid;
$t->wait_until(sub {
    $b->send_op('ListTasks', { filter => { state => 'working' } });
    my $l = $b->recv_op('ListTasks.Response', 5);
    $tid = $l->{payload}{tasks}[0]{id};
}, 10);
ok($tid, 'the task works');
$b->send_op('SubscribeToTask', { task_id => $tid });
$a->disconnect();
my @up = until_terminal($b, $tid, 15);
$task = $up[-1]{payload}{task};
is(task_state($task), 'input-required', 'it ends when its sender went away');
like($task->{status}{message}{parts}[0]{text}, qr/went away/,
    'and says so');
like(task_output($task), qr/^1\n2\n3\n/m, 'with its first page');
$b->send_op('CancelTask', { task_id => $tid });
is($b->recv_op('Error', 5)->{payload}{code}, 'TASK_NOT_CANCELABLE',
    'it has ended');

# a program that does not read its input (the kernel keeps 4k of it, not
# dropping any outside canonical mode): once the queue for it is full
# (1 MiB, after the kernel's) the terminal takes no more: INTERNAL
my $z = start_session($t, 'stty -icanon -echo; echo READY; sleep 60',
    wait_for => 'READY', wait_ms => 10000);
my $c = attach($t, $z);
$c->recv_json(5);
my $e;
for (1 .. 24) {
    my $id = $c->send_op('SendMessage', { message => a2a_message(
        'x' x 200000, wait_ms => 0) });
    my $m = $c->recv_match(sub { ($_[0]{id} // '') eq $id }, 10);
    note "$_ $m->{op} " . ($m->{payload}{code} // task_state($m->{payload}{task})) . ' ' . ($m->{payload}{message} // '');
    if ($m->{op} eq 'Error') {
        $e = $m;
        last;
    }
}
is($e && $e->{payload}{code}, 'INTERNAL', 'a full terminal: INTERNAL')
    or diag explain $e;
is($e && $e->{payload}{a2a_error}{code}, -32603, 'a2a_error populated');

# the worker is told to quit (a reload) while a task waits for a later
# page: the task ends failed at once (its wait would hold the old worker
# for its wait_ms), stored for the clients that come back
my $d = attach($t, $s);
$d->recv_json(5);
my $sleep2 = 'sleep 20.' . ($$ % 1000);
my $id = $d->send_op('SendStreamingMessage', { message => a2a_message(
    "seq 1 3000; $sleep2", submit => 1, wait_for => 'NEVER',
    wait_ms => 25000) });
$tid = $d->recv_match(sub { ($_[0]{id} // '') eq $id }, 5)
    ->{payload}{task_id};
$d->recv_until(sub { $_[0]{op} eq 'TaskStatusUpdate'
    && join('', map { $_->{text} // '' }
        @{$_[0]{payload}{delta}{parts} // []}) =~ /^\d+$/m }, 10,
    'a page of output is in');
ok($t->reload(), 'reloaded');
my $f = attach($t, $s);
$f->recv_json(5);
my $g;
$t->wait_until(sub {
    $f->send_op('GetTask', { task_id => $tid });
    $g = $f->recv_op('GetTask.Response', 5)->{payload}{task};
    is_terminal($g);
}, 10);
is(task_state($g), 'failed', 'the task ended with its worker');
like($g->{status}{message}{parts}[0]{text}, qr/stopping/, 'and says why');

is($b->invalid_frames + $c->invalid_frames + $f->invalid_frames, 0,
    'every frame matched the schema');
