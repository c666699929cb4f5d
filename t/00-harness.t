#!/usr/bin/perl

# Tests of the test harness itself (t/lib/Test/Nginx*.pm).  Needs nginx but
# not ngx_pty_module: uses $t->no_module.

use strict;
use warnings;

use Test::More;
use FindBin;
use lib "$FindBin::Bin/lib";
use Test::Nginx;
use Test::Nginx::PtyWS qw(uuid_v7 rfc3339_now validate_frame
    session_frame_kind decode_output json_encode);
use Test::Nginx::PtyAPI qw(api_call api_get);
use MIME::Base64 qw(encode_base64);
use Time::HiRes qw(time);
use JSON::PP ();
use IO::Socket::INET;
use POSIX ();

my $t = Test::Nginx->new()->has(qw/http/)->no_module->workers(2)->master_process(1)->plan(68);

###############################################################################
# UUIDv7 / RFC 3339

my @ids = map { uuid_v7() } 1 .. 200;
is(scalar(grep { $_ !~ $Test::Nginx::PtyWS::UUID_RE } @ids), 0, 'uuid_v7 format');
my %u = map { $_ => 1 } @ids;
is(scalar(keys %u), 200, 'uuid_v7 unique');
is_deeply([sort @ids], \@ids, 'uuid_v7 monotonic');
like(rfc3339_now(), qr/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/, 'rfc3339_now');

###############################################################################
# schema validation

my $schemas = -d Test::Nginx::PtyWS::schemas_dir();

sub frame {
    my ($op, $payload, %x) = @_;
    return { op => $op, id => uuid_v7(), ts => '2026-11-30T12:00:00.123Z',
        payload => $payload, %x };
}

SKIP: {
skip 'no schemas', 11 unless $schemas;

my @ok = (
    frame('binding_hello', {
        binding_uri => 'https://agentic-sandbox.aiwg.io/bindings/pty-ws/v1',
        binding_version => '1.0.0',
        supported_operations => [qw(a b c d e f)],
        session => { session_id => 's', current_sequence => 0 } }),
    frame('pty.session_frame', { kind => 'Output', stream => 'stdout',
        data => encode_base64('hi', '') }, sequence => 3),
    frame('pty.session_frame', { kind => 'Closed', reason => 'normal',
        exit_code => undef }),
    frame('Error', { code => 'INVALID_REQUEST', message => 'x',
        retryable => JSON::PP::true() }),
);

for my $f (@ok) {
    my @e = validate_frame($f);
    is_deeply(\@e, [], "valid $f->{op} frame") or diag explain \@e;
}

my @e = validate_frame(frame('pty.session_frame',
    { kind => 'Output', stream => 'stdout', data => 'aGk=' }, bogus => 1));
ok(@e, 'extra top-level key rejected');
ok((grep { /bogus/ } @e), 'error names the key') or diag explain \@e;

@e = validate_frame(frame('pty.session_frame', { kind => 'Outptu', data => '' }));
ok((grep { /payload\(pty\.session_frame\)/ } @e), 'wrong session frame kind rejected')
    or diag explain \@e;

my $f = frame('ping', { client_ts => rfc3339_now() });
$f->{id} = '0190a0e0-0000-4000-8000-000000000000';
ok(scalar validate_frame($f), 'UUIDv4 id rejected');

$f = frame('ping', { client_ts => rfc3339_now() });
$f->{ts} = '30/11/2026';
ok((grep { /date-time/ } validate_frame($f)), 'ts date-time format checked');

ok(scalar validate_frame(frame('Error', { code => 'NOPE', message => 'x' })),
    'Error payload enum checked');

ok(scalar validate_frame('{"op":'), 'invalid JSON reported');
}

###############################################################################
# frame building / parsing

{
    my $raw = Test::Nginx::PtyWS::build_frame(opcode => 1, payload => 'x' x 300,
        mask => 1, mask_key => 'abcd');
    is(length $raw, 2 + 2 + 4 + 300, 'masked frame with 16-bit length');

    my $p = bless { rbuf => $raw . Test::Nginx::PtyWS::build_frame(
        opcode => 8, payload => pack('n', 1000) . 'bye', mask => 0, fin => 1) },
        'Test::Nginx::PtyWS';
    my $f1 = $p->_parse_frame;
    is($f1->{payload}, 'x' x 300, 'parse masked frame');
    my $f2 = $p->_parse_frame;
    is_deeply([@$f2{qw(opcode code reason)}], [8, 1000, 'bye'], 'parse close frame');

    require Protocol::WebSocket::Frame;
    my $pw = Protocol::WebSocket::Frame->new;
    $pw->append(Test::Nginx::PtyWS::build_frame(opcode => 1, payload => 'hello',
        len => 64));
    is($pw->next_bytes, 'hello', 'Protocol::WebSocket parses 64-bit length frame');
}

