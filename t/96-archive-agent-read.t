#!/usr/bin/perl

# The agent API reads what the scrollback lost from the archive: a
# program prints 1.5 MB (six times the 256 KiB scrollback) before the
# agent reads any of it, and paging through write's output gives every
# line, in order, with nothing missed.  Without the archive the same
# reads say what was missed.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Test::More;
use Time::HiRes qw(time sleep);
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::PtyAPI qw(api_call);

my $t = pty_nginx(workers => 2,
    extra_http => '@ARCHIVE@');
my $conf = $t->read_file('nginx.conf');
sub with_archive { archive_conf($t, $conf, $_[0]) }

with_archive(1);
$t->plan(5)->run();

my $port = $t->port(8080);
my $N = 230000;    # 1.5 MB

# everything printed, and stored, before the agent reads
sub flood {
    my $s = start_session($t, "seq 1 $N; echo DONE; exec sleep 1000");
    my $text = $s->{output} // '';
    my $deadline = time + 30 * Test::Nginx::timeout_scale();
    while (time < $deadline) {
        my ($st, $r) = api_call($port, '/pty/read', { id => $s->{id} });
        last if ($r->{screen} // '') =~ /DONE/;
        sleep 0.1;
    }
    # what the scrollback lost is the oldest output, stored long before
    return ($s, $text);
}

sub read_all {
    my ($s, $text) = @_;
    my $missed = 0;
    for (1 .. 1000) {
        my ($st, $j) = api_call($port, '/pty/write',
            { id => $s->{id}, input => '', wait_ms => 0 });
        return (undef, "status $st") unless $st == 200;
        $text .= $j->{output};
        $missed += $j->{missed};
        last if !$j->{more} && $text =~ /DONE\n/;
    }
    return ($text, $missed);
}

my ($s, $first) = flood();
my ($text, $missed) = read_all($s, $first);
is($missed, 0, 'nothing missed');
my $want = join('', map { "$_\n" } 1 .. $N) . "DONE\n";
ok(defined $text && length($text) == length($want),
    'all ' . length($want) . ' bytes');
ok(defined $text && $text eq $want, 'every line, in order');

# the same without the archive: the loss is told
$t->stop();
with_archive(0);
$t->run();
($s, $first) = flood();
($text, $missed) = read_all($s, $first);
cmp_ok($missed, '>', 0, 'without the archive, output is missed');
like($text, qr/\[pty: \d+ bytes of output missed\]/, 'and said so');
