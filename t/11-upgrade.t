#!/usr/bin/perl

# The upgrade and the WebSocket layer: refusals with JSON bodies, RFC 6455
# framing rules and their close codes.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Test::More;
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::PtyWS qw(json_decode);

my $t = pty_nginx(extra_loc => 'pty_ws_max_message 4k;');
$t->plan(21)->run();

my $s = start_session($t, 'cat');
my $path = $s->{attach_path};

my $ws = attach($t, $s, protocols => ['chat']);
is($ws->status, 400, 'no pty-ws.v1: 400');
like($ws->response_body, qr/"error"/, 'refusal has a JSON body');

$ws = attach($t, $s, protocols => []);
is($ws->status, 400, 'no subprotocol: 400');

$ws = attach($t, $s, protocols => ['bearer.abc', 'pty-ws.v1']);
is($ws->status, 101, 'pty-ws.v1 among others accepted');
is($ws->protocol, 'pty-ws.v1', 'only pty-ws.v1 echoed');

(my $unknown = $path) =~ s/[0-9a-f]{12}\/attach$/000000000000\/attach/;
$ws = Test::Nginx::PtyWS->connect(port => $t->port(8080), path => $unknown);
is($ws->status, 404, 'unknown session: 404');

(my $other = $path) =~ s{/agents/test/}{/agents/elsewhere/};
$ws = Test::Nginx::PtyWS->connect(port => $t->port(8080), path => $other);
is($ws->status, 404, 'wrong instance: 404');

my $r = http_get($path);
like($r, qr/^HTTP\/1\.1 426/, 'plain GET: 426 Upgrade Required');

sub fresh {
    my $c = attach($t, $s);
    $c->recv_json(5);      # binding_hello
    return $c;
}

# fragmented message reassembled
$ws = fresh();
my $msg = '{"op":"ping","id":"' . Test::Nginx::PtyWS::uuid_v7()
    . '","payload":{"client_ts":"2026-11-30T00:00:00.000Z"}}';
$ws->send_fragmented($msg, 3);
is($ws->recv_op('pong', 5)->{op}, 'pong', 'fragmented message');

# interleaved ping inside a fragmented message
$ws->send_frame(opcode => 1, fin => 0, payload => substr($msg, 0, 10));
$ws->ping('x');
$ws->send_frame(opcode => 0, fin => 1, payload => substr($msg, 10));
is($ws->recv_op('pong', 5)->{op}, 'pong', 'ping between fragments');

$ws = fresh();
$ws->send_frame(opcode => 1, payload => '{}', mask => 0);
is(($ws->wait_close(5))[0], 1002, 'unmasked frame: 1002');

$ws = fresh();
$ws->send_frame(opcode => 2, payload => 'bin');
is(($ws->wait_close(5))[0], 4400, 'binary frame: 4400');

$ws = fresh();
$ws->send_frame(opcode => 1, payload => "\xff\xfe");
is(($ws->wait_close(5))[0], 1007, 'invalid UTF-8: 1007');

$ws = fresh();
$ws->send_frame(opcode => 1, payload => 'x' x 5000);
is(($ws->wait_close(5))[0], 1009, 'too big: 1009');

# a 64-bit length that wraps the message's size round to a small one (the
# worker once unmasked far past its buffer): its top bit is set, which RFC
# 6455 forbids (1002); one just under that is over the limit (1009)
$ws = fresh();
$ws->send_frame(opcode => 1, fin => 0, payload => 'x' x 9);
$ws->send_raw("\x00\xff" . ("\xff" x 8) . "\x00\x00\x00\x00" . ('y' x 32));
is(($ws->wait_close(5))[0], 1002, 'length wrapping the message size: 1002');
$ws = fresh();
$ws->send_frame(opcode => 1, fin => 0, payload => 'x' x 9);
$ws->send_raw("\x00\xff\x7f" . ("\xff" x 7) . "\x00\x00\x00\x00"
    . ('y' x 32));
is(($ws->wait_close(5))[0], 1009, 'a huge length just under it: 1009');

# a message of empty fragments: nothing to copy (no pointer arithmetic on
# a buffer not allocated yet, which UBSan reports under make test-asan)
$ws = fresh();
$ws->send_frame(opcode => 1, fin => 0, payload => '');
$ws->send_frame(opcode => 0, fin => 1, payload => '');
is($ws->recv_op('Error', 5)->{payload}{code}, 'INVALID_REQUEST',
    'empty fragmented message: Error');

$ws = fresh();
$ws->send_frame(opcode => 1, rsv => 4, payload => '{}');
is(($ws->wait_close(5))[0], 1002, 'reserved bits: 1002');

$ws = fresh();
$ws->send_frame(opcode => 0, payload => 'x');
is(($ws->wait_close(5))[0], 1002, 'continuation without start: 1002');

$ws = fresh();
$ws->close(1000, 'bye');
is(($ws->wait_close(5))[0], 1000, 'close handshake echoed');

# the session survived all of it
my ($c) = attach_join($t, $s);
send_input($c, "hello\r");
like(read_output($c, qr/hello/), qr/hello/, 'session still works');