{
    # send_fragmented over a socketpair
    use Socket;
    socketpair(my $a, my $b, AF_UNIX, SOCK_STREAM, PF_UNSPEC) or die $!;
    my $c = bless { sock => $a, timeout => 5, rbuf => '' }, 'Test::Nginx::PtyWS';
    $c->send_fragmented('abcdefghij', 3);
    $c->send_fragmented('0123456789', 0, opcode => 2, sizes => [4]);
    shutdown($a, 1);
    my $p = bless { rbuf => do { local $/; <$b> } }, 'Test::Nginx::PtyWS';
    my @f;
    while (my $f = $p->_parse_frame) { push @f, $f }
    is_deeply([map { "$_->{opcode}:$_->{fin}:$_->{masked}:$_->{payload}" } @f],
        ['1:0:1:abc', '0:0:1:def', '0:1:1:ghij', '2:0:1:0123', '0:1:1:456789'],
        'send_fragmented');
}

###############################################################################
# session frame helpers

{
    my @m = (
        frame('pty.session_frame', { kind => 'Output', stream => 'stdout', data => encode_base64('ab', '') }),
        frame('pty.session_frame', { kind => 'Resize', cols => 1, rows => 1 }),
        frame('pty.session_frame', { kind => 'Output', stream => 'stdout', data => encode_base64('cd', '') }),
    );
    is(session_frame_kind($m[1]), 'Resize', 'session_frame_kind');
    is(decode_output(@m), 'abcd', 'decode_output');
}

###############################################################################
# WebSocket client against a scripted in-process server (no nginx)

SKIP: {
skip 'no schemas', 15 unless $schemas;

my $srv = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => 0,
    Listen => 1, ReuseAddr => 1) or die "listen: $!";
my $sport = $srv->sockport;
my $pid = fork() // die "fork: $!";
if ($pid == 0) { ws_server($srv); POSIX::_exit(0) }
close $srv;

my $ws = Test::Nginx::PtyWS->connect(port => $sport, path => '/agents/i/sessions/s/attach');
is($ws->status, 101, 'ws: 101');
is($ws->protocol, 'pty-ws.v1', 'ws: subprotocol');
my $hello = $ws->recv_json(5);
is($hello->{op}, 'binding_hello', 'ws: hello');
my $out = $ws->recv_json(5);
is(decode_output($out), 'fragmented', 'ws: fragments reassembled, ping skipped');
is(scalar $ws->pings_seen, 1, 'ws: ping recorded');
{
    local $TODO = 'invalid frame must be flagged';
    $ws->recv_json(5);
}
is($ws->invalid_frames, 1, 'ws: invalid frame counted');

my $id = $ws->send_op('pty.session_input', { data => encode_base64('ls', '') });
like($id, $Test::Nginx::PtyWS::UUID_RE, 'ws: send_op returns uuid');
my @got = $ws->recv_until(sub { session_frame_kind($_[0]) eq 'Output' }, 5);
is(scalar @got, 1, 'ws: recv_until');
my $echo = JSON::PP::decode_json(decode_output(@got));
is($echo->{pong_payload}, '', 'ws: server saw our auto pong');
is($echo->{client}{id}, $id, 'ws: server got id');
ok(!grep({ $_ } validate_frame($echo->{client})), 'ws: client frame valid');
ok($echo->{masked}, 'ws: client frames masked');

$ws->close(1000, 'done');
my ($code, $reason) = $ws->wait_close(5);
is_deeply([$code, $reason], [1000, 'bye'], 'ws: close reply');
ok($ws->wait_eof(5), 'ws: eof');
waitpid($pid, 0);
}

