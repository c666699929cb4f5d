#!/usr/bin/perl

# pty-extensions/v1 section 9, scenario 8: under sustained output a
# Keyframe comes at least every keyframe_interval_seconds (slow output)
# and at least every keyframe_interval_frames Output frames (a burst);
# none while idle; each one anchored on the last Output before it.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Test::More;
use Time::Local qw(timegm);
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::PtyExt;
use Test::Nginx::PtyAPI qw(api_call);
use Test::Nginx::PtyWS qw(decode_output);

# 8080: a keyframe every second (frames never reach the count);
# 8081: a keyframe every 10 Outputs (the seconds never run out)
my $t = pty_nginx(extra_loc => 'pty_keyframe_interval_seconds 1; '
        . 'pty_keyframe_interval_frames 100000;',
    extra_http => 'server { listen 127.0.0.1:%%PORT_8081%%; '
        . 'location /agents/ { pty_attach; } '
        . 'location /pty/ { pty_api; pty_keyframe_interval_frames 10; '
        . 'pty_keyframe_interval_seconds 600; } }');
$t->plan(13)->run();

sub ms {
    my ($ts) = @_;
    my ($y, $mo, $d, $h, $mi, $s, $f) =
        $ts =~ /^(\d+)-(\d+)-(\d+)T(\d+):(\d+):(\d+)(?:\.(\d+))?Z$/
        or return undef;
    return timegm($s, $mi, $h, $d, $mo - 1, $y) * 1000
        + ($f ? substr($f . '00', 0, 3) : 0);
}

# every broadcast Keyframe's anchor is the last Output/Resize before it
sub anchors_ok {
    my (@f) = @_;
    my ($last, $bad) = (undef, 0);
    for (@f) {
        my $k = kind($_);
        $last = $_->{sequence} if $k eq 'Output' || $k eq 'Resize';
        next unless $k eq 'Keyframe';
        if (!defined $last || $_->{payload}{anchor_sequence} != $last) {
            diag("Keyframe $_->{sequence}: anchor "
                . "$_->{payload}{anchor_sequence}, last Output "
                . ($last // 'none'));
            $bad++;
        }
    }
    return !$bad;
}

###############################################################################
# by time: a line every 50 ms for about 3 s

my $s = start_session($t, 'read -p go? x; for i in $(seq 1 60); do echo line$i; '
    . 'sleep 0.05; done; echo DO""NE; read y');
my $ws = attach($t, $s);
$ws->recv_json(5);
go($ws, join_flush($ws, replay_from => 0));

my $out = '';
my @f = $ws->recv_until(sub { $out .= decode_output($_[0]);
    $out =~ /DONE\r\n/ }, 15, 'the end of the slow output');

# the final keyframe folds the last line in; then none while idle
push @f, $ws->recv_until(sub { kind($_[0]) eq 'Keyframe' }, 3,
    'a keyframe after the last output');
my @idle = drain($ws, 2.5);
is(scalar(grep { kind($_) eq 'Keyframe' } @idle), 0,
    'no keyframe while idle (2.5 intervals)');

my @out = grep { kind($_) eq 'Output' } @f;
my @kf = grep { kind($_) eq 'Keyframe' } @f;
cmp_ok(scalar @out, '>=', 60, 'slow output came as many Output frames')
    or diag(scalar @out . ' Outputs');
cmp_ok(scalar @kf, '>=', 3, 'at least 3 keyframes in ~3 s');

my @kms = map { ms($_->{ts}) } @kf;
my @gaps = map { $kms[$_] - $kms[$_ - 1] } 1 .. $#kms;
my $first = ms($out[0]{ts});
ok(@kms && $kms[0] - $first <= 1300 && !(grep { $_ > 1300 } @gaps),
    'a keyframe at most 1 s (+0.3) after the first output, then every 1 s')
    or diag("first output $first, keyframes at @kms, gaps @gaps");
ok(!(grep { $_ < 700 } @gaps), 'but not much more often: a cadence')
    or diag("gaps @gaps");

# every Output frame is in a keyframe within the interval
my $late = 0;
for my $o (@out) {
    my $t0 = ms($o->{ts});
    my ($k) = grep { $_->{sequence} > $o->{sequence} } @kf;
    $late++ if !$k || ms($k->{ts}) - $t0 > 1300;
}
is($late, 0, 'every Output folded into a keyframe within 1.3 s');
ok(anchors_ok(@f), 'anchor_sequence: the last Output before each keyframe');
is($kf[-1]{payload}{anchor_sequence}, $out[-1]{sequence},
    'the last keyframe holds the last output');

###############################################################################
# by count: a burst, at most 10 Outputs between two keyframes

my (undef, $s2) = api_call($t->port(8081), '/pty/start',
    { command => 'read -p go? x; seq 1 120000; echo DO""NE; read y',
      wait_ms => 0 });
$ws = Test::Nginx::PtyWS->connect(port => $t->port(8081),
    path => $s2->{attach_path});
$ws->recv_json(5);
go($ws, join_flush($ws, replay_from => 0));

$out = '';
@f = $ws->recv_until(sub { $out .= decode_output($_[0]);
    $out =~ /DONE\r\n/ }, 15, 'the end of the burst');
push @f, drain($ws, 1);

my ($run, $max, $keys, $outs) = (0, 0, 0, 0);
for (@f) {
    my $k = kind($_);
    if ($k eq 'Output') { $run++; $outs++; $max = $run if $run > $max }
    if ($k eq 'Keyframe') { $run = 0; $keys++ }
}
cmp_ok($outs, '>=', 30, 'the burst came as many Output frames')
    or diag("$outs Outputs");
cmp_ok($max, '<=', 10, 'never more than 10 Outputs without a keyframe')
    or diag("$max in a row");
cmp_ok($keys, '>=', int($outs / 10), 'a keyframe for every 10 Outputs')
    or diag("$keys keyframes, $outs Outputs");
ok(anchors_ok(@f), 'burst: anchor_sequence is the last Output before');
ok(!(grep { kind($_) eq 'Error' } @f), 'no lag on the way')
    or diag(map { "$_->{payload}{code}\n" } grep { kind($_) eq 'Error' } @f);
