#!/usr/bin/perl

# pty_mcp with pty_archive: tools/list offers pty_transcript, which reads
# a session's frames and text from the archive, also after nginx has
# restarted; without the archive the tool is not offered.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Test::More;
use Time::HiRes qw(time sleep);
use JSON::PP ();
use MIME::Base64 qw(decode_base64);
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::PtyAPI qw(api_call);

my $t = pty_nginx(extra_http => '@ARCHIVE@
    server {
        listen 127.0.0.1:%%PORT_8081%%;
        client_body_buffer_size 1m;
        location /mcp {
            pty_mcp;
        }
    }');
my $conf = $t->read_file('nginx.conf');
sub with_archive { archive_conf($t, $conf, $_[0]) }

with_archive(1);
$t->plan(6)->run();

my %accept = (Accept => 'application/json, text/event-stream');

sub rpc {
    my ($sid, $body) = @_;
    my ($st, $j, $raw, $hd) = api_call($t->port(8081), '/mcp', $body,
        headers => { %accept, $sid ? ('Mcp-Session-Id' => $sid) : () });
    return ($st, $j, $hd);
}

sub session {
    my (undef, undef, $h) = rpc(undef, { jsonrpc => '2.0', id => 1,
        method => 'initialize', params => { protocolVersion => '2025-06-18',
            capabilities => {}, clientInfo => { name => 't', version => '0' } }
    });
    my $sid = $h->{'mcp-session-id'};
    rpc($sid, { jsonrpc => '2.0', method => 'notifications/initialized' });
    return $sid;
}

sub tools {
    my ($sid) = @_;
    my (undef, $j) = rpc($sid, { jsonrpc => '2.0', id => 2,
        method => 'tools/list' });
    return map { $_->{name} } @{$j->{result}{tools} // []};
}

my $sid = session();
ok((grep { $_ eq 'pty_transcript' } tools($sid)),
    'with an archive, pty_transcript is offered');

my (undef, $j) = rpc($sid, { jsonrpc => '2.0', id => 3,
    method => 'tools/call', params => { name => 'pty_start',
        arguments => { command => 'echo from-mcp-$((40+2))', wait_ms => 0 } }
});
my $id = $j->{result}{structuredContent}{id} // '';
ok($id, 'a session started over MCP');

# once the archive has its end, after a restart too
my $tr;
my $deadline = time + 10 * Test::Nginx::timeout_scale();
while (time < $deadline) {
    (undef, $j) = rpc($sid, { jsonrpc => '2.0', id => 4,
        method => 'tools/call', params => { name => 'pty_transcript',
            arguments => { id => $id, text => JSON::PP::true() } } });
    $tr = $j->{result}{structuredContent};
    last if ($tr->{text} // '') =~ /from-mcp-42/ && $tr->{state} eq 'exited';
    sleep 0.1;
}
like($tr->{text} // '', qr/from-mcp-42/, 'its text');

$t->stop();
$t->run();
$sid = session();
(undef, $j) = rpc($sid, { jsonrpc => '2.0', id => 5,
    method => 'tools/call', params => { name => 'pty_transcript',
        arguments => { id => $tr->{id} } } });
my $after = $j->{result}{structuredContent} // {};
my $out = join '', map { decode_base64($_->{payload}{data}) }
    grep { ($_->{payload}{kind} // '') eq 'Output' } @{$after->{frames}};
like($out, qr/from-mcp-42/, 'its frames after a restart');
is($after->{reason}, 'normal', 'and how it ended');

$t->stop();
with_archive(0);
$t->run();
$sid = session();
ok(!(grep { $_ eq 'pty_transcript' } tools($sid)),
    'without an archive, it is not offered');
