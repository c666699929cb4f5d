#!/usr/bin/perl

# pty-extensions/v1 section 9, scenario 10: every ending emits exactly one
# Closed, retained in replay, then binding_goodbye and close 1000 on every
# connection; nothing after it.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Test::More;
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::PtyAPI qw(api_call);
use Test::Nginx::PtyExt;

my $t = pty_nginx(extra_http => 'server { listen 127.0.0.1:%%PORT_8081%%; '
    . 'location /agents/ { pty_attach; pty_terminate_on_last_controller on; } '
    . 'location /bad/ { pty_api; pty_shell /nonexistent/shell; } }');
$t->plan(16)->run();

# the end of a stream: Closed, goodbye, close; returns Closed's payload
sub ending {
    my ($ws, $what) = @_;
    my @f = $ws->recv_until(sub { $_[0]{op} eq 'binding_goodbye' }, 10);
    my @c = grep { kind($_) eq 'Closed' } @f;
    is(scalar @c, 1, "$what: exactly one Closed");
    my $after = 0;
    my $seen = 0;
    for (@f) { $seen ||= kind($_) eq 'Closed'; $after++ if $seen
        && kind($_) =~ /^(Output|Resize)$/ }
    my ($code) = $ws->wait_close(5);
    ok(!$after && $f[-1]{payload}{reason} eq 'session_closed'
        && ($code // 0) == 1000, "$what: then goodbye session_closed, 1000");
    return $c[0] ? $c[0]{payload} : {};
}

# 1. the program exits by itself: normal, its code; two clients both told
my $s = start_session($t, 'read x; exit 3');
my ($a) = attach_join($t, $s);
my ($b) = attach_join($t, $s, role => 'observer');
send_input($a, "go\r");
my $c = ending($a, 'exit');
is_deeply([@$c{qw/reason exit_code/}], ['normal', 3], 'normal, exit_code 3');
like($c->{detail}, qr/^command_result/, 'detail: command_result');
ending($b, 'exit, observer');

# retained: a late joiner replays it, once
my $late = attach($t, $s);
$late->recv_json(5);
$late->send_json({ op => 'pty.join_session', payload => { role => 'observer' },
    extensions => [EXT_URI], replay_from => 0 });
my @f = $late->recv_until(sub { $_[0]{op} eq 'binding_goodbye' }, 5);
is(scalar(grep { kind($_) eq 'Closed' } @f), 1,
    'after the end: Closed replayed once, then goodbye');

# 2. killed through the API
$s = start_session($t, 'sleep 100');
($a) = attach_join($t, $s);
api_call($t->port(8080), '/pty/kill', { id => $s->{id} });
$c = ending($a, 'kill');
is($c->{reason}, 'killed', 'kill: killed');

# 3. the program cannot be started
my (undef, $bad) = api_call($t->port(8081), '/bad/start', { command => 'x' });
$a = Test::Nginx::PtyWS->connect(port => $t->port(8081),
    path => $bad->{attach_path});
$a->recv_json(5);
$a->send_json({ op => 'pty.join_session', payload => { role => 'observer' },
    extensions => [EXT_URI], replay_from => 0 });
$c = ending($a, 'spawn failure');
is_deeply([@$c{qw/reason exit_code/}], ['error', undef],
    'spawn failure: error, no exit code');

# 4. terminate_on_last_controller: the last controller leaves
$s = start_session($t, 'sleep 100');
(my $path = $s->{attach_path});
my $ctl = Test::Nginx::PtyWS->connect(port => $t->port(8081), path => $path);
$ctl->recv_json(5);
join_flush($ctl);
my $obs = Test::Nginx::PtyWS->connect(port => $t->port(8081), path => $path);
$obs->recv_json(5);
join_flush($obs, role => 'observer');
$ctl->send_op('pty.leave_session', {});
$c = ending($obs, 'last controller left');
is($c->{reason}, 'killed', 'terminate_on_last_controller: killed')
    or diag explain [
        # (a kill before the keeper read the start: t/29-kill-before-start)
        $c,
        (api_call($t->port(8080), '/pty/list', {}))[1],
        [$t->error_log_lines()],
    ];
