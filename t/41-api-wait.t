#!/usr/bin/perl

# write's waiting: wait_for timing out honestly, Ctrl-C interrupting a
# sleep, a read -s password prompt, readline redraws settling into the
# final line, one waiter per session, a client that leaves mid-wait.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use IO::Select;
use IO::Socket::INET;
use Time::HiRes qw(time sleep);
use Test::More;
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::PtyAgent;
use Test::Nginx::PtyWS qw(json_encode);

my $t = pty_nginx();
$t->plan(18)->run();

my $bash = 'PS1="ready\$ " exec bash --norc --noprofile -i';
my $s = agent_start($t, $bash, wait_for => 'ready$ ');
ok($s->{matched}, 'bash prompt');
my $id = $s->{id};

# wait_for that never comes: the whole wait, then an honest timed_out
my $t0 = time;
my $r = agent($t, 'write', { id => $id, input => 'echo hi', submit => 1,
    wait_for => 'NEVER-PRINTED', wait_ms => 600 });
my $took = time - $t0;
ok(!$r->{matched} && $r->{timed_out}, 'wait_for: timed_out, not matched');
# upper bounds tell a wait from the default 10 s, with room for a loaded
# machine (answers there come seconds late)
ok($took >= 0.55 && $took < 8, sprintf('waited the wait_ms (%.2fs)', $took));
like($r->{output}, qr/^echo hi\nhi\nready\$ $/, 'output still returned');

# Ctrl-C interrupts a sleep; the prompt comes back at once
$r = agent($t, 'write', { id => $id, input => 'sleep 100', submit => 1,
    wait_ms => 300 });
ok($r->{running}, 'sleep 100 running');
$t0 = time;
$r = agent($t, 'write', { id => $id, input => '\x03', wait_for => 'ready$ ' });
ok($r->{matched} && time - $t0 < 8, '\x03 interrupts sleep 100');

$r = agent($t, 'write', { id => $id, input => 'echo "rc=$?"', submit => 1,
    wait_for => 'ready$ ' });
like($r->{output}, qr/\nrc=130\n/, 'sleep ended by SIGINT (status 130)');

# read -s: the prompt, the answer through write, no echo
$r = agent($t, 'write', { id => $id, submit => 1,
    input => 'read -s -p "Password: " pw; echo "got:${#pw}:$pw"',
    wait_for => 'Password: ' });
ok($r->{matched}, 'password prompt');
$r = agent($t, 'write', { id => $id, input => 'hunter2', submit => 1,
    wait_for => 'ready$ ' });
like($r->{output}, qr/got:7:hunter2/, 'read -s got the password');
is(() = $r->{output} =~ /hunter2/g, 1, 'the password was not echoed');

# readline: a typo fixed with DEL, a word fixed with cursor-left; the
# redraws settle into the final line
$r = agent($t, 'write', { id => $id,
    input => 'echo hellp\x7fo wrld\e[D\e[D\e[Do', submit => 1,
    wait_for => 'ready$ ' });
like($r->{output}, qr/^echo hello world\nhello world\nready\$ $/,
    'readline edits settle into the final line');

# one waiter per session: a second call while one waits is refused
my $sock = IO::Socket::INET->new(PeerAddr => '127.0.0.1',
    PeerPort => $t->port(8080)) or die "connect: $!";
my $body = json_encode({ id => $id, wait_ms => 5000 });
print $sock "POST /pty/write HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
    . "Content-Type: application/json\r\nContent-Length: "
    . length($body) . "\r\n\r\n$body";
my $busy;
for (1 .. 50) {
    $r = agent($t, 'write', { id => $id, wait_ms => 0 });
    $busy = $r->{error}{code} // '';
    last if $busy eq 'busy';
    sleep 0.02;
}
is($busy, 'busy', 'a second waiter: 409 busy');

# the waiting client goes away: the session is free again at once
close $sock;
my $free;
my $deadline = time + 3;
while (time < $deadline) {
    $r = agent($t, 'write', { id => $id, wait_ms => 0 });
    last if $free = ($r->{_status} == 200);
    sleep 0.05;
}
ok($free, 'a client closing mid-wait frees the session');

# wait_ms without wait_for: one plain wait, then what came
$t0 = time;
$r = agent($t, 'write', { id => $id, input => 'echo late', submit => 1,
    wait_ms => 400 });
$took = time - $t0;
ok($took >= 0.35 && $took < 8, sprintf('wait_ms 400 waited %.2fs', $took));
like($r->{output}, qr/\nlate\n/, 'and returned the output');
ok(!exists $r->{matched}, 'no matched without wait_for');

# nothing new: an empty poll returns empty text
$r = agent($t, 'write', { id => $id, wait_ms => 0 });
is($r->{output}, '', 'empty poll, empty output');

# nginx stops (TERM) while a call waits: it gets an answer, not a hang.
# The probe that shows the call waiting (a 409 for the probe) can itself
# be in progress when the call arrives, which then gets the 409: sent
# again then.
$body = json_encode({ id => $id, wait_for => 'never', wait_ms => 8000 });
WAIT: for my $try (1 .. 5) {
    $sock = IO::Socket::INET->new(PeerAddr => '127.0.0.1',
        PeerPort => $t->port(8080)) or die "connect: $!";
    print $sock "POST /pty/write HTTP/1.1\r\nHost: x\r\n"
        . "Connection: close\r\nContent-Type: application/json\r\n"
        . "Content-Length: " . length($body) . "\r\n\r\n$body";
    my $sel = IO::Select->new($sock);
    for (1 .. 50) {
        last WAIT
            if agent($t, 'write', { id => $id, wait_ms => 0 })->{_status} == 409;
        # the call answered already: refused as busy by the probe
        next WAIT if $sel->can_read(0);
        sleep 0.02;
    }
    last;
}
my ($master) = ($t->read_file('nginx.pid') // '') =~ /(\d+)/;
kill 'TERM', $master if $master;
my $resp = '';
$sock->blocking(1);
while (sysread($sock, my $buf, 4096)) { $resp .= $buf }
like($resp, qr/^HTTP\/1\.1 503 .*"code":"shutting_down"/s,
    'a waiting call ends with 503 shutting_down when nginx stops');
