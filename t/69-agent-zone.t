#!/usr/bin/perl

# Ended sessions give the zone back what they no longer need: their frame
# rings down to the final screen and Closed (also when many end at once),
# the output an agent has read, and, once the zone is half full, all but
# the last 16 KiB of output nobody read; a late reader sees that loss
# marked.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Test::More;
use JSON::PP;
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::PtyAgent;

my $t = pty_nginx(zone => '16m');
$t->plan(7)->run();

sub status { agent($t, 'status', {}) }

# all have ended: $n of them, or, once the zone needs the room for those
# still running, fewer (the oldest ended are forgotten)
sub ended {
    my ($n, $fewer) = @_;
    my $s;
    return 1 if $t->wait_until(sub { $s = status();
        $s->{sessions}{running} == 0 && ($s->{sessions}{total} == $n
            || $fewer && $s->{sessions}{total} < $n) }, 30);
    diag("waiting for $n ended: " . JSON::PP->new->canonical
        ->encode($s->{sessions}));
    return 0;
}

# 20 at once, each 109 KB of output, nobody reading
agent($t, 'start', { command => 'seq 1 20000', wait_ms => 0 }) for 1 .. 20;
ok(ended(20), '20 sessions ended');
my $s = status();
ok($s->{buffers}{ring} / 20 <= 4096, 'ring per ended session: '
    . int($s->{buffers}{ring} / 20) . ' bytes');
ok($s->{buffers}{scrollback} / 20 > 100000,
    'their unread output is kept while there is room');

# what an agent read of an ended session goes back to the zone
my $id = agent($t, 'list', { limit => 1 })->{sessions}[0]{id};
my $r = agent($t, 'write', { id => $id, wait_ms => 0 });
$r = agent($t, 'write', { id => $id, wait_ms => 0 }) while $r->{more};
my $after = status()->{buffers}{scrollback};
ok($s->{buffers}{scrollback} - $after > 100000,
    'reading it to the end frees its scrollback');

# the zone half full: more ended sessions keep only a tail
agent($t, 'start', { command => 'seq 1 30000', wait_ms => 0 }) for 1 .. 40;
my $all_ended = ended(60, 'or fewer');
$s = status();
ok($s->{zone}{used} < 12 * 1024 * 1024, 'the zone stays below 3/4 full ('
    . int($s->{zone}{used} / 1024) . ' KiB used)');

# read all 40 late: each ends in full; those cut say so where they were
my ($marked, $whole, $bad) = (0, 0, 0);
for my $e (@{agent($t, 'list', { command => 'seq 1 30000' })->{sessions}}) {
    my $text = '';
    my $r = { more => 1 };
    while ($r->{more}) {
        $r = agent($t, 'write', { id => $e->{id}, wait_ms => 0 });
        $text .= $r->{output} // '';
    }
    my $ok = $text =~ /\n29999\n30000\n$/;
    if ($text =~ /^\[pty: \d+ bytes of output missed\]\n\d+\n/) {
        $marked++;
    } elsif ($text =~ /^1\n2\n/) {
        $whole++;
    } else {
        $ok = 0;
    }
    next if $ok;
    $bad++;
    diag("$e->{id}: " . length($text) . " bytes, HTTP $r->{_status}, state "
        . ($r->{state} // '?') . ', all ended: ' . ($all_ended ? 'yes' : 'no')
        . ', from ' . substr($text, 0, 60) =~ s/\n/|/gr
        . ' to ' . substr($text, -60) =~ s/\n/|/gr);
}
ok($marked >= 1, "cut to their tails: $marked, whole: $whole");
is($bad, 0, 'every one to its last line, a cut one after its marker');
