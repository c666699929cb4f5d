#!/usr/bin/perl

# A kill ends the session's whole process tree, not only the program's
# process group: a job the shell put in a group of its own (set -m) and a
# process orphaned by a double fork (the keeper is its subreaper) are found
# by the keeper's walk of its descendants and signalled too.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Test::More;
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::PtyAPI qw(api_call);

my $t = pty_nginx();
$t->plan(6)->run();

my ($job, $orphan) = ("sleep 1001$$", "sleep 1002$$");
my (undef, $s) = api_call($t->port(8080), '/pty/start', {
    command => "set -m; $job & ( $orphan & ) ; echo REA''DY; exec cat",
    wait_for => 'READY' });
ok($s && $s->{matched}, 'the session started its job and its orphan');

ok($t->wait_until(sub { procs_running($job) && procs_running($orphan) }, 5),
    'both are running');
# the session's own group is the one its leader heads (pgid = sid): a
# signal to that group does not reach this job
my ($jpid) = procs_running($job);
isnt(stat_field($jpid, 2), stat_field($jpid, 3),
    'the job has a process group of its own');

my ($st) = api_call($t->port(8080), '/pty/kill', { id => $s->{id} });
is($st, 200, 'kill');
ok($t->wait_until(sub { !procs_running($job) }, 10), 'the job is gone');
ok($t->wait_until(sub { !procs_running($orphan) }, 10), 'the orphan is gone');

$t->stop();

# a field of /proc/PID/stat after the command: 2 pgid, 3 sid
sub stat_field {
    my ($pid, $i) = @_;
    open my $fh, '<', "/proc/$pid/stat" or return 0;
    my $l = <$fh> // '';
    $l =~ s/^.*\) //;
    return (split ' ', $l)[$i];
}
