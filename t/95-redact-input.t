#!/usr/bin/perl

# pty_redact beyond the output: a secret in a session's command line is
# masked wherever the session is shown (list, the start's answer, the
# error and audit logs, the archive), and a secret in an A2A message is
# masked in the task (its answer, GetTask, the archive's frames), while
# the program gets both as they were sent.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Test::More;
use Digest::SHA qw(sha256_hex);
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::PtyAPI qw(api_call);
use Test::Nginx::PtyExt;
use Test::Nginx::PtyA2A;

my $token = 'ghp_' . ('Z9y8X7w6V5' x 3) . 'u4T3s2';
my $other = 'glpat-' . ('Qq1_Rr2-Ss' x 2);

my $t = pty_nginx(archive => 'batch=20ms',
    extra_http => 'pty_audit_log %%TESTDIR%%/audit.log;'
        . ' error_log %%TESTDIR%%/info.log info;',
    extra_loc => 'pty_redact on;');
$t->plan(13)->run();

my $port = $t->port(8080);

# the program hashes what it got: the secret itself, not its mask
my ($st, $s) = api_call($port, '/pty/start', {
    command => "printf %s $token | sha256sum; exec cat",
    wait_for => '-', wait_ms => 5000 });
is($st, 200, 'started');
like($s->{output}, qr/\Q@{[sha256_hex($token)]}\E/,
    'the program got the command as typed');
unlike($s->{command} // '', qr/\Q$token\E/, 'the start answer masks it');
like($s->{command} // '', qr/sha256sum/, 'and keeps the rest');

my (undef, $l) = api_call($port, '/pty/list', { full => \1 });
my ($e) = grep { $_->{session_id} eq $s->{session_id} } @{$l->{sessions}};
ok($e && $e->{command} !~ /\Q$token\E/ && $e->{command} =~ /\*{5}/,
    'list masks it');

# A2A: the message's secret reaches cat, whose echo and copy are masked
my $ws = attach($t, $s);
$ws->recv_json(5);
my $r = send_message($ws, "echo $other", submit => 1, wait_for => 'echo');
my $task = $r->{payload}{task};
my $hist = $task->{history}[0]{parts}[0]{text} // '';
ok($hist !~ /\Q$other\E/ && $hist =~ /^echo \[REDACTED\]\*+$/,
    "the task's history masks it ($hist)");
ok($task->{metadata}{matched}, 'its masked echo was taken for the echo: '
    . 'the wait matched');
$ws->send_op('GetTask', { task_id => $task->{id} });
my $g = $ws->recv_op('GetTask.Response', 5);
unlike(Test::Nginx::PtyWS::json_encode($g), qr/\Q$other\E/,
    'GetTask too');
# the agent API's wait, the same
my ($wst, $w) = api_call($port, '/pty/write', { id => $s->{id},
    input => "say $other", submit => \1, wait_for => 'say', wait_ms => 5000 });
ok($w->{matched} && $w->{output} !~ /\Q$other\E/,
    'a write with a secret: its masked echo is its echo, the answer masked');
($wst, $w) = api_call($port, '/pty/write', { id => $s->{id},
    input => "\\x04", wait_ms => 3000 });
diag explain $w unless $t->wait_until(sub { (api_call($port, '/pty/list',
    {}))[1]{sessions}[0]{state} eq 'exited' }, 10);
$t->stop();

for my $f (qw/error.log info.log audit.log/) {
    unlike($t->read_file($f) // '', qr/\Q$token\E|\Q$other\E/,
        "$f has neither");
}
my $dump = `python3 -c 'import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); print(list(c.execute("SELECT command FROM sessions")), list(c.execute("SELECT data FROM frames")))' '@{[$t->testdir]}/arch/pty.db'`;
ok($dump =~ /sha256sum/ && $dump !~ /\Q$token\E|\Q$other\E/,
    'the archive has neither');
