#!/usr/bin/perl

# pty-extensions/v1 section 9, scenario 5: an observer joining an active
# session gets RoleAssigned, MembershipChanged, a Keyframe holding the
# screen so far (anchor_sequence >= 0), then live frames.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Test::More;
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::PtyExt;
use MIME::Base64 qw(decode_base64);

my $t = pty_nginx();
$t->plan(9)->run();

my $s = start_session($t, SHELL);
my $ctl = attach($t, $s);
$ctl->recv_json(5);
join_flush($ctl);
send_input($ctl, "echo BEFORE\$((40+2))\r");
read_output($ctl, qr/BEFORE42\r\n.*ready\$ $/s);
my ($last_out) = grep { kind($_) eq 'Output' } reverse $ctl->json_seen;

my $obs = attach($t, $s);
$obs->recv_json(5);
my @flush = join_flush($obs, role => 'observer', label => 'late');
is_deeply([map { kind($_) } @flush],
    [qw/RoleAssigned MembershipChanged Keyframe/],
    'late join: RoleAssigned, MembershipChanged, Keyframe, nothing else');
my $kf = $flush[-1]{payload};
cmp_ok($kf->{anchor_sequence}, '>=', 0, 'anchor_sequence >= 0');
is($kf->{anchor_sequence}, $last_out->{sequence},
    'anchor is the last Output before the join');
like(decode_base64($kf->{snapshot}), qr/BEFORE42/,
    'the snapshot shows what was written before');
is_deeply([@$kf{qw/snapshot_cols snapshot_rows/}], [120, 32],
    'snapshot geometry is the session\'s');

# the controller's copy of the Keyframe was never sent to it
my @ctl_kf = grep { kind($_) eq 'Keyframe'
    && $_->{sequence} == $flush[-1]{sequence} } $ctl->json_seen;
is(scalar @ctl_kf, 0, 'the joiner\'s Keyframe is not sent to others');

# live frames after it, with higher sequences, the same for both
send_input($ctl, "echo AFTER\$((1+1))\r");
my $acc = '';
my @live = $obs->recv_until(sub {
    $acc .= Test::Nginx::PtyWS::decode_output($_[0]); $acc =~ /AFTER2\r\n/ },
    5);
cmp_ok($live[0]{sequence}, '>', $flush[-1]{sequence},
    'live frames follow the Keyframe');
my @mine = grep { kind($_) eq 'Output' } @live;
my %ctl_seq = map { $_->{sequence} => $_->{payload}{data} }
    grep { kind($_) eq 'Output' }
    $ctl->recv_until(sub { $_[0]{sequence}
        && $_[0]{sequence} >= $live[-1]{sequence} }, 5), $ctl->json_seen;
ok(!(grep { ($ctl_seq{$_->{sequence}} // '') ne $_->{payload}{data} }
    @mine), 'observer and controller get identical Output frames');
is(scalar(grep { kind($_) eq 'Keyframe' } @live), 0,
    'no Keyframe in the live stream when idle');
