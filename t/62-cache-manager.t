#!/usr/bin/perl

# nginx's cache manager and cache loader run the modules' process hooks
# too: they must not get a keeper forker and spare, take a doorbell slot or
# adopt sessions.  Only the worker has the pty helpers.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Test::More;
use Test::Nginx;
use Test::Nginx::Pty;

my $t = pty_nginx(workers => 1,
    extra_http => 'proxy_cache_path %%TESTDIR%%/cache keys_zone=c:1m; '
        . 'pty_user off;');
$t->skip_all_if(Test::Nginx::valgrind(), 'process titles under valgrind');
$t->plan(4)->run();

my $master = $t->master_pid;
# The master forks the cache manager after the workers, and the child
# names itself a moment later: wait for the name, not for the fork.
my $cm;
$t->wait_until(sub {
    ($cm) = grep { Test::Nginx::_cmdline($_) =~ /cache manager/ }
        Test::Nginx::_children($master);
    $cm;
}, 5);
my ($worker) = $t->worker_pids;

ok($cm, 'nginx runs a cache manager');
ok($t->wait_until(sub { grep { Test::Nginx::_cmdline($_) =~ /pty keeper forker/ }
    Test::Nginx::_children($worker) }, 5), 'the worker has its keeper forker');
is($cm ? scalar(Test::Nginx::_children($cm)) : -1, 0,
    'the cache manager has no child');

my $s = start_session($t, 'exec cat');
my $ws = attach($t, $s);
$ws->recv_json(5);
join_session($ws, role => 'controller');
send_input($ws, "ping\r");
like(read_output($ws, qr/ping/, 5), qr/ping/, 'sessions work beside it');

$t->stop();
