package Test::Nginx::Web;

# Test::Nginx::Web - what the tests of the web client share: where the npm
# package is, whether its dependencies are installed (make web), the demo's
# own config (conf/demo.conf) under the harness, running node scripts.
#
#   my $web = web_ready();          # skips the test without node_modules
#   my $t = demo_nginx();           # conf/demo.conf, harness paths and port
#   my ($rc, $out) = run_cmd("cd $web && npm pack");
#   node_tap($out);                 # each node:test result as a test here

use strict;
use warnings;

use Exporter qw(import);
use Test::More ();

use Test::Nginx;

our @EXPORT_OK = qw(web_ready run_cmd web_dir demo_nginx node_tap);

sub web_dir { return "$Test::Nginx::REPO_ROOT/src/web" }

sub web_ready {
    my $web = web_dir();
    Test::More::plan(skip_all => 'node is not installed (scripts/install-deps.sh)')
        unless system('command -v node >/dev/null 2>&1') == 0;
    Test::More::plan(skip_all => "no $web/node_modules: run make web")
        unless -d "$web/node_modules/\@xterm/headless";
    return $web;
}

# conf/demo.conf as make run fills it in, with the harness's globals
# (module, pid, error log) in place of its own and its port
sub demo_nginx {
    my $t = Test::Nginx->new()->has(qw/http/);
    $t->master_process('on');
    my $root = $Test::Nginx::REPO_ROOT;
    my $dir = $t->testdir;
    mkdir "$dir/$_" for qw(logs tmp archive);
    # the archive's directory, the workers' (nobody when root runs this)
    chmod 0777, "$dir/archive";
    open my $fh, '<', "$root/conf/demo.conf" or die "conf/demo.conf: $!\n";
    my $conf = do { local $/; <$fh> };
    close $fh;
    $conf =~ s/^\s*(?:load_module|error_log|pid|daemon)\s[^;]*;[^\n]*\n//mg;
    $conf = "%%TEST_GLOBALS%%\n" . $conf;
    my $users = $> == 0 ? 'pty_user_range 3000000 3009999;' : '';
    $conf =~ s/%%USERS%%/$users/g;
    $conf =~ s/%%PREFIX%%/$dir/g;
    $conf =~ s/%%ROOT%%/$root/g;
    $conf =~ s/%%PORT%%/%%PORT_8080%%/g;
    # the token make run would print (t->{demo_token}, for the page's URL)
    my $token = join '', map { ('a' .. 'z', 'A' .. 'Z', 0 .. 9)[rand 62] } 1 .. 32;
    $t->{demo_token} = $token;
    $conf =~ s/%%TOKEN%%/$token/g;
    die "conf/demo.conf: a placeholder this harness does not fill: $1\n"
        if $conf =~ /%%(?!TEST_GLOBALS|PORT_8080)(\w+)%%/;
    $t->write_file_expand('nginx.conf', $conf);
    return $t;
}

# node --test --test-reporter=tap output: one test here per top-level
# result, with the failure's details
sub node_tap {
    my ($out) = @_;
    my ($n, $block) = (0, '');
    my $tb = Test::More->builder;
    for my $line (split /\n/, $out) {
        if ($line =~ /^(not )?ok \d+ - (.*?)(?: # SKIP.*)?$/) {
            $n++;
            $tb->ok(!$1, $2) or Test::More::diag($block);
            $block = '';
        } else {
            $block .= "$line\n";
        }
    }
    $tb->ok(0, 'node ran its tests') or Test::More::diag($out) unless $n;
    return $n;
}

# the command's exit code and its output (stdout and stderr)
sub run_cmd {
    my ($cmd) = @_;
    my $out = `($cmd) 2>&1`;
    return ($? >> 8, $out);
}

1;
