#!/usr/bin/perl

# nginx -s reload: a session outlives the worker that started it.  Its
# client is told to reconnect, a new worker takes the terminal over from
# the keeper, and replay_from continues the same sequence.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Test::More;
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::PtyWS qw(session_frame_kind decode_output);

my $t = pty_nginx();
$t->master_process(1);     # a reload replaces workers: there must be some
$t->plan(11)->run();

my $s = start_session($t, 'PS1="ok\$ " exec bash --norc --noprofile -i');
my ($ws) = attach_join($t, $s);

send_input($ws, "echo before\r");
my $out = '';
my @f = $ws->recv_until(sub {
    $out .= decode_output($_[0]);
    $out =~ /before\r\n.*ok\$ $/s }, 10);
my $last = (grep { defined } map { $_->{sequence} } @f)[-1];
ok($last, "output before the reload, up to sequence $last");

my @old = $t->worker_pids;
ok($t->reload(), 'reloaded');
ok(!(grep { my $p = $_; grep { $_ == $p } $t->worker_pids } @old),
    'the old worker is gone');

my $bye = $ws->recv_op('binding_goodbye', 10);
is($bye->{payload}{reason}, 'server_shutdown', 'client told to reconnect');

# the new worker takes the session over on the reattach
my ($ws2, $hello, @flush) = attach_join($t, $s, replay_from => $last);
ok($hello->{payload}{session}{current_sequence} >= $last,
    'sequence kept across the reload');
is(session_frame_kind($flush[0]), 'RoleAssigned', 'RoleAssigned first');
ok((!grep { defined $_->{sequence} && $_->{sequence} <= $last
    && session_frame_kind($_) ne 'RoleAssigned' } @flush),
    'replay starts after replay_from');

send_input($ws2, "echo after\r");
like(read_output($ws2, qr/after\r\n/), qr/after/,
    'the program still runs and answers');

my ($st, $list) = Test::Nginx::PtyAPI::api_call($t->port(8080), '/pty/list',
    {});
is(scalar(grep { $_->{id} eq $s->{id} && $_->{state} eq 'running' }
    @{$list->{sessions}}), 1, 'listed as running');

# a reload that would resize the zone is refused; the sessions keep going
my $conf = $t->read_file('nginx.conf');
$conf =~ s/pty_zone pty:32m;/pty_zone pty:48m;/ or die "no zone line\n";
$t->write_file('nginx.conf', $conf);
$t->allow_log(qr/cannot change while nginx runs/);
kill 'HUP', $t->master_pid;
ok($t->wait_for_log(qr/size of pty_zone "pty" cannot change/, 5),
    'resizing the zone on reload is refused');
send_input($ws2, "echo still\r");
like(read_output($ws2, qr/still\r\n/), qr/still/,
    'the session runs on under the old configuration');

