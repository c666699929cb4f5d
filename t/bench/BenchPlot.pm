package BenchPlot;

# BenchPlot - small hand-written SVG charts for the benchmark table
# (no dependencies beyond Perl itself).
#
#   use BenchPlot qw(svg_bars svg_lines cdf);
#
#   # grouped bars: one group per category, one bar per series
#   svg_bars('docs/img/throughput.svg',
#       title => 'Throughput by content type', ylabel => 'MB/s',
#       groups => ['plain text', 'CJK/emoji'],
#       series => [ { name => 'raw PTY', values => [64, 64] },
#                   { name => 'pty-ws/v1', values => [31, 28] } ]);
#
#   # lines through points: e.g. MB/s per client by number of observers
#   svg_lines('docs/img/fanout.svg',
#       title => 'Fan-out', xlabel => 'observers', ylabel => 'MB/s',
#       series => [ { name => 'per client', points => [[1, 30], [32, 20]] } ],
#       xlog => 1);
#
#   # a latency CDF: cdf() turns samples into points for svg_lines
#   svg_lines('docs/img/echo.svg', title => 'Echo', xlabel => 'us',
#       ylabel => 'fraction', xlog => 1, ymax => 1,
#       marks => [[150, 'p99 target']],
#       series => [ { name => 'idle', points => cdf(@samples) } ]);

use strict;
use warnings;

use Exporter qw(import);
use POSIX qw(floor ceil);

our @EXPORT_OK = qw(svg_bars svg_lines cdf);

my @COLOURS = ('#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd',
    '#8c564b', '#17becf');

my ($W, $H) = (640, 360);
my ($L, $R, $T, $B) = (64, 150, 36, 48);     # margins: room for the legend

# samples (any order) -> [[value, fraction at or below it], ...]
sub cdf {
    my @s = sort { $a <=> $b } @_;
    my $n = @s or return [];
    my $step = @s > 400 ? int(@s / 400) : 1;
    my @p;
    for (my $i = 0; $i < $n; $i += $step) {
        push @p, [$s[$i], ($i + 1) / $n];
    }
    push @p, [$s[-1], 1];
    return \@p;
}

sub svg_bars {
    my ($file, %o) = @_;
    my @groups = @{ $o{groups} };
    my @series = @{ $o{series} };
    my $max = 0;
    for my $s (@series) {
        $max = $_ > $max ? $_ : $max for grep { defined } @{ $s->{values} };
    }
    my ($top, @ticks) = ticks(0, $max || 1);
    my $svg = head(%o);
    $svg .= yaxis(0, $top, \@ticks, 0, $o{ylabel});

    my $pw = $W - $L - $R;
    my $gw = $pw / (@groups || 1);
    my $bw = $gw * 0.8 / (@series || 1);
    for my $g (0 .. $#groups) {
        my $x0 = $L + $g * $gw + $gw * 0.1;
        for my $k (0 .. $#series) {
            my $v = $series[$k]{values}[$g] // next;
            my $h = ($H - $T - $B) * $v / $top;
            $svg .= sprintf('<rect x="%.1f" y="%.1f" width="%.1f" '
                . 'height="%.1f" fill="%s"><title>%s: %s</title></rect>' . "\n",
                $x0 + $k * $bw, $H - $B - $h, $bw - 1, $h,
                $COLOURS[$k % @COLOURS], esc($series[$k]{name}), $v);
        }
        $svg .= text($x0 + $gw * 0.4, $H - $B + 16, $groups[$g], 'middle');
    }
    $svg .= legend(map { $_->{name} } @series);
    write_svg($file, $svg);
}

