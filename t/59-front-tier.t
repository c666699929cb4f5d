#!/usr/bin/perl

# Beyond one machine: a PTY lives on one host, so scale-out is routing.
# Two module instances ("a" and "b") behind a front nginx that routes by
# the {instance_id} of the URL (docs/ARCHITECTURE.md, "Front tier"):
# sessions started on each, attached and replayed through the front, and
# a session id presented to the wrong instance refused cleanly.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Test::More;
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::PtyAPI qw(api_call);
use Test::Nginx::PtyWS qw(session_frame_kind);

sub backend {
    my ($name, $port) = @_;
    my $t = Test::Nginx->new()->has(qw/http/);
    $t->write_file_expand('nginx.conf', <<"CONF");
%%TEST_GLOBALS%%

events {}

http {
    %%TEST_GLOBALS_HTTP%%

    pty_zone pty:8m;
    pty_user_range 3000000 3009999;
    pty_instance_id $name;
    pty_env HOME=%%TESTDIR%%;
    pty_auth off;

    server {
        listen 127.0.0.1:%%PORT_$port%%;

        location /agents/ { pty_attach; }
        location /pty/    { pty_api; }
    }
}
CONF
    return $t;
}

my $a = backend('a', 8081);
my $b = backend('b', 8082);

my $front = Test::Nginx->new()->has(qw/http proxy map/);
$front->no_module;
$front->write_file_expand('nginx.conf', <<'CONF');
%%TEST_GLOBALS%%

events {}

http {
    %%TEST_GLOBALS_HTTP%%

    # {instance_id} -> the host that owns its sessions
    map $pty_instance $pty_backend {
        a        127.0.0.1:%%PORT_8081%%;
        b        127.0.0.1:%%PORT_8082%%;
        default  "";
    }

    map $uri $pty_instance {
        "~^/agents/(?<i>[^/]+)/"  $i;
        "~^/pty/(?<i>[^/]+)/"     $i;
    }

    server {
        listen 127.0.0.1:%%PORT_8080%%;

        location /agents/ {
            if ($pty_backend = "") {
                return 404 '{"error":{"code":"unknown_instance"}}';
            }

            proxy_pass http://$pty_backend;
            proxy_http_version 1.1;
            proxy_set_header Upgrade $http_upgrade;
            proxy_set_header Connection "upgrade";
            proxy_read_timeout 1h;
            proxy_send_timeout 1h;
        }

        # the API by instance: /pty/{instance}/{call}
        location ~ ^/pty/[^/]+/(?<call>[a-z]+)$ {
            if ($pty_backend = "") {
                return 404 '{"error":{"code":"unknown_instance"}}';
            }

            proxy_pass http://$pty_backend/pty/$call;
        }
    }
}
CONF

# 12 here and one log check for the other instances (see Test::Nginx)
$a->plan(13)->run();
$b->run();
$front->run();

my $p = $front->port(8080);

my (%s, %ws);
for my $i (qw/a b/) {
    my ($st, $j) = api_call($p, "/pty/$i/start",
        { command => "PS1='$i\$ ' exec bash --norc --noprofile -i" });
    is($st, 200, "start on $i through the front");
    $s{$i} = $j;
}

like($s{a}{attach_path}, qr{^/agents/a/sessions/}, 'attach path names a');

for my $i (qw/a b/) {
    ($ws{$i}) = attach_join($front, $s{$i});
    send_input($ws{$i}, "echo on-\$PS1-host\r");
}

like(read_output($ws{a}, qr/on-a\$ -host\r\n/), qr/on-a/, 'a answers');
like(read_output($ws{b}, qr/on-b\$ -host\r\n/), qr/on-b/, 'b answers');

# replay through the front after a disconnect
send_input($ws{a}, "echo first\r");
my @f = $ws{a}->recv_until(sub {
    (Test::Nginx::PtyWS::decode_output($_[0]) // '') =~ /first\r\n/ }, 10);
my $last = (grep { defined } map { $_->{sequence} } @f)[-1];
$ws{a}->disconnect;
send_input($ws{b}, "true\r");

my ($again, $hello, @flush) = attach_join($front, $s{a},
    replay_from => $last);
is(session_frame_kind($flush[0]), 'RoleAssigned', 'reattached to a');
ok(!(grep { $_->{op} eq 'Error' } @flush), 'replay within the window');
# the old connection's end reaches a through the front a moment later:
# until then its controller holds the session, and the new one observes
if (($flush[0]{payload}{role} // '') ne 'controller') {
    my $gone = grep { (session_frame_kind($_) // '') eq 'MembershipChanged'
        && !@{$_->{payload}{controllers}} } @flush;
    $again->recv_until(sub {
        (session_frame_kind($_[0]) // '') eq 'MembershipChanged'
            && !@{$_[0]{payload}{controllers}} }, 10) unless $gone;
    $again->send_op('pty.request_role', { role => 'controller' });
    $again->recv_until(sub {
        (session_frame_kind($_[0]) // '') eq 'RoleAssigned'
            && $_[0]{payload}{role} eq 'controller' }, 10);
}
send_input($again, "echo second\r");
like(read_output($again, qr/second\r\n/), qr/second/, 'live after replay');

# b's session id presented as instance a: a does not know it
(my $wrong = $s{b}{attach_path}) =~ s{/agents/b/}{/agents/a/};
my $ws = Test::Nginx::PtyWS->connect(port => $p, path => $wrong);
is($ws->status, 404, 'b\'s session at instance a: 404');

(my $none = $s{a}{attach_path}) =~ s{/agents/a/}{/agents/zzz/};
$ws = Test::Nginx::PtyWS->connect(port => $p, path => $none);
is($ws->status, 404, 'unknown instance: 404 at the front');

my ($st) = api_call($p, '/pty/zzz/list', {});
is($st, 404, 'API of an unknown instance: 404');
