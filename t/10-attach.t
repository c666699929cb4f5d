#!/usr/bin/perl

# A live terminal end to end: a session started through the API, attached
# over pty-ws/v1, input and output, resize seen by the program, leave,
# and the exit code in Closed.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Test::More;
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::PtyWS qw(decode_output session_frame_kind);
use MIME::Base64 qw(decode_base64);

my $t = pty_nginx();
$t->plan(30)->run();

# bash with a known prompt and no rc files
my $s = start_session($t, 'PS1="ready\$ " exec bash --norc --noprofile -i');
like($s->{id}, qr/^pty-\d+$/, 'start: short name');
like($s->{session_id}, $Test::Nginx::PtyWS::UUID_RE, 'start: UUIDv7');

my ($ws, $hello, @flush) = attach_join($t, $s, label => 'alice');

is($ws->protocol, 'pty-ws.v1', 'subprotocol echoed');
is($hello->{op}, 'binding_hello', 'binding_hello first');
is_deeply($hello->{payload}{supported_operations},
    [qw/SendMessage SendStreamingMessage GetTask ListTasks CancelTask
        SubscribeToTask/], 'hello lists the six core operations');
is($hello->{payload}{session}{session_id}, $s->{session_id},
    'hello names the session');

my @k = kinds(@flush);
is_deeply([@k[0 .. 1]], [qw/RoleAssigned MembershipChanged/],
    'RoleAssigned then MembershipChanged');
is($k[-1], 'Keyframe', 'Keyframe ends the flush');
is($flush[0]{payload}{role}, 'controller', 'first joiner controls');
is($flush[1]{payload}{controllers}[0]{label}, 'alice', 'label in membership');
is($flush[-1]{payload}{snapshot_format}, 'vt100-screen-state-v1',
    'snapshot format');

my @seq = map { $_->{sequence} } grep { defined $_->{sequence} } @flush;
ok((!grep { $seq[$_] <= $seq[$_ - 1] } 1 .. $#seq), 'sequence increases');

# what the program wrote before the join is in the snapshot
my $snap = '';
for (1 .. 50) {
    $snap = decode_base64($flush[-1]{payload}{snapshot});
    last if $snap =~ /ready\$ /;
    # the prompt may still be on its way: ask for a fresh snapshot
    $ws->send_op('pty.request_keyframe', {});
    @flush = wait_kind($ws, 'Keyframe');
}
like($snap, qr/ready\$ /, 'the prompt is in the Keyframe');
my $out;

send_input($ws, "echo \$((6*7))\r");
$out = read_output($ws, qr/42\r\n.*ready\$ /s);
like($out, qr/[\r\n]42\r\n/, 'input reaches the program, output returns');

$ws->send_op('pty.session_resize', { cols => 100, rows => 40 });
my $resize = wait_kind($ws, 'Resize');
is_deeply([@{$resize->{payload}}{qw/cols rows/}], [100, 40],
    'Resize broadcast');

send_input($ws, "stty size\r");
$out = read_output($ws, qr/40 100\r\n/);
like($out, qr/40 100/, 'the program sees the new size');

# bad frames: errors, and the connection stays usable
$ws->send_text('{not json');
my $err = $ws->recv_op('Error', 5);
is($err->{payload}{code}, 'INVALID_REQUEST', 'malformed JSON');

my $id = $ws->send_op('no.such_op', {});
$err = $ws->recv_op('Error', 5);
is($err->{payload}{code}, 'UNSUPPORTED_OPERATION', 'unknown op');
is($err->{id}, $id, 'error echoes the request id');
ok($err->{payload}{a2a_error}, 'a2a_error populated');

$ws->send_json({ op => 'pty.session_input', sequence => 5,
    payload => { data => 'eA==' } });
$err = $ws->recv_op('Error', 5);
is($err->{payload}{code}, 'INVALID_REQUEST', 'client sequence refused');

my $ping = $ws->send_op('ping', { client_ts => '2026-11-30T00:00:00.000Z' });
my $pong = $ws->recv_op('pong', 5);
is($pong->{id}, $ping, 'application ping answered');

send_input($ws, "echo still\r");
like(read_output($ws, qr/still\r\n/), qr/still/, 'still usable');

# leave: MembershipChanged, binding_goodbye, close 1000
$ws->send_op('pty.leave_session', {});
my @tail = $ws->recv_until(sub { $_[0]{op} eq 'binding_goodbye' }, 5);
ok((grep { (session_frame_kind($_) // '') eq 'MembershipChanged' } @tail),
    'leave: MembershipChanged');
my ($code) = $ws->wait_close(5);
is($code, 1000, 'leave: close 1000');

# exit code in Closed
$s = start_session($t, 'sleep 0.3; exit 3');
($ws) = attach_join($t, $s);
my $closed = wait_kind($ws, 'Closed', 10);
is($closed->{payload}{exit_code}, 3, 'Closed carries exit code 3');
is($closed->{payload}{reason}, 'normal', 'reason normal');
my $bye = $ws->recv_op('binding_goodbye', 5);
is($bye->{payload}{reason}, 'session_closed', 'goodbye after Closed');
($code) = $ws->wait_close(5);
is($code, 1000, 'close 1000 after Closed');

# python3 round trip
$s = start_session($t, 'python3 -q');
($ws) = attach_join($t, $s);
read_output($ws, qr/>>> $/);
send_input($ws, "2**64\r");
like(read_output($ws, qr/>>> $/), qr/18446744073709551616/, 'python3');
