package Test::Nginx::Web;

# Test::Nginx::Web - what the tests of the web client share: where the npm
# package is, whether its dependencies are installed (make web), running a
# command for its output.
#
#   my $web = web_ready();          # skips the test without node_modules
#   my ($rc, $out) = run_cmd("cd $web && npm pack");

use strict;
use warnings;

use Exporter qw(import);
use Test::More ();

use Test::Nginx;

our @EXPORT_OK = qw(web_ready run_cmd web_dir);

sub web_dir { return "$Test::Nginx::REPO_ROOT/src/web" }

sub web_ready {
    my $web = web_dir();
    Test::More::plan(skip_all => 'node is not installed (scripts/install-deps.sh)')
        unless system('command -v node >/dev/null 2>&1') == 0;
    Test::More::plan(skip_all => "no $web/node_modules: run make web")
        unless -d "$web/node_modules/\@xterm/headless";
    return $web;
}

# the command's exit code and its output (stdout and stderr)
sub run_cmd {
    my ($cmd) = @_;
    my $out = `($cmd) 2>&1`;
    return ($? >> 8, $out);
}

1;
