#!/usr/bin/perl

# The archive (pty_archive): nginx -t refuses a directory the workers
# cannot write; the writer is a process of its own, of the workers' user;
# the database is in WAL mode at the current schema version; every frame a
# client saw is stored with its sequence, id, kind and payload, and the
# session with its command, principal, start, end and exit code; a reload
# keeps the writer; a stop stores the Closed instance_terminated of the
# sessions still running.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use MIME::Base64 qw(decode_base64);
use Test::More;
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::PtyExt;
use Test::Nginx::PtyAPI qw(api_call);
use Test::Nginx::PtyArchive;

my $t = pty_nginx(extra_http => 'pty_archive %%TESTDIR%%/archive/pty.db;',
    auth => 'pty_principal $http_x_user; '
        . 'pty_scopes "pty:observe pty:control pty:start pty:kill";');
archive_dir($t);

# nginx -t: what a worker could not write is refused, with the reason
sub conf_test {
    my ($path) = @_;
    my $conf = $t->read_file('nginx.conf');
    $conf =~ s/pty_archive \S+;/pty_archive $path;/;
    $t->write_file('check.conf', $conf);
    my $dirp = $t->testdir;
    my $out = `$Test::Nginx::NGINX -t -p $dirp/ -c check.conf -e $dirp/check.log 2>&1`;
    return ($? >> 8, $out);
}

$t->plan(20);
$t->allow_log(qr/\[emerg\].*"pty_archive"/);
$t->_rewrite_templates;

my ($rc, $out) = conf_test($t->testdir . '/nowhere/pty.db');
isnt($rc, 0, 'nginx -t: a missing directory is refused');
like($out, qr/directory "[^"]*nowhere" of "pty_archive" .* is not there/,
    'and named');

SKIP: {
    skip 'as root only: the workers are another user', 2 unless $> == 0;
    my $root = $t->testdir . '/rootonly';
    mkdir $root;
    chmod 0755, $root;
    ($rc, $out) = conf_test("$root/pty.db");
    isnt($rc, 0, 'nginx -t: a directory the workers cannot write');
    like($out, qr/not writable by the workers' user "nobody"/,
        'is refused, naming the user');
}

$t->run();

my $writer = $t->wait_until(sub { archive_writer($t) });
ok($writer, 'the archive writer runs');
my ($uid) = ($t->read_file("/proc/$writer/status") // '') =~ /^Uid:\s+(\d+)/m;
is($uid, workers_uid(), 'as the workers\' user');

# a session a client watches, its output in many frames, ending by itself
my ($st, $s) = api_call($t->port(8080), '/pty/start', {
    command => 'for i in $(seq 1 40); do echo "line $i"; sleep 0.01; done; '
        . 'exit 3', wait_ms => 0 }, headers => { 'X-User' => 'alice' });
is($st, 200, 'started');

my $ws = attach($t, $s, headers => { 'X-User' => 'alice' });
$ws->recv_json(5);
join_flush($ws, role => 'observer', replay_from => 0);
my @seen = $ws->recv_until(sub { kind($_[0]) eq 'Closed' }, 15);
my @frames = grep { defined $_->{sequence} } $ws->json_seen;
my ($closed) = grep { kind($_) eq 'Closed' } @frames;
ok($closed, 'the session ended');

wait_stored($t, $s->{session_id}, $closed->{sequence});

is(sql_one($t, 'PRAGMA journal_mode'), 'wal', 'WAL mode');
is(sql_one($t, 'PRAGMA user_version'), 1, 'schema version 1');

my ($row) = sql($t, 'SELECT name, command, principal, started, ended, '
    . "exit_code, reason FROM sessions WHERE uuid = '$s->{session_id}'");
is("pty-$row->[0]", $s->{id}, 'the session by its name');
like($row->[1], qr/^for i in/, 'its command');
is($row->[2], 'alice', 'its principal');
ok($row->[4] >= $row->[3] && $row->[3] > 1e12, 'start and end, unix ms');
is_deeply([@$row[5, 6]], [3, 'normal'], 'exit code and reason');

# what the client saw (every frame but its own RoleAssigned) is stored
my %db = map { $_->[0] => $_ } sql($t, 'SELECT f.seq, hex(f.id), f.kind, '
    . 'hex(f.data) FROM frames f JOIN sessions s ON s.sid = f.sid WHERE '
    . "s.uuid = '$s->{session_id}'");
my %kinds = (Output => 1, Resize => 2, RoleAssigned => 3,
    MembershipChanged => 4, Keyframe => 5, Closed => 6);
my @bad = grep {
    my $d = $db{$_->{sequence}};
    (my $id = uc $_->{id}) =~ s/-//g;
    !$d || $d->[1] ne $id || $d->[2] != $kinds{kind($_)}
        || (kind($_) eq 'Output'
            && pack('H*', $d->[3]) ne decode_base64($_->{payload}{data}))
} grep { kind($_) ne 'RoleAssigned' } @frames;
is(scalar @bad, 0, scalar(@frames) . ' frames stored with their sequence, '
    . 'id, kind and bytes');

# a reload keeps the writer; a stop stores the running sessions' end
$t->reload() or die "reload failed\n";
ok(Test::Nginx::_alive($writer), 'a reload keeps the writer');

my ($st2, $s2) = api_call($t->port(8080), '/pty/start', {
    command => 'echo started; sleep 100', wait_for => 'started' },
    headers => { 'X-User' => 'bob' });
$t->stop();

($row) = sql($t, 'SELECT ended IS NOT NULL, exit_code, reason, last_seq '
    . "FROM sessions WHERE uuid = '$s2->{session_id}'");
is_deeply([@$row[0 .. 2]], [1, '', 'instance_terminated'],
    'a session nginx stopped: ended, instance_terminated');
like(sql_one($t, "SELECT data FROM frames f JOIN sessions s ON "
    . "s.sid = f.sid WHERE s.uuid = '$s2->{session_id}' AND f.kind = 6"),
    qr/"reason":"instance_terminated"/, 'its Closed frame is stored');
ok($t->wait_until(sub { !Test::Nginx::_alive($writer) }, 5),
    'the writer ends with nginx');
