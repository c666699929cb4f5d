#!/usr/bin/perl

# Output the scrollback lost before the agent read it: the text never
# joins the lines around the loss, says where and how much was lost, and
# goes on at a line boundary.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Test::More;
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::PtyAgent;

my $t = pty_nginx();
$t->plan(9)->run();

# the issue's reproduction: "total=" then 100,000 lines, read 2 s later
my $s = agent_start($t,
    'printf "total="; sleep 1; seq 1 100000; echo END; sleep 5',
    wait_for => 'total=');
like($s->{output}, qr/total=$/, 'start: the unfinished line');

$t->wait_until(sub { agent($t, 'read', { id => $s->{id} })->{screen}
    =~ /^END$/m }, 15);

my ($text, $missed) = ($s->{output}, 0);
for (1 .. 100) {
    my $r = agent($t, 'write', { id => $s->{id}, wait_ms => 0 });
    last unless $r->{_status} == 200;
    $text .= $r->{output};
    $missed += $r->{missed};
    last unless $r->{more};
}

my @lines = split /\n/, $text;
is($lines[0], 'total=', 'the line before the loss ends as it was');
like($lines[1], qr/^\[pty: (\d+) bytes of output missed\]$/,
    'a marker line follows it');
my ($marked) = $lines[1] =~ /(\d+)/;
is($marked, $missed, 'the marker counts what "missed" reports');
ok($missed > 200000, "most of 588,895 bytes were lost ($missed)");
is($lines[-1], 'END', 'the text goes on to the end');

# after the marker only whole lines the program printed, in order
my @after = @lines[2 .. $#lines - 1];
my $bad = grep { !/^\d+$/ } @after;
is($bad, 0, 'no line was made up of two');
my $gaps = grep { $after[$_] != $after[$_ - 1] + 1 } 1 .. $#after;
is($gaps, 0, 'consecutive numbers after the marker');
is($after[-1], 100000, 'up to the last');
