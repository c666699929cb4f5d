package BenchStats;

# BenchStats - the summaries every bench table prints.
#
#   median(@values)               the middle value (the lower of two)
#   mmm(\@values, '%.2f')         "min/median/max" in that format

use strict;
use warnings;

use Exporter qw(import);

our @EXPORT_OK = qw(median mmm);

sub median {
    my @s = sort { $a <=> $b } @_;
    return $s[$#s / 2];
}

sub mmm {
    my ($v, $fmt) = @_;
    $fmt //= '%.0f';
    my @s = sort { $a <=> $b } @$v;
    return sprintf("$fmt/$fmt/$fmt", $s[0], median(@s), $s[-1]);
}

1;
