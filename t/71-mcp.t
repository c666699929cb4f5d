#!/usr/bin/perl

# pty_mcp: the agent tools as an MCP server (Streamable HTTP).  The
# official MCP SDK (npm @modelcontextprotocol/sdk, t/mcp) connects, lists
# the tools, runs python3 to the answer of 2**64 with progress during a
# long wait, sees tool errors, and kills the session; raw requests check
# the transport's rules.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Test::More;
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::PtyAPI qw(api_call api_request);
use Test::Nginx::PtyWS qw(json_decode json_encode);
use IO::Select;
use IO::Socket::INET;

my $node = `node --version 2>/dev/null`;
plan(skip_all => 'node is not installed (scripts/install-deps.sh installs '
    . 'it)') unless $node;

my $sdk = "$FindBin::Bin/mcp/node_modules/\@modelcontextprotocol/sdk";
BAIL_OUT("the MCP SDK is missing: run scripts/install-deps.sh (npm ci in "
    . "t/mcp)") unless -d $sdk;

my $t = pty_nginx(extra_http => '
    server {
        listen 127.0.0.1:%%PORT_8081%%;
        client_body_buffer_size 1m;
        location /mcp {
            pty_mcp;
        }
        location /mcp-fixed {
            pty_command "cat";
            pty_mcp;
        }
    }

    map $pty_bearer_token $mcp_who {
        "tok-alice"  alice;
        "tok-bob"    bob;
        default      "";
    }

    server {
        listen 127.0.0.1:%%PORT_8082%%;
        client_body_buffer_size 1m;
        location /mcp {
            pty_auth on;
            pty_principal $mcp_who;
            pty_mcp;
        }
    }');
$t->plan(47)->run();

my $port = $t->port(8081);
my $url = "http://127.0.0.1:$port/mcp";

# --- the SDK's session -------------------------------------------------------

my $out = `timeout 90 node $FindBin::Bin/mcp/client.mjs $url session 2>&1`;
my $r = eval { json_decode((split /\n/, $out)[-1]) } // {};
is($r->{error}, undef, 'the SDK client ran without an exception')
    or diag($out);

is($r->{protocol}, '2025-11-25', 'protocol version negotiated: the newest');
is($r->{server}{name}, 'ngx_pty_module', 'serverInfo');
like($r->{instructions} // '', qr/wait_for/, 'instructions teach wait_for');

my %tools = map { $_->{name} => $_ } @{$r->{tools} // []};
is(join(',', sort keys %tools), 'pty_kill,pty_list,pty_read,pty_start,'
    . 'pty_write', 'tools/list: the five tools');
ok(!grep({ !$_->{input} || !$_->{output} } values %tools),
    'each with input and output schemas');
like($tools{pty_write}{description} // '', qr/\\x03.*Ctrl-C/s,
    'pty_write teaches the escapes');
like($tools{pty_write}{description} // '', qr/wait_for/,
    'and wait_for');
is_deeply($r->{ping}, {}, 'ping');

ok($r->{start}{data}{id} && !$r->{start}{isError}, 'pty_start python3');
like($r->{start}{data}{output} // '', qr/>>> $/, 'its prompt');
like($r->{start}{data}{screen} // '', qr/^Python 3/, 'and its screen');

like($r->{write}{data}{output} // '', qr/^2\*\*64\n18446744073709551616\n>>> $/,
    'pty_write: 2**64 answered');
ok($r->{write}{data}{matched}, 'wait_for matched');
like($r->{write}{text} // '', qr/"output":"2\*\*64\\n18446744073709551616/,
    'the text content is the same answer, as JSON');

like($r->{slow}{data}{output} // '', qr/slept\n>>> $/,
    'a 2.5 s wait answered after the sleep');
ok(@{$r->{progress} // []} >= 2, 'with progress notifications meanwhile ('
    . scalar(@{$r->{progress} // []}) . ')');
my @p = map { $_->{progress} } @{$r->{progress} // []};
ok(!grep({ $p[$_] <= $p[$_ - 1] } 1 .. $#p), 'progress only grows');

like($r->{read}{data}{screen} // '', qr/slept\n>>>/, 'pty_read: the screen');
ok(defined $r->{read}{data}{cursor}{row}, 'and the cursor');

ok($r->{typo}{isError}, 'a typo in a member: a tool error');
like($r->{typo}{text} // '', qr/unknown member \\"waitfor\\"/,
    'with the HTTP API\'s message');
ok($r->{unknown}{isError} && ($r->{unknown}{text} // '')
    =~ /unknown_session/, 'an unknown session: a tool error');
ok(grep({ $_->{id} eq ($r->{start}{data}{id} // '') }
    @{$r->{list}{data}{sessions} // []}), 'pty_list has the session');

is($r->{kill}{data}{state}, 'exited', 'pty_kill: the session ended');
ok($r->{after}{isError} && ($r->{after}{text} // '') =~ /session_closed/,
    'input after it: session_closed');
is($r->{notool}{code}, -32602, 'an unknown tool: JSON-RPC -32602');

# --- the transport's rules, raw ----------------------------------------------

my %accept = (Accept => 'application/json, text/event-stream');

sub rpc {
    my ($body, %h) = @_;
    my ($st, $j, $raw, $hd) = api_call($port, '/mcp', $body,
        headers => { %accept, %h });
    return ($st, $j, $hd);
}

my ($st, $j, $h) = rpc({ jsonrpc => '2.0', id => 1, method => 'initialize',
    params => { protocolVersion => '2025-06-18', capabilities => {},
        clientInfo => { name => 'raw', version => '0' } } });
is($j->{result}{protocolVersion}, '2025-06-18',
    'an older version the server speaks is kept');
my $sid = $h->{'mcp-session-id'} // '';
like($sid, qr/^[0-9a-f]{48}$/, 'Mcp-Session-Id given');

($st) = rpc({ jsonrpc => '2.0', method => 'notifications/initialized' },
    'Mcp-Session-Id' => $sid);
is($st, 202, 'a notification: 202');

($st, $j) = rpc({ jsonrpc => '2.0', id => 2, method => 'tools/list' });
is($st, 400, 'no Mcp-Session-Id after initialize: 400');
($st, $j) = rpc({ jsonrpc => '2.0', id => 2, method => 'tools/list' },
    'Mcp-Session-Id' => 'f' x 48);
is($st, 404, 'one the server did not give: 404');
($st, $j) = rpc({ jsonrpc => '2.0', id => 2, method => 'tools/list' },
    'Mcp-Session-Id' => $sid, 'MCP-Protocol-Version' => '1999-01-01');
is($st, 400, 'an unsupported MCP-Protocol-Version: 400');
($st, $j) = rpc([{ jsonrpc => '2.0', id => 3, method => 'ping' }],
    'Mcp-Session-Id' => $sid);
is($st, 400, 'a batch: 400');
($st, $j) = rpc({ jsonrpc => '2.0', id => 4, method => 'resources/list' },
    'Mcp-Session-Id' => $sid);
is($j->{error}{code}, -32601, 'an unknown method: -32601');
($st) = rpc({ jsonrpc => '2.0', id => 5, method => 'ping' },
    'Mcp-Session-Id' => $sid, Origin => 'http://evil.example');
is($st, 403, 'an Origin that is not the server: 403');
($st) = api_request($port, 'GET', '/mcp', undef, no_body => 1,
    headers => { Accept => 'text/event-stream', 'Mcp-Session-Id' => $sid });
is($st, 405, 'GET (no server stream): 405');

# a body longer than the header buffer (1k) comes in two parts: the one
# read with the header, and the rest
($st, $j) = rpc({ jsonrpc => '2.0', id => 6, method => 'initialize',
    params => { protocolVersion => '2025-06-18', capabilities => {},
        clientInfo => { name => 'x' x 4000, version => '0' } } });
is($st, 200, 'a body read in two parts is one message');

# pty_command: pty_start needs no command; the other tools still need id
my ($fsid) = (rpc({ jsonrpc => '2.0', id => 1, method => 'initialize',
    params => { protocolVersion => '2025-06-18', capabilities => {},
        clientInfo => { name => 'raw', version => '0' } } }))[2]
    {'mcp-session-id'};
($st, $j) = api_call($port, '/mcp-fixed', { jsonrpc => '2.0', id => 2,
    method => 'tools/list' }, headers => { %accept,
        'Mcp-Session-Id' => $fsid });
my %fixed = map { $_->{name} => $_->{inputSchema} }
    @{$j->{result}{tools} // []};
ok($fixed{pty_start} && !$fixed{pty_start}{required},
    'pty_command: pty_start requires nothing');
is_deeply($fixed{pty_write}{required}, ['id'], 'pty_write still needs id');

# a client that goes away from a progress stream ends the wait (and its
# timers): the session takes the next write at once
($st, $j) = rpc({ jsonrpc => '2.0', id => 7, method => 'tools/call',
    params => { name => 'pty_start', arguments => { command => 'cat',
        wait_ms => 0 } } }, 'Mcp-Session-Id' => $sid);
my $cat = $j->{result}{structuredContent}{id} // '';
my $call = json_encode({ jsonrpc => '2.0', id => 8, method => 'tools/call',
    params => { name => 'pty_write', _meta => { progressToken => 'p1' },
        arguments => { id => $cat, wait_for => 'never', wait_ms => 30000 } }
});
my $sock = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port)
    or die "connect: $!";
print $sock "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:$port\r\n"
    . "Accept: application/json, text/event-stream\r\n"
    . "Content-Type: application/json\r\nMcp-Session-Id: $sid\r\n"
    . "Content-Length: " . length($call) . "\r\n\r\n$call";
my $stream = '';
my $deadline = time + 10;
while (time < $deadline && $stream !~ /notifications\/progress/) {
    last unless IO::Select->new($sock)->can_read($deadline - time);
    last unless sysread($sock, my $buf, 4096);
    $stream .= $buf;
}
like($stream, qr/notifications\/progress/, 'a progress event on the stream');
close $sock;
my $free;
$deadline = time + 5;
while (time < $deadline) {
    ($st, $j) = rpc({ jsonrpc => '2.0', id => 9, method => 'tools/call',
        params => { name => 'pty_write', arguments => { id => $cat } } },
        'Mcp-Session-Id' => $sid);
    last if $free = !$j->{result}{isError};
    select undef, undef, undef, 0.05;
}
ok($free, 'its client gone, the session is free again');

# --- with principals: the auth issue's rules hold here too -----------------

my $aport = $t->port(8082);

sub arpc {
    my ($who, $sid, $body) = @_;
    my ($st, $j, $raw, $hd) = api_call($aport, '/mcp', $body, headers => {
        %accept, $who ? (Authorization => "Bearer tok-$who") : (),
        $sid ? ('Mcp-Session-Id' => $sid) : () });
    return ($st, $j, $hd);
}

my $init = { jsonrpc => '2.0', id => 1, method => 'initialize',
    params => { protocolVersion => '2025-11-25', capabilities => {},
        clientInfo => { name => 'raw', version => '0' } } };
($st, $j, $h) = arpc(undef, undef, $init);
is($st, 401, 'no token: 401 before any JSON-RPC');
like($h->{'www-authenticate'} // '', qr/^Bearer/, 'with WWW-Authenticate');

my ($asid) = (arpc('alice', undef, $init))[2]{'mcp-session-id'};
($st, $j) = arpc('alice', $asid, { jsonrpc => '2.0', id => 2,
    method => 'tools/call', params => { name => 'pty_start',
        arguments => { command => 'sleep 30', wait_ms => 0 } } });
my $aid = $j->{result}{structuredContent}{id} // '';
ok($aid, 'alice starts a session over MCP');

my ($bsid) = (arpc('bob', undef, $init))[2]{'mcp-session-id'};
($st, $j) = arpc('bob', $bsid, { jsonrpc => '2.0', id => 3,
    method => 'tools/call', params => { name => 'pty_read',
        arguments => { id => $aid } } });
ok($j->{result}{isError} && $j->{result}{content}[0]{text}
    =~ /unknown_session/, 'bob cannot see it: unknown_session');
($st, $j) = arpc('bob', $bsid, { jsonrpc => '2.0', id => 4,
    method => 'tools/call', params => { name => 'pty_list',
        arguments => {} } });
ok(!grep({ $_->{id} eq $aid } @{$j->{result}{structuredContent}{sessions}
    // []}), 'nor list it');
