#!/usr/bin/perl

# Input a program reads slower than it comes: the session queues it (up to
# pty_input_max) and hands it over in order as the program reads, a few
# bytes a time; a drained queue gives its memory back (it was kept, 1 MiB
# after a burst, until the session ended).

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Digest::MD5 qw(md5_hex);
use Test::More;
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::PtyAgent;

my $t = pty_nginx(workers => 1,
    extra_loc => 'pty_input_max 1m; client_body_buffer_size 2m;');
$t->plan(4)->run();

my ($worker) = $t->worker_pids;

sub cpu_ticks {
    open my $fh, '<', "/proc/$worker/stat" or return 0;
    my @f = split ' ', (<$fh> =~ s/^.*\) //sr);
    return $f[11] + $f[12];
}

sub rss_kb {
    open my $fh, '<', "/proc/$worker/status" or return 0;
    while (<$fh>) {
        return $1 if /^VmRSS:\s+(\d+)/;
    }
    return 0;
}

# raw mode (no echo, no line discipline), a few bytes a time; "P<k>" at
# each 100 kB read
my $total = 5 * 200_000;
my $py = <<"PY";
import os, tty, hashlib
tty.setraw(0)
print("READY", flush=True)
h = hashlib.md5()
n = 0
while n < $total:
    b = os.read(0, 3)
    h.update(b)
    if (n + len(b)) // 100000 > n // 100000:
        print("P%d" % ((n + len(b)) // 100000), flush=True)
    n += len(b)
print("GOT", n, h.hexdigest(), flush=True)
PY

my $s = agent_start($t, "python3 -c '$py'", wait_for => 'READY');
my $id = $s->{id};
my $rss0 = rss_kb();
my $cpu0 = cpu_ticks();

# the first two at once (the queue grows), each other when the program
# has read all but the last 200 kB (the queue is moved down, or grows)
my ($all, $out) = ('', '');
my $sent = 0;
for my $k (0 .. 4) {
    my $chunk = substr(('abcdefghij' x 20_001) . $k, $k + 1, 200_000);
    my $r = agent($t, 'write', { id => $id, input => $chunk, wait_ms => 0 });
    last unless $r->{_status} == 200;
    $all .= $chunk;
    $sent++;
    my $half = 2 * $k;
    $out = agent_collect($t, $id, qr/P$half\b/, 30, initial => $out)
        if $k > 0;
}
is($sent, 5, 'five writes of 200 kB taken while the program reads slowly');

$out = agent_collect($t, $id, qr/GOT \d+ \w+/, 120, initial => $out);
my ($n, $md5) = $out =~ /GOT (\d+) (\w+)/;
is($n // 0, $total, 'the program read every byte');
is($md5 // '', md5_hex($all), 'in the order it was sent');

note('worker CPU for it: ' . (cpu_ticks() - $cpu0) . ' ticks');

SKIP: {
    skip 'ASan keeps freed memory', 1 if Test::Nginx::asan();
    cmp_ok(rss_kb() - $rss0, '<', 1280, 'the drained queue gave its memory '
        . 'back') or diag(rss_kb() - $rss0 . ' kB more');
}

agent($t, 'kill', { id => $id });