sub ws_server {
    my ($srv) = @_;
    my $c = $srv->accept or return;
    binmode $c;
    my $req = '';
    while ($req !~ /\r\n\r\n/) { sysread($c, $req, 4096, length $req) or return }
    my ($key) = $req =~ /Sec-WebSocket-Key: (\S+)/i;
    require Digest::SHA;
    my $acc = encode_base64(Digest::SHA::sha1($key
        . '258EAFA5-E914-47DA-95CA-C5AB0DC85B11'), '');
    my $frame = sub { Test::Nginx::PtyWS::build_frame(mask => 0, @_) };
    my $sf = sub { json_encode(frame('pty.session_frame',
        { kind => 'Output', stream => 'stdout', data => encode_base64($_[0], '') })) };
    my $hello = json_encode(frame('binding_hello', {
        binding_uri => 'https://agentic-sandbox.aiwg.io/bindings/pty-ws/v1',
        binding_version => '1.0.0', supported_operations => [qw(a b c d e f)],
        session => { session_id => 's', current_sequence => 0 } }));
    my $frag = $sf->('fragmented');
    my $bad = json_encode(frame('ping', { client_ts => rfc3339_now() }, extra => 1));

    print $c "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
        . "Connection: Upgrade\r\nSec-WebSocket-Accept: $acc\r\n"
        . "Sec-WebSocket-Protocol: pty-ws.v1\r\n\r\n"
        . $frame->(opcode => 1, payload => $hello)
        . $frame->(opcode => 1, fin => 0, payload => substr($frag, 0, 10))
        . $frame->(opcode => 9, payload => '')
        . $frame->(opcode => 0, fin => 0, payload => substr($frag, 10, 10))
        . $frame->(opcode => 0, payload => substr($frag, 20))
        . $frame->(opcode => 1, payload => $bad);

    my $p = bless { rbuf => '' }, 'Test::Nginx::PtyWS';
    my (%seen, $masked);
    while (1) {
        my $f;
        until ($f = $p->_parse_frame) {
            sysread($c, $p->{rbuf}, 4096, length $p->{rbuf}) or return;
        }
        $masked = $f->{masked};
        if ($f->{opcode} == 10) { $seen{pong_payload} = $f->{payload} }
        if ($f->{opcode} == 1) {
            print $c $frame->(opcode => 1, payload => $sf->(json_encode({
                %seen, masked => $masked,
                client => JSON::PP::decode_json($f->{payload}) })));
        }
        if ($f->{opcode} == 8) {
            print $c $frame->(opcode => 8, payload => pack('n', 1000) . 'bye');
            close $c;
            return;
        }
    }
}

###############################################################################
# log checker

{
    my $log = <<'EOF';
2026/11/30 12:00:00 [notice] 1#1: start worker processes
2026/11/30 12:00:00 [alert] 1#1: worker process 5 exited on signal 11
2026/11/30 12:00:00 [error] 1#1: *1 open() failed
2026/11/30 12:00:00 [emerg] 1#1: unknown directive "x"
==123== ERROR: AddressSanitizer: heap-use-after-free
src/x.c:10:5: runtime error: signed integer overflow
EOF
    my @p = Test::Nginx::log_problems($log);
    is(scalar @p, 4, 'log_problems finds alert, emerg, asan, ubsan');
    @p = Test::Nginx::log_problems($log, qr/unknown directive/, qr/signal 11/);
    is(scalar @p, 2, 'allow_log patterns honoured');
}

###############################################################################
# nginx run / reload / stop

$t->write_file_expand('nginx.conf', <<'EOF');

%%TEST_GLOBALS%%

events {}

http {
    %%TEST_GLOBALS_HTTP%%

    server {
        listen 127.0.0.1:%%PORT_8080%%;
        server_name localhost;

        location / { return 200 "ok"; }
        location /json {
            default_type application/json;
            return 200 '{"a":1,"b":[true]}';
        }
    }
}

EOF

like($t->read_file('nginx.conf'), qr/worker_processes 2;.*daemon on;/s,
    'globals expanded');
unlike($t->read_file('nginx.conf'), qr/load_module/, 'no_module');

my $start = time;
$t->run();
ok($t->master_pid && kill(0, $t->master_pid), 'master running');
like(http_get('/'), qr/^HTTP\/1\.1 200.*\r\n\r\nok$/s, 'http_get');
like(http_post('/', 'body'), qr/ 200 /, 'http_post');

my @w = $t->worker_pids;
is(scalar @w, 2, 'two workers');

