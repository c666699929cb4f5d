#!/usr/bin/perl

# Hostile frames and handshakes: lengths that wrap, non-minimal length
# encodings, keys that are not 16 bytes of base64, close frames that break
# RFC 6455's rules.  Each gets its close code (or 400), and the one worker
# keeps serving: the same pid answers afterwards.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use MIME::Base64 qw(encode_base64);
use Test::More;
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::PtyWS qw(handshake json_decode uuid_v7);

my $t = pty_nginx(workers => 1, extra_loc => 'pty_ws_max_message 4k;');
$t->plan(41)->run();

my $s = start_session($t, 'cat');
my $path = $s->{attach_path};

sub fresh {
    my $c = attach($t, $s);
    $c->recv_json(5);      # binding_hello
    return $c;
}

my $first = fresh();
my $worker = worker_of($first);
ok($worker, "worker $worker serves");

# a raw frame: first byte, then the 7-bit length code and its extension
sub raw {
    my ($b0, $code, $ext, $payload) = @_;
    return chr($b0) . chr(0x80 | $code) . $ext . "\0\0\0\0" . ($payload // '');
}

my $max64 = "\xff" x 8;

# the review's reproduction: a 1-byte fragment, then a continuation whose
# 64-bit length is 2^64-1
my $ws = fresh();
$ws->send_frame(opcode => 1, fin => 0, payload => 'x');
$ws->send_raw(raw(0x80, 127, $max64));
is(($ws->wait_close(5))[0], 1002, 'continuation of length 2^64-1: 1002');
is(worker_of(fresh()), $worker, 'the same worker answers afterwards');

$ws = fresh();
$ws->send_raw(raw(0x81, 127, $max64));
is(($ws->wait_close(5))[0], 1002, 'text frame of length 2^64-1: 1002');

$ws = fresh();
$ws->send_raw(raw(0x81, 127, "\x80" . "\0" x 7));
is(($ws->wait_close(5))[0], 1002, 'length 2^63 (top bit set): 1002');

$ws = fresh();
$ws->send_frame(opcode => 1, fin => 0, payload => 'x' x 100);
$ws->send_raw(raw(0x80, 127, pack('NN', 0xffffffff, 0xffffff9c)));
is(($ws->wait_close(5))[0], 1002, 'continuation of 2^64-100: 1002');

# lengths that fit 64 bits but not the message limit
$ws = fresh();
$ws->send_frame(opcode => 1, fin => 0, payload => 'x');
$ws->send_raw(raw(0x80, 127, pack('NN', 0x7fffffff, 0xffffffff)));
is(($ws->wait_close(5))[0], 1009, 'continuation of 2^63-1: 1009');

$ws = fresh();
$ws->send_frame(opcode => 1, fin => 0, payload => 'x' x 3000);
$ws->send_frame(opcode => 0, fin => 1, payload => 'x' x 1200);
is(($ws->wait_close(5))[0], 1009, 'fragments over pty_ws_max_message: 1009');

# non-minimal length encodings
$ws = fresh();
$ws->send_raw(raw(0x81, 126, pack('n', 2), "{}" ^ "\0\0"));
is(($ws->wait_close(5))[0], 1002, '16-bit length for 2 bytes: 1002');

$ws = fresh();
$ws->send_raw(raw(0x81, 127, pack('NN', 0, 125), 'x' x 125));
is(($ws->wait_close(5))[0], 1002, '64-bit length for 125 bytes: 1002');

$ws = fresh();
$ws->send_raw(raw(0x81, 127, pack('NN', 0, 1000), 'x' x 1000));
is(($ws->wait_close(5))[0], 1002, '64-bit length for 1000 bytes: 1002');

$ws = fresh();
$ws->send_raw(raw(0x89, 126, pack('n', 3), 'abc'));
is(($ws->wait_close(5))[0], 1002, 'control frame with a 16-bit length: 1002');

# minimal encodings still work, fragmented or not
my ($p1, $p2) = (uuid_v7(), uuid_v7());
my $msg = '{"op":"ping","id":"' . $p1 . '","payload":{"client_ts":'
    . '"2026-11-30T00:00:00.000Z"}}';
my $big = '{"op":"ping","id":"' . $p2 . '","payload":{"client_ts":'
    . '"2026-11-30T00:00:00.000Z","pad":"' . ('y' x 200) . '"}}';
$ws = fresh();
$ws->send_frame(opcode => 1, payload => $big);
is($ws->recv_op('pong', 5)->{id}, $p2, '16-bit length, minimal: served');
$ws->send_fragmented($msg, 3);
is($ws->recv_op('pong', 5)->{id}, $p1, 'fragments: served');

# Sec-WebSocket-Key: base64 of exactly 16 bytes
my %good = (port => $t->port(8080), path => $path);
for my $case (
    [ '!' x 24, 'not base64' ],
    [ 'A' x 24, 'base64 of 18 bytes' ],
    [ ('A' x 23) . '=', 'base64 of 17 bytes' ],
    [ ('A' x 20) . '====', 'too much padding' ],
    [ ('A' x 21) . 'B==', 'non-zero trailing bits' ],
    [ ('A' x 22) . '=x', 'garbage after the padding' ],
    [ 'AAAAAAAAAAAAAAAAAAAAAA', 'no padding (22 characters)' ],
)
{
    my ($st, $h, $body) = handshake(%good, key => $case->[0]);
    is($st, 400, "key $case->[1]: 400");
    ok(eval { json_decode($body)->{error}{code} }, "key $case->[1]: JSON")
        if $case->[1] eq 'not base64';
}

my ($st) = handshake(%good, key => encode_base64('0123456789abcdef', ''));
is($st, 101, 'a key of 16 bytes: 101');

# close frames
$ws = fresh();
$ws->send_frame(opcode => 8, payload => pack('n', 1000) . "\xff\xfe");
is(($ws->wait_close(5))[0], 1007, 'close reason not UTF-8: 1007');

$ws = fresh();
$ws->send_frame(opcode => 8, payload => pack('n', 1000) . "\xed\xa0\x80");
is(($ws->wait_close(5))[0], 1007, 'close reason with a surrogate: 1007');

$ws = fresh();
$ws->send_frame(opcode => 8, payload => "\x03");
is(($ws->wait_close(5))[0], 1002, 'close payload of 1 byte: 1002');

for my $code (0, 999, 1004, 1005, 1006, 1015, 1016, 2000, 2999, 5000, 65535)
{
    $ws = fresh();
    $ws->send_frame(opcode => 8, payload => pack('n', $code) . 'x');
    is(($ws->wait_close(5))[0], 1002, "close code $code: 1002");
}

$ws = fresh();
$ws->send_frame(opcode => 8, payload => pack('n', 4999) . "\xc3\xa9");
is(($ws->wait_close(5))[0], 4999, 'close code 4999, UTF-8 reason: echoed');

# the worker survived all of it
my ($c) = attach_join($t, $s);
is(worker_of($c), $worker, 'the same worker, at the end');
ok((grep { $_ == $worker } $t->worker_pids), 'and it is still alive');
send_input($c, "hello\r");
like(read_output($c, qr/hello/), qr/hello/, 'the session still works');
