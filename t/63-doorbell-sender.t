#!/usr/bin/perl

# Doorbells take datagrams from nginx's workers only: one from a process
# of another user is dropped, and logged once per worker, not once per
# datagram.  The workers ring each other as before.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use POSIX ();
use Socket qw(AF_UNIX SOCK_DGRAM);
use Test::More;
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::PtyAgent;
use Test::Nginx::PtyAPI qw(api_call);

my $t = pty_nginx(workers => 2, reuseport => 1);
$t->plan(5)->run();

my @workers = $t->worker_pids;

# the abstract addresses, as any local user can list them
sub bells {
    open(my $fh, '<', '/proc/net/unix') or return {};
    my %b;
    while (<$fh>) {
        $b{$2} = $1 if m{\@(ngx_pty_bell/[0-9a-f]+/(\d+))\s*$};
    }
    return \%b;
}

my $bells;
ok($t->wait_until(sub {
        $bells = bells();
        !grep { !$bells->{$_} } @workers }, 5),
    'every worker has a doorbell');

# rung by a process of another user (daemon, uid 1): 'o' asks a worker to
# walk the zone for orphans, 'w' to look at its sessions
my $pid = fork() // die "fork: $!";
if ($pid == 0) {
    POSIX::setgid(1);
    POSIX::setuid(1) or POSIX::_exit(2);
    POSIX::_exit(3) if $< != 1;
    socket(my $s, AF_UNIX, SOCK_DGRAM, 0) or POSIX::_exit(4);
    for my $w (@workers) {
        my $addr = pack('S', AF_UNIX) . "\0" . $bells->{$w};
        for my $what (qw(o w o w o)) {
            send($s, $what, 0, $addr) or POSIX::_exit(5);
        }
    }
    POSIX::_exit(0);
}
waitpid($pid, 0);
is($? >> 8, 0, 'another user sent datagrams to the doorbells');

my $re = qr/doorbell datagram\(s\) not from nginx's workers dropped, the last from uid 1,/;
ok($t->wait_until(sub {
        scalar(() = $t->read_file('error.log') =~ /$re/g) == @workers }, 5),
    'each worker dropped them, with one line');

# the workers still ring each other: input through a worker that does
# not own the session reaches it by the owner's doorbell
my $s = agent_start($t, 'cat', wait_ms => 0);
my %served;
for my $i (1 .. 40) {
    my ($st, $j, undef, $h) = api_call($t->port(8080), '/pty/write',
        { id => $s->{id}, input => "x$i", submit => \1,
          wait_for => "x$i" });
    $served{$h->{'x-pty-worker'}}++ if $st == 200 && $j->{matched};
    last if keys %served > 1;
}
is(scalar keys %served, 2, 'input served by both workers reaches the program');
unlike($t->read_file('error.log'), qr/doorbell.*uid (?!1,)\d+/,
    'no worker\'s datagram was dropped');
