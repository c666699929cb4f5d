#!/usr/bin/perl

# Two sessions attack each other, and nginx, from the inside.  Each attack
# a program could make on the old module is made again and must fail: the
# programs run as uids of their own (pty_user_range), the workers and the
# keepers are not dumpable, a keeper gives its terminal only to a worker
# that knows the session's secret, and the terminal is its user's alone.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use POSIX ();
use Socket qw(AF_UNIX SOCK_SEQPACKET);
use Test::More;
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::PtyAPI qw(api_call);
use JSON::PP ();

plan(skip_all => 'needs root: programs get users of their own') if $> != 0;

my $t = pty_nginx();
$t->plan(24)->run();

my $port = $t->port(8080);
my @workers = $t->worker_pids;
my $wuid = uid_of($workers[0]);

# the victim: a shell with a secret in its environment
my $vb = start($port, "SECRET=hunter2$$ exec bash --norc --noprofile -i",
    'PS1="B\$ "');
my ($bpid) = $t->wait_until(sub { (child_of())[0] }, 5);
ok($bpid, 'the victim runs');
my $btty = readlink("/proc/$bpid/fd/0") // '';
like($btty, qr{^/dev/pts/\d+$}, 'the victim has a terminal');

# the attacker: each attack is a command whose output says what it got
my $va = start($port, 'exec bash --norc --noprofile -i', 'PS1="A\$ "');
my ($apid) = $t->wait_until(sub { (grep { $_ != $bpid } child_of())[0] }, 5);

my $auid = uid_of($apid);
my $buid = uid_of($bpid);
ok($auid >= 3000000 && $auid <= 3009999, "the attacker runs as a range uid ($auid)");
ok($buid >= 3000000 && $buid <= 3009999, 'so does the victim');
isnt($auid, $buid, 'each session has a uid of its own');
isnt($auid, $wuid, 'not the workers\' uid');

# the terminal is the session user's, writable by the tty group at most
my @st = stat($btty);
is($st[4], $buid, 'the victim\'s terminal belongs to its user');
is(sprintf('%o', $st[2] & 07777), '620', 'mode 0620');

# workers and keepers are not dumpable: /proc/PID/mem is root's then
for my $w (@workers) {
    is((stat("/proc/$w/mem"))[4], 0, "worker $w is not dumpable");
}
my $keeper = ppid_of($bpid);
is((stat("/proc/$keeper/mem"))[4], 0, 'the keeper is not dumpable');

my $py = sub {
    my ($code) = @_;
    $code =~ s/'/'"'"'/g;
    return "python3 -c '$code'";
};

my %attacks = (
    'keeper socket' => $py->(<<"PY"),
import socket, array
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
try:
    s.connect(b"\\0ngx_pty_keeper/$vb->{session_id}")
    fds = array.array("i")
    msg, anc, fl, ad = s.recvmsg(8, socket.CMSG_SPACE(4))
    print("ATTACK-"+"RESULT", "GOT-FD" if anc else "REFUSED")
except Exception as e:
    print("ATTACK-"+"RESULT", "REFUSED", type(e).__name__)
PY
    'worker memory' => $py->(<<"PY"),
try:
    f = open("/proc/$workers[0]/mem", "rb")
    print("ATTACK-"+"RESULT", "OPENED")
except Exception as e:
    print("ATTACK-"+"RESULT", "REFUSED", type(e).__name__)
PY
    'ptrace' => $py->(<<"PY"),
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
r = libc.ptrace(16, $bpid, 0, 0)
print("ATTACK-"+"RESULT", "ATTACHED" if r == 0 else "REFUSED", ctypes.get_errno())
PY
    'environ' => "cat /proc/$bpid/environ >/dev/null 2>&1 "
        . "&& echo ATTACK-''RESULT READ || echo ATTACK-''RESULT REFUSED",
    'tty write' => "(echo INJECTED > $btty) 2>/dev/null "
        . "&& echo ATTACK-''RESULT WROTE || echo ATTACK-''RESULT REFUSED",
    'signal worker' => "kill -0 $workers[0] 2>/dev/null "
        . "&& echo ATTACK-''RESULT SIGNALLED || echo ATTACK-''RESULT REFUSED",
    'signal victim' => "kill -STOP $bpid 2>/dev/null "
        . "&& echo ATTACK-''RESULT SIGNALLED || echo ATTACK-''RESULT REFUSED",
    'no new privileges' => "echo ATTACK-''RESULT "
        . "\$(awk '/^NoNewPrivs/ {print \$2}' /proc/self/status)",
);

