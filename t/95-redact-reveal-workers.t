#!/usr/bin/perl

# pty:reveal across workers: the ledger of what redaction hid is in the
# zone, so a principal holding pty:reveal sees the secret whichever
# worker serves its WebSocket, the terminal's owner or another; one
# without it sees the mask on both.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Test::More;
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::PtyAPI qw(api_call);
use JSON::PP ();

my $key = 'AKIAIOSFODNN7EXAMPLE';

my $t = pty_nginx(workers => 2, reuseport => 1,
    extra_loc => 'pty_redact on;',
    extra_server => <<'SERVER');
        location /admin/agents/ {
            pty_attach;
            pty_auth on;
            pty_principal alice;
            pty_scopes "pty:admin pty:reveal";
        }
SERVER

$t->plan(5)->run();

$t->write_file('show.sh', "read x\nprintf 'key %s\\n' '$key'\n"
    . "echo after-secret\nexec cat\n");
my $s = start_session($t, 'bash ' . $t->testdir . '/show.sh');
my $admin = { %$s, attach_path => '/admin' . $s->{attach_path} };

my @revealed = attach_workers($t, $admin, 2);
my @masked = attach_workers($t, $s, 2);
is(scalar(@revealed) + scalar(@masked), 4,
    'two of each, on two workers each');
join_session($_->[0], role => 'observer') for @revealed, @masked;

api_call($t->port(8080), '/pty/write',
    { id => $s->{id}, input => 'go', submit => JSON::PP::true() });

for my $w (@revealed) {
    like(read_output($w->[0], qr/after-secret/), qr/key \Q$key\E/,
        "pty:reveal sees it on worker $w->[2]");
}
for my $w (@masked) {
    my $out = read_output($w->[0], qr/after-secret/);
    ok($out =~ /key \[REDACTED\]/ && index($out, $key) < 0,
        "without it, the mask on worker $w->[2]") or diag $out;
}
