#!/usr/bin/perl

# Load test: many sessions with output, many WebSocket clients spread over
# the workers (reuseport).  Run with `make load`; prints wsload's summary.
#
#   LOAD_SESSIONS  sessions (500)
#   LOAD_CLIENTS   WebSocket clients in all, LOAD_CLIENTS / LOAD_SESSIONS
#                  per session, the first the controller (2000)
#   LOAD_LINES     each session prints "seq 1 LOAD_LINES" after Enter (2000)
#   LOAD_WORKERS   nginx workers (4)
#   LOAD_TIMEOUT   seconds wsload waits for everything (300)
#
# wsload checks, per client: sequences grow after the join flush, the
# Output holds exactly the lines 1..LOAD_LINES in order, one Closed.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../lib";

use Test::More;
use Test::Nginx;
use Test::Nginx::Pty;
use Time::HiRes qw/time/;

my $root = "$FindBin::Bin/../..";
my $wsload = "$root/build/wsload";
my $sessions = $ENV{LOAD_SESSIONS} // 500;
my $clients = $ENV{LOAD_CLIENTS} // 2000;
my $lines = $ENV{LOAD_LINES} // 2000;
my $workers = $ENV{LOAD_WORKERS} // 4;
my $timeout = $ENV{LOAD_TIMEOUT} // 300;
my $per = int($clients / $sessions) || 1;

-x $wsload or die "build t/bench first (make load)\n";

# each session takes roughly pty_ring_size + pty_scrollback_size of the zone
my $t = pty_nginx(workers => $workers, reuseport => 1, zone => '512m',
    extra_loc => 'pty_ring_size 64k; pty_scrollback_size 16k; '
        . 'pty_ring_max_size 1m; pty_replay_buffer_frames 100; '
        . 'pty_max_observers ' . ($per > 32 ? $per : 32) . ';');

# more connections and files per worker than the harness config allows
# (no more files than the hard limit nginx could raise itself to)
my $hard = `sh -c 'ulimit -Hn'`;
chomp $hard;
my $nofile = $hard =~ /^\d+$/ && $hard < 65536 ? $hard : 65536;
for ($t->{_templates}{'nginx.conf'}) {
    s/^events \{\}/worker_rlimit_nofile $nofile;\n\nevents {\n    worker_connections 8192;\n}/m
        or die "no events block in the config\n";
}

$t->run();

my $t0 = time;
my @paths;
for my $i (1 .. $sessions) {
    my $s = start_session($t, "read x; seq 1 $lines; sleep 0.2",
        cols => 80, rows => 24);
    push @paths, $s->{attach_path};
}
my $started = time - $t0;

my $list = $t->testdir . '/paths';
open my $fh, '>', $list or die "$list: $!\n";
print $fh "$_\n" for @paths;
close $fh;

my $summary = `$wsload @{[$t->port(8080)]} $per $lines $timeout < $list`;
my $rc = $? >> 8;
print "# $summary";
ok($rc == 0, "wsload: every client got every frame it was owed ($summary)");

$t->stop();

my $log = $t->read_file('error.log') // '';
my @bad = grep { /\[(?:alert|crit|emerg)\]/ } split /\n/, $log;
ok(!@bad, 'no alert/crit/emerg in error.log') or diag(join "\n", @bad[0 .. ($#bad < 19 ? $#bad : 19)]);

done_testing();

printf "\n%d sessions started through the API in %.2fs; %d clients "
    . "(%d per session) over %d workers, %d lines each\n",
    $sessions, $started, $sessions * $per, $per, $workers, $lines;
print "wsload: $summary";
