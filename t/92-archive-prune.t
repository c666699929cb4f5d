#!/usr/bin/perl

# What the archive keeps: a running session keeps every frame newer than
# pty_replay_buffer_retention_seconds and at least its last
# pty_replay_buffer_frames; older ones are pruned (a replay_from before
# them is REPLAY_OUT_OF_RANGE).  An ended session is kept for keep_closed,
# and while the file is over max_size the sessions that ended first go.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Test::More;
use Time::HiRes qw(time sleep);
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::PtyAPI qw(api_call);
use Test::Nginx::PtyWS qw(session_frame_kind);

my $t = pty_nginx(
    extra_http => 'pty_archive %%TESTDIR%%/arch/pty.db batch=20ms'
        . ' prune=200ms keep_closed=3s;',
    extra_loc => 'pty_replay_buffer_frames 10;'
        . ' pty_replay_buffer_retention_seconds 1; pty_closed_linger 100ms;'
        . ' pty_ring_size 64k; pty_ring_max_size 64k;');
mkdir($t->testdir . '/arch') or die "mkdir: $!\n";
chmod(0777, $t->testdir . '/arch');
$t->plan(12)->run();

my $port = $t->port(8080);

sub transcript {
    my ($id, %o) = @_;
    my ($st, $j) = api_call($port, '/pty/transcript',
        { id => $id, limit => 10000, %o });
    return ($st, $j);
}

# polls until $cond holds for the transcript (a deadline, not a sleep)
sub transcript_until {
    my ($id, $cond, $secs) = @_;
    my $deadline = time + $secs * Test::Nginx::timeout_scale();
    my ($st, $j);
    while (time < $deadline) {
        ($st, $j) = transcript($id);
        return ($st, $j) if $cond->($st, $j);
        sleep 0.1;
    }
    return ($st, $j);
}

# by age: a fast session keeps about its last second
my $fast = start_session($t, 'i=0; while :; do printf "f %d %0300d\\n" $i 0;'
    . ' i=$((i+1)); sleep 0.005; done');
my ($st, $j) = transcript_until($fast->{id}, sub {
    $_[0] == 200 && ($_[1]{first_sequence} // 0) > 400 }, 20);
my $asked = time;
cmp_ok($j->{first_sequence} // 0, '>', 400, 'old frames of a running '
    . 'session are pruned');
my @f = @{$j->{frames}};
my @holes = grep { $f[$_]{sequence} != $f[$_ - 1]{sequence} + 1
    && !$f[$_ - 1]{target} } 1 .. $#f;
is(scalar(@holes), 0, 'what is kept has no holes');
ok($f[0]{sequence} == $j->{first_sequence}, 'from the first kept one on');
my $oldest = ts_of($f[0]{ts});
cmp_ok($oldest, '>', $asked - 1 - 2, 'what is left is the last second '
    . '(and the pruning interval)');

# a replay_from before what is kept
my $ws = attach($t, $fast);
$ws->recv_json(5);
$ws->send_json({ op => 'pty.join_session', payload => { role => 'observer' },
    extensions => [Test::Nginx::Pty::EXT_URI()], replay_from => 1 });
my @flush = $ws->recv_until(sub {
    (session_frame_kind($_[0]) // '') eq 'Keyframe' }, 10);
my ($err) = grep { ($_->{op} // '') eq 'Error' } @flush;
is($err && $err->{payload}{code}, 'REPLAY_OUT_OF_RANGE',
    'replay from a pruned frame is out of range');
$ws->close;

# by count: a slow session keeps its last 10 even when they are older
my $slow = start_session($t, 'while :; do echo s; sleep 0.3; done');
($st, $j) = transcript_until($slow->{id}, sub {
    $_[0] == 200 && ($_[1]{first_sequence} // 0) > 1 }, 20);
cmp_ok($j->{first_sequence} // 0, '>', 1, 'a slow session is pruned too');
cmp_ok($j->{last_sequence} - $j->{first_sequence} + 1, '>=', 10,
    'but keeps at least pty_replay_buffer_frames');
cmp_ok(ts_of($j->{frames}[0]{ts}), '<', time - 1.5,
    'older than the retention time');

# ended sessions: kept for keep_closed, then gone
my $ended = start_session($t, 'echo bye');
($st, $j) = transcript_until($ended->{id}, sub {
    $_[0] == 200 && ($_[1]{state} // '') eq 'exited' }, 10);
is($st, 200, 'an ended session is kept');
($st) = transcript_until($ended->{id}, sub { $_[0] == 404 }, 20);
is($st, 404, 'and gone after keep_closed');

# by size: the sessions that ended first go first
$t->stop();
my $conf = $t->read_file('nginx.conf');
$conf =~ s/keep_closed=3s/keep_closed=1h max_size=512k/ or die "no line\n";
$t->write_file('nginx.conf', $conf);
$t->run();
my @ids;
for my $n (1 .. 12) {
    my $s = start_session($t, "head -c 120000 /dev/zero | tr '\\\\0' $n%10");
    push @ids, $s->{id};
    transcript_until($s->{id}, sub {
        $_[0] == 200 && ($_[1]{state} // '') eq 'exited' }, 10);
}
($st) = transcript_until($ids[0], sub { $_[0] == 404 }, 10);
is($st, 404, 'over max_size, the first ended session went');
($st) = transcript($ids[-1]);
is($st, 200, 'the last one is kept');

sub ts_of {
    my ($ts) = @_;
    my ($y, $mo, $d, $h, $mi, $s) =
        $ts =~ /^(\d+)-(\d+)-(\d+)T(\d+):(\d+):([\d.]+)Z$/ or return 0;
    require Time::Local;
    return Time::Local::timegm(0, $mi, $h, $d, $mo - 1, $y) + $s;
}
