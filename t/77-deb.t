#!/usr/bin/perl

# make deb: the Debian package built with dh and dh-sequence-nginx,
# installed into the system (dpkg -i), its snippet enabled in
# /etc/nginx/modules-enabled, loaded by Debian's /usr/sbin/nginx from the
# installed path (nginx -t), serving a session.  The system nginx is never
# started: the test runs it with its own prefix and config, and purges the
# package afterwards unless it was installed before.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Test::More;
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::Web qw(run_cmd);

plan(skip_all => 'installing a package needs root (run as root, or check'
    . ' make deb by hand)') if $> != 0;
plan(skip_all => 'no dpkg-buildpackage or dh_nginx: scripts/install-deps.sh deb')
    unless -x '/usr/bin/dpkg-buildpackage' && -x '/usr/bin/dh_nginx';
plan(skip_all => 'TEST_NGINX_BINARY is not Debian\'s nginx')
    if ($ENV{TEST_NGINX_BINARY} // '/usr/sbin/nginx') ne '/usr/sbin/nginx';

my $root = $Test::Nginx::REPO_ROOT;
# under make test: a make of its own, not the running one's flags
delete @ENV{qw(MAKEFLAGS MFLAGS MAKELEVEL)};
my $pkg = 'libnginx-mod-http-pty';
my $so = '/usr/lib/nginx/modules/ngx_pty_module.so';
my $enabled = '/etc/nginx/modules-enabled/50-mod-http-pty.conf';

my ($rc, $out) = run_cmd("make -C $root --no-print-directory -s deb");
is($rc, 0, 'make deb') or diag($out);
my ($deb) = $out =~ m{(\S+/${pkg}_[^_/\s]+_[a-z0-9]+\.deb)};
ok($deb && -f $deb, "it names ${pkg}_<version>_<arch>.deb") or diag($out);

my $before = `dpkg-query -W -f='\${Status}' $pkg 2>/dev/null` =~ /ok installed/;
($rc, $out) = run_cmd("DEBIAN_FRONTEND=noninteractive dpkg -i $deb");
is($rc, 0, 'dpkg -i') or diag($out);
END { system("dpkg --purge $pkg >/dev/null 2>&1") if $> == 0 && !$before }

ok(-f $so, "the module is in $so");
is(readlink($enabled), '/usr/share/nginx/modules-available/mod-http-pty.conf',
    'the snippet is enabled in modules-enabled');
like(`cat $enabled`, qr{^load_module modules/ngx_pty_module\.so;$}m,
    'the snippet loads the module from the modules directory');

# the installed snippet, as /etc/nginx/nginx.conf includes it; "modules/"
# is relative to the prefix, as Debian's /usr/share/nginx/modules is
my $t = Test::Nginx->new()->has(qw/http/)->no_module;
symlink('/usr/lib/nginx/modules', $t->testdir . '/modules')
    or die "symlink: $!\n";
$t->write_file_expand('nginx.conf', <<"CONF");
include $enabled;
%%TEST_GLOBALS%%

events {}

http {
    %%TEST_GLOBALS_HTTP%%
    pty_zone pty:16m;
    pty_instance_id test;
    pty_env HOME=%%TESTDIR%%;
    pty_user_range 3000000 3009999;

    server {
        listen 127.0.0.1:%%PORT_8080%%;
        client_body_buffer_size 1m;
        pty_auth off;              # loopback test: no authentication
        location /agents/ { pty_attach; }
        location /pty/    { pty_api; }
    }
}
CONF

my $dir = $t->testdir;
($rc, $out) = run_cmd("/usr/sbin/nginx -t -p $dir/ -c nginx.conf -e $dir/t.log");
is($rc, 0, 'nginx -t loads the installed module') or diag($out);
like($out, qr/test is successful/, 'nginx -t: test is successful');

$t->run();
my $s = start_session($t, 'PS1="ready\$ " exec bash --norc --noprofile -i');
my ($ws) = attach_join($t, $s);
send_input($ws, "echo \$((6*7))\r");
like(read_output($ws, qr/42\r\n/), qr/42\r\n/,
    'the installed module serves a session');
$ws->close;
$t->stop;

SKIP: {
    skip 'the package was installed before the test: left installed', 2
        if $before;
    ($rc, $out) = run_cmd("dpkg --purge $pkg");
    is($rc, 0, 'dpkg --purge') or diag($out);
    ok(!-e $so && !-l $enabled, 'the module and its snippet are gone');
}

done_testing();
