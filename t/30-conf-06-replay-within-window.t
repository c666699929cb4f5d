#!/usr/bin/perl

# pty-extensions/v1 section 9, scenario 6: disconnect, reconnect with
# replay_from: RoleAssigned, the missed frames with their original
# sequence and ts, a Keyframe, then live; nothing missing or doubled at
# the seam, and no other client's targeted frames.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Test::More;
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::PtyExt;
use Test::Nginx::PtyWS qw(decode_output);

my $t = pty_nginx();
$t->plan(10)->run();

my $s = start_session($t, SHELL);
my $ctl = attach($t, $s);
$ctl->recv_json(5);
join_flush($ctl);

my $obs = attach($t, $s);
$obs->recv_json(5);
join_flush($obs, role => 'observer');
send_input($ctl, "echo ONE\r");
read_output($obs, qr/ONE\r\n.*ready\$ $/s);
my $n = (seqs($obs->json_seen))[-1];
$obs->disconnect;

# missed while away: a MembershipChanged and output
send_input($ctl, "for i in 1 2 3; do echo MISSED\$i; done\r");
read_output($ctl, qr/MISSED3\r\n.*ready\$ $/s);
my $m = (seqs($ctl->json_seen))[-1];

my $back = attach($t, $s);
$back->recv_json(5);
my @flush = join_flush($back, role => 'observer', replay_from => $n);
my $ra = shift @flush;
my $kf = pop @flush;
is(kind($ra), 'RoleAssigned', 'RoleAssigned first');
cmp_ok($ra->{sequence}, '>', $m, 'with a sequence after the missed frames');

# what the controller saw after N, less its own targeted frames
my %ctl_seen = map { $_->{sequence} => $_ } grep { defined $_->{sequence} }
    $ctl->json_seen;
my @want = grep { $_ > $n && $_ < $ra->{sequence} } sort { $a <=> $b }
    keys %ctl_seen;
my @replayed = grep { $_->{sequence} < $ra->{sequence} } @flush;
is_deeply([seqs(@replayed)], \@want,
    'replay: every broadcast frame after N, in order');
ok(!(grep { $_->{ts} ne $ctl_seen{$_->{sequence}}{ts}
    || $_->{id} ne $ctl_seen{$_->{sequence}}{id} } @replayed),
    'replayed frames keep their original ts and id');
like(join('', map { decode_output($_) } @replayed), qr/MISSED1.*MISSED3/s,
    'the missed output is there');
ok(!(grep { kind($_) eq 'RoleAssigned' } @replayed),
    'no other client\'s RoleAssigned replayed');
is_deeply([map { kind($_) } grep { $_->{sequence} > $ra->{sequence} }
    @flush], ['MembershipChanged'], 'then its own MembershipChanged');
is(kind($kf), 'Keyframe', 'then a Keyframe');

# the seam: live frames continue without gap or repeat
send_input($ctl, "echo LIVE\r");
my $acc = '';
my @live = $back->recv_until(sub { $acc .= decode_output($_[0]);
    $acc =~ /LIVE\r\n.*ready\$ $/s }, 5);
my @all = seqs($back->json_seen);
my @ctl_after = grep { $_ > $kf->{sequence} } seqs($ctl->recv_until(sub {
    ($_[0]{sequence} // 0) >= $live[-1]{sequence} }, 5));
is_deeply([seqs(@live)], \@ctl_after,
    'live: exactly the frames the controller got, none twice');
my %dup;
ok(!(grep { $dup{$_}++ } @all), 'no sequence delivered twice');
