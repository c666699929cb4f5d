#!/usr/bin/perl

# Revocation reaches a client that stopped reading: its revoke frame is
# pushed out of a small ring by the output that follows, and when it reads
# again it must still be ended with principal_revoked, not skipped ahead
# to a Keyframe (PTY_OUTPUT_LAGGED) and left attached.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Test::More;
use MIME::Base64 qw(decode_base64);
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::PtyExt;
use Test::Nginx::PtyAPI qw(api_call);
use Test::Nginx::PtyAuth;
use Test::Nginx::PtyWS qw(session_frame_kind decode_output);

my $t = Test::Nginx->new()->has(qw/http/);

my $users = $> == 0 ? 'pty_user_range 3010000 3019999;' : '';
my ($auth_loc, $refuse, $attach) = (AUTH_LOCATION, REFUSE_LOCATIONS,
    AUTH_ATTACH);

# the slow client comes through 8082, whose sockets keep a small send
# buffer: what the kernels hold stays far below the output that follows
$t->write_file_expand('nginx.conf', <<"CONF");
%%TEST_GLOBALS%%

events {}

http {
    %%TEST_GLOBALS_HTTP%%

    pty_zone pty:16m;
    pty_instance_id test;
    pty_env HOME=%%TESTDIR%%;
    $users
    pty_ring_size 64k;
    pty_ring_max_size 64k;
    pty_replay_buffer_frames 1;
    pty_ws_send_buffer 16k;

    server {
        listen 127.0.0.1:%%PORT_8080%%;
        listen 127.0.0.1:%%PORT_8082%% sndbuf=16k;
        client_body_buffer_size 1m;

$auth_loc
$refuse
        location /agents/ {
$attach
            pty_attach;
        }

        location /pty/ {
$attach
            pty_api;
        }
    }
}
CONF

auth_server($t, 8081);
$t->plan(6)->run();

my $port = $t->port(8080);
my %tok = (
    alice => token('alice', 'pty:observe pty:control pty:start', 600),
    root  => token('root', 'pty:admin', 600),
);

sub api {
    my ($who, $call, $body) = @_;
    my ($st, $j) = api_call($port, "/pty/$call", $body,
        headers => { bearer($tok{$who}) });
    return ($st, $j);
}

sub ws {
    my ($who, $s, $p, %o) = @_;
    return Test::Nginx::PtyWS->connect(port => $p, path => $s->{attach_path},
        headers => { bearer($tok{$who}) }, %o);
}

# Root reads as fast as it can, but on a loaded machine it may fall out
# of the small ring too: what it waits for then comes in the Keyframe
# that follows PTY_OUTPUT_LAGGED, not in an Output frame.
sub watch {
    my ($ws, $re, $timeout) = @_;
    my $seen = '';
    $ws->recv_until(sub {
        $seen .= (session_frame_kind($_[0]) // '') eq 'Keyframe'
            ? decode_base64($_[0]{payload}{snapshot}) : decode_output($_[0]);
        $seen =~ $re;
    }, $timeout);
    return $seen;
}

# two floods of 590 KB, each after a line of input
my $flood = 'seq 100000 199999';
my ($st, $s) = api('alice', 'start', { wait_ms => 0, command =>
    "read a; $flood; echo DO''NE1; read b; $flood; echo DO''NE2; read c" });
is($st, 200, 'alice starts a session');

# root watches the output; alice's slow client joins, then stops reading
my $r = ws('root', $s, $port);
$r->recv_json(5);
join_flush($r, role => 'observer');

my $slow = ws('alice', $s, $t->port(8082), rcvbuf => 4096);
$slow->recv_json(5);
join_flush($slow, role => 'observer');

api('root', 'write', { id => $s->{id}, input => '',
    submit => JSON::PP::true() });
like(watch($r, qr/DONE1/, 30), qr/DONE1/,
    'the first flood: the slow client has fallen behind');

($st, my $j) = api('root', 'revoke', { principal => 'alice' });
is($j->{connections}, 1, 'alice is revoked with one connection');

# the second flood pushes the revoke frame out of the ring
api('root', 'write', { id => $s->{id}, input => '',
    submit => JSON::PP::true() });
like(watch($r, qr/DONE2/, 30), qr/DONE2/,
    'the second flood');

my @g = $slow->recv_until(sub { ($_[0]{op} // '') eq 'binding_goodbye' }, 15,
    'the slow client gets a goodbye');
is(@g ? $g[-1]{payload}{reason} // '' : 'none', 'principal_revoked',
    'the slow client is ended as revoked when it reads again');
my ($code) = $slow->wait_close(5);
ok(defined $code, 'and closed');

$r->disconnect;
