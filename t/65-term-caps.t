#!/usr/bin/perl

# Caps on what one session may cost (docs/DIRECTIVES.md): pty_max_cells
# bounds cols x rows at start (API: 400 size_too_large), join and resize
# (WebSocket: Error INVALID_REQUEST, nothing applied); pty_session_max_memory
# bounds a session's ring, scrollback and inbox in the zone.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Test::More;
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::PtyExt;
use Test::Nginx::PtyAPI qw(api_call);

my $t = pty_nginx(workers => 1, extra_http => 'server { '
    . 'listen 127.0.0.1:%%PORT_8081%%; client_body_buffer_size 1m; '
    . 'location /pty/ { pty_api; pty_max_cells 2000; pty_api_cols 40; '
    . 'pty_api_rows 25; '
    . 'pty_session_max_memory 1m; pty_scrollback_size 64k; } '
    . 'location /agents/ { pty_attach; pty_max_cells 2000; } }');
$t->run();

my $port = $t->port(8080);
my $small = $t->port(8081);

# 1. the API's start
my ($st, $r) = api_call($port, '/pty/start', { command => 'true',
    cols => 1024, rows => 1024, wait_ms => 0 });
is($st, 400, '1024x1024: 400');
is($r->{error}{code}, 'size_too_large', 'size_too_large');
like($r->{error}{message}, qr/1048576 cells.*limit of 100000 cells.*pty_max_cells/,
    'the message gives the size and the limit');

($st, $r) = api_call($port, '/pty/start', { command => 'true',
    cols => 500, rows => 200, wait_ms => 0 });
is($st, 200, '500x200 is within the default');

($st, $r) = api_call($small, '/pty/start', { command => 'true',
    cols => 50, rows => 41, wait_ms => 0 });
is($st, 400, 'pty_max_cells 2000: 50x41 refused');
($st, $r) = api_call($small, '/pty/start', { command => 'true',
    cols => 50, rows => 40, wait_ms => 0 });
is($st, 200, 'pty_max_cells 2000: 50x40 taken');

# 2. WebSocket: a join and a resize above the attach location's cap
my $s = start_session($t, 'cat', cols => 40, rows => 20);
my $ws = Test::Nginx::PtyWS->connect(port => $small,
    path => $s->{attach_path});
$ws->recv_json(5);
my ($j1, $r1) = (Test::Nginx::PtyWS::uuid_v7(), Test::Nginx::PtyWS::uuid_v7());
$ws->send_json({ op => 'pty.join_session', id => $j1,
    payload => { role => 'controller', cols => 100, rows => 100 },
    extensions => [EXT_URI] });
my $e = $ws->recv_op('Error', 5);
is($e->{payload}{code}, 'INVALID_REQUEST', 'join at 100x100: INVALID_REQUEST');
like($e->{payload}{message}, qr/10000\) is above the server's limit of 2000/,
    'it says why');
is($e->{id}, $j1, 'answering the join');

my @flush = join_session($ws, role => 'controller');
is(kind($flush[-1]), 'Keyframe', 'a join within the cap works');

$ws->send_json({ op => 'pty.session_resize', id => $r1,
    payload => { cols => 1000, rows => 1000 }, extensions => [EXT_URI] });
$e = $ws->recv_op('Error', 5);
is($e->{payload}{code}, 'INVALID_REQUEST', 'resize 1000x1000: INVALID_REQUEST');
is($e->{id}, $r1, 'answering the resize');

$ws->send_op('pty.session_resize', { cols => 50, rows => 40 });
my @f = $ws->recv_until(sub { (kind($_[0]) // '') eq 'Resize' }, 5);
is_deeply([@{$f[-1]{payload}}{qw/cols rows/}], [50, 40],
    'the next Resize is the one within the cap');
ok(!grep({ (kind($_) // '') eq 'Resize' && $_->{payload}{cols} == 1000 } @f),
    'the refused one was not applied');
($st, $r) = api_call($port, '/pty/list', { full => \1 });
my ($me) = grep { $_->{id} eq $s->{id} } @{$r->{sessions}};
is_deeply([@$me{qw/cols rows/}], [50, 40], 'the session is 50x40');
$ws->close;

# 3. pty_session_max_memory: 1m for the ring, scrollback and inbox
($st, $r) = api_call($small, '/pty/start', {
    command => 'seq 1 300000; echo DO""NE; sleep 60', wait_for => 'DONE',
    wait_ms => 20000 });
is($st, 200, 'a session prints 2 MB');
my $big = $r->{id};
for (1 .. 100) {
    last if ($r->{matched} // 0) || $st != 200;
    ($st, $r) = api_call($small, '/pty/write', { id => $big,
        wait_for => 'DONE', wait_ms => 5000 });
}
ok($r->{matched}, 'to its end');
($st, $r) = api_call($small, '/pty/status', {});
cmp_ok($r->{buffers}{ring} + $r->{buffers}{scrollback}
    + $r->{buffers}{inbox}, '<=', 1024 * 1024 + 16 * 1024,
    "its ring, scrollback and inbox stay within 1m (ring $r->{buffers}{ring})");

my $log = $t->read_file('error.log');
like($log, qr/session \Q$big\E keeps fewer than 1000 frames .*"pty_session_max_memory"/,
    'the log names pty_session_max_memory');
like($log, qr/asked for 100x100 on session .* above "pty_max_cells" 2000/,
    'the refused join is logged');

api_call($port, '/pty/kill', { id => $_ }) for $s->{id}, $big;

$t->done_testing();
