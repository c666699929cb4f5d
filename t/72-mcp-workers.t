#!/usr/bin/perl

# pty_mcp across two workers: the official MCP SDK's Streamable HTTP
# client, each request on a new connection spread by the kernel
# (reuseport), drives one python3 session through whichever worker takes
# it: the MCP session id, the tool calls and their waits work from any.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Test::More;
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::PtyWS qw(json_decode);

plan(skip_all => 'node is not installed (scripts/install-deps.sh installs '
    . 'it)') unless `node --version 2>/dev/null`;
BAIL_OUT("the MCP SDK is missing: run scripts/install-deps.sh (npm ci in "
    . "t/mcp)") unless -d "$FindBin::Bin/mcp/node_modules/\@modelcontextprotocol/sdk";

my $t = pty_nginx(workers => 2, reuseport => 1, extra_http => '
    server {
        listen 127.0.0.1:%%PORT_8081%% reuseport;
        keepalive_timeout 0;
        client_body_buffer_size 1m;
        location /mcp {
            pty_mcp;
        }
    }');
$t->plan(7)->run();

my $url = 'http://127.0.0.1:' . $t->port(8081) . '/mcp';
my $out = `timeout 120 node $FindBin::Bin/mcp/client.mjs $url workers 2>&1`;
my $r = eval { json_decode((split /\n/, $out)[-1]) } // {};

is($r->{error}, undef, 'the SDK client ran without an exception')
    or diag($out);
my @workers = keys %{$r->{workers} // {}};
is(scalar @workers, 2, 'both workers answered ('
    . join(', ', map { "$_: $r->{workers}{$_}" } @workers) . ')');

my @bad = grep { ($r->{answers}[$_ - 1] // '') ne "print($_*$_)\n"
    . ($_ * $_) . "\n>>> " } 1 .. 12;
is("@bad", '', 'twelve writes, each answered with its own result');
is(scalar @{$r->{answers} // []}, 12, 'all of them');
ok(($r->{progress} // 0) >= 1, 'progress during a wait');
is($r->{kill}{data}{state}, 'exited', 'the kill');
ok(scalar(@{$r->{list}{data}{sessions} // []}) >= 1,
    'another MCP session lists it');
