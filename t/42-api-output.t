#!/usr/bin/perl

# What the API reads: the screen model of full-screen programs (vi, top),
# 1 MiB of output paged without loss, bytes lost to a small ring reported,
# and a WebSocket observer of an API-started session seeing the same bytes.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Time::HiRes qw(time);
use Test::More;
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::PtyAgent;
use Test::Nginx::PtyAPI qw(api_call);

my $t = pty_nginx(extra_http => '
    server {
        listen 127.0.0.1:%%PORT_8081%%;
        location /pty/ {
            pty_api;
            pty_scrollback_size 8k;
        }
    }', extra_loc => 'pty_scrollback_size 4m;');
$t->plan(14)->run();

# --- the screen of full-screen programs -------------------------------------

my $s = agent_start($t, 'vi', cols => 80, rows => 24);
my $r = agent($t, 'read', { id => $s->{id}, wait_for => '~' });
ok($r->{matched}, 'vi: the screen shows tildes');
is($r->{rows}, 24, 'read: rows');

agent($t, 'write', { id => $s->{id}, input => 'ihello screen\e', wait_ms => 0 });
$r = agent($t, 'read', { id => $s->{id}, wait_for => 'hello screen' });
like($r->{screen}, qr/^hello screen\n~/, 'vi: typed text on row 1, tildes below');

# reading the screen consumes no output: write still has it all
my $w = agent($t, 'write', { id => $s->{id}, wait_ms => 0 });
like($w->{output}, qr/hello screen/, 'read consumed nothing');
agent($t, 'write', { id => $s->{id}, input => ':q!', submit => 1,
    wait_ms => 3000 });

$s = agent_start($t, 'top -d 0.5', cols => 100, rows => 30);
$r = agent($t, 'read', { id => $s->{id}, wait_for => 'load average' });
like($r->{screen}, qr/^top - .*load average.*\nTasks:/s, 'top: the header');
agent($t, 'write', { id => $s->{id}, input => 'q', wait_ms => 3000 });

# --- 1 MiB paged ------------------------------------------------------------

my $t0;
my $n = 150000;                      # 1,038,895 bytes of digits and \n
$t0 = time;
$s = agent_start($t, "seq 1 $n", wait_ms => 0);
my ($out, $pages, $max, $missed, $cursor) = ($s->{output}, 1, 0, 0, 0);
$cursor = $s->{offset};
my $deadline = time + 20;
while (time < $deadline) {
    $r = agent($t, 'write', { id => $s->{id}, offset => $cursor,
        wait_ms => 100 });
    last unless $r->{_status} == 200;
    $pages++;
    $out .= $r->{output};
    $max = length $r->{output} if length $r->{output} > $max;
    $missed += $r->{missed};
    $cursor = $r->{offset};
    last if !$r->{running} && !$r->{more};
}
my $took = time - $t0;
is($missed, 0, "1 MiB: nothing missed ($pages pages, "
    . sprintf('%.2fs', $took) . ')');
ok($max <= 65536 && $pages > 15, "pages at most 64k (largest $max)");
is($out, join('', map { "$_\n" } 1 .. $n), 'every line, in order');
is($cursor, length($out), 'cursor counts the text delivered');

$r = agent($t, 'write', { id => $s->{id}, offset => 5 });
is($r->{error}{code}, 'cursor_mismatch', 'a stale cursor: 409');

# --- a small ring: the loss is reported -------------------------------------

my $small = $t->port(8081);
my ($st, $j) = api_call($small, '/pty/start',
    { command => 'seq 1 20000; echo END; sleep 5', wait_ms => 0 });
# nobody reads while it prints: a reader waiting in between could keep up
# with the program (whether it does is a matter of timing) and lose nothing
select undef, undef, undef, 1;
my ($lost, $text) = (0, '');
$deadline = time + 10;
while (($st // 0) == 200 && time < $deadline) {
    my ($st2, $j2) = api_call($small, '/pty/write',
        { id => $j->{id}, wait_for => 'END' });
    last unless ($st2 // 0) == 200;
    $lost += $j2->{missed};
    $text .= $j2->{output};
    last if $text =~ /END/;
}
ok($lost > 8192, "8k ring: missed bytes reported ($lost)");
like($text, qr/\n20000\nEND\n/, 'and the newest output is there');

# --- a WebSocket observer sees the bytes the API wrote ----------------------

$s = agent_start($t, 'PS1="ready\$ " exec bash --norc --noprofile -i',
    wait_for => 'ready$ ');
my ($ws) = attach_join($t, $s, role => 'observer');
$r = agent($t, 'write', { id => $s->{id}, input => 'echo $((6*7))',
    submit => 1, wait_for => 'ready$ ' });
is($r->{output}, "echo \$((6*7))\n42\nready\$ ", 'API: settled output');
# raw: bash adds bracketed-paste mode switches around the command
my $raw = read_output($ws, qr/42\r\n.*ready\$ $/s);
like($raw, qr/echo \$\(\(6\*7\)\)\r\n.*\r42\r\n.*ready\$ $/s,
    'observer: the same bytes, raw');
