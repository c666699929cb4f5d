#!/usr/bin/perl

# Every bad request gets a 4xx with {error: {code, message}}, and the worker
# keeps serving.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Test::More;
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::PtyAgent;
use Test::Nginx::PtyAPI qw(api_call);

my $t = pty_nginx(extra_loc => 'pty_input_max 1k; pty_api_wait_max 5s;
    pty_api_wait 300ms; pty_api_wait_for 2s;');

my $id;    # a live session, set below
my @cases = (
    # [ call, body (hashref or raw text), status, code, name ]
    [ 'start', '{"command": "ls"',           400, 'bad_json', 'malformed JSON' ],
    [ 'start', '["ls"]',                     400, 'bad_json', 'not an object' ],
    [ 'start', '{"a":1,"a":2}',              400, 'bad_json', 'duplicate keys' ],
    [ 'start', { command => 5 },             400, 'bad_request', 'command type' ],
    [ 'start', { command => '' },            400, 'bad_request', 'empty command' ],
    [ 'start', { command => "a\x00b" },      400, 'bad_request', 'NUL in command' ],
    [ 'start', { command => 'ls', cols => 0 },    400, 'bad_size', 'cols 0' ],
    [ 'start', { command => 'ls', rows => 5000 }, 400, 'bad_size', 'rows 5000' ],
    [ 'start', { command => 'ls', cols => '80' }, 400, 'bad_size', 'cols string' ],
    [ 'start', { command => 'ls', wait_ms => 6000 }, 400, 'wait_too_long',
        'start wait_ms over the max' ],
    [ 'write', { id => 'pty-999999' },       404, 'unknown_session', 'unknown name' ],
    [ 'write', { id => '01234567-89ab-7def-8123-456789abcdef' }, 404,
        'unknown_session', 'unknown UUID' ],
    [ 'write', { id => 'nonsense' },         404, 'unknown_session', 'bad id form' ],
    [ 'write', { id => 42 },                 400, 'bad_request', 'id type' ],
    [ 'write', {},                           400, 'bad_request', 'no id' ],
    [ 'write', sub { { id => $id, input => 5 } }, 400, 'bad_request', 'input type' ],
    [ 'write', sub { { id => $id, submit => 'yes' } }, 400, 'bad_request',
        'submit type' ],
    [ 'write', sub { { id => $id, wait_for => [] } }, 400, 'bad_request',
        'wait_for type' ],
    [ 'write', sub { { id => $id, wait_ms => -1 } }, 400, 'bad_request',
        'negative wait_ms' ],
    [ 'write', sub { { id => $id, wait_ms => 5001 } }, 400, 'wait_too_long',
        'wait_ms over pty_api_wait_max' ],
    [ 'write', sub { { id => $id, wait_for => 'x', wait_ms => 99999 } }, 400,
        'wait_too_long', 'wait_for with too long a wait' ],
    # messages that quote the input are cut where UTF-8 allows
    [ 'start', '{"command": "ls", "a' . ('\u00e9' x 40) . '": 1}', 400,
        'unknown_member', 'a long unknown member of two-byte characters' ],
    [ 'write', sub { '{"id": "' . $id . '", "wait_for_regex": "(a\u00e9 '
        . ('\u00e9' x 1000) . '"}' }, 400, 'bad_regex',
        'a long bad regex of two-byte characters' ],
    [ 'write', sub { '{"id": "' . $id . '", "wait_for_regex": "(\u00e9 '
        . ('\u00e9' x 1000) . '"}' }, 400, 'bad_regex',
        'the same, cut one byte on' ],
    [ 'write', sub { { id => $id, input => 'x' x 2000 } }, 413,
        'input_too_large', 'input over pty_input_max' ],
    [ 'write', sub { { id => $id, cursor => 'x' } }, 400, 'bad_request',
        'cursor type' ],
    [ 'read',  { id => 'pty-999999' },       404, 'unknown_session', 'read unknown' ],
    [ 'kill',  { id => 'pty-999999' },       404, 'unknown_session', 'kill unknown' ],
    [ 'nope',  {},                           404, 'unknown_call', 'unknown call' ],
);

$t->plan(3 * @cases + 3)->run();

$id = agent_start($t, 'cat', wait_ms => 0)->{id};

for my $c (@cases) {
    my ($call, $body, $status, $code, $name) = @$c;
    $body = $body->() if ref $body eq 'CODE';
    my ($st, $j) = api_call($t->port(8080), "/pty/$call", $body);
    is($st, $status, "$name: $status");
    is($j->{error}{code}, $code, "$name: code $code");
    ok(defined $j->{error}{message} && length $j->{error}{message},
        "$name: a message");
}

my ($st, $j) = api_call($t->port(8080), '/pty/list', undef, method => 'GET');
is($st, 405, 'GET: 405');

# the configured defaults: wait_for gives up after pty_api_wait_for (2s)
my $r = agent($t, 'write', { id => $id, input => 'x', wait_for => 'never' });
ok($r->{timed_out}, 'wait_for default from pty_api_wait_for');

# still serving, the session still usable
$r = agent($t, 'write', { id => $id, input => 'still here', submit => 1,
    wait_for => "still here\n" });
ok($r->{matched}, 'the worker and the session survived');
