#!/usr/bin/perl

# Identity and access with a real auth service behind auth_request
# (Test::Nginx::PtyAuth: signed tokens with an expiry): close codes a
# browser can read (binding scenario 6: no bearer or an expired one ->
# 4401), scopes (observe, control, start, kill, admin), the per-session
# access list in the zone (another principal gets 404 everywhere, an
# anonymous location owns nothing of it), the bearer token in the
# subprotocol (accepted, not echoed, not logged), the auth subrequest's
# headers, limit_conn -> 4429, revocation, $pty_* variables, and closed
# by default (nginx -t).

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use MIME::Base64 qw(encode_base64url);
use Test::More;
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::PtyExt;
use Test::Nginx::PtyAPI qw(api_call);
use Test::Nginx::PtyAuth;
use Test::Nginx::PtyWS qw(decode_output);

my $t = Test::Nginx->new()->has(qw/http/);

my $users = $> == 0 ? 'pty_user_range 3000000 3009999;' : '';
my ($auth_loc, $refuse, $attach) = (AUTH_LOCATION, REFUSE_LOCATIONS,
    AUTH_ATTACH);

$t->write_file_expand('nginx.conf', <<"CONF");
%%TEST_GLOBALS%%

events {}

http {
    %%TEST_GLOBALS_HTTP%%

    log_format pty '\$remote_addr "\$request" \$status p=\$pty_principal '
                   's=\$pty_session_id c=\$pty_client_id r=\$pty_role '
                   't=\$pty_trace_id';
    access_log %%TESTDIR%%/pty-access.log pty;

    pty_zone pty:16m;
    pty_instance_id test;
    pty_env HOME=%%TESTDIR%%;
    $users
    pty_audit_log %%TESTDIR%%/audit.log;

    limit_conn_zone \$pty_bearer_token zone=pertoken:1m;

    server {
        listen 127.0.0.1:%%PORT_8080%%;
        client_body_buffer_size 1m;
        error_log %%TESTDIR%%/debug.log debug;

        # a server-wide WebSocket proxy recipe, inherited by every
        # location that sets no proxy_set_header of its own
        proxy_http_version 1.1;
        proxy_set_header Upgrade \$http_upgrade;
        proxy_set_header Connection "upgrade";

$auth_loc
        location = /_auth_leaky {
            internal;
            proxy_pass http://127.0.0.1:%%PORT_8081%%/check;
            proxy_pass_request_body off;
        }

$refuse
        location /agents/ {
$attach
            pty_close_codes on;
            pty_attach;
        }

        location /pty/ {
$attach
            pty_share observe scope=team:watch;
            pty_share control scope=team:dev;
            pty_share observe principal=paul;
            pty_api;
        }

        location /limited/agents/ {
$attach
            limit_conn pertoken 1;
            limit_conn_status 429;
            error_page 429 = \@pty_429;
            pty_close_codes on;
            pty_attach;
        }

        location /leaky/agents/ {
            auth_request /_auth_leaky;
            auth_request_set \$pty_who \$upstream_http_x_principal;
            pty_principal \$pty_who;
            pty_attach;
        }

        location /open/ {
            pty_auth off;
            pty_api;
        }
    }
}
CONF

auth_server($t, 8081);
$t->plan(94)->run();

my $port = $t->port(8080);

my %tok = (
    alice => token('alice', 'pty:observe pty:control pty:start pty:kill', 600),
    bob   => token('bob', 'pty:observe pty:control pty:start pty:kill', 600),
    olga  => token('olga', 'pty:observe team:watch', 600),
    vic   => token('vic', 'pty:observe pty:control team:watch', 600),
    carl  => token('carl', 'pty:observe pty:control team:dev', 600),
    paul  => token('paul', 'pty:observe,pty:control', 600),
    root  => token('root', 'pty:admin', 600),
    stale => token('alice', 'pty:observe pty:control', -10),
);

