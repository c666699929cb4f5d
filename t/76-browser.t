#!/usr/bin/perl

# The demo page in a real browser: Debian's chromium driven by
# playwright-core, against conf/demo.conf (t/web/browser.test.mjs): echo
# hello, an observer that sees the same screen and cannot type, a reload
# of nginx that closes the sockets (reconnect, replay, identical screens),
# top across a reload of the observer page, a window resize seen by stty.
# A failed step leaves screenshots in the test directory (kept).

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Test::More;
use Test::Nginx;
use Test::Nginx::Web qw(web_ready run_cmd demo_nginx node_tap);

web_ready();
my $chromium = $ENV{CHROMIUM} || '/usr/bin/chromium';
plan(skip_all => "no $chromium: scripts/install-deps.sh test installs it")
    unless -x $chromium;

my $t = demo_nginx();
$t->run();

my $dir = $t->testdir;
my $env = join ' ',
    'PTY_BASE=http://127.0.0.1:' . port(8080),
    'PTY_NGINX_PID=' . $t->master_pid,
    "PTY_SHOTS=$dir",
    "PTY_TOKEN=$t->{demo_token}";
my ($rc, $out) = run_cmd("$env node --test --test-reporter=tap"
    . " $FindBin::Bin/web/browser.test.mjs");
node_tap($out);
is($rc, 0, 'node exited 0') or diag($out);

# the token went in fragments, subprotocol lists and headers: the one
# request URL with it is the test's own ?token= (not taken by the page)
my @leaks = grep { m{"[A-Z]+ ([^ "]*)} && index($1, $t->{demo_token}) >= 0 }
    split /\n/, ($t->read_file('logs/access.log') // '');
is(scalar(@leaks), 1, 'the token in no URL the page sent')
    or diag(join "\n", @leaks);
if ($rc) {
    $ENV{TEST_NGINX_LEAVE} = 1;
    diag("screenshots and logs kept in $dir");
}

$t->done_testing;
