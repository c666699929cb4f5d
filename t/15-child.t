#!/usr/bin/perl

# What the program gets: no descriptor of nginx's (sockets, epoll, the
# keeper's), a terminal's environment, pty_env, default signal handling.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Test::More;
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::PtyAPI qw(api_call);

my $t = pty_nginx(extra_loc => 'pty_env LANG=C.UTF-8; pty_env PTY_TEST=yes; '
    . 'pty_env HOME=%%TESTDIR%%;');
$t->plan(7)->run();

# enough client connections that nginx's descriptors go beyond 3..10
my @idle = map { Test::Nginx::PtyWS->connect(port => $t->port(8080),
    path => '/agents/test/sessions/pty-999/attach') } 1 .. 5;

my $s = start_session($t,
    'read x; ls -l /proc/self/fd; echo "env:$TERM:$LANG:$PTY_TEST:$HOME";'
    . ' trap -p; echo end');
my ($ws) = attach_join($t, $s);
send_input($ws, "\r");
my $out = read_output($ws, qr/\bend\r\n/);

my @fds = $out =~ /(\d+) -> /g;
ok(@fds >= 3, 'fd listing read') or diag $out;
is_deeply([grep { $_ > 3 } @fds], [], 'only 0-2 and ls\'s own directory');
unlike($out, qr/socket:|anon_inode|\/ptmx/, 'no socket, epoll or master');
like($out, qr/env:xterm-256color:C\.UTF-8:yes:\Q${\ $t->testdir}\E/,
    'terminal environment, pty_env replacing a default');
unlike($out, qr/trap -- /, 'no signal trapped or ignored');

my ($st, $list) = api_call($t->port(8080), '/pty/list', {});
is($st, 200, 'list');
ok(scalar(@{$list->{sessions}}), 'the session is listed');
