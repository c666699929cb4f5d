#!/usr/bin/perl

# The agent API from any worker: a session started through one worker is
# written through another and read through a third.  The settled text
# continues across workers without a line lost or reported twice, the
# cursor holds, and kill works from anywhere.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Test::More;
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::PtyWS qw(json_encode json_decode);
use IO::Socket::INET;
use IO::Select;
use JSON::PP ();

my $t = pty_nginx(workers => 4, reuseport => 1);
$t->run();

# keep-alive connections, one per worker: each call goes where we say
my %conn;
for (1 .. 200) {
    last if keys %conn >= 3;
    my $c = IO::Socket::INET->new(PeerAddr => '127.0.0.1',
        PeerPort => $t->port(8080), Proto => 'tcp') or next;
    my ($st, $j, $h) = call($c, 'list', {});
    my $pid = $h->{'x-pty-worker'};
    if ($pid && !$conn{$pid}) { $conn{$pid} = $c } else { close $c }
}
my @w = sort keys %conn;
is(scalar @w, 3, 'keep-alive connections to three workers');
my @c = map { $conn{$_} } @w;

my ($st, $r, $h) = call($c[0], 'start', { command =>
    'PS1="$ " exec bash --norc --noprofile -i', wait_for => '$ ' });
is($st, 200, "started through worker $w[0]");
is($h->{'x-pty-worker'}, $w[0], '... and answered by it');
my $id = $r->{id};
my $text = $r->{output};
like($text, qr/\$ $/, 'the start answer has the prompt');

($st, $r, $h) = call($c[1], 'write', { id => $id, input => 'echo one',
    submit => JSON::PP::true, wait_for => "one\n\$ ",
    offset => $r->{offset} });
is($st, 200, "write through worker $w[1]") or diag explain $r;
is($h->{'x-pty-worker'}, $w[1], '... answered by it');
ok($r->{matched}, 'wait_for matched there');
$text .= $r->{output};

($st, $r, $h) = call($c[2], 'write', { id => $id, input => 'echo two',
    submit => JSON::PP::true, wait_for => "two\n\$ ",
    offset => $r->{offset} });
is($st, 200, "write through worker $w[2], cursor accepted");
like($r->{output}, qr/^echo two/,
    'it continues the unfinished line, not repeating the prompt');
$text .= $r->{output};

($st, $r) = call($c[0], 'write', { id => $id, input => 'echo three',
    submit => JSON::PP::true, wait_for => "three\n\$ ",
    offset => $r->{offset} });
is($st, 200, "back to worker $w[0]");
$text .= $r->{output};

(my $flat = $text) =~ s/\r//g;
is($flat, "\$ echo one\none\n\$ echo two\ntwo\n\$ echo three\nthree\n\$ ",
    'the settled text across three workers is one stream');

($st, $r) = call($c[1], 'read', { id => $id });
is($st, 200, "read through worker $w[1]");
like($r->{screen}, qr/three\n\$ ?$/m, 'the screen, rebuilt from the ring');


# each answer lets go of the session before it is sent: the next call,
# through another worker at once, is never told the session is busy
my (@bad, $cursor);
$cursor = $r->{offset};
for my $i (1 .. 2000) {
    ($st, $r) = call($c[$i % 3], 'write', { id => $id, input => "echo r$i",
        submit => JSON::PP::true, wait_for => "r$i\n\$ ",
        offset => $cursor });
    push @bad, "$i: $st " . ($r->{error}{code} // '') if $st != 200;
    last if $st != 200;
    $cursor = $r->{offset};
}
is("@bad", '', '2000 writes round the workers, each answered at once');

($st, $r) = call($c[2], 'kill', { id => $id });
is($st, 200, "kill through worker $w[2]");
is($r->{state}, "exited", "ended");

$t->done_testing();

# one request on a keep-alive connection: (status, json, headers)
sub call {
    my ($c, $name, $body) = @_;
    my $json = json_encode($body);
    print $c "POST /pty/$name HTTP/1.1\r\nHost: localhost\r\n"
        . "Content-Type: application/json\r\n"
        . 'Content-Length: ' . length($json) . "\r\n\r\n" . $json;
    my $raw = '';
    my $sel = IO::Select->new($c);
    while ($sel->can_read(20)) {
        my $n = sysread($c, $raw, 65536, length $raw);
        last unless $n;
        my $i = index($raw, "\r\n\r\n");
        next if $i < 0;
        my ($len) = substr($raw, 0, $i) =~ /Content-Length:\s*(\d+)/i;
        last if defined $len && length($raw) >= $i + 4 + $len;
    }
    my ($status, $headers, $rbody) =
        Test::Nginx::PtyAPI::parse_response($raw);
    return ($status, (eval { json_decode($rbody) } // {}), $headers);
}
