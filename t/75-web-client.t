#!/usr/bin/perl

# The client library (src/web, npm package ngx-pty-client): typechecked
# with tsc, packed with npm pack, and its own tests run from the tarball
# against this nginx: join, echo, observer, reconnect with replay, replay
# out of range, resize, repaint, Closed, the token in the subprotocol list.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Test::More;
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::Web qw(web_ready run_cmd);

my $web = web_ready();

# a ring of 64k: a few thousand lines while a client is away are more than
# it keeps (replay out of range); the log shows the subprotocol header
# (and a small sndbuf: a client that stops reading lags behind the ring)
my $t = pty_nginx(
    listen_opts => 'sndbuf=16k',
    extra_http => 'log_format proto \'$request "$http_sec_websocket_protocol"\';'
        . ' access_log %%TESTDIR%%/proto.log proto;',
    extra_loc => 'pty_ring_size 64k; pty_ring_max_size 64k;'
        . ' pty_replay_buffer_frames 10;');
$t->plan(6)->run();

my ($rc, $out) = run_cmd("cd $web && npx --no-install tsc --noEmit -p tsconfig.json");
is($rc, 0, 'tsc --noEmit: the JSDoc types check') or diag($out);

# the tarball, as npm would publish it
my $dir = $t->testdir;
($rc, $out) = run_cmd("cd $web && npm pack --silent --pack-destination $dir");
is($rc, 0, 'npm pack') or diag($out);
my ($tgz) = glob("$dir/ngx-pty-client-*.tgz");
($rc, $out) = run_cmd("cd $dir && tar xzf $tgz");
my @files = split /\n/, `tar tzf $tgz`;
ok((grep { m{^package/types/node\.d\.ts$} } @files)
    && (grep { m{^package/lib/browser\.js$} } @files)
    && !(grep { m{node_modules|\.tgz$} } @files),
    'the tarball has lib/, the generated types, no node_modules')
    or diag(join "\n", @files);

# its dependencies: the ones make installed for src/web
symlink("$web/node_modules", "$dir/package/node_modules")
    or die "symlink: $!\n";

($rc, $out) = run_cmd("cd $dir/package && npx --no-install tsc --noEmit"
    . " --strict --module NodeNext --moduleResolution NodeNext"
    . " --target ES2022 --types node test/consumer.ts");
is($rc, 0, 'a TypeScript consumer compiles against the packed types')
    or diag($out);

my $base = 'http://127.0.0.1:' . port(8080);
($rc, $out) = run_cmd("cd $dir/package && PTY_TEST_BASE=$base"
    . " PTY_TEST_ACCESS_LOG=$dir/proto.log"
    . " node --test --test-reporter=tap test/");
is($rc, 0, 'the package tests pass from the tarball') or diag($out);
my ($pass) = $out =~ /^# pass (\d+)$/m;
my ($skipped) = $out =~ /^# skipped (\d+)$/m;
ok(($pass // 0) >= 14 && ($skipped // 1) == 0,
    'all ran, none skipped (pass ' . ($pass // '?') . ')')
    or diag($out);
