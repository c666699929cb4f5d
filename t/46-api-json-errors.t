#!/usr/bin/perl

# Every answer of an API location is JSON, the errors nginx answers itself
# included (client_max_body_size's 413, a broken chunked body's 400); and
# an empty body is the empty object.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Test::More;
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::PtyAPI qw(api_call);

my $t = pty_nginx();
my $conf = $t->read_file('nginx.conf');
$conf =~ s/(location \/pty\/ \{)/location \/small\/ {
            pty_api;
            client_max_body_size 1k;
        }

        $1/;
$t->write_file('nginx.conf', $conf);
$t->plan(15)->run();

my $port = $t->port(8080);

sub json_error {
    my ($name, $status, $code, @req) = @_;
    my ($st, $j, $raw, $h) = api_call($port, @req);
    is($st, $status, "$name: $status");
    like($h->{'content-type'} // '', qr{^application/json}, "$name: JSON");
    is(ref $j eq 'HASH' && $j->{error}{code}, $code, "$name: code $code")
        or diag($raw);
}

# nginx refuses these before the module's handler runs
json_error('over client_max_body_size', 413, 'too_large', '/small/start',
    '{"command":"' . ('x' x 2000) . '"}');

my $chunk = '{"command":"' . ('x' x 2000) . '"}';
json_error('chunked over client_max_body_size', 413, 'too_large',
    '/small/start',
    sprintf("%x\r\n%s\r\n0\r\n\r\n", length $chunk, $chunk),
    headers => { 'Transfer-Encoding' => 'chunked',
                 'Content-Length' => undef });

json_error('a broken chunked body', 400, 'bad_request', '/small/list',
    "zz\r\n{}\r\n0\r\n\r\n",
    headers => { 'Transfer-Encoding' => 'chunked',
                 'Content-Length' => undef });

# the module's own limit was JSON already
json_error('over pty_api_max_body', 413, 'too_large', '/pty/start',
    '{"command":"' . ('x' x (1024 * 1024 + 10)) . '"}');

# an empty body (Content-Length: 0) is {}
my ($st, $j) = api_call($port, '/pty/list', '');
is($st, 200, 'list with Content-Length: 0: 200');
ok(ref $j->{sessions} eq 'ARRAY', 'and the sessions');
($st, $j) = api_call($port, '/pty/status', '');
is($st, 200, 'status with Content-Length: 0: 200');
