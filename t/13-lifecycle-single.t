#!/usr/bin/perl

# The lifecycle tests of 12-lifecycle.t with master_process off.

use strict;
use warnings;

use FindBin;

$ENV{PTY_TEST_MASTER} = 'off';
do "$FindBin::Bin/12-lifecycle.t";
die $@ if $@;
