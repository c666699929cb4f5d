#!/usr/bin/perl

# Soak: many sessions printing and echoing input, many WebSocket clients
# over several workers, nginx reloaded every SOAK_RELOAD seconds all along.
# Run with `make soak` (a few minutes; not part of `make test`).
#
#   SOAK_SESSIONS  sessions (200)
#   SOAK_CLIENTS   WebSocket clients in all, SOAK_CLIENTS / SOAK_SESSIONS
#                  per session, the first the controller (1000)
#   SOAK_SECONDS   how long the clients run and the reloads go on (120)
#   SOAK_WORKERS   nginx workers (4)
#   SOAK_RELOAD    seconds between reloads (10)
#   SOAK_TICK_MS   each session prints "tick N" this often (100)
#   SOAK_INPUT_MS  each controller types a line this often (200)
#
# Each session runs a program printing "tick N" every SOAK_TICK_MS and
# answering every input line with "got LINE".  t/bench/wssoak.c runs the
# clients; a client told binding_goodbye reconnects with replay_from, and
# every one is checked for lost, reordered, doubled or altered frames and
# lines, and every typed line for its answer (see wssoak.c).  Before each
# reload and at the end the workers' memory and the zone's use are
# sampled.  Fails on any loss.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../lib";

use Test::More;
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::PtyAPI qw(api_call);
use Time::HiRes qw/time sleep/;
use POSIX qw(WNOHANG);

