#!/usr/bin/perl

# The AgentCard advertises the params in force; pty-extensions/v1 is
# activated on pty-ws/v1 only (header or first frame) and refused with
# UnsupportedExtension on the HTTP API.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Test::More;
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::PtyAPI qw(api_call api_get);
use Test::Nginx::PtyExt;

my $t = pty_nginx(extra_http => 'pty_max_observers 5; '
    . 'pty_keyframe_interval_frames 50; '
    . 'server { listen 127.0.0.1:%%PORT_8081%%; '
    . 'location = /.well-known/agent-card.json { pty_agent_card; } }');
$t->plan(17)->run();

my ($st, $card) = api_get($t->port(8081), '/.well-known/agent-card.json');
is($st, 200, 'AgentCard served');
my ($ext) = @{$card->{capabilities}{extensions}};
is($ext->{uri}, EXT_URI, 'extension URI');
is_deeply($ext->{params}, { max_controllers => 1, max_observers => 5,
    keyframe_interval_seconds => 5, keyframe_interval_frames => 50,
    replay_buffer_frames => 1000, replay_buffer_retention_seconds => 86400,
    default_cols => 120, default_rows => 30 },
    'params: the values in force (defaults and two set)');
ok(!$ext->{required}, 'not required');
my ($b) = @{$card->{bindings}};
like($b->{uri}, qr{/bindings/pty-ws/v1$}, 'pty-ws/v1 binding');
like($b->{notes}, qr/ListTasks/, 'bindings[].notes');
is($b->{url_template}, '/agents/test/sessions/{session_id}/attach',
    'attach URL template');

# API: activation refused
my ($status, $json) = api_call($t->port(8080), '/pty/start',
    { command => 'true' }, headers => { 'A2A-Extensions' => EXT_URI });
is($status, 400, 'API with A2A-Extensions: 400');
is($json->{error}{code}, 'UnsupportedExtension', 'UnsupportedExtension');

# WebSocket: header activation is echoed in binding_hello
my $s = start_session($t, 'cat');
my $ws = attach($t, $s, headers => { 'A2A-Extensions' => EXT_URI });
my $hello = $ws->recv_json(5);
is_deeply($hello->{payload}{activated_extensions}, [EXT_URI],
    'header activation echoed in binding_hello');
my @f = join_flush($ws, no_activation => 1);
is(kind($f[0]), 'RoleAssigned', 'pty.* works without "extensions"');

# first-frame activation
$ws = attach($t, $s);
$hello = $ws->recv_json(5);
is_deeply($hello->{payload}{activated_extensions}, [], 'no header: []');
@f = join_flush($ws, role => 'observer');
is(kind($f[0]), 'RoleAssigned', 'activated by the first frame');

# not activated: pty.* is not available
$ws = attach($t, $s);
$ws->recv_json(5);
$ws->send_op('ping', { client_ts => 'x' });
is($ws->recv_op('Error', 5)->{payload}{code}, 'INVALID_REQUEST',
    'ping: client_ts must be RFC 3339 (the pong echoes it)');
$ws->send_op('ping', { client_ts => '2026-11-30T00:00:00.5+01:00' });
$ws->recv_op('pong', 5);
$ws->send_json({ op => 'pty.join_session', payload => { role => 'observer' },
    extensions => [EXT_URI] });
my $err = $ws->recv_op('Error', 5);
is($err->{payload}{code}, 'UNSUPPORTED_OPERATION',
    'extensions on a later frame do not activate');
like($err->{payload}{message}, qr/not activated/, 'and the error says so');
($st) = api_call($t->port(8081), '/.well-known/agent-card.json', {});
is($st, 405, 'AgentCard: GET only');
