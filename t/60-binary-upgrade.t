#!/usr/bin/perl

# A binary upgrade (USR2, then QUIT to the old master) as
# docs/ARCHITECTURE.md describes it: sessions do not cross to the new
# binary (its zone is new and empty); they keep working under the old
# master while it lives.  When it quits, the sessions end as on any stop:
# each client gets exactly one Closed instance_terminated, and the
# programs go, and so do its workers' keeper forkers and spare keepers.
# The new binary serves new sessions.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Test::More;
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::PtyWS qw(session_frame_kind);
use Test::Nginx::PtyAPI qw(api_call);

my $t = pty_nginx(workers => 2,
    # the workers' own keeper forkers: see t/25 for the spawner's
    extra_http => 'pty_user off;');
my $titles = !Test::Nginx::valgrind();  # helpers are found by their titles
$t->plan(17)->run();

my $tag = "new-$$";
my $s = start_session($t, "exec sleep 1$$");
my ($ws) = attach_join($t, $s, role => 'controller');
# (the shell execs sleep in its own time: waited for)
ok($t->wait_until(sub { procs_running("sleep 1$$") }, 5),
    'a session under the old binary');

my @helpers;
SKIP: {
    skip 'process titles under valgrind', 1 unless $titles;
    ok($t->wait_until(sub { (@helpers = helpers($t->worker_pids)) == 4 },
        5), 'each worker has a forker and a spare');
}

my $old = $t->binary_upgrade();
ok($old, 'USR2: a new master and its workers');
isnt($t->master_pid, $old, 'the harness follows the new master');

# still served by the old worker it is connected to
send_input($ws, "x");

kill 'QUIT', $old;
ok($t->wait_until(sub { !Test::Nginx::_alive($old) }, 15),
    'the old master quits');

my @f = $ws->recv_until(sub { ($_[0]{op} // '') eq 'binding_goodbye' }, 10);
my @closed = grep { (session_frame_kind($_) // '') eq 'Closed' } @f;
is(scalar @closed, 1, 'its client gets one Closed');
is($closed[0]{payload}{reason}, 'instance_terminated',
    'reason instance_terminated');
is($f[-1]{payload}{reason}, 'session_closed', 'then goodbye session_closed');
ok($t->wait_until(sub { !procs_running("sleep 1$$") }, 10),
    'its program is gone');
SKIP: {
    skip 'process titles under valgrind', 1 unless $titles;
    ok($t->wait_until(sub { !grep { Test::Nginx::_alive($_) } @helpers },
        10), 'and its forkers and spares');
}

# the new binary: a fresh zone that serves new sessions
my ($st, $list) = api_call($t->port(8080), '/pty/list', {});
is($st, 200, 'the new binary answers the API');
ok(!(grep { $_->{id} eq $s->{id} } @{$list->{sessions} // []}),
    'the old session is not in the new zone');

my $n = start_session($t, 'cat');
my ($wn) = attach_join($t, $n, role => 'controller');
send_input($wn, "$tag\r");
like(read_output($wn, qr/$tag\r\n$tag/), qr/$tag/,
    'a new session echoes under the new binary');
ok($t->worker_pids >= 2, 'the new workers run');

# and a plain stop (nginx -s quit): the same end for its clients
my $master = $t->master_pid;
@helpers = helpers($t->worker_pids);
kill 'QUIT', $master;
@f = $wn->recv_until(sub { ($_[0]{op} // '') eq 'binding_goodbye' }, 10);
is(join(',', map { $_->{payload}{reason} }
    grep { (session_frame_kind($_) // '') eq 'Closed' } @f),
    'instance_terminated', 'quit: one Closed instance_terminated');
ok($t->wait_until(sub { !Test::Nginx::_alive($master) }, 15),
    'nginx stopped');
SKIP: {
    skip 'process titles under valgrind', 1 unless $titles;
    ok($t->wait_until(sub { !grep { Test::Nginx::_alive($_) } @helpers },
        10), 'its forkers and spares are gone');
}

# the workers' keeper forkers and the spares they hold
sub helpers {
    my @f = map { Test::Nginx::_children($_) } @_;
    @f = grep { Test::Nginx::_cmdline($_) =~ /pty keeper forker/ } @f;
    my @s = grep { Test::Nginx::_cmdline($_) =~ /pty spare keeper/ }
        map { Test::Nginx::_children($_) } @f;
    return (@f, @s);
}