my $root = "$FindBin::Bin/../..";
my $wssoak = "$root/build/wssoak";
my $sessions = $ENV{SOAK_SESSIONS} // 200;
my $clients = $ENV{SOAK_CLIENTS} // 1000;
my $seconds = $ENV{SOAK_SECONDS} // 120;
my $workers = $ENV{SOAK_WORKERS} // 4;
my $every = $ENV{SOAK_RELOAD} // 10;
my $tick = ($ENV{SOAK_TICK_MS} // 100) / 1000;
my $input_ms = $ENV{SOAK_INPUT_MS} // 200;
my $per = int($clients / $sessions) || 1;
my $drain = 5;

-x $wssoak or die "build t/bench first (make soak)\n";

# rings stay at pty_ring_size (few frames retained), so the zone's use
# settles once every ring is full; a reconnect needs a second of frames
my $t = pty_nginx(workers => $workers, reuseport => 1,
    zone => (64 + $sessions) . 'm',
    extra_loc => 'pty_ring_size 64k; pty_scrollback_size 16k; '
        . 'pty_ring_max_size 1m; pty_replay_buffer_frames 100; '
        . 'pty_max_observers ' . ($per * 2 > 32 ? $per * 2 : 32) . ';');

my $hard = `sh -c 'ulimit -Hn'`;
chomp $hard;
my $nofile = $hard =~ /^\d+$/ && $hard < 65536 ? $hard : 65536;
for ($t->{_templates}{'nginx.conf'}) {
    s/^events \{\}/worker_rlimit_nofile $nofile;\n\nevents {\n    worker_connections 8192;\n}/m
        or die "no events block in the config\n";
}

$t->run();

# one process a session: ticks on a clock, an answer to each input line
my $prog = 'use Time::HiRes qw(time); $| = 1; my ($i, $b, $n) = (0, "", '
    . 'time); while (1) { my $w = $n - time; if ($w <= 0) { $i++; '
    . 'print "tick $i\n"; $n += ' . $tick . '; $n = time if $n < time - 1; '
    . 'next } my $r = ""; vec($r, 0, 1) = 1; next unless select($r, undef, '
    . 'undef, $w) > 0; sysread(STDIN, $b, 4096, length $b) or exit; '
    . 'print "got $1\n" while $b =~ s/^(.*)\n//; }';
my $command = "stty -echo; exec perl -e '$prog'";

my $t0 = time;
my @paths;
for (1 .. $sessions) {
    push @paths, start_session($t, $command, cols => 80, rows => 24)
        ->{attach_path};
}
my $started = time - $t0;

my $list = $t->testdir . '/paths';
open my $fh, '>', $list or die "$list: $!\n";
print $fh "$_\n" for @paths;
close $fh;

sub kib {
    my ($pid, $field) = @_;
    open my $st, '<', "/proc/$pid/status" or return 0;
    while (my $l = <$st>) {
        return $1 if $l =~ /^$field:\s+(\d+) kB/;
    }
    return 0;
}

my @samples;
sub sample {
    my ($label) = @_;
    my @w = $t->worker_pids;
    my ($rss, $anon) = (0, 0);
    for (@w) {
        $rss += kib($_, 'VmRSS');
        $anon += kib($_, 'RssAnon');
    }
    my (undef, $st) = api_call($t->port(8080), '/pty/status', {});
    push @samples, {
        t => time - $t0, label => $label, workers => scalar @w,
        rss => $rss / 1024, anon => $anon / 1024,
        master => kib($t->master_pid, 'VmRSS') / 1024,
        zone => ($st->{zone}{used} // 0) / 1048576,
        ring => ($st->{buffers}{ring_used} // 0) / 1048576,
        running => $st->{sessions}{running} // 0,
    };
}

my $out = $t->testdir . '/wssoak.out';
my $err = $t->testdir . '/wssoak.err';
my $client = fork // die "fork: $!\n";
if (!$client) {
    open STDIN, '<', $list or die "$list: $!\n";
    open STDOUT, '>', $out or die "$out: $!\n";
    open STDERR, '>', $err or die "$err: $!\n";
    exec $wssoak, $t->port(8080), $per, $seconds, $input_ms, $drain;
    die "exec $wssoak: $!\n";
}

# reloads on a clock while the clients run; none in the last seconds, so
# that every client is back and checked after the last one
my $run0 = time;
my ($reloads, $failed, $slowest) = (0, 0, 0);
my @hup;
my $next = $run0 + $every;
while ($next < $run0 + $seconds - 5) {
    sleep($next - time) if $next > time;
    last if waitpid($client, WNOHANG) == $client;
    sample("before reload " . ($reloads + 1));
    my $r0 = time;
    push @hup, $r0;
    $t->reload(timeout => 30) or $failed++;
    $slowest = time - $r0 if time - $r0 > $slowest;
    $reloads++;
    $next += $every;
}

waitpid($client, 0);
my $rc = $? >> 8;
sample('end');

my $summary = do { local (@ARGV, $/) = ($out); <> } // '';
my %r = $summary =~ /(\w+)=(-?[\d.]+)/g;
my $details = do { local (@ARGV, $/) = ($err); <> } // '';

# a lost input's time next to the reload nearest to it
$details =~ s{^(lost input .*? typed at ([\d.]+)s.*)$}{
    my ($l, $at) = ($1, $2);
    my ($k, $d) = (0, 1e9);
    for my $i (0 .. $#hup) {
        my $x = ($at - ($hup[$i] - ($r{start} // $run0))) * 1000;
        ($k, $d) = ($i + 1, $x) if abs $x < abs $d;
    }
    sprintf "%s; %+.0f ms from the HUP of reload %d", $l, $d, $k;
}mge if @hup;

ok($rc == 0 && %r, 'wssoak: no frame, line or input lost, reordered '
    . 'or doubled') or diag($details);
ok(!$failed, "every reload finished (slowest " . sprintf('%.1f', $slowest)
    . " s)");
is($samples[-1]{running}, $sessions, 'every session still runs');

# flat: the workers' own memory does not grow from reload to reload, and
# the zone stays within what the rings and scrollbacks are sized for
my ($first) = grep { $_->{label} =~ /reload 2$/ } @samples;
$first //= $samples[0];
ok($samples[-1]{anon} <= $first->{anon} * 1.2 + 2, sprintf
    'workers\' private memory flat (%.1f MiB after the first reload, '
    . '%.1f MiB at the end)', $first->{anon}, $samples[-1]{anon});
ok($samples[-1]{zone} <= $sessions * (64 + 16 + 16) / 1024 + 4, sprintf
    'zone use %.1f MiB within the rings\' bound', $samples[-1]{zone});

$t->stop();

done_testing();

printf "\nsoak: %d sessions (started in %.1fs), %d clients (%d per "
    . "session), %d workers, %.0f s, %d reloads (one every %d s), a tick "
    . "every %d ms, a line typed every %d ms\n\n",
    $sessions, $started, $sessions * $per, $per, $workers, $seconds,
    $reloads, $every, $tick * 1000, $input_ms;

my @rows = (
    ['clients', $r{clients}],
    ['session frames checked', $r{frames}],
    ['Output frames', $r{outputs}],
    ['tick lines checked', $r{ticks}],
    ['input lines typed (refused, typed again)',
        "$r{inputs} ($r{refused})"],
    ['"got" lines checked', $r{got_lines}],
    ['reconnects (slowest, ms)', "$r{reconnects} ($r{max_rejoin_ms})"],
    ['closes without goodbye', $r{unclean}],
    ['lags (frames skipped)', "$r{lags} ($r{lag_skipped})"],
    ['lost / reordered / altered frames',
        "$r{lost_frames} / $r{reordered} / $r{corrupt}"],
    ['tick gaps / stray lines / doubled "got"',
        "$r{tick_gaps} / $r{stray_lines} / $r{dup_got}"],
    ['lost input lines (out of order)',
        "$r{lost_input} ($r{input_reordered})"],
    ['lost lines: ms before their goodbye',
        $r{lost_input} ? "$r{lost_bye_min_ms}..$r{lost_bye_max_ms}" : '-'],
    ['replays out of range / other errors',
        "$r{out_of_range} / $r{errors}"],
) if %r;
printf "| %-42s | %16s |\n", 'what', 'count';
printf "|%s|%s|\n", '-' x 44, '-' x 18;
printf "| %-42s | %16s |\n", @$_ for @rows;

printf "\n| %7s | %-16s | %7s | %12s | %13s | %10s | %13s | %8s |\n",
    't (s)', 'sample', 'workers', 'RSS (MiB)', 'anon (MiB)', 'master',
    'zone (MiB)', 'running';
printf "|%s|%s|%s|%s|%s|%s|%s|%s|\n", '-' x 9, '-' x 18, '-' x 9, '-' x 14,
    '-' x 15, '-' x 12, '-' x 15, '-' x 10;
printf "| %7.1f | %-16s | %7d | %12.1f | %13.1f | %10.1f | %13.2f | %8d |\n",
    @$_{qw/t label workers rss anon master zone running/} for @samples;

if ($details) {
    my @l = split /\n/, $details;
    print "\nwssoak reported:\n", map { "  $_\n" } @l[0 .. ($#l < 39 ? $#l : 39)];
}
