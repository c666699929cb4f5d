#!/usr/bin/perl

# pty-extensions/v1 section 9, scenario 1: single controller.  Join as
# controller, send input, receive output, resize, leave; RoleAssigned,
# MembershipChanged and Keyframe arrive in that order.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Test::More;
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::PtyExt;
use Test::Nginx::PtyWS qw(decode_output);
use MIME::Base64 qw(decode_base64);

my $t = pty_nginx();
$t->plan(27)->run();

my $s = start_session($t, SHELL, cols => 100, rows => 30);

my $ws = attach($t, $s);
my $hello = $ws->recv_json(5);
is($hello->{op}, 'binding_hello', 'binding_hello first');
is_deeply($hello->{payload}{activated_extensions}, [],
    'hello: nothing activated yet (activation comes on the first frame)');

# the session is 100x30; the first controller's 120x30 is applied
my @flush = join_flush($ws, label => 'alice', cols => 120, rows => 30);
is_deeply([map { kind($_) } @flush],
    [qw/RoleAssigned MembershipChanged Resize Keyframe/],
    'flush: RoleAssigned, MembershipChanged, Resize, Keyframe');

my ($ra, $mc, $rs, $kf) = @flush;
is($ra->{payload}{role}, 'controller', 'RoleAssigned: controller');
like($ra->{payload}{client_id}, qr/^c-\d+$/, 'RoleAssigned: client_id');
ok(!exists $ra->{payload}{downgraded}, 'RoleAssigned: not downgraded');
is_deeply($mc->{payload}, { kind => 'MembershipChanged',
    controllers => [{ client_id => $ra->{payload}{client_id},
        label => 'alice' }], observers => [] },
    'MembershipChanged: alice controls, nobody observes');
is_deeply([@{$rs->{payload}}{qw/cols rows/}], [120, 30],
    'Resize to the joiner\'s size');
is_deeply([@{$kf->{payload}}{qw/snapshot_cols snapshot_rows/}], [120, 30],
    'Keyframe at the new size');
# anchored on the Resize, or on output the shell wrote after it (its
# prompt, late on a loaded machine), which the Keyframe folds in
my $anchor = $kf->{payload}{anchor_sequence};
ok($anchor >= $rs->{sequence} && $anchor < $kf->{sequence},
    'Keyframe anchored on the Resize or what followed it')
    or diag "Resize $rs->{sequence}, Keyframe $kf->{sequence} anchor $anchor";
my @seq = seqs(@flush);
is_deeply([@seq[0 .. 2]], [$seq[0] .. $seq[0] + 2],
    'consecutive sequences up to the Resize');
cmp_ok($hello->{payload}{session}{current_sequence}, '<', $seq[0],
    'hello\'s current_sequence precedes RoleAssigned');
is($ra->{id} =~ $Test::Nginx::PtyWS::UUID_RE ? 1 : 0, 1,
    'server frame ids are UUIDv7');

# input reaches the program, output comes back
send_input($ws, "echo \$((6*7))\r");
my $out = read_output($ws, qr/42\r\n.*ready\$ /s);
like($out, qr/[\r\n]42\r\n/, 'input in, output out');

# the program sees the size
send_input($ws, "stty size\r");
like(read_output($ws, qr/30 120\r\n/), qr/30 120/, 'program sees 120x30');

# resize: a Resize frame, and the program sees it
$ws->send_op('pty.session_resize', { cols => 90, rows => 25 });
my @r = $ws->recv_until(sub { kind($_[0]) eq 'Resize' }, 5);
is_deeply([@{$r[-1]{payload}}{qw/cols rows/}], [90, 25], 'Resize frame');
ok(!grep({ kind($_) eq 'Error' } @r), 'no error for the resize');
send_input($ws, "stty size\r");
like(read_output($ws, qr/25 90\r\n/), qr/25 90/, 'program sees 90x25');

# a requested keyframe shows the screen as it is now
$ws->send_op('pty.request_keyframe', {});
my $k = wait_kind($ws, 'Keyframe', 3);
is($k->{payload}{snapshot_cols}, 90, 'requested Keyframe: 90 columns');
like(decode_base64($k->{payload}{snapshot}), qr/25 90/,
    'requested Keyframe shows the output');

# leave: MembershipChanged (nobody left), binding_goodbye, close 1000
my $leave = $ws->send_op('pty.leave_session', {});
my @tail = $ws->recv_until(sub { $_[0]{op} eq 'binding_goodbye' }, 5);
is_deeply([map { kind($_) } without_output(@tail)],
    [qw/MembershipChanged binding_goodbye/],
    'leave: MembershipChanged, then binding_goodbye');
is_deeply([@{$tail[-2]{payload}}{qw/controllers observers/}], [[], []],
    'leave: the membership is empty');
is($tail[-1]{payload}{reason}, 'other', 'goodbye reason');
my ($code) = $ws->wait_close(5);
is($code, 1000, 'leave: close 1000');

# the session lives on: another connection is its controller again
$ws = attach($t, $s);
$ws->recv_json(5);
@flush = join_flush($ws, role => 'observer');
is_deeply([map { kind($_) } without_output(@flush)],
    [qw/RoleAssigned MembershipChanged Keyframe/],
    'rejoin: RoleAssigned, MembershipChanged, Keyframe');
is($flush[0]{payload}{role}, 'observer',
    'not fresh any more: an observer stays an observer');
send_input($ws, "echo no\r");
is($ws->recv_op('Error', 5)->{payload}{code}, 'PERMISSION_DENIED',
    'and cannot type');
