#!/usr/bin/perl

# The archive's faults never stop a terminal: a corrupt file, a read-only
# one, one locked by another process and a full disk are each logged once,
# live sessions go on meanwhile, and once the fault is gone the archive
# stores what the rings still hold.  nginx -t refuses a directory the
# workers cannot write.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Test::More;
use JSON::PP;
use Time::HiRes qw(time sleep);
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::PtyAPI qw(api_call);

my $t = pty_nginx(
    extra_http => 'pty_archive %%TESTDIR%%/arch/pty.db batch=20ms;');
my $dir = $t->testdir;
mkdir("$dir/arch") or die "mkdir: $!\n";
chmod(0777, "$dir/arch");
$t->allow_log(qr/archive .* cannot be written|file is not a database|sessions run without it/);
$t->plan(17)->run();

my $port = $t->port(8080);

# nginx -t: a directory the workers' user cannot write
mkdir("$dir/ro") or die "mkdir: $!\n";
chmod(0555, "$dir/ro");
my $conf = $t->read_file('nginx.conf');
(my $bad = $conf) =~ s{/arch/pty\.db}{/ro/pty.db} or die "no line\n";
$t->write_file('bad.conf', $bad);
my ($rc, $out) = $t->test_config('bad.conf');
isnt($rc, 0, 'nginx -t fails');
like($out, qr/pty_archive: directory "\Q$dir\E\/ro" is not writable/,
    'naming the directory');

# a terminal answers while the archive fails
sub echoes {
    my ($word) = @_;
    my $s = start_session($t, 'exec cat');
    # the line cat gives back, whole: its newline may come in a read of
    # its own
    my ($st, $j) = api_call($port, '/pty/write', { id => $s->{id},
        input => "$word\n", wait_for => "$word\n", wait_ms => 5000 });
    my $ok = $st == 200 && $j->{matched} && $j->{output} eq "$word\n$word\n";
    diag("echoing $word: $st " . substr(JSON::PP->new->canonical
        ->encode($j // {}), 0, 400)) unless $ok;
    return ($s, $ok);
}

sub count_log {
    my ($re) = @_;
    my @l = grep { /$re/ } split /\n/, $t->read_file('error.log');
    return scalar @l;
}

sub wait_log_count {
    my ($re, $n, $secs) = @_;
    my $deadline = time + $secs * Test::Nginx::timeout_scale();
    sleep 0.05 while count_log($re) < $n && time < $deadline;
    my $got = count_log($re);
    # what the archive said, when it was not what was awaited
    diag(join "\n", grep { /archive/ } split /\n/,
        $t->read_file('error.log')) if $got != $n;
    return $got;
}

sub frames_stored {
    my ($s) = @_;
    my ($st, $j) = api_call($port, '/pty/transcript', { id => $s->{id} });
    return $st == 200 ? $j : undef;
}

# 1. corrupt: not a database at all
$t->stop();
$t->write_file('arch/pty.db', "this is not a database\n" x 512);
chmod(0666, "$dir/arch/pty.db");
$t->run();
my ($s, $ok) = echoes('corrupt');
ok($ok, 'a corrupt file: terminals work');
is(wait_log_count(qr/cannot be written: .*not a database/, 1, 10), 1,
    'logged once');
my ($st) = api_call($port, '/pty/transcript', { id => $s->{id} });
is($st, 503, 'transcripts say the archive is unavailable');

# 2. read-only: the workers cannot write it, then can
$t->stop();
unlink("$dir/arch/pty.db");
$t->run();
echoes('fresh');
$t->stop();
chmod(0444, "$dir/arch/pty.db");
my $before = count_log(qr/cannot be written: .*readonly/);
$t->run();
($s, $ok) = echoes('readonly');
ok($ok, 'a read-only file: terminals work');
is(wait_log_count(qr/cannot be written: .*readonly/, $before + 1, 10),
    $before + 1, 'logged once');
# counted before the fault goes: a retry may follow at once
my $again = count_log(qr/is written again/);
chmod(0644, "$dir/arch/pty.db");
is(wait_log_count(qr/is written again/, $again + 1, 40), $again + 1,
    'writable again: the archive says so');
my $j = frames_stored($s);
ok($j && grep({ ($_->{payload}{kind} // '') eq 'Output' } @{$j->{frames}}),
    'and stored what came meanwhile');

# 3. locked by another process for longer than a writer waits
my $lock = "$dir/arch/pty.db";
my $holder = open(my $py, '|-', 'python3', '-c',
    'import sqlite3, sys; c = sqlite3.connect(sys.argv[1], '
    . 'isolation_level=None); c.execute("BEGIN EXCLUSIVE"); '
    . 'open(sys.argv[2], "w").close(); sys.stdin.read()', $lock,
    "$dir/locked");
my $deadline = time + 10 * Test::Nginx::timeout_scale();
sleep 0.05 while !-e "$dir/locked" && time < $deadline;
ok($holder && -e "$dir/locked", 'another process locks the file');
$before = count_log(qr/cannot be written: .*locked/);
($s, $ok) = echoes('locked');
ok($ok, 'a locked file: terminals work');
is(wait_log_count(qr/cannot be written: .*locked/, $before + 1, 20),
    $before + 1, 'logged once');
$again = count_log(qr/is written again/);
close($py);
is(wait_log_count(qr/is written again/, $again + 1, 40), $again + 1,
    'unlocked: written again');
$j = frames_stored($s);
ok($j && grep({ ($_->{payload}{kind} // '') eq 'Output' } @{$j->{frames}}),
    'with what came meanwhile');

# 4. a full disk: a small tmpfs, where the machine lets us mount one
SKIP: {
    mkdir("$dir/full");
    skip 'no tmpfs (mount needs root and CAP_SYS_ADMIN)', 3
        unless $> == 0
            && system("mount -t tmpfs -o size=256k tmpfs '$dir/full' "
                      . '2>/dev/null') == 0;
    chmod(0777, "$dir/full");
    $t->stop();
    (my $full = $conf) =~ s{/arch/pty\.db}{/full/pty.db} or die;
    $t->write_file('nginx.conf', $full);
    $t->run();
    $before = count_log(qr/cannot be written: .*full/);
    my $big = start_session($t, 'head -c 3000000 /dev/urandom | base64');
    ($s, $ok) = echoes('full');
    ok($ok, 'a full disk: terminals work');
    is(wait_log_count(qr/cannot be written: .*full/, $before + 1, 20),
        $before + 1, 'logged once');
    ($s, $ok) = echoes('still');
    ok($ok, 'and go on working');
    $t->stop();
    system("umount '$dir/full'");
}
