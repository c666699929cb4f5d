#!/usr/bin/perl

# The build is incremental: after make, a second make has nothing to do
# (make -q), and a changed source file recompiles that file alone and
# relinks the module; the nginx tree is not configured again.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Test::More;
use Test::Nginx;

my $root = $Test::Nginx::REPO_ROOT;
# under make test: a make of its own, not the running one's flags
delete @ENV{qw(MAKEFLAGS MFLAGS MAKELEVEL)};
plan(skip_all => 'no configured tree: run make first')
    unless -f "$root/build/nginx-src/objs/Makefile";
plan(skip_all => 'TEST_NGINX_MODULE names another build')
    if $ENV{TEST_NGINX_MODULE};

sub mk {
    my ($args) = @_;
    my $out = `make -C '$root' --no-print-directory $args 2>&1`;
    return ($? >> 8, $out);
}

my ($rc, $built) = mk('-s built');
my @built = split ' ', $built;
ok(@built >= 3 && (grep { $_ eq 'build/ngx_pty_module.so' } @built),
    'make built names the module and the tools') or diag($built);

# bring it up to date (what make test did already), then nothing to do
($rc, my $out) = mk("@built");
is($rc, 0, 'make') or diag($out);
($rc, $out) = mk("-q @built");
is($rc, 0, 'make -q: a second make has nothing to do') or diag(mk("-n @built"));

my $t0 = time;
($rc, $out) = mk('');
is($rc, 0, 'a second make succeeds');
unlike($out, qr/(?:^|\s)-c\s|configured nginx|-o build\//, 'and builds nothing')
    or diag($out);
cmp_ok(time - $t0, '<', 60, 'in seconds, not minutes');

# one changed file: that object and the module, nothing else
my $src = "$root/src/ngx_pty_util.c";
utime(undef, undef, $src) or die "utime $src: $!\n";
my $conf_mtime = (stat "$root/build/nginx-src/objs/Makefile")[9];
($rc, $out) = mk("@built");
is($rc, 0, 'make after touching src/ngx_pty_util.c') or diag($out);
my @objs = $out =~ m{-o\s+objs/addon/\S*?/?([\w.]+\.o)\b}g;
is_deeply(\@objs, ['ngx_pty_util.o'], 'that file alone is compiled')
    or diag($out);
like($out, qr{-o\s+objs/ngx_pty_module\.so}, 'the module is relinked');
is((stat "$root/build/nginx-src/objs/Makefile")[9], $conf_mtime,
    'nginx is not configured again');
($rc, $out) = mk("-q @built");
is($rc, 0, 'and then up to date again');

done_testing();
