#!/usr/bin/perl

# Faults of the archive never reach a terminal: a full disk (a small
# tmpfs), a read-only file system, a database another process holds
# locked, a corrupt file.  Each failure is logged once with its reason,
# the archive works again when it can (and says so), and a client keeps
# its terminal throughout.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Test::More;
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::PtyExt;
use Test::Nginx::PtyArchive;

plan(skip_all => 'mounts a tmpfs: root only') unless $> == 0;

my $t = pty_nginx(extra_http => 'pty_archive %%TESTDIR%%/archive/pty.db;',
    extra_loc => 'pty_ring_max_size 1m;');
my $dir = $t->testdir . '/archive';
mkdir $dir;
system('mount', '-t', 'tmpfs', '-o', 'size=640k', 'tmpfs', $dir) == 0
    or plan(skip_all => 'cannot mount a tmpfs here');
END { system('umount', '-l', $dir) if $dir && -d $dir }
archive_dir($t);

$t->plan(17)->run();

my $s = start_session($t, SHELL);
my $ws = attach($t, $s);
$ws->recv_json(5);
join_flush($ws);


my $n = 0;
sub works {
    my ($what) = @_;
    $n++;
    send_input($ws, "echo ok-\$((40+$n))\r");
    my $out = read_output($ws, qr/ok-${\(40 + $n)}\r\n/, 20);
    like($out, qr/ok-${\(40 + $n)}/, "$what: the terminal works");
}

sub logged {
    my ($re) = @_;
    return scalar(() = ($t->read_file('error.log') // '') =~ /$re/g);
}

sub stored_upto {
    my $last = sql_one($t, 'SELECT last_seq FROM sessions WHERE uuid = '
        . "'$s->{session_id}'");
    return $last // 0;
}

works('at first');

# a full disk: 2 MB of output into 640 KB
send_input($ws, "head -c 1500000 /dev/urandom | base64 -w 1000; "
    . "echo FULL\r");
read_output($ws, qr/FULL\r\n/, 60);
ok($t->wait_until(sub { logged(qr/archive .* failed \(\w+\): database or disk is full/) }, 20),
    'a full disk is logged, with its reason');
works('with the disk full');
send_input($ws, "head -c 300000 /dev/urandom | base64 -w 1000; "
    . "echo FULL2\r");
read_output($ws, qr/FULL2\r\n/, 60);
is(logged(qr/archive .* failed/), 1, 'once for the episode');

system('mount', '-o', 'remount,size=16m', $dir);
works('room again');
ok($t->wait_until(sub { logged(qr/archive .* works again/) }, 10),
    'the archive works again, and says so');
my $seq = $ws->{json}[-1]{sequence};
ok(wait_stored($t, $s->{session_id}, $seq, 10), 'and stores what comes');
ok(sql_one($t, 'SELECT count(*) FROM gaps') > 0,
    'what the rings dropped meanwhile is recorded as a gap');

# locked by another process for a while
my $lock = fork() // die;
if ($lock == 0) {
    POSIX::setgid((getpwnam('nobody'))[3]);
    POSIX::setuid((getpwnam('nobody'))[2]);
    open STDOUT, '>', '/dev/null';
    { exec 'sqlite3', "$dir/pty.db", 'BEGIN EXCLUSIVE; '
        . "SELECT count(*) FROM frames; SELECT 1 FROM (WITH RECURSIVE c(x) "
        . "AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 30000000) "
        . "SELECT max(x) FROM c); COMMIT;"; }
    POSIX::_exit(127);
}
works('locked');
ok($t->wait_until(sub { logged(qr/archive .* failed \(\w+\): database is locked/) }, 20),
    'a locked database is logged');
waitpid($lock, 0);
ok($t->wait_until(sub { logged(qr/archive .* works again/) == 2 }, 10),
    'the lock gone, it works again');

# a read-only file system at a start: the writer tries again
$t->stop();
system('mount', '-o', 'remount,ro', $dir) == 0 or die "remount ro\n";
$t->run();
$s = start_session($t, SHELL);
$ws = attach($t, $s);
$ws->recv_json(5);
join_flush($ws);
works('read-only');
ok($t->wait_until(sub { logged(qr/archive .* failed \(open\)/) }, 10),
    'a read-only file system is logged');
system('mount', '-o', 'remount,rw', $dir);
works('writable again');
ok($t->wait_until(sub { logged(qr/archive .* works again/) == 3 }, 10),
    'and it works again');

# corrupt: moved aside at the next start, a new one made
$t->stop();
open my $fh, '+<', "$dir/pty.db" or die;
print $fh 'x' x 4096;
close $fh;
unlink "$dir/pty.db-wal", "$dir/pty.db-shm";
$t->run();
$s = start_session($t, SHELL);
$ws = attach($t, $s);
$ws->recv_json(5);
join_flush($ws);

works('with a corrupt file');
ok($t->wait_until(sub { glob("$dir/pty.db.corrupt-*") }, 10)
    && logged(qr/is corrupt: moved aside/), 'it is moved aside, logged');
