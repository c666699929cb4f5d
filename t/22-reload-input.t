#!/usr/bin/perl

# Input typed through reloads (docs/ARCHITECTURE.md, "Workers"): every line
# a client sends reaches the program exactly once and in order, or the
# client gets an Error for it.  A client keeps typing numbered lines while
# 20 reloads replace the workers; on each binding_goodbye it answers the
# close, reconnects with replay_from and goes on.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use POSIX ();
use Test::More;
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::PtyWS qw(decode_output session_frame_kind);
use Time::HiRes qw(time sleep);

my $reloads = 20;

# the old connection's membership may outlast the reconnect for a moment
my $t = pty_nginx(workers => 2, extra_loc => 'pty_max_controllers 4;');
$t->run();

# the program numbers what it reads, so a doubled line shows
my $s = start_session($t, 'stty -echo; n=0; while read l; do n=$((n+1)); '
    . 'echo "got $l #$n"; done');

my ($ws) = attach_join($t, $s, role => 'controller');
my ($out, $last, $sent, $errors, $goodbyes) = ('', 0, 0, 0, 0);

# takes what has come; on goodbye answers the close and reconnects
sub take {
    my ($timeout) = @_;
    while (my $f = $ws->recv_json($timeout)) {
        $timeout = 0;
        $last = $f->{sequence} if defined $f->{sequence}
            && ($f->{op} // '') eq 'pty.session_frame';
        $out .= decode_output($f);
        $errors++ if ((session_frame_kind($f) // '') eq 'Error'
            && $f->{payload}{code} eq 'PTY_WRITE_FAILED')
            || ($f->{op} // '') eq 'Error';
        if (($f->{op} // '') eq 'binding_goodbye') {
            $goodbyes++;
            $ws->recv_frame(2);         # the close, answered
            $ws->disconnect;
            my ($w2, undef, @flush) = attach_join($t, $s,
                role => 'controller', replay_from => $last,
                retry_goodbye => 1);
            for my $g (@flush) {
                $last = $g->{sequence} if defined $g->{sequence};
                $out .= decode_output($g)
                    if (session_frame_kind($g) // '') eq 'Output';
            }
            $ws = $w2;
        }
    }
}

$ws->{auto_close_reply} = 1;

my $pid = fork() // die "fork: $!\n";
if ($pid == 0) {
    for (1 .. $reloads) {
        $t->reload(timeout => 10) or POSIX::_exit(1);
        sleep 0.3;
    }
    POSIX::_exit(0);
}

# type until the reloads are done, then a few more
my $done = 0;
my $end;
while (!$end || time < $end) {
    $sent++;
    send_input($ws, "L$sent\r");
    my $next = time + 0.02;
    take(0.02);
    sleep($next - time) if $next > time;
    if (!$end && waitpid($pid, POSIX::WNOHANG()) == $pid) {
        $done = $? == 0;
        $end = time + 0.5;
    }
    $ws->{auto_close_reply} = 1;
}
ok($done, "$reloads reloads");
cmp_ok($goodbyes, '>=', $reloads, "the client was told to reconnect "
    . "$goodbyes times");

# everything typed has come out, or was refused
my $deadline = time + 10;
while (time < $deadline && $out !~ /got L$sent #/) {
    take(0.2);
}

my @got = $out =~ /got L(\d+) #(\d+)/g;
my (@lines, @counts);
while (@got) { push @lines, shift @got; push @counts, shift @got }
my @missing = grep { my $n = $_; !grep { $_ == $n } @lines } 1 .. $sent;
is(scalar(@missing), $errors, "$sent lines typed: missing ones were "
    . "refused with an Error") or diag("missing: @missing[0 .. ($#missing < 20 ? $#missing : 19)]");
is_deeply(\@counts, [1 .. scalar @counts], 'each line read once');
is_deeply(\@lines, [sort { $a <=> $b } @lines], 'in order');
cmp_ok($sent, '>', 100, "$sent lines typed");

$t->done_testing();
