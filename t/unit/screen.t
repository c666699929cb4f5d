#!/usr/bin/perl
# Runs the C unit tests of src/ngx_pty_screen.c (built by make as build/screen_test).
use strict;
use warnings;
use FindBin;
my $bin = "$FindBin::Bin/../../build/screen_test";
if (!-x $bin) {
    print "1..0 # SKIP $bin not built (run make)\n";
    exit 0;
}
exec $bin or die "exec $bin: $!";
