#!/usr/bin/perl

# After a restart: 5,000 frames a client saw live come back from the
# archive with their sequences and ids (the transcript call, page by
# page); the sessions of the run before are listed (history), a session
# nginx stopped as exited with instance_terminated; the settled text of
# an ended session; each session's access list still applies.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Test::More;
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::PtyExt;
use Test::Nginx::PtyAPI qw(api_call);
use Test::Nginx::PtyArchive;
use JSON::PP ();

my $t = pty_nginx(extra_http => 'pty_archive %%TESTDIR%%/archive/pty.db;',
    auth => 'pty_principal $http_x_user; '
        . 'pty_scopes "pty:observe pty:control pty:start pty:kill";');
archive_dir($t);
$t->plan(16)->run();

my %alice = (headers => { 'X-User' => 'alice' });

sub call {
    my ($name, $args, %o) = @_;
    my ($st, $j, $body) = api_call($t->port(8080), "/pty/$name", $args,
        %alice, %o);
    return ($st, $j);
}

# thousands of short writes: a frame each, or nearly
my ($st, $s) = call('start', { command => 'stty -echo; read go; '
    . q|perl -e '$\|=1; for (1..12000) { print "line $_\n"; |
    . q|select(undef,undef,undef,0.0004) }'; exit 7|, wait_ms => 0 });
my $ws = attach($t, $s, %alice);
$ws->recv_json(5);
join_flush($ws, role => 'controller');
ready_line($ws);
send_input($ws, "\r");
my @live = $ws->recv_until(sub { kind($_[0]) eq 'Closed' }, 60,
    'the end of the output');
my @seen = grep { defined $_->{sequence} && kind($_) ne 'RoleAssigned'
    && !(kind($_) eq 'Keyframe' && $_->{sequence} < $live[0]{sequence}) }
    $ws->json_seen;
my $closed = $seen[-1];
cmp_ok(scalar(grep { kind($_) eq 'Output' } @seen), '>=', 5000,
    scalar(@seen) . ' frames seen live, 5,000 Output at least');

# one still running when nginx stops
my (undef, $s2) = call('start', { command => 'echo up; sleep 100',
    wait_for => 'up' });

wait_stored($t, $s->{session_id}, $closed->{sequence}, 30);
$t->stop();
$t->run();

# the sessions of the run before
my ($hst, $h) = call('history', {});
is($hst, 200, 'history');
my %by = map { $_->{session_id} => $_ } @{$h->{sessions}};
is($by{$s->{session_id}}{state}, 'exited', 'the first: exited');
is_deeply([@{$by{$s->{session_id}}}{qw/reason exit_code/}], ['normal', 7],
    'by itself, exit code 7');
is_deeply([@{$by{$s2->{session_id}}}{qw/state reason/}],
    ['exited', 'instance_terminated'],
    'the one nginx stopped: exited, instance_terminated');
is($by{$s->{session_id}}{principal}, 'alice', 'its principal');

# its frames, page by page, as they were sent
my (@got, $from, $pages);
$from = 1;
while (1) {
    my ($tst, $tr) = call('transcript', { id => $s->{session_id},
        from => $from, max_bytes => 256 * 1024, text => JSON::PP::false() });
    last unless $tst == 200;
    push @got, @{$tr->{frames}};
    $pages++;
    last unless $tr->{more};
    $from = $tr->{next};
}
cmp_ok($pages, '>', 1, "in $pages pages");

my %got = map { $_->{sequence} => $_ } @got;
my @missing = grep { !$got{$_->{sequence}} } @seen;
my @differ = grep { my $g = $got{$_->{sequence}};
    $g && ($g->{id} ne $_->{id} || $g->{ts} ne $_->{ts}
        || Test::Nginx::PtyWS::json_encode($g->{payload})
           ne Test::Nginx::PtyWS::json_encode($_->{payload})) } @seen;
is(scalar @missing, 0, 'every frame seen live is in the transcript');
is(scalar @differ, 0, 'with its id, time and payload');
is_deeply([map { $_->{sequence} } @got],
    [sort { $a <=> $b } map { $_->{sequence} } @got],
    'in sequence order, none twice');
my ($end) = grep { kind($_) eq 'Closed' } @got;
ok($end && !(grep { $_->{sequence} > $end->{sequence}
    && kind($_) eq 'Output' } @got), 'its Closed, after all its output');

# the settled text of the whole session
my ($tst, $tr) = call('transcript', { id => $s->{id}, frames =>
    JSON::PP::false(), max_bytes => 4 * 1024 * 1024 });
is($tst, 200, 'by its pty-N name too');
like($tr->{text}, qr/^line 1\nline 2\n(?:.*\n)*line 12000\n$/,
    'the settled text, every line');
ok(!exists $tr->{frames}, 'without frames when not asked');

# another principal learns nothing of it
($tst) = call('transcript', { id => $s->{session_id} },
    headers => { 'X-User' => 'mallory' });
is($tst, 404, 'another principal: 404');
my (undef, $hm) = call('history', {}, headers => { 'X-User' => 'mallory' });
ok(!(grep { $_->{session_id} eq $s->{session_id} } @{$hm->{sessions}}),
    'nor sees it listed');

sub ready_line {
    my ($w) = @_;
    # read go waits: the prompt is the terminal's silence; a short pause
    $w->recv_json(0.3);
}
