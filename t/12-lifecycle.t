#!/usr/bin/perl

# Session lifecycle: kill through the API, and nothing outlives nginx —
# with a master process and with master_process off.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Test::More;
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::PtyAPI qw(api_call);
use Test::Nginx::PtyWS qw(session_frame_kind);

sub parent {
    open my $fh, '<', "/proc/$_[0]/stat" or return ();
    my $stat = <$fh> // '';
    return $stat =~ /^\d+ \(.*\) \S (\d+)/ ? $1 : ();
}

sub gone {
    my (@pids) = @_;
    return !grep { -e "/proc/$_" && !zombie($_) } @pids;
}

sub zombie {
    open my $fh, '<', "/proc/$_[0]/stat" or return 1;
    my $stat = <$fh> // '';
    return $stat =~ /^\d+ \(.*\) Z/;
}

# t/13-lifecycle-single.t runs this file with master_process off
my $master = $ENV{PTY_TEST_MASTER} // 'on';
my ($n1, $n2) = $master eq 'on' ? (1001, 1002) : (1003, 1004);

{
    my $t = pty_nginx();
    $t->master_process($master eq 'on' ? 1 : 0);
    $t->plan(8)->run();

    # kill: Closed "killed", and the program is gone
    my $s = start_session($t, "sleep $n1");
    my ($ws) = attach_join($t, $s);
    ok($t->wait_until(sub { procs_running("sleep $n1") }, 5),
        "$master: program running");
    my @prog = procs_running("sleep $n1");

    my ($status) = api_call($t->port(8080), '/pty/kill', { id => $s->{id} });
    is($status, 200, "$master: kill answered");
    my $closed = wait_kind($ws, 'Closed', 10);
    is($closed->{payload}{reason}, 'killed', "$master: Closed killed");
    ok($t->wait_until(sub { gone(@prog) }, 5), "$master: killed program gone");

    # nginx stops: programs and keepers go with it
    my ($ws2) = attach_join($t, start_session($t, "sleep $n2"));
    ok($t->wait_until(sub { procs_running("sleep $n2") }, 5),
        "$master: second program running");
    my @left = procs_running("sleep $n2");
    push @left, map { parent($_) } @left;    # the keepers

    # its client gets the end of the session, not an invitation to return
    $t->stop();
    my @f = $ws2->recv_until(sub { ($_[0]{op} // '') eq 'binding_goodbye' }, 5);
    is(join(',', map { "$_->{payload}{reason}" } grep {
            (session_frame_kind($_) // '') eq 'Closed' || $_->{op} eq
            'binding_goodbye' } @f),
        'instance_terminated,session_closed',
        "$master: attached client gets Closed instance_terminated, goodbye");
    ok($t->wait_until(sub { gone(@left) }, 5),
        "$master: no program or keeper outlives nginx");
    ok(!(grep { /exited on signal/ } $t->error_log_lines),
        "$master: no child died on a signal nginx saw");
}
