#!/usr/bin/perl

# A connection accepted by a worker just before a reload, whose upgrade
# request is read after the worker was told to quit (its listeners already
# had their goodbye): it gets binding_goodbye right after its hello, so its
# client reconnects to a new worker before it joins and types.  Joined on
# the quitting worker instead, nothing kept that worker for it, and the
# worker's exit closed the connection under the client's first input (the
# soak's lost input lines).

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Test::More;
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::PtyExt;

my $t = pty_nginx(workers => 1);
$t->master_process('on');
$t->plan(7)->run();

my $s = start_session($t, 'exec cat');
my ($old) = $t->worker_pids;

# whether a process holds the server side of the connection from our port
sub holds {
    my ($pid, $port) = @_;
    my %inode;
    open my $tcp, '<', '/proc/net/tcp' or return 0;
    while (<$tcp>) {
        my @f = split;
        next unless ($f[2] // '') =~ /:([0-9A-F]{4})$/ && hex($1) == $port;
        $inode{$f[9]} = 1;
    }
    opendir my $d, "/proc/$pid/fd" or return 0;
    return grep { (readlink("/proc/$pid/fd/$_") // '') =~ /^socket:\[(\d+)\]/
        && $inode{$1} } readdir $d;
}

my $ws = attach($t, $s, auto_close_reply => 0, before_rest => sub {
    my ($ws) = @_;
    # the request line is in and the old worker took the connection: it
    # holds it (a header read timer) through the quit
    $t->wait_until(sub { holds($old, $ws->socket->sockport) }, 5)
        or diag('the old worker did not take the connection');
    kill 'HUP', $t->master_pid;
    $t->wait_until(sub {
        Test::Nginx::_cmdline($old) =~ /shutting down/ }, 10)
        or diag('the old worker did not start to quit');
});
ok($ws->upgraded, 'the quitting worker upgrades the connection');
is(worker_of($ws), $old, 'it is the old worker');

my @f = $ws->recv_until(sub { ($_[0]{op} // '') eq 'binding_goodbye' }, 5);
is_deeply([map { $_->{op} } @f], [qw/binding_hello binding_goodbye/],
    'binding_hello, then binding_goodbye at once');
is($f[-1] && $f[-1]{payload}{reason}, 'server_shutdown',
    'reason server_shutdown: reconnect');
ok(kill(0, $old), 'the old worker waits for the close to be answered');
$ws->close;
ok($t->wait_until(sub { !kill(0, $old) }, 10), 'then it exits');

# the session goes on in the new worker
my ($ws2) = attach_join($t, $s, role => 'controller');
send_input($ws2, "after-quit\r");
like(read_output($ws2, qr/after-quit\r\nafter-quit/, 5),
    qr/after-quit\r\nafter-quit/, 'input reaches the session after it');
