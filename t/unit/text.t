#!/usr/bin/perl
# Runs the C unit tests of src/ngx_pty_text.c (built by make as build/text_test).
use strict;
use warnings;
use FindBin;
my $bin = "$FindBin::Bin/../../build/text_test";
if (!-x $bin) {
    print "1..0 # SKIP $bin not built (run make)\n";
    exit 0;
}
exec $bin or die "exec $bin: $!";
