#!/usr/bin/perl

# Pruning in the background: over pty_archive_max_size the sessions that
# ended first go first; an ended session goes after pty_archive_retention;
# a live session keeps at least pty_replay_buffer_frames frames and every
# frame of its pty_replay_buffer_retention_seconds, and loses the rest.
# A reload with other archive settings hands over to a new writer.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Test::More;
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::PtyAPI qw(api_call);
use Test::Nginx::PtyArchive;

my $http = 'pty_archive %%TESTDIR%%/archive/pty.db; '
    . 'pty_archive_prune_interval 200ms; ';
my $t = pty_nginx(extra_http => $http . 'pty_archive_max_size 300k; '
        . 'pty_archive_retention 1h;',
    extra_loc => 'pty_replay_buffer_frames 50; '
        . 'pty_replay_buffer_retention_seconds 1;');
archive_dir($t);
$t->plan(9)->run();

sub sessions {
    return map { $_->[0] } sql($t, 'SELECT uuid FROM sessions');
}

# three ended sessions of about 120 KB each: the first goes for size
my @ended;
for my $i (1 .. 3) {
    my (undef, $s) = api_call($t->port(8080), '/pty/start', {
        command => "head -c 120000 /dev/zero | tr '\\0' x; echo; exit $i",
        wait_ms => 0 });
    push @ended, $s->{session_id};
    $t->wait_until(sub { sql_one($t, 'SELECT count(*) FROM sessions WHERE '
        . "uuid = '$s->{session_id}' AND ended IS NOT NULL") }, 20);
}

ok($t->wait_until(sub { !grep { $_ eq $ended[0] } sessions() }, 10),
    'over the size bound: the session that ended first is gone');
my %left = map { $_ => 1 } sessions();
ok($left{$ended[2]}, 'the newest is kept');
is(sql_one($t, "SELECT count(*) FROM frames f LEFT JOIN sessions s ON "
    . "s.sid = f.sid WHERE s.sid IS NULL"), 0, 'with no frame left over');

# shorter retention: a reload, and a new writer takes over
my $old = archive_writer($t);
$t->write_file_expand('nginx.conf', $t->read_file('nginx.conf')
    =~ s/pty_archive_retention 1h;/pty_archive_retention 1s;/r);
$t->reload() or die "reload failed\n";
ok($t->wait_until(sub { my $w = archive_writer($t); $w && $w != $old }, 10),
    'other settings: a new writer');

ok($t->wait_until(sub { !grep { $left{$_} } sessions() }, 10),
    'ended sessions go after pty_archive_retention');

# a live session: 400 frames or so, then quiet
my (undef, $live) = api_call($t->port(8080), '/pty/start', {
    command => 'for i in $(seq 1 400); do echo "line $i"; sleep 0.003; '
        . 'done; echo done; sleep 100', wait_for => 'done', wait_ms => 30000 });
my $sid = "(SELECT sid FROM sessions WHERE uuid = '$live->{session_id}')";
my $last = sql_one($t, "SELECT last_seq FROM sessions WHERE uuid = "
    . "'$live->{session_id}'");
cmp_ok($last, '>', 100, "a live session with $last frames");

ok($t->wait_until(sub { sql_one($t, "SELECT min(seq) FROM frames WHERE "
    . "sid = $sid") > $last - 50 }, 10),
    'older than its retention seconds and its last 50 frames: pruned');
my $n = sql_one($t, "SELECT count(*) FROM frames WHERE sid = $sid "
    . "AND seq > $last - 50");
is($n, 50, 'its last 50 frames are kept');
is(sql_one($t, "SELECT count(*) FROM sessions WHERE sid = $sid"), 1,
    'and the session');
