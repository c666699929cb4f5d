#!/usr/bin/perl

# Floods from one client do not take the worker from the others:
#  - bad frames sent without reading the Errors: the replies are bounded,
#    the client is closed with 1008, the worker's memory stays flat and
#    another client on the same worker keeps getting its pongs;
#  - pty.session_input beyond pty_input_rate: RATE_LIMITED Errors, the
#    input dropped, another client's pongs timely, input works after;
#    resizes are paced by the same limit;
#  - input the program does not read, and an observer's input: one log
#    line per episode and a count, not a line per frame.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use MIME::Base64 qw(encode_base64);
use Test::More;
use Time::HiRes qw(time);
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::PtyWS qw(json_encode rfc3339_now uuid_v7 validate_frame);

# a low rate, so that the flood is well beyond it however slow the
# machine; a small send buffer, so that the kernel holds few replies;
# 8081: no input rate limit, for the program that never reads
my $t = pty_nginx(workers => 1, listen_opts => 'sndbuf=16k',
    extra_loc => 'pty_input_rate 64k burst=128k;',
    extra_http => 'server { listen 127.0.0.1:%%PORT_8081%%; '
        . 'location /agents/ { pty_attach; pty_input_rate off; } }');
$t->plan(18)->run();

sub rss_kb {
    my ($pid) = @_;
    open my $fh, '<', "/proc/$pid/status" or return 0;
    while (<$fh>) {
        return $1 if /^VmRSS:\s+(\d+)/;
    }
    return 0;
}

# the seconds an application ping takes, undef past the deadline
sub ping_time {
    my ($ws, $deadline) = @_;
    my $start = time;
    my $id = $ws->send_op('ping', { client_ts => rfc3339_now() })
        or return undef;
    while (defined(my $m = $ws->recv_json($deadline - (time - $start)))) {
        return time - $start if $m->{op} eq 'pong' && $m->{id} eq $id;
        last if time - $start > $deadline;
    }
    return undef;
}

# what has arrived, without waiting for more
sub drain {
    my ($ws) = @_;
    my @m;
    while (defined(my $m = $ws->recv_json(0.01))) {
        push @m, $m;
    }
    return @m;
}

###############################################################################
# replies the client never reads

my $s = start_session($t, 'sleep 60');
my $other = attach($t, $s);
$other->recv_json(5);
my $worker = worker_of($other);
my $rss0 = rss_kb($worker);

my $bad = attach($t, $s, rcvbuf => 4096);
$bad->recv_json(5);
$bad->{validate} = 0;         # it must read fast once it reads
is(worker_of($bad), $worker, 'both clients on the one worker');

# "{}" is an envelope without op: an Error each; 1 MB of them
my $chunk = join '', map { Test::Nginx::PtyWS::build_frame(opcode => 1,
    payload => '{}') } 1 .. 8192;
my ($slowest, $missed, $start) = (0, 0, time);

for my $i (1 .. 16) {
    last unless $bad->send_raw($chunk);
    my $took = ping_time($other, 3);
    if (!defined $took) { $missed++; last }
    $slowest = $took if $took > $slowest;
    last if time - $start > 12;
}

my $grown = rss_kb($worker) - $rss0;
ok(!$missed, 'the other client got every pong during the flood');
cmp_ok($slowest, '<', 1, 'and each within a second')
    or diag(sprintf '%.2f s', $slowest);
cmp_ok($grown, '<', 16384, 'the worker grew by less than 16 MB')
    or diag("$grown kB");
is(($bad->wait_close(5))[0], 1008, 'the flooder is closed with 1008');

# WebSocket Pings unread: their Pongs are replies too
my $pinger = attach($t, $s, rcvbuf => 4096);
$pinger->recv_json(5);
$pinger->{validate} = 0;
$chunk = Test::Nginx::PtyWS::build_frame(opcode => 9, payload => '')
    x 10000;
for (1 .. 16) {
    $pinger->send_raw($chunk) or last;
}
is(($pinger->wait_close(5))[0], 1008, 'a Ping flood unread: 1008');

my $took = ping_time($other, 3);
ok(defined $took && $took < 1, 'the other client is served afterwards');

###############################################################################
# input faster than pty_input_rate

$s = start_session($t, "stty -echo; grep --line-buffered '^ping'");
my ($flood) = attach_join($t, $s);
is(worker_of($flood), $worker, 'the flooder is on the same worker');
my $obs = attach($t, $s);
$obs->recv_json(5);
join_session($obs, role => 'observer');