sub api {
    my ($who, $call, $body, $path) = @_;
    my %h = $who ? (headers => { bearer($tok{$who}) }) : ();
    my ($st, $j, $raw, $h) = api_call($port, ($path // '/pty/') . $call,
        $body // {}, %h);
    return ($st, $j, $h);
}

sub ws {
    my ($who, $s, %o) = @_;
    my $path = $o{path} // $s->{attach_path};
    my %args = (port => $port, path => $path);
    if ($o{subprotocol}) {
        $args{protocols} = subprotocols($tok{$who});
    } elsif ($who) {
        $args{headers} = { bearer($tok{$who}) };
    }
    return Test::Nginx::PtyWS->connect(%args);
}

# a refused upgrade a browser can read: 101, an Error, the close code
sub refused {
    my ($ws, $code, $error, $name) = @_;
    my $err = $ws->upgraded ? $ws->recv_json(5) : undef;
    my ($close) = $ws->wait_close(5);
    ok($ws->upgraded && ($err->{payload}{code} // '') eq $error
        && ($close // 0) == $code, "$name: $error, close $code")
        or diag('status ' . ($ws->status // 'none') . ', close '
            . ($close // 'none') . ', ' . ($ws->response_body // ''));
}

###############################################################################
# closed by default

my $bad = $t->read_file('nginx.conf');
$bad =~ s{location /open/ \{\s*pty_auth off;}{location /open/ \{};
$t->write_file('bad.conf', $bad);
my $dir = $t->testdir;
my ($status, $out) = $t->test_config('bad.conf');
isnt($status, 0, 'nginx -t refuses an API location without authentication');
like($out, qr{"pty_api" in location "/open/" has no authentication: set "pty_principal".*"pty_auth off"},
    'naming pty_principal and pty_auth off');

###############################################################################
# no token, an expired one, a bad one: 401 / 4401

my ($st, $j, $h) = api(undef, 'list');
is($st, 401, 'API without a token: 401');
is($j->{error}{code}, 'unauthenticated', 'with a JSON body');
like($h->{'www-authenticate'} // '', qr/^Bearer/, 'and WWW-Authenticate');

my $fake = { attach_path => '/agents/test/sessions/'
    . '0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b/attach' };
refused(ws(undef, $fake), 4401, 'UNAUTHENTICATED', 'no bearer');
refused(ws('stale', $fake), 4401, 'UNAUTHENTICATED', 'an expired bearer');
refused(ws('stale', $fake, subprotocol => 1), 4401, 'UNAUTHENTICATED',
    'an expired bearer in the subprotocol');
$tok{junk} = 'not.a.token.at-all';
refused(ws('junk', $fake), 4401, 'UNAUTHENTICATED', 'an invalid bearer');

# decoded from base64url, a subprotocol token could carry CR LF into the
# auth subrequest's headers ("Bearer $pty_bearer_token"): refused instead
refused(Test::Nginx::PtyWS->connect(port => $port,
    path => $fake->{attach_path}, protocols => ['pty-ws.v1', 'bearer.'
    . encode_base64url("$tok{alice}\r\nX-Injected: 1")]), 4401,
    'UNAUTHENTICATED', 'a subprotocol token with CR LF in it');
ok(!grep({ /x-injected/ } split /\n/, $t->read_file('auth-requests.log')),
    'its bytes never reach the auth service as a header');

my $plain = Test::Nginx::PtyWS->connect(port => $port,
    path => $fake->{attach_path}, headers => { Upgrade => undef,
    Connection => 'close' });
is($plain->status, 401, 'a plain HTTP client gets the plain 401');

($st, $j) = api('stale', 'list');
is($st, 401, 'API with an expired token: 401');

# a principal goes into text frames: one that is not UTF-8 is none
$tok{latin} = token("caf\xe9", 'pty:observe pty:start', 600);
$tok{utf8} = token("caf\xc3\xa9", 'pty:observe pty:start', 600);
($st) = api('latin', 'list');
is($st, 401, 'a principal that is not UTF-8: 401');
($st) = api('utf8', 'list');
is($st, 200, 'one in UTF-8 is a principal');

###############################################################################
# alice's session: hers, observed and controlled by whom it is shared with

($st, my $s) = api('alice', 'start', { command => SHELL, wait_ms => 0 });
is($st, 200, 'alice starts a session (pty:start)');
like($s->{id}, qr/^pty-\d+$/, 'named pty-N');
my ($st2, $s2) = api('alice', 'start', { command => 'cat', wait_ms => 0 });
my ($n1, $n2) = map { /(\d+)/ } $s->{id}, $s2->{id};
ok(abs($n2 - $n1) != 1, 'short names are not sequential');

my $a = ws('alice', $s, subprotocol => 1);
is($a->status, 101, 'the subprotocol token is accepted');
is($a->protocol, 'pty-ws.v1', 'only pty-ws.v1 is echoed');
$a->recv_json(5);
$a->send_json({ op => 'pty.join_session', payload => { role => 'controller',
    client_label => 'laptop' }, extensions => [EXT_URI],
    service_parameters => { trace_id => 'trace-alice-1' } });
my @f = $a->recv_until(sub { kind($_[0]) eq 'Keyframe' }, 10);
my ($ra) = grep { kind($_) eq 'RoleAssigned' } @f;
is($ra->{payload}{role}, 'controller', 'alice controls her session');
my ($mc) = grep { kind($_) eq 'MembershipChanged' } @f;
is($mc->{payload}{controllers}[0]{label}, 'alice (laptop)',
    'MembershipChanged names the principal');
ready_shell($a, @f);

# observe scope only: observer, whatever it asks
my ($o, undef, @of) = (ws('olga', $s));
$o->recv_json(5);
@of = join_flush($o, role => 'controller');
($ra) = grep { kind($_) eq 'RoleAssigned' } @of;
is($ra->{payload}{role}, 'observer', 'pty:observe: observer though it asked');
ok($ra->{payload}{downgraded}, 'told it was downgraded');
my $id = send_input($o, "echo OLGA\r");
my $err = $o->recv_op('Error', 5);
is($err->{payload}{code}, 'PERMISSION_DENIED', 'its input is denied');
$id = $o->send_op('pty.request_role', { role => 'controller' });
$err = $o->recv_op('Error', 5);
is($err->{payload}{code}, 'PERMISSION_DENIED', 'request_role controller too');

# control scope, but the session is only shared with it to observe
my $v = ws('vic', $s);
$v->recv_json(5);
($ra) = grep { kind($_) eq 'RoleAssigned' } join_flush($v, role => 'controller');
is($ra->{payload}{role}, 'observer', 'pty:control on an observe share: observer');
$v->disconnect;

# the controller leaves: the seat is free, the observer still may not take it
$a->close(1000, 'bye');
$a->wait_close(5);
$o->send_op('pty.request_role', { role => 'controller' });
$err = $o->recv_op('Error', 5);
is($err->{payload}{code}, 'PERMISSION_DENIED',
    'a free controller seat is not for an observer');

# control scope and a control share: controller
my $c = ws('carl', $s);
$c->recv_json(5);
($ra) = grep { kind($_) eq 'RoleAssigned' } join_flush($c, role => 'controller');
is($ra->{payload}{role}, 'controller', 'pty:control on a control share: controller');
send_input($c, "echo CARL\$((6*7))\r");
like(read_output($c, qr/CARL42/), qr/CARL42/, 'its input reaches the terminal');
like(read_output($o, qr/CARL42/), qr/CARL42/, 'the observer sees it');

# the API follows the same scopes: olga may read, not write or kill
($st, $j) = api('olga', 'read', { id => $s->{id} });
is($st, 200, 'observe scope: read');
($st, $j) = api('olga', 'write', { id => $s->{id}, input => 'x' });
is($st, 403, 'observe scope: write is 403');
is($j->{error}{code}, 'permission_denied', 'with a JSON body');
($st, $j) = api('carl', 'kill', { id => $s->{id} });
is($st, 403, 'no pty:kill scope: kill is 403');
($st) = api('olga', 'start', { command => 'true' });
is($st, 403, 'no pty:start scope: start is 403');
($st) = api('paul', 'read', { id => $s->{session_id} });
is($st, 200, 'a share by principal name: read');
($st) = api('paul', 'write', { id => $s->{id}, input => 'x' });
is($st, 403, 'an observe share: no write, whatever the scopes');
($st) = api('carl', 'write', { id => $s->{id}, input => 'echo API',
    submit => JSON::PP::true() });
is($st, 200, 'a control share: write through the API');

###############################################################################
# another principal: 404 everywhere, never 403

($st, $j) = api('bob', 'list');
is($st, 200, 'bob lists');
ok(!grep({ $_->{session_id} eq $s->{session_id} } @{$j->{sessions}}),
    'without alice\'s sessions');
($st, $j) = api('alice', 'list');
is(scalar(grep { $_->{session_id} eq $s->{session_id} } @{$j->{sessions}}),
    1, 'alice lists hers');

for my $call (qw/read write kill/) {
    for my $key ($s->{id}, $s->{session_id}) {
        ($st, $j) = api('bob', $call, { id => $key,
            $call eq 'write' ? (input => 'x') : () });
        ok($st == 404 && $j->{error}{code} eq 'unknown_session',
            "bob: $call $key is 404 unknown_session");
    }
}
($st, $j) = api('bob', 'read', { id => 'pty-1' });
is($st, 404, 'a name that may not exist: the same 404');

refused(ws('bob', $s), 4404, 'TASK_NOT_FOUND', 'bob attaching to it');
my $rb = ws('bob', $s, subprotocol => 1);
refused($rb, 4404, 'TASK_NOT_FOUND', 'bob attaching with a replay in mind');

($st, $j) = api(undef, 'kill', { id => $s->{session_id} }, '/open/');
is($st, 404, 'an anonymous location cannot reach it either');
($st, $j) = api(undef, 'list', {}, '/open/');
ok(!grep({ $_->{session_id} eq $s->{session_id} } @{$j->{sessions}}),
    'nor list it');

($st) = api('root', 'read', { id => $s->{session_id} });
is($st, 200, 'pty:admin reaches every session');

###############################################################################
# tokens in the URL, the auth subrequest's headers, limit_conn

my $asked = () = ($t->read_file('auth-requests.log') // '') =~ /\n/g;
($st, $j) = api_call($port, '/pty/list?access_token=leaked', {},
    headers => { bearer($tok{alice}) });
is($st, 400, 'a token in the query string is refused');
is($j->{error}{code}, 'token_in_query', 'and named');
my $ws_q = Test::Nginx::PtyWS->connect(port => $port,
    path => "$s->{attach_path}?token=leaked", headers => { bearer($tok{alice}) });
is($ws_q->status, 400, 'an upgrade with one too');
$ws_q->disconnect;
my $now = () = ($t->read_file('auth-requests.log') // '') =~ /\n/g;
is($now, $asked, 'refused before auth_request could send the URI to the '
    . 'auth service');

my $leak = ws('alice', $s, path => '/leaky' . $s->{attach_path});
isnt($leak->status, 101,
    'a server-wide proxy_set_header Upgrade breaks a plain auth location');
$leak->disconnect;

my @seen = split /\n/, $t->read_file('auth-requests.log');
ok(scalar(grep { /\bupgrade\b/ } @seen), 'it sent the upgrade headers');
my @recipe = grep { !/\bupgrade\b/ } @seen;
ok(@recipe && !grep({ /upgrade|sec-websocket/ } @recipe),
    'the recipe\'s subrequests carry none of them');

my $l1 = ws('alice', $s, path => '/limited' . $s->{attach_path});
is($l1->status, 101, 'limited location: one connection');
refused(ws('alice', $s, path => '/limited' . $s->{attach_path}), 4429,
    'RATE_LIMITED', 'a second one past limit_conn');
$l1->disconnect;

###############################################################################
# revocation

# revoking a principal whose CRC32 is alice's ends none of alice's
my $a5 = ws('alice', $s);               # attached, not joined yet
$a5->recv_json(5);
($st, $j) = api('root', 'revoke', { principal => 'mallory-nfykt*Tt' });
is($j->{connections}, 0, 'a principal with no connections: none ended');
($ra) = grep { kind($_) eq 'RoleAssigned' } join_session($a5);
ok($ra, 'alice, whose CRC32 is the same, still joins');
$a5->disconnect;

my $a2 = ws('alice', $s);
$a2->recv_json(5);
join_flush($a2, role => 'observer', replay_from => 1);
my $a3 = ws('alice', $s);               # attached, not joined yet
$a3->recv_json(5);
($st, $j) = api('alice', 'revoke', { principal => 'alice' });
is($st, 403, 'revoke needs pty:admin');
($st, $j) = api('root', 'revoke', { principal => 'alice' });
is($st, 200, 'an admin revokes alice');
is($j->{connections}, 1, 'one live connection');
my @g = $a2->recv_until(sub { $_[0]{op} eq 'binding_goodbye' }, 5);
is($g[-1]{payload}{reason}, 'principal_revoked', 'alice is told why');
my ($code) = $a2->wait_close(5);
ok(defined $code, 'and closed');
join_session($a3, role => 'observer', no_wait => 1);
@g = $a3->recv_until(sub { $_[0]{op} eq 'binding_goodbye' }, 5);
is($g[-1]{payload}{reason}, 'principal_revoked',
    'one attached before the revocation is ended when it joins');
my $a4 = ws('alice', $s);
$a4->recv_json(5);
($ra) = grep { kind($_) eq 'RoleAssigned' } join_session($a4);
ok($ra, 'a connection made after it joins (the auth service decides)');
$a4->disconnect;
send_input($c, "echo STILL\$((1+1))\r");
like(read_output($c, qr/STILL2/), qr/STILL2/, 'carl stays');

###############################################################################
# the audit log, rotation, the variables, what the logs do not hold

($st) = api('alice', 'kill', { id => $s->{id} });
is($st, 200, 'alice kills her session');

# a command the audit line cuts, cut between characters (parsed below)
($st) = api('alice', 'start', { command => 'true ' . ("\x{e9}" x 200),
    wait_ms => 0 });
is($st, 200, 'a long command of two-byte characters');

my @audit = map { Test::Nginx::PtyWS::json_decode($_) }
    split /\n/, $t->read_file('audit.log');
my %ev;
push @{$ev{$_->{event}}}, $_ for @audit;
for my $e (qw/session_start attach detach attach_denied write_denied
    role_denied replay revoke session_kill write/)
{
    ok($ev{$e}, "audit: $e");
}
my ($start) = grep { $_->{session_id} eq $s->{session_id} }
    @{$ev{session_start}};
ok($start && $start->{principal} eq 'alice' && $start->{command} eq SHELL
    && $start->{client_addr} eq '127.0.0.1' && $start->{ts},
    'session_start: who, from where, what, when');
my ($att) = grep { $_->{principal} eq 'alice' && $_->{role} } @{$ev{attach}};
ok($att && $att->{client_id} =~ /^c-\d+$/ && $att->{trace_id} eq 'trace-alice-1'
    && $att->{session_id} eq $s->{session_id}, 'attach: client, trace, session');
my ($rep) = @{$ev{replay}};
ok($rep->{from} == 1 && $rep->{to} >= 1, 'replay: its range');
ok(!grep({ !$_->{ts} || !exists $_->{principal} } @audit),
    'every line has a time and a principal');

rename "$dir/audit.log", "$dir/audit.log.1" or die "rename: $!\n";
kill 'USR1', $t->master_pid;
$t->wait_until(sub { -e "$dir/audit.log" }, 5);

# the master makes the new file, then signals the worker, which may take a
# request before it reopens: start sessions until one is logged there
my $bob;
for my $try (1 .. 10) {
    api('bob', 'start', { command => 'true', wait_ms => 0 });
    last if $bob = $t->wait_until(sub {
        ($t->read_file('audit.log') // '') =~ /"principal":"bob"/ }, 1);
}
ok($bob, 'after nginx -s reopen the log goes on in a new file');
my (undef, $later) = api('bob', 'start', { command => 'true', wait_ms => 0 });
ok($later && $t->wait_until(sub {
        ($t->read_file('audit.log') // '') =~ /"session":"\Q$later->{id}\E"/ },
        5), 'and the lines after it');

my $acc = $t->read_file('pty-access.log');
like($acc, qr/p=alice s=\Q$s->{session_id}\E c=c-\d+ r=controller t=trace-alice-1/,
    'the access log has $pty_principal, session, client, role and trace');

my $b64 = encode_base64url($tok{alice});
ok(index($acc, $tok{alice}) < 0 && index($acc, $b64) < 0,
    'the access log holds no token');
my @leaks = grep { index($_, $tok{alice}) >= 0 || index($_, $b64) >= 0 }
    split /\n/, $t->read_file('debug.log');
# nginx's own: its header dumps, the proxied request, the script engine
my @ours = grep { !/ http (?:proxy )?header: | http script var: |^[A-Z][\w-]*: / }
    @leaks;
is(scalar @ours, 0, 'the debug log holds the token only in nginx\'s own '
    . 'header dumps') or diag(join "\n", @ours[0 .. 4]);

$c->disconnect;
$o->disconnect;
