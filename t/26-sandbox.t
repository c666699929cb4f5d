#!/usr/bin/perl

# pty_sandbox with Debian's bubblewrap: programs see their own pid
# namespace and /tmp, keep their range uid and no_new_privs, and a kill
# still ends everything, in a shell location and in a pty_allow one.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Test::More;
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::PtyAPI qw(api_call);

plan(skip_all => 'bubblewrap is not installed (scripts/install-deps.sh)')
    unless -x '/usr/bin/bwrap';

# (as docs/DIRECTIVES.md gives it: bwrap's outer process ignores the
# terminal's signals, the program gets them back)
my $bwrap = '/usr/bin/env --ignore-signal=INT,QUIT,TSTP '
    . '/usr/bin/bwrap --unshare-pid --unshare-ipc --unshare-uts '
    . '--die-with-parent --ro-bind / / --proc /proc '
    . '--dev /dev --tmpfs /tmp -- /usr/bin/env --default-signal=INT,QUIT,TSTP';

my $t = pty_nginx(extra_http => <<"HTTP");
    pty_user_range 3000000 3009999;
    pty_sandbox $bwrap;

    server {
        listen 127.0.0.1:%%PORT_8081%%;
        location /pty/ {
            pty_api;
            pty_allow "^cat ";
        }
    }
HTTP
$t->plan(12)->run();

my $port = $t->port(8080);
my ($worker) = $t->worker_pids;

sub run_cmd {
    my ($p, $cmd) = @_;
    my ($st, $r) = api_call($p, '/pty/start',
        { command => $cmd, wait_for => 'END', wait_ms => 10000 });
    return $r ? ($r->{output} // "") : "status $st";
}

my $out = run_cmd($port, "test -e /proc/$worker && echo SEES-WORKER; "
    . 'echo PROCS=$(ls /proc | grep -c "^[0-9]"); echo E""ND');
unlike($out, qr/SEES-WORKER/, 'the workers are out of sight');
like($out, qr/PROCS=[1-9]\b/, 'a pid namespace of its own (a few processes)');

my $marker = "sandbox-tmp-$$";
$out = run_cmd($port, "touch /tmp/$marker && echo MADE; "
    . 'echo UID=$(id -u) NNP=$(awk \'/^NoNewPrivs/ {print $2}\' '
    . '/proc/self/status); echo E""ND');
like($out, qr/MADE/, 'it writes its /tmp');
ok(!-e "/tmp/$marker", 'which is not the host\'s');
like($out, qr/UID=30\d{5}\b/, 'it runs as its range uid inside');
like($out, qr/NNP=1/, 'with no_new_privs');

# a kill ends the sandbox and what it started, setsid or not
my ($st, $s) = api_call($port, '/pty/start', {
    command => "setsid sleep 1201$$ & echo REA''DY; exec sleep 1202$$",
    wait_for => 'READY' });
ok($t->wait_until(sub { procs_running("sleep 1201$$")
    && procs_running("sleep 1202$$") }, 5), 'a sandboxed session runs');
api_call($port, '/pty/kill', { id => $s->{id} });
ok($t->wait_until(sub { !procs_running("sleep 1201$$")
    && !procs_running("sleep 1202$$") }, 10), 'the kill ends all of it');

# Ctrl-C reaches the program, not the sandbox: python is interrupted
# and the session lives on (with --new-session, or with bwrap taking the
# signal, the whole session ended with it)
($st, $s) = api_call($port, '/pty/start',
    { command => 'python3 -q', wait_for => '>>> ', wait_ms => 10000 });
api_call($port, '/pty/write', { id => $s->{id},
    input => 'import time; time.sleep(30)', submit => \1, wait_ms => 500 });
my ($wst, $w) = api_call($port, '/pty/write', { id => $s->{id},
    input => '\x03', wait_for => 'KeyboardInterrupt', wait_ms => 10000 });
ok($w && $w->{matched}, 'Ctrl-C interrupts the sandboxed program')
    or diag explain $w;
($wst, $w) = api_call($port, '/pty/write', { id => $s->{id},
    input => 'print(6*7)', submit => \1, wait_for => '42', wait_ms => 10000 });
ok($w && $w->{matched} && $w->{running}, 'and the session goes on')
    or diag explain $w;
api_call($port, '/pty/kill', { id => $s->{id} });

# a pty_allow location runs its words in the sandbox too
($st, $s) = api_call($t->port(8081), '/pty/start',
    { command => 'cat /proc/1/cmdline', wait_ms => 3000 });
is($st, 200, 'an allowed command starts');
like($s->{output} // "", qr/bwrap/, 'its pid 1 is the sandbox');

$t->stop();