sub svg_lines {
    my ($file, %o) = @_;
    my @series = grep { @{ $_->{points} } } @{ $o{series} };
    my @x = map { $_->[0] } map { @{ $_->{points} } } @series;
    my @y = map { $_->[1] } map { @{ $_->{points} } } @series;
    @x or @x = (1);
    @y or @y = (1);
    my ($xmin, $xmax) = (min(@x), max(@x));
    my ($ytop, @yt) = ticks(0, $o{ymax} // max(@y) || 1);

    my ($fx, @xt);
    if ($o{xlog}) {
        $xmin = 10 ** floor(log10($xmin > 0 ? $xmin : 1));
        $xmax = 10 ** ceil(log10($xmax > $xmin ? $xmax : $xmin * 10));
        for (my $v = $xmin; $v <= $xmax * 1.0001; $v *= 10) {
            push @xt, $v;
        }
        $fx = sub { (log10($_[0] > $xmin ? $_[0] : $xmin) - log10($xmin))
            / (log10($xmax) - log10($xmin)) };
    } else {
        ($xmax, @xt) = ticks(0, $xmax || 1);
        $xmin = 0;
        $fx = sub { $_[0] / $xmax };
    }

    my $pw = $W - $L - $R;
    my $ph = $H - $T - $B;
    my $svg = head(%o);
    $svg .= yaxis(0, $ytop, \@yt, 1, $o{ylabel});
    for my $v (@xt) {
        my $x = $L + $pw * $fx->($v);
        $svg .= sprintf('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" '
            . 'stroke="#ddd"/>' . "\n", $x, $T, $x, $H - $B);
        $svg .= text($x, $H - $B + 16, num($v), 'middle');
    }
    $svg .= text($L + $pw / 2, $H - 10, $o{xlabel} // '', 'middle');

    # marks => [[x, label], ...]: dashed verticals, e.g. the targets
    for my $m (@{ $o{marks} // [] }) {
        my $x = $L + $pw * $fx->($m->[0]);
        $svg .= sprintf('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" '
            . 'stroke="#555" stroke-dasharray="4 3"/>' . "\n",
            $x, $T, $x, $H - $B);
        $svg .= text($x + 3, $T + 12, $m->[1], 'start', 'fill="#555"');
    }

    for my $k (0 .. $#series) {
        my @pts = map {
            sprintf('%.1f,%.1f', $L + $pw * $fx->($_->[0]),
                $H - $B - $ph * ($_->[1] > $ytop ? $ytop : $_->[1]) / $ytop)
        } @{ $series[$k]{points} };
        $svg .= sprintf('<polyline fill="none" stroke="%s" stroke-width="2" '
            . 'points="%s"/>' . "\n", $COLOURS[$k % @COLOURS], "@pts");
        if (@pts <= 20) {
            for (@pts) {
                my ($cx, $cy) = split /,/;
                $svg .= sprintf('<circle cx="%s" cy="%s" r="3" fill="%s"/>'
                    . "\n", $cx, $cy, $COLOURS[$k % @COLOURS]);
            }
        }
    }
    $svg .= legend(map { $_->{name} } @series);
    write_svg($file, $svg);
}

# a round top above max and the ticks from lo up to it
sub ticks {
    my ($lo, $max) = @_;
    my $raw = ($max - $lo) / 5;
    my $mag = 10 ** floor(log10($raw));
    my ($step) = grep { $_ * $mag >= $raw } 1, 2, 2.5, 5, 10;
    $step *= $mag;
    my $top = $lo + $step * ceil(($max - $lo) / $step - 1e-9);
    my @t;
    for (my $v = $lo; $v <= $top + $step / 2; $v += $step) {
        push @t, $v;
    }
    return ($top, @t);
}

sub yaxis {
    my ($lo, $top, $ticks, $grid, $label) = @_;
    my $ph = $H - $T - $B;
    my $s = sprintf('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#000"/>'
        . "\n", $L, $H - $B, $W - $R, $H - $B);
    $s .= sprintf('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#000"/>'
        . "\n", $L, $T, $L, $H - $B);
    for my $v (@$ticks) {
        my $y = $H - $B - $ph * ($v - $lo) / ($top - $lo);
        $s .= sprintf('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" '
            . 'stroke="#ddd"/>' . "\n", $L, $y, $W - $R, $y) if $grid;
        $s .= text($L - 6, $y + 4, num($v), 'end');
    }
    $s .= sprintf('<text x="16" y="%d" transform="rotate(-90 16 %d)" '
        . 'text-anchor="middle">%s</text>' . "\n",
        $T + $ph / 2, $T + $ph / 2, esc($label // ''));
    return $s;
}

sub legend {
    my (@names) = @_;
    my $s = '';
    for my $k (0 .. $#names) {
        my $y = $T + 10 + $k * 20;
        $s .= sprintf('<rect x="%d" y="%d" width="12" height="12" '
            . 'fill="%s"/>' . "\n", $W - $R + 12, $y - 10,
            $COLOURS[$k % @COLOURS]);
        $s .= text($W - $R + 30, $y, $names[$k], 'start');
    }
    return $s;
}

sub head {
    my (%o) = @_;
    return qq{<svg xmlns="http://www.w3.org/2000/svg" width="$W" }
        . qq{height="$H" viewBox="0 0 $W $H" font-family="sans-serif" }
        . qq{font-size="12">\n<rect width="$W" height="$H" fill="#fff"/>\n}
        . text($L + ($W - $L - $R) / 2, 20, $o{title} // '', 'middle',
            'font-weight="bold"');
}

sub text {
    my ($x, $y, $t, $anchor, $extra) = @_;
    return sprintf('<text x="%.1f" y="%.1f" text-anchor="%s"%s>%s</text>'
        . "\n", $x, $y, $anchor, $extra ? " $extra" : '', esc($t));
}

sub write_svg {
    my ($file, $svg) = @_;
    open my $fh, '>', $file or die "$file: $!\n";
    print $fh $svg, "</svg>\n";
    close $fh or die "$file: $!\n";
}

sub num {
    my ($v) = @_;
    return $v >= 1e6 ? ($v / 1e6) . 'M' : $v >= 1e4 ? ($v / 1e3) . 'k'
        : 0 + sprintf('%.3g', $v);
}

sub esc {
    my ($t) = @_;
    $t =~ s/&/&amp;/g;
    $t =~ s/</&lt;/g;
    $t =~ s/>/&gt;/g;
    return $t;
}

sub log10 { return log($_[0]) / log(10) }
sub min { my $m = shift; $_ < $m and $m = $_ for @_; return $m }
sub max { my $m = shift; $_ > $m and $m = $_ for @_; return $m }

1;
