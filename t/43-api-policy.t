#!/usr/bin/perl

# Who may start what, and for how long: pty_deny, pty_allow, pty_command,
# pty_max_sessions, pty_zone_max_sessions, pty_idle_timeout, pty_max_age;
# and every session ends with nginx (Closed instance_terminated, no
# process left behind).

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Time::HiRes qw(time sleep);
use Test::More;
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::PtyAgent;

my $t = pty_nginx(extra_http => 'pty_zone_max_sessions 6;');
my $conf = $t->read_file('nginx.conf');
my $dir = $t->testdir();
$conf =~ s/^(events)/error_log $dir\/info.log info;\n\n$1/m;
$conf =~ s/(location \/pty\/ \{)/location \/policy\/ {
            pty_api;
            pty_deny "rm\\s+-rf";
            pty_allow "^(echo|bash|rm) ";
        }
        location \/fixed\/ {
            pty_api;
            pty_command "echo fixed-command; sleep 30";
        }
        location \/capped\/ {
            pty_api;
            pty_max_sessions 2;
        }
        location \/idle\/ {
            pty_api;
            pty_idle_timeout 800ms;
        }
        location \/aged\/ {
            pty_api;
            pty_max_age 1500ms;
        }

        $1/;
$t->write_file('nginx.conf', $conf);
$t->plan(20)->run();

sub at { my ($loc, $call, $body) = @_;
    return agent($t, $call, $body, location => "/$loc/") }

# --- command policy ---------------------------------------------------------

my $r = at('policy', 'start', { command => 'rm -rf /tmp/nothing-here' });
is($r->{_status}, 403, 'pty_deny: 403');
like($r->{error}{message}, qr/pty_deny "rm\\s\+-rf"/,
    'the refusal names the rule');
$r = at('policy', 'start', { command => 'sleep 1' });
is($r->{error}{code}, 'not_allowed', 'no pty_allow match: not_allowed');
$r = at('policy', 'start', { command => 'echo allowed', wait_for => 'allowed' });
ok($r->{_status} == 200 && $r->{matched}, 'an allowed command runs');

$r = at('fixed', 'start', {});
like($r->{output}, qr/fixed-command/, 'pty_command runs without "command"');
at('fixed', 'kill', { id => $r->{id} });
$r = at('fixed', 'start', { command => 'id' });
is($r->{error}{code}, 'command_fixed', 'another command: 403 command_fixed');
is($r->{_status}, 403, 'status 403');

# --- caps ---------------------------------------------------------------------

my @ids = map { at('capped', 'start', { command => 'sleep 30',
    wait_ms => 0 })->{id} } 1 .. 2;
$r = at('capped', 'start', { command => 'sleep 30', wait_ms => 0 });
is($r->{_status}, 429, 'pty_max_sessions 2: the third is refused');
like($r->{error}{message}, qr/pty_max_sessions/, 'naming the limit');

$r = agent($t, 'start', { command => 'sleep 30', wait_ms => 0 });
is($r->{_status}, 200, 'another location is not capped by it');
push @ids, $r->{id};

at('capped', 'kill', { id => $ids[0] });
$r = at('capped', 'start', { command => 'sleep 30', wait_ms => 0 });
is($r->{_status}, 200, 'a killed session frees its place');
push @ids, $r->{id};

# live now: 3 (2 capped, 1 pty); the zone allows 6
my @more = map { agent($t, 'start', { command => 'sleep 30',
    wait_ms => 0 }) } 1 .. 4;
is_deeply([map { $_->{_status} } @more], [200, 200, 200, 429],
    'pty_zone_max_sessions 6: the seventh live session is refused');
like($more[3]{error}{message}, qr/pty_zone_max_sessions/, 'naming it');
agent($t, 'kill', { id => $_ }) for @ids[1 .. $#ids],
    map { $_->{id} // () } @more;

# --- idle timeout and maximum age ------------------------------------------

my $t0 = time;
my $s = at('idle', 'start', { command => 'sleep 30', wait_ms => 0 });
$r = at('idle', 'write', { id => $s->{id}, wait_ms => 10000 });
my $took = time - $t0;
is($r->{closed_reason}, 'timeout', 'pty_idle_timeout: Closed timeout');
# not before its time; the upper bound only tells it from the program's
# own 30 s (a loaded machine delays timers and answers by seconds)
ok($took > 0.7 && $took < 10, sprintf('after the idle time (%.2fs)', $took));

# output keeps a session from idling, not from ageing
$t0 = time;
$s = at('aged', 'start',
    { command => 'while :; do echo tick; sleep 0.1; done', wait_ms => 0 });
my ($ws) = attach_join($t, $s, role => 'observer');
my $closed = wait_kind($ws, 'Closed', 15);
$took = time - $t0;
is($closed->{payload}{reason}, 'timeout', 'pty_max_age: Closed timeout');
ok($took > 1.3 && $took < 15, sprintf('at the maximum age (%.2fs)', $took));

# --- nginx stops: every session ends ---------------------------------------

my $mark = 400000 + $$ % 10000;
$s = agent_start($t, "sleep $mark", wait_ms => 0);
ok($t->wait_until(sub { procs_running("sleep $mark") }, 5),
    'a session is running');
$t->stop();

ok($t->wait_until(sub { !procs_running("sleep $mark") }, 5),
    'nginx stopped: no process left');
ok(scalar $t->grep_error_log(qr/pty-\d+ closed: instance_terminated/,
    'info.log'),
    'Closed instance_terminated');