my ($st, $json, $body, $h) = api_call(port(8080), '/json', { x => 1 });
is($st, 200, 'api_call status');
is_deeply($json, { a => 1, b => [JSON::PP::true()] }, 'api_call json');
is($h->{'content-type'}, 'application/json', 'api_call headers');
($st, $json) = api_get(port(8080), '/');
is_deeply([$st, $json], [200, undef], 'api_get non-json');

# websocket handshake refused by a plain location
my $ws = Test::Nginx::PtyWS->connect(port => port(8080), path => '/');
is($ws->status, 200, 'ws: non-101 status');
is($ws->response_body, 'ok', 'ws: refusal body');
ok(!$ws->upgraded, 'ws: not upgraded');
my ($hs, $hh) = Test::Nginx::PtyWS::handshake(port => port(8080), path => '/',
    protocols => []);
is($hh->{'content-length'}, 2, 'handshake() headers');

ok($t->reload, 'reload');
my @w2 = $t->worker_pids;
is(scalar @w2, 2, 'two workers after reload');
my %old = map { $_ => 1 } @w;
ok(!grep({ $old{$_} } @w2), 'worker pids changed');
ok(!grep({ kill 0, $_ } @w), 'old workers gone');

my @all = $t->all_pids;
$t->stop();     # emits the automatic log check test
ok(!grep({ Test::Nginx::_alive($_) } @all), 'no processes left after stop');
cmp_ok(time - $start, '<', 5 * Test::Nginx::timeout_scale(), 'fast');

###############################################################################
# daemon off + master_process off instance; plain error expected in log

my $t2 = Test::Nginx->new()->no_module->master_process(0)
    ->allow_log(qr/planted-allowed/);
$t2->write_file_expand('nginx.conf', <<'EOF');
%%TEST_GLOBALS%%
daemon off;
events {}
http {
    %%TEST_GLOBALS_HTTP%%
    server {
        listen 127.0.0.1:%%PORT_8081%%;
        location / { return 200 "two"; }
    }
}
EOF
$t2->run();
like(http_get('/', PeerAddr => '127.0.0.1:' . port(8081)), qr/two$/, 'daemon off');
is(scalar $t2->worker_pids, 0, 'no workers with master_process off');
open my $fh, '>>', $t2->testdir . '/error.log';
print $fh "2026/11/30 12:00:00 [alert] 1#1: planted-allowed\n";
close $fh;
my $m2 = $t2->master_pid;
$t2->stop();    # emits its log check test (counted in plan)
ok(!Test::Nginx::_alive($m2), 'daemon-off nginx stopped');

###############################################################################
# child scripts: planted alert fails the automatic check; die leaves no nginx

my $lib = "$FindBin::Bin/lib";
my $child = <<'EOF';
use strict; use warnings; use Test::More; use Test::Nginx;
my $t = Test::Nginx->new()->no_module;
$t->plan(1) if $ARGV[0] eq 'plan';
$t->write_file_expand('nginx.conf', "%%TEST_GLOBALS%%\nevents {}\n"
  . "http { %%TEST_GLOBALS_HTTP%% server { listen 127.0.0.1:%%PORT_8080%%; } }\n");
$t->run();
print STDERR "MASTER ", $t->master_pid, "\n";
open my $fh, '>>', $t->testdir . '/error.log';
print $fh "2026/11/30 12:00:00 [alert] 1#1: planted\n";
close $fh;
die "planned death\n" if $ARGV[0] eq 'die';
ok($t->master_pid, 'child');
done_testing() if $ARGV[0] eq 'done';
EOF
$t->write_file('child.pl', $child);

sub run_child {
    my ($mode) = @_;
    my $out = `$^X -I$lib ${\ $t->testdir}/child.pl $mode 2>&1`;
    return ($out, $? >> 8);
}

my ($out, $rc) = run_child('plan');
like($out, qr/^1\.\.2\n.*^ok 1 - child\n.*^not ok 2 - no alerts in error\.log\n/ms,
    'planted alert fails the automatic check') or diag $out;
ok($rc, 'child exit code non-zero');

($out, $rc) = run_child('done');
like($out, qr/no alerts in error\.log: FAILED/, 'done_testing: alert reported')
    or diag $out;
ok($rc, 'done_testing: exit code non-zero') or diag $out;

($out, $rc) = run_child('die');
my ($mpid) = $out =~ /MASTER (\d+)/;
ok($mpid && !Test::Nginx::_alive($mpid), 'nginx stopped when test dies')
    or diag $out;

###############################################################################
