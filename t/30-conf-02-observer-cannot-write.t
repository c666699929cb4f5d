#!/usr/bin/perl

# pty-extensions/v1 section 9, scenario 2: an observer's pty.session_input
# (and pty.session_resize) is refused with PERMISSION_DENIED, nothing
# reaches the PTY, and the attempt is logged.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Test::More;
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::PtyExt;

my $t = pty_nginx();
$t->plan(12)->run();

my $s = start_session($t, SHELL);

my $ctl = attach($t, $s);
$ctl->recv_json(5);
join_flush($ctl, label => 'ctl');

my $obs = attach($t, $s);
$obs->recv_json(5);
my @flush = join_flush($obs, role => 'observer', label => 'obs');
is($flush[0]{payload}{role}, 'observer', 'observer joined');

# typed by the observer: refused, with its request id
my $id = send_input($obs, "echo OBSERVER\$((1+1))\r");
my @f = $obs->recv_until(sub { $_[0]{op} eq 'Error' }, 5);
my $err = $f[-1];
is($err->{payload}{code}, 'PERMISSION_DENIED', 'input: PERMISSION_DENIED');
is($err->{id}, $id, 'the Error echoes the request id');
is($err->{payload}{a2a_error}{name}, 'PermissionDeniedError',
    'a2a_error populated');
is($err->{payload}{retryable}, JSON::PP::false(), 'not retryable')
    if eval { require JSON::PP; 1 };

# resized by the observer: refused, no Resize anywhere
$id = $obs->send_op('pty.session_resize', { cols => 50, rows => 10 });
$err = $obs->recv_op('Error', 5);
is($err->{payload}{code}, 'PERMISSION_DENIED', 'resize: PERMISSION_DENIED');
is($err->{id}, $id, 'resize error echoes the id');

# the controller's marker proves what the PTY got, in order
send_input($ctl, "echo MARK\$((2+3))\r");
my $out = read_output($ctl, qr/MARK5\r\n/);
unlike($out, qr/OBSERVER/, 'the observer\'s bytes never reached the PTY');
send_input($ctl, "stty size\r");
like(read_output($ctl, qr/\d+ \d+\r\n/), qr/32 120/,
    'the observer\'s resize was not applied');

my @seen = grep { kind($_) eq 'Resize' } ($ctl->json_seen, $obs->json_seen);
is(scalar @seen, 0, 'no Resize frame was sent');

# the observer still receives everything
like(read_output($obs, qr/MARK5\r\n/), qr/MARK5\r\n/,
    'the observer sees the controller\'s output');

like($t->read_file('error.log'),
    qr/observer c-\d+ denied input on session pty-\d+/,
    'the denied write is logged');