$rss0 = rss_kb($worker);
my $fid = uuid_v7();
my $input = Test::Nginx::PtyWS::build_frame(opcode => 1,
    payload => json_encode({ op => 'pty.session_input', id => $fid,
        ts => rfc3339_now(),
        payload => { data => encode_base64(('x' x 1023) . "\n", '') } }));
$chunk = $input x 64;
($slowest, $missed, $start) = (0, 0, time);
my @limited;

$flood->{validate} = 0;       # thousands of Errors: checked one below
for my $i (1 .. 50) {
    $flood->send_raw($chunk) or last;
    push @limited, grep { $_->{op} eq 'Error'
        && $_->{payload}{code} eq 'RATE_LIMITED' } drain($flood);
    next if $i % 5;
    my $took = ping_time($obs, 3);
    if (!defined $took) { $missed++; last }
    $slowest = $took if $took > $slowest;
    last if time - $start > 12;
}
push @limited, grep { $_->{op} eq 'Error'
    && $_->{payload}{code} eq 'RATE_LIMITED' } drain($flood);
$flood->{validate} = 1;

cmp_ok(scalar @limited, '>', 100, 'input over the rate: RATE_LIMITED')
    or diag(scalar @limited);
my $e = $limited[0] // {};
ok($e->{id} && $e->{id} eq $fid && $e->{payload}{retryable}
    && ($e->{payload}{a2a_error}{name} // '') eq 'RateLimitedError'
    && $e->{payload}{message} =~ /dropped/
    && !validate_frame($e), 'the Error echoes the id, is retryable, '
    . 'says the input was dropped, and matches the schema');
ok(!$missed, 'another client got every pong during the input flood');
cmp_ok($slowest, '<', 1, 'and each within a second')
    or diag(sprintf '%.2f s', $slowest);
SKIP: {
    # the input buffers freed in the flood stay in ASan's quarantine
    skip 'ASan keeps freed memory', 1 if Test::Nginx::asan();
    cmp_ok(rss_kb($worker) - $rss0, '<', 16384,
        'the worker grew by < 16 MB');
}

send_input($flood, "ping after the flood\n");
like(read_output($flood, qr/ping after/), qr/ping after the flood/,
    'input within the rate goes through afterwards');

# resizes and role changes put frames in the ring for everyone: paced too
my $resize = Test::Nginx::PtyWS::build_frame(opcode => 1,
    payload => json_encode({ op => 'pty.session_resize', id => $fid,
        ts => rfc3339_now(), payload => { cols => 100, rows => 30 } }));
$flood->{validate} = 0;
my $n = 0;
for my $i (1 .. 5) {
    $flood->send_raw($resize x 100);
    $flood->recv_until(sub { $n++ if $_[0]{op} eq 'Error'
        && $_[0]{payload}{code} eq 'RATE_LIMITED'; $n >= 30 * $i }, 10);
}
$flood->{validate} = 1;
cmp_ok($n, '>=', 150, 'a flood of resizes: RATE_LIMITED');

###############################################################################
# log lines a client causes: one per episode, then a count

$s = start_session($t, 'sleep 60');
my $path = $s->{attach_path};
my $ctl = Test::Nginx::PtyWS->connect(port => $t->port(8081), path => $path);
$ctl->recv_json(5);
join_session($ctl, role => 'controller');
$ctl->{validate} = 0;
my $kb = Test::Nginx::PtyWS::build_frame(opcode => 1,
    payload => json_encode({ op => 'pty.session_input', id => $fid,
        ts => rfc3339_now(),
        payload => { data => encode_base64('y' x 1024, '') } }));

# 2 MB into a program that reads nothing: half of it dropped
for (1 .. 32) {
    $ctl->send_raw($kb x 64);
    drain($ctl);
}

my $o = attach($t, $s);
$o->recv_json(5);
join_session($o, role => 'observer');
$o->{validate} = 0;
$o->send_raw($kb x 300);
$o->recv_until(sub { $_[0]{op} eq 'Error' }, 5);
ping_time($o, 5);           # all 300 answered

my @dropped = $t->grep_error_log(qr/does not read its input/);
cmp_ok(scalar @dropped, '<=', 2, 'dropped input: not a line per frame')
    or diag(scalar @dropped);
my @denied = $t->grep_error_log(qr/denied input/);
cmp_ok(scalar @denied, '<=', 2, 'observer input: not a line per frame')
    or diag(scalar @denied);

$o->close(1000);
$o->wait_close(5);
ok($t->wait_for_log(qr/\d+ more "observer denied" messages suppressed/, 5),
    'the count of the rest, when the observer leaves');
