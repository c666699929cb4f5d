#!/usr/bin/perl

# Rings grow in the zone as output comes (docs/ARCHITECTURE.md, "Shared
# zone"); when the zone is full they cannot: the session keeps working
# with the rings it has (the frame ring evicts, the scrollback wraps and
# the API counts what it lost as missed), and the log says so once,
# naming pty_zone.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Test::More;
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::PtyExt qw(SHELL);
use Test::Nginx::PtyAPI qw(api_call);

my $t = pty_nginx(workers => 1, zone => '1m',
    extra_loc => 'pty_closed_linger 100ms;');
$t->run();

my $port = $t->port(8080);

my ($st, $r) = api_call($port, '/pty/start', { command => SHELL,
    wait_for => 'ready$ ', wait_ms => 10000 });
is($st, 200, 'a shell');
my $id = $r->{id};

# fill the zone: long command lines first, then short ones for the rest
my @fill;
for my $cmd ('exec sleep 60 #' . ('x' x 60000), 'exec sleep 60') {
    for (1 .. 400) {
        my ($s, $j) = api_call($port, '/pty/start',
            { command => $cmd, wait_ms => 0 });
        last unless $s == 200;
        push @fill, $j->{id};
    }
}
($st, $r) = api_call($port, '/pty/start',
    { command => 'exec sleep 60', wait_ms => 0 });
is($st, 503, 'the zone is full: 503');

# ~340 KB of output into a 2 KiB ring and a 1 KiB scrollback, with no
# API reader meanwhile: the screen says when it is done
($st, $r) = api_call($port, '/pty/write', { id => $id,
    input => 'seq 1 50000; printf "%s-%s\n" done 1', submit => \1,
    wait_ms => 0 });
($st, $r) = api_call($port, '/pty/read', { id => $id,
    wait_for => 'done-1', wait_ms => 20000 });
ok($r->{matched}, 'the screen shows the end');
my ($missed, $matched) = (0, 0);
for (1 .. 20) {
    ($st, $r) = api_call($port, '/pty/write', { id => $id,
        wait_for => 'done-1', wait_ms => 5000 });
    last unless $st == 200;
    $missed += $r->{missed};
    $matched = $r->{matched};
    last if $matched;
}
ok($matched, 'the output arrives to its end');
cmp_ok($missed, '>', 200000, "what the scrollback could not keep is "
    . "missed ($missed)");

# and again: still working, still said once
($st, $r) = api_call($port, '/pty/write', { id => $id,
    input => 'seq 1 20000; printf "%s-%s\n" done 2', submit => \1,
    wait_for => 'done-2', wait_ms => 20000 });
for (1 .. 20) {
    last if $r->{matched} || $st != 200;
    ($st, $r) = api_call($port, '/pty/write', { id => $id,
        wait_for => 'done-2', wait_ms => 5000 });
}
ok($r->{matched}, 'the session keeps working')
    or diag("status $st: " . join(' ', map { "$_=" . (ref $r->{$_} eq 'HASH'
        ? join(',', %{$r->{$_}}) : ref $r->{$_} eq 'ARRAY'
        ? join(',', @{$r->{$_}}) : $r->{$_} // '') } sort keys %$r));

my $log = $t->read_file('error.log');
my @ring = $log =~ /the ring of session \Q$id\E stays at \d+ bytes and evicts: the shared zone is full; raise the size in "pty_zone"/g;
my @sc = $log =~ /the scrollback of session \Q$id\E stays at \d+ bytes: the shared zone is full; raise the size in "pty_zone"/g;
is(scalar @ring, 1, 'the ring that cannot grow is logged once');
is(scalar @sc, 1, 'the scrollback that cannot grow is logged once');

api_call($port, '/pty/kill', { id => $_ }) for $id, @fill;

$t->done_testing();