for my $name (sort keys %attacks) {
    my $out = run_in($port, $va, $attacks{$name});
    if ($name eq 'no new privileges') {
        like($out, qr/ATTACK-RESULT 1/, 'no setuid program raises a session');
        next;
    }
    like($out, qr/ATTACK-RESULT REFUSED/, "$name: refused")
        or diag($out);
}

my $scr = run_in($port, $vb, 'echo STILL-$((6*7))');
like($scr, qr/STILL-42/, 'the victim still answers, and only to its own');
unlike($scr, qr/INJECTED/, 'nothing was typed into the victim');

# nothing of nginx's reaches a program: three descriptors and its terminal
my @fds = map { readlink($_) // '' } glob("/proc/$bpid/fd/*");
ok(!(grep { $_ ne $btty } @fds), 'the program holds its terminal alone')
    or diag("@fds");

# a process of the workers' own user, without the secret, gets nothing
my $got = as_user($wuid, sub {
    socket(my $s, AF_UNIX, SOCK_SEQPACKET, 0) or return 'SOCKET';
    connect($s, pack('Sa*', AF_UNIX, "\0ngx_pty_keeper/$vb->{session_id}"))
        or return 'REFUSED';
    my $n = sysread($s, my $buf, 64);
    return defined $n && $n > 0 ? 'GOT' : 'CLOSED';
});
like($got, qr/^(CLOSED|REFUSED)$/, 'the workers\' user without the secret: '
    . 'no terminal');
ok($t->wait_until(sub { ($t->read_file('error.log') // '')
    =~ /keeper refused a peer without the session's secret/ }, 5),
    'the refusal is logged');

$t->stop();

###############################################################################

sub start {
    my ($port, $cmd, $env) = @_;
    my ($st, $s) = api_call($port, '/pty/start',
        { command => "$env $cmd", wait_ms => 0 });
    die "start: $st\n" unless $st && $st == 200;
    return $s;
}

sub run_in {
    my ($port, $s, $cmd) = @_;
    my ($st, $r) = api_call($port, '/pty/write', { id => $s->{id},
        input => "$cmd; echo DO''NE", submit => JSON::PP::true(),
        wait_for => 'DONE', wait_ms => 10000 });
    return $r ? ($r->{output} // '') : '';
}

# the programs of sessions: the keepers' children running as range uids
# the programs of this nginx's sessions: another suite on the machine
# runs its own with users from the same range.  This test is the
# subreaper of its nginx (the spawner outlives the process that forked it)
sub child_of {
    return grep { my $u = uid_of($_); $u >= 3000000 && $u <= 3009999
        && ppid_is_keeper($_) && descends($_, $$) }
        map { m{(\d+)$} } glob '/proc/[0-9]*';
}

sub descends {
    my ($pid, $root) = @_;
    for (1 .. 64) {
        $pid = ppid_of($pid) or return 0;
        return 1 if $pid == $root;
    }
    return 0;
}

sub ppid_is_keeper {
    my ($pid) = @_;
    my $pp = ppid_of($pid) or return 0;
    open my $fh, '<', "/proc/$pp/cmdline" or return 0;
    my $c = <$fh> // '';
    return $c =~ /pty session keeper/;
}

sub ppid_of {
    my ($pid) = @_;
    open my $fh, '<', "/proc/$pid/stat" or return 0;
    my $l = <$fh> // '';
    $l =~ s/^.*\) //;
    return (split ' ', $l)[1];
}

sub uid_of {
    my ($pid) = @_;
    open my $fh, '<', "/proc/$pid/status" or return -1;
    while (my $l = <$fh>) { return $1 if $l =~ /^Uid:\s+(\d+)/ }
    return -1;
}

sub as_user {
    my ($uid, $code) = @_;
    pipe(my $r, my $w) or die;
    my $pid = fork() // die;
    if ($pid == 0) {
        close $r;
        POSIX::setgid(65534); POSIX::setuid($uid);
        syswrite($w, $> == $uid ? $code->() : "SETUID-FAILED");
        POSIX::_exit(0);
    }
    close $w;
    my $out = do { local $/; <$r> } // '';
    waitpid($pid, 0);
    return $out;
}
