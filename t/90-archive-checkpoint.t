#!/usr/bin/perl

# The archive's checkpoints wait for a flood to end: while a session
# floods, the flood's pages stay in the WAL (the file is not written a
# second time while the flood needs the CPU); the first quiet batch after
# it copies them into the database file.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Test::More;
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::PtyAPI qw(api_call);

my $t = pty_nginx(extra_http => '@ARCHIVE@');
archive_conf($t, $t->read_file('nginx.conf'), 1);
$t->plan(4)->run();

my $port = $t->port(8080);
my $db = $t->testdir . '/arch/pty.db';
my $mib = 1024 * 1024;

sub size_of { my @st = stat($_[0]); return @st ? $st[7] : 0 }

# 24 MB of lines, then a program that waits for a line of input
my $s = start_session($t, "head -c 24000000 /dev/zero | tr '\\0' x"
    . ' | fold -w 100; exec cat');

my $grown = $t->wait_until(sub { size_of("$db-wal") > 16 * $mib }, 60);
ok($grown, sprintf('the flood stays in the WAL (%.1f MiB of it; SQLite '
    . 'alone would have checkpointed at 8)', size_of("$db-wal") / $mib));
cmp_ok(size_of($db), '<', 8 * $mib, sprintf('and is not copied into the '
    . 'file meanwhile (%.1f MiB)', size_of($db) / $mib));

# a line of output after the flood: a small batch, the writer caught up
my ($st) = api_call($port, '/pty/write', { id => $s->{id},
    input => 'quiet', submit => \1, wait_for => 'quiet\r?\n.*quiet',
    wait_ms => 30000 });
is($st, 200, 'a line after the flood');

my $copied = $t->wait_until(sub {
    api_call($port, '/pty/write', { id => $s->{id}, input => 'q',
        submit => \1, wait_ms => 0 });
    size_of($db) >= 20 * $mib;
}, 60);
ok($copied, sprintf('then the checkpoint copies it into the file (%.1f MiB)',
    size_of($db) / $mib));
