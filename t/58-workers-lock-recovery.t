#!/usr/bin/perl

# A worker killed while it holds a session's lock must not stall the
# others: gdb stops a worker inside the lock (queueing input for the
# owner) and kills it there; the owner takes the lock over from the dead
# pid and output goes on.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Test::More;
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::PtyWS qw(decode_output);
use Time::HiRes qw(sleep time);

my $gdb = `command -v gdb 2>/dev/null`;
chomp $gdb;
plan(skip_all => 'no gdb') unless $gdb;

my $t = pty_nginx(workers => 4, reuseport => 1);
$t->allow_log(qr/exited on signal 9/);
$t->run();

my ($s, $owner) = start_ticker($t);

my ($victim, $obs) = attach_workers($t, $s, 2, not => { $owner => 1 });
join_session($victim->[0], role => 'controller');
join_session($obs->[0]);
my $pid = $victim->[2];

# stop the victim where it holds the lock, then kill it there
open(my $g, '-|', "$gdb -nx -p $pid -batch -ex 'break ngx_pty_inbox_put' "
    . "-ex continue -ex kill 2>&1") or die "gdb: $!";
my $attached;
for (1 .. 100) {
    my $tracer = (grep { /^TracerPid:/ } do {
        open my $f, '<', "/proc/$pid/status" or last; <$f> })[0] // '';
    $attached = 1, last if $tracer =~ /:\s*[1-9]/;
    sleep 0.1;
}
plan(skip_all => 'gdb cannot attach here') unless $attached;
sleep 1;        # the breakpoint is set once gdb has read the symbols

send_input($victim->[0], "stop here\r");
my $deadline = time + 15;
sleep 0.05 while kill(0, $pid) && time < $deadline;
ok(!kill(0, $pid), "worker $pid killed inside the session lock");
close $g;

my $txt = '';
my $want;
$obs->[0]->recv_until(sub {
    $txt .= decode_output($_[0]);
    $want //= (($txt =~ /tick (\d+)\r\n(?!.*tick)/s)[0] // 0) + 20
        if $txt =~ /tick \d+\r\n/;
    defined $want && $txt =~ /tick $want\r/ }, 15);
ok(defined $want && $txt =~ /tick $want\r/,
    'output goes on through the owner');
ok(scalar $t->grep_error_log(
    qr/took over a session lock held by process $pid/),
    'the owner took the lock over from the dead worker');

$t->done_testing();
