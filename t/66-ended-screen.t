#!/usr/bin/perl

# The last screen of an ended session survives its late joiners.  Once it
# ends with nobody joined its ring is cut down to the last Keyframe and the
# Closed; in a full zone it cannot grow again, so each late joiner's own
# Keyframe and membership frames push the broadcast Keyframe out.  A worker that does not own the
# session rebuilds the screen from the ring: from the newest Keyframe of
# any kind, not only a broadcast one, or the screen comes back empty.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use MIME::Base64 qw(decode_base64);
use Test::More;
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::PtyExt;
use Test::Nginx::PtyAPI qw(api_call);

my $t = pty_nginx(workers => 2, reuseport => 1, zone => '256k',
    extra_loc => 'pty_closed_linger 5m;');
$t->plan(13)->run();

my $port = $t->port(8080);

# short sessions until the zone is full and the oldest go early
my $full;
for my $i (1 .. 300) {
    my ($st, $r) = api_call($port, '/pty/start', { command => 'true',
        wait_ms => 2000 });
    last unless $st == 200;
    next unless $i % 20 == 0;
    last if $full = ($t->read_file('error.log')
        =~ /forgotten before its pty_closed_linger/);
}
ok($full, 'the zone is full of ended sessions');

my ($st, $s) = api_call($port, '/pty/start', {
    command => 'for i in $(seq 1 40); do echo "late line $i"; done; exit 7',
    wait_ms => 0 });
is($st, 200, 'a session that prints and exits 7');

ok($t->wait_until(sub {
    my (undef, $r) = api_call($port, '/pty/list', {});
    my ($me) = grep { $_->{id} eq $s->{id} } @{$r->{sessions} // []};
    $me && !$me->{running};
}, 10), 'it ends');

# late joiners, one per worker each round, each leaving again
for my $round (1 .. 4) {
    my @c = attach_workers($t, $s, 2);
    my @screens;
    for my $c (@c) {
        my ($ws) = @$c;
        $ws->send_json({ op => 'pty.join_session',
            payload => { role => 'observer' }, extensions => [EXT_URI] });
        my @f = $ws->recv_until(sub { $_[0]{op} eq 'binding_goodbye' }, 5);
        my ($kf) = grep { kind($_) eq 'Keyframe' } @f;
        push @screens, $kf ? decode_base64($kf->{payload}{snapshot}) : '';
        $ws->close;
    }
    next if $round < 2;
    is(scalar(grep { /late line 40/ } @screens), 2,
        "round $round: the Keyframe of each worker shows the last screen");
}

# and the API, on whichever worker answers
for (1 .. 6) {
    my ($st, $r) = api_call($port, '/pty/read', { id => $s->{id} });
    like($r->{screen} // '', qr/late line 40/, "read $_: the last screen");
}

unlike($t->read_file('error.log'), qr/\[(alert|emerg|crit)\]/, 'no alerts');
