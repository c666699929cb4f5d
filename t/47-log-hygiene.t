#!/usr/bin/perl

# What the module logs cannot leak a query string's token or be forged by
# a client: no ?token= in its lines (request context included), and a
# command's newline cannot start a log line.  At notice and debug level.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Test::More;
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::PtyAgent;
use Test::Nginx::PtyAPI qw(api_call);

my $t = pty_nginx();
my $dir = $t->testdir();
my $conf = $t->read_file('nginx.conf');
# a second log at debug level, whatever TEST_NGINX_VERBOSE says
$conf =~ s/^(events)/error_log $dir\/debug.log debug;\n\n$1/m;
$conf =~ s/(location \/pty\/ \{)/location \/strict\/ {
            pty_api;
            pty_allow "^cat( |\$)";
        }

        $1/;
$t->write_file('nginx.conf', $conf);
# the escaped command keeps its text, "[alert]" included, on the module's line
$t->allow_log(qr/\] \d+#\d+: (?:\*\d+ )?pty: .*forged/);
$t->plan(7)->run();

my $port = $t->port(8080);
my $forged = "\n2026/01/01 00:00:00 [alert] 1#1: forged";

# refused by the policy: a notice naming the command, in request context
my ($st) = api_call($port, '/strict/start?sig=SECRET1',
    { command => "cat$forged" });
is($st, 403, 'a refused start');

# started through the shell: the command in the session's info line
my $s = agent($t, 'start?sig=SECRET2',
    { command => "echo hi; sleep 30; : $forged", wait_for => 'hi' });
is($s->{_status}, 200, 'a started session');

# an observer that writes: a notice in the WebSocket's context
my ($ctl) = attach_join($t, $s);
my ($ws) = attach_join($t,
    { attach_path => "$s->{attach_path}?sig=SECRET3" }, role => 'observer');
send_input($ws, "x");
$ws->recv_until(sub { $_[0]{op} eq 'Error' }, 5);
ok($t->wait_until(sub {
        $t->read_file('error.log') =~ /observer c-\d+ denied/ }, 5),
    'the observer\'s refusal is logged');

agent($t, "kill", { id => $s->{id} });

for my $log ('error.log', 'debug.log') {
    my $text = $t->read_file($log);
    # at debug level nginx itself writes the request line as it came
    # ("http request line", "http args"): only the module's lines count
    my @ours = grep { /\] \d+#\d+: (?:\*\d+ )?pty[: ]/ || !/ http / }
        split /\n/, $text;
    my @leak = grep { /SECRET/ } @ours;
    ok(!@leak, "$log: no token in the module's lines")
        or diag(join "\n", @leak[0 .. ($#leak < 3 ? $#leak : 3)]);
    ok($text !~ /^2026\/01\/01 00:00:00 \[alert\] 1#1: forged/m,
        "$log: no forged line");
}
