#!/usr/bin/perl

# Replay older than the ring, on two workers while output goes on: a
# join with replay_from 0 long after the ring dropped the first frames
# gets every frame from the archive, then from the ring, then live: the
# same sequences and ids the archive stored, none missing, none twice.
# A replay_from the archive no longer has (pruned) is REPLAY_OUT_OF_RANGE
# and a Keyframe, as without an archive.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Test::More;
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::PtyExt;
use Test::Nginx::PtyArchive;

my $t = pty_nginx(workers => 2, reuseport => 1,
    extra_http => 'pty_archive %%TESTDIR%%/archive/pty.db;',
    extra_loc => 'pty_ring_size 64k; pty_ring_max_size 128k; '
        . 'pty_replay_buffer_frames 20;');
archive_dir($t);
$t->plan(13)->run();

# a kilobyte every 5 ms or so: the ring holds about 60 frames
my $s = start_session($t, 'i=0; while :; do i=$((i+1)); '
    . 'printf "tick %06d %01000d\n" $i 0; sleep 0.005; done');

# wait until the ring has dropped the start: frame 1 is only archived
my $first = sub { sql_one($t, "SELECT min(seq) FROM frames f JOIN sessions "
    . "s ON s.sid = f.sid WHERE s.uuid = '$s->{session_id}'") };
$t->wait_until(sub { ($first->() // 0) == 1
    && wait_stored($t, $s->{session_id}, 300, 0.1) }, 30);

my @c = attach_workers($t, $s, 2);
is(scalar @c, 2, 'clients on two workers');

for my $c (@c) {
    join_session($c->[0], replay_from => 0, no_wait => 1);
}

# both read until each is a good way into the live output
my $live = 0;
my %got;
my $deadline = time + 60;
while (time < $deadline) {
    for my $c (@c) {
        while (my $m = $c->[0]->recv_json(0.02)) {
            push @{$got{$c->[2]}}, $m;
        }
    }
    $live ||= sql_one($t, "SELECT last_seq + 100 FROM sessions WHERE uuid = "
        . "'$s->{session_id}'");
    last unless grep {
        my @o = grep { kind($_) eq 'Output' } @{$got{$_->[2]} // []};
        !@o || $o[-1]{sequence} < $live } @c;
}

my $last = 0;
for my $c (@c) {
    my @o = grep { kind($_) eq 'Output' } @{$got{$c->[2]}};
    $last = $o[-1]{sequence} if @o && $o[-1]{sequence} > $last;
}

# the archive has them all by now: the reference
wait_stored($t, $s->{session_id}, $last, 20);
my @ref = sql($t, "SELECT f.seq, lower(hex(f.id)) FROM frames f JOIN "
    . "sessions s ON s.sid = f.sid WHERE s.uuid = '$s->{session_id}' AND "
    . "f.kind = 1 AND f.seq <= $last ORDER BY f.seq");

for my $c (@c) {
    my @f = @{$got{$c->[2]}};
    my @o = grep { kind($_) eq 'Output' } @f;
    my $upto = $o[-1]{sequence};
    my @want = grep { $_->[0] <= $upto } @ref;
    my @have = map { my $id = $_->{id}; $id =~ s/-//g; [$_->{sequence}, $id] }
        @o;
    is($have[0][0], $ref[0][0], "worker $c->[2]: from the first frame");
    ok($upto >= $live, "worker $c->[2]: into live output");
    is(scalar(@have), scalar(@want), "worker $c->[2]: " . scalar(@want)
        . ' Output frames, none missing, none twice');
    is_deeply(\@have, \@want, "worker $c->[2]: same sequences and ids");
    ok(!(grep { ($_->{payload}{code} // '') =~ /REPLAY_OUT_OF_RANGE|LAGGED/ }
        @f), "worker $c->[2]: no out of range, no lag");
}

# the frames the archive no longer has: out of range, then a Keyframe
sql($t, "DELETE FROM frames WHERE seq < 50 AND sid = (SELECT sid FROM "
    . "sessions WHERE uuid = '$s->{session_id}')");
my $ws = attach($t, $s);
$ws->recv_json(5);
my @flush = join_flush($ws, role => 'observer', replay_from => 10);
my ($err) = grep { kind($_) eq 'Error' } @flush;
is($err && $err->{payload}{code}, 'REPLAY_OUT_OF_RANGE',
    'pruned from the archive: REPLAY_OUT_OF_RANGE');
is(kind($flush[-1]), 'Keyframe', 'then a Keyframe');
