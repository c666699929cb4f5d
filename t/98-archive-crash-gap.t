#!/usr/bin/perl

# The archive's two promises about loss.  A worker killed in the middle of
# storing loses no frame: the next worker stores what the ring still holds
# (every sequence from 1 to the Closed is there, no gap).  A writer that
# cannot keep up with a ring too small to wait for it records the frames
# it missed as a gap and says so once; it never holds up the terminal.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Test::More;
use Time::HiRes qw(time sleep);
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::PtyAPI qw(api_call);

my $t = pty_nginx(workers => 2, extra_http => '@ARCHIVE@',
    extra_loc => '@RING@');
my $conf = $t->read_file('nginx.conf');
my $dir = archive_dir($t);

sub with_ring {
    my ($ring) = @_;
    (my $c = $conf) =~ s{\@RING\@}{$ring}g;
    archive_conf($t, $c, 1);
}

with_ring('');
$t->allow_log(qr/exited on signal 9|cannot be written|fell behind/);
$t->plan(8)->run();

my $port = $t->port(8080);

sub transcript_all {
    my ($id) = @_;
    my (@f, $head);
    my $from = 1;
    while (defined $from) {
        my ($st, $j) = api_call($port, '/pty/transcript',
            { id => $id, from => $from, limit => 5000 });
        return unless $st == 200;
        $head //= $j;
        push @f, @{$j->{frames}};
        $from = $j->{next};
    }
    return ($head, @f);
}

sub wait_ended {
    my ($id) = @_;
    my $deadline = time + 30 * Test::Nginx::timeout_scale();
    while (time < $deadline) {
        my ($st, $j) = api_call($port, '/pty/transcript',
            { id => $id, limit => 0 });
        return 1 if $st == 200 && $j->{state} eq 'exited';
        sleep 0.1;
    }
    return 0;
}

# 1. the owner is killed while the program prints: nothing stored is lost
my ($st, $s, $body, $h) = api_call($port, '/pty/start', { wait_ms => 0,
    command => 'for i in $(seq 1 400); do echo "line $i"; sleep 0.005;'
        . ' done' });
my $owner = $h->{'x-pty-worker'};
my $deadline = time + 10;
my $seen = 0;
while (time < $deadline) {
    my (undef, $j) = api_call($port, '/pty/transcript',
        { id => $s->{id}, limit => 0 });
    $seen = $j->{last_sequence} // 0;
    last if $seen >= 50;
    sleep 0.05;
}
ok($seen >= 50, "50 frames out before the kill ($seen)");
kill 'KILL', $owner;

ok(wait_ended($s->{id}), 'another worker took it over and it ended');
$t->stop();
$t->run();
my ($head, @f) = transcript_all($s->{id});
my @seqs = sort { $a <=> $b } map { $_->{sequence} } @f;
is($head->{gaps}, 0, 'no gap recorded');
my @holes = grep { $seqs[$_] != $seqs[$_ - 1] + 1 } 1 .. $#seqs;
# targeted frames (a joiner's) are not shown: none were made here
is(scalar(@holes), 0, 'every sequence from the first to the last')
    or diag explain [map { $seqs[$_ - 1] . '..' . $seqs[$_] } @holes[0 .. 2]];
is($f[-1]{payload}{kind}, 'Closed', 'up to its Closed');

# 2. a writer held up while a small ring overflows: a gap, said once
$t->stop();
with_ring('pty_ring_size 64k; pty_ring_max_size 64k;');
$t->run();
my $lock = open(my $py, '|-', 'python3', '-c',
    'import sqlite3, sys; c = sqlite3.connect(sys.argv[1], '
    . 'isolation_level=None); c.execute("BEGIN EXCLUSIVE"); '
    . 'open(sys.argv[2], "w").close(); sys.stdin.read()', "$dir/pty.db",
    "$dir/locked");
$deadline = time + 10 * Test::Nginx::timeout_scale();
sleep 0.05 while !-e "$dir/locked" && time < $deadline;

my $g = start_session($t, 'seq 1 60000; echo FLOOD-DONE');
$deadline = time + 20 * Test::Nginx::timeout_scale();
my $screen = '';
while (time < $deadline) {
    my (undef, $r) = api_call($port, '/pty/read', { id => $g->{id} });
    $screen = $r->{screen} // '';
    last if $screen =~ /FLOOD-DONE/;
    sleep 0.1;
}
like($screen, qr/FLOOD-DONE/, 'the terminal ran on while the file was locked');
close($py);

ok(wait_ended($g->{id}) && do {
    my ($gh) = transcript_all($g->{id});
    $deadline = time + 30 * Test::Nginx::timeout_scale();
    while (($gh->{gaps} // 0) == 0 && time < $deadline) {
        sleep 0.2;
        ($gh) = transcript_all($g->{id});
    }
    ($gh->{gaps} // 0) > 0 }, 'the frames the ring dropped are a gap');
my @warn = grep { /fell behind the ring of session/ }
    split /\n/, $t->read_file('error.log');
is(scalar(@warn), 1, 'said once') or diag join "\n", @warn;
