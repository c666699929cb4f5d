#!/usr/bin/perl

# Tasks under identity and access: a principal that may only observe the
# session (no pty:control) reads tasks but may not send or cancel one
# (PERMISSION_DENIED); the owner's tasks are audited as writes, with the
# trace_id of the connection.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Test::More;
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::PtyA2A;
use Test::Nginx::PtyAPI qw(api_call);
use Test::Nginx::PtyAuth;

my $t = Test::Nginx->new()->has(qw/http/);
my $users = $> == 0 ? 'pty_user_range 3000000 3009999;' : '';
my ($auth_loc, $refuse, $attach) = (AUTH_LOCATION, REFUSE_LOCATIONS,
    AUTH_ATTACH);

$t->write_file_expand('nginx.conf', <<"CONF");
%%TEST_GLOBALS%%

events {}

http {
    %%TEST_GLOBALS_HTTP%%

    pty_zone pty:16m;
    pty_instance_id test;
    pty_env HOME=%%TESTDIR%%;
    $users
    pty_audit_log %%TESTDIR%%/audit.log;

    server {
        listen 127.0.0.1:%%PORT_8080%%;

$auth_loc
$refuse
        location /agents/ {
$attach
            pty_attach;
        }

        location /pty/ {
$attach
            pty_share observe scope=team:watch;
            pty_api;
        }
    }
}
CONF

auth_server($t, 8081);
$t->plan(9)->run();

my $port = $t->port(8080);
my $alice = token('alice', 'pty:observe pty:control pty:start', 600);
my $olga = token('olga', 'pty:observe team:watch', 600);

my ($st, $s) = api_call($port, '/pty/start', { command => 'python3 -q',
    wait_for => '>>> ', wait_ms => 10000 }, headers => { bearer($alice) });
is($st, 200, 'alice starts python3');

sub ws {
    my ($tok) = @_;
    my $ws = Test::Nginx::PtyWS->connect(port => $port,
        path => $s->{attach_path}, headers => { bearer($tok) });
    $ws->recv_json(5);
    return $ws;
}

my $a = ws($alice);
my $id = $a->send_json({ op => 'ping', payload => {
    client_ts => Test::Nginx::PtyWS::rfc3339_now() },
    service_parameters => { trace_id => 'trace-alice' } });
$a->recv_op('pong', 5);
my $r = send_message($a, 'print(6*7)', submit => 1, wait_for => '>>> ');
like(task_output($r->{payload}{task}), qr/42/, 'alice\'s task');
my $tid = $r->{payload}{task}{id};

my $o = ws($olga);
$r = send_message($o, 'print(1)', submit => 1, wait_for => '>>> ');
is($r->{payload}{code}, 'PERMISSION_DENIED', 'olga may not send');
is($r->{payload}{a2a_error}{name}, 'PermissionDeniedError',
    'a2a_error populated');
$o->send_op('GetTask', { task_id => $tid });
is($o->recv_op('GetTask.Response', 5)->{payload}{task}{id}, $tid,
    'olga reads alice\'s task');

# a running task olga may not cancel
$id = $a->send_op('SendMessage', { message => a2a_message(
    'import time; time.sleep(30)', submit => 1, wait_for => '>>> ',
    wait_ms => 20000) });
my $l;
$t->wait_until(sub {
    $o->send_op('ListTasks', { filter => { state => 'working' } });
    $l = $o->recv_op('ListTasks.Response', 5);
    @{$l->{payload}{tasks} // []} }, 10);
$o->send_op('CancelTask', { task_id => $l->{payload}{tasks}[0]{id} // '' });
is($o->recv_op('Error', 5)->{payload}{code}, 'PERMISSION_DENIED',
    'olga may not cancel');
$a->send_op('CancelTask', { task_id => $l->{payload}{tasks}[0]{id} // '' });
is(task_state($a->recv_op('CancelTask.Response', 5)->{payload}{task}),
    'canceled', 'alice may');

my $audit = '';
$t->wait_until(sub { $audit = $t->read_file('audit.log') // '';
    $audit =~ /"write".*trace-alice/ }, 5);
like($audit, qr/"alice".*"write"|"write".*"alice"/, 'the task is audited');
like($audit, qr/trace-alice/, 'with the connection\'s trace_id');
