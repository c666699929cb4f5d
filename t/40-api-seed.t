#!/usr/bin/perl

# The agent API's typical session, verbatim from the tool description:
# start python3, 2**64 with submit and wait_for, Ctrl-D as an escape, the
# exit code, kill.  Then the input escape rule, byte by byte, through a
# program that prints in hex what it reads from a raw-mode terminal.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Test::More;
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::PtyAgent;

my @escapes = (
    # [ input as the JSON string holds it, bytes the program reads, name ]
    [ '\x03',          '03',        '\x03 is Ctrl-C' ],
    [ "\x03",          '03',        'a real 0x03 too' ],
    [ '\r\n\t\e',      '0d0a091b',  '\r \n \t \e' ],
    [ 'a\\\\b',        '615c62',    '\\\\ is one backslash' ],
    [ 'x\\',           '785c',      'trailing lone backslash kept' ],
    [ '\x4',           '5c7834',    'short hex passes through' ],
    [ '\xZZ',          '5c785a5a',  'invalid hex passes through' ],
    [ '\q\a',          '5c715c61',  'unknown escapes pass through' ],
    [ '\u00e9',        'c3a9',      '\u as UTF-8' ],
    [ '\uD83D\uDE00',  'f09f9880',  'surrogate pair, one code point' ],
    [ '\uD83Dx',       'efbfbd78',  'lone surrogate is U+FFFD' ],
    [ '\u12G4',        '5c7531324734', 'bad \u hex passes through' ],
    [ 'a\x00b',        '610062',    '\x00 is a NUL byte' ],
    [ '\u0000',        '00',        '\u0000 is a NUL byte' ],
    [ "a\x00b",        '610062',    'a real NUL byte in the JSON too' ],
);

my $t = pty_nginx();
$t->plan(13 + @escapes)->run();

# --- the seed's session ---------------------------------------------------

my $s = agent_start($t, 'python3');
like($s->{id}, qr/^pty-\d+$/, 'start: id is pty-N');
like($s->{session_id}, qr/^[0-9a-f]{8}-[0-9a-f]{4}-7/, 'start: UUIDv7');

my $screen = $s->{output};
$screen = agent_collect($t, $s->{id}, qr/>>> $/, 10, initial => $screen)
    unless $screen =~ />>> $/;
like($screen, qr/^Python 3.*\n>>> $/s, 'start: the banner and the prompt');

my $r = agent($t, 'write', { id => $s->{id}, input => '2**64', submit => 1,
    wait_for => '>>> ' });
is($r->{output}, "2**64\n18446744073709551616\n>>> ",
    'write 2**64: the answer, settled');
ok($r->{matched} && !$r->{timed_out}, 'wait_for matched');

# by the UUID as well as by the short name
$r = agent($t, 'write', { id => $s->{session_id}, input => '\x04',
    wait_ms => 5000 });
is($r->{_status}, 200, 'write by session_id');
ok(!$r->{running}, '\x04: the interpreter exits');
is($r->{exit_code}, 0, 'exit code reported');

$r = agent($t, 'write', { id => $s->{id}, input => 'x' });
is($r->{error}{code}, 'session_closed', 'input after exit: 409 '
    . "session_closed ($r->{_status})");

$r = agent($t, 'kill', { id => $s->{id} });
is($r->{state}, 'exited', 'kill of an exited session answers its state');

# kill of a live one: the keeper sends SIGHUP and SIGTERM to the group
# (interactive shells ignore SIGTERM alone), Closed, exit code 128+signal
$s = agent_start($t, 'sleep 100');
$r = agent($t, 'kill', { id => $s->{id} });
ok(!$r->{running} && $r->{closed_reason} eq 'killed', 'kill: closed, killed');
like($r->{exit_code}, qr/^(?:129|143)$/, 'kill: ended by SIGHUP/SIGTERM');

# --- input escapes ----------------------------------------------------------

$t->write_file('hex.py', <<'PY');
import os, sys, tty
tty.setraw(0)
sys.stdout.write("ready\r\n")
sys.stdout.flush()
while True:
    d = os.read(0, 256)
    sys.stdout.write(d.hex() + "\r\n")
    sys.stdout.flush()
PY

$s = agent_start($t, 'python3 ' . $t->testdir() . '/hex.py',
    wait_for => "ready\n");
ok($s->{matched}, 'hex reader started');

for my $e (@escapes) {
    $r = agent($t, 'write', { id => $s->{id}, input => $e->[0],
        wait_for => "\n" });
    is($r->{output}, "$e->[1]\n", $e->[2]);
}
