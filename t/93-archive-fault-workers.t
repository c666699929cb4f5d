#!/usr/bin/perl

# A fault seen by two workers ends for both: after a read-only file is
# writable again, the first worker to retry stores what every ring holds,
# and the other, whose retry then finds nothing to store, must still
# store its sessions' next frames (it used to wait for a retry that was
# never set, and stored nothing more).

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Test::More;
use JSON::PP;
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::PtyAPI qw(api_call);

my $t = pty_nginx(workers => 2, reuseport => 1,
    archive => 'batch=20ms');
my $dir = $t->testdir;
$t->allow_log(qr/archive .* cannot be written/);
$t->plan(7)->run();

my $port = $t->port(8080);

# the file exists, then is read-only for the workers from their start
start_session($t, 'true');
$t->wait_until(sub { -s "$dir/arch/pty.db" }, 10);
$t->stop();
chmod(0444, "$dir/arch/pty.db");
$t->run();

# sessions until each worker owns a ticker (frames all the time: both
# workers try the file and fail) and an idle cat
my (%ticker, %cat);
for (1 .. 200) {
    last if keys %ticker == 2 && keys %cat == 2;
    my ($s, $pid) = start_ticker($t);
    if ($ticker{$pid}) {
        api_call($port, '/pty/kill', { id => $s->{id} });
        my ($st, $c, $body, $h) = api_call($port, '/pty/start',
            { command => 'exec cat', wait_ms => 0 });
        $cat{$h->{'x-pty-worker'}} //= $c if $st == 200;
        next;
    }
    $ticker{$pid} = $s;
}
is(scalar(keys %ticker) . ' ' . scalar(keys %cat), '2 2',
    'each worker owns a ticker and a cat');
ok($t->wait_for_log(qr/cannot be written: .*readonly/, 10),
    'the fault is logged');

# each ticker goes on past the log line: its worker has tried meanwhile
for my $s (values %ticker) {
    my ($st, $j) = api_call($port, '/pty/write', { id => $s->{id},
        input => '', wait_for_regex => 'tick \\d+\\n', wait_ms => 5000 });
    my ($n) = ($j->{output} // '') =~ /.*tick (\d+)/s;
    ($st, $j) = api_call($port, '/pty/write', { id => $s->{id},
        input => '', wait_for_regex => 'tick ' . (($n // 0) + 30) . '\\b',
        wait_ms => 10000 });
    ok(defined $n && $st == 200 && $j->{matched}, "ticker $s->{id} ran on")
        or diag("$st " . substr(JSON::PP->new->canonical
            ->encode($j // {}), 0, 600));
}

# the tickers end while the file is still read-only: at the retry after
# the fault, one worker stores everything and the other finds nothing
api_call($port, '/pty/kill', { id => $_->{id} }) for values %ticker;
chmod(0644, "$dir/arch/pty.db");
ok($t->wait_for_log(qr/is written again/, 40), 'writable again');

sub last_stored {
    my ($s) = @_;
    my $py = 'import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); '
        . 'r = c.execute("SELECT last_seq FROM sessions WHERE id = ?", '
        . '(sys.argv[2],)).fetchone(); print(r[0] if r else 0)';
    my $n = `python3 -c '$py' $dir/arch/pty.db $s->{session_id}`;
    chomp $n;
    return $n || 0;
}

# a cat has said nothing yet (no frame to store); only this worker's
# session has new frames now: only this worker is told to store them
for my $pid (sort keys %cat) {
    my $s = $cat{$pid};
    my $before = last_stored($s);
    my ($st, $j) = api_call($port, '/pty/write', { id => $s->{id},
        input => "after\n", wait_for => "after",
        wait_ms => 5000 });
    # within a few batches: the fault is over for every worker once one
    # has written, not after each one's own backoff (up to 10 s)
    $t->wait_until(sub { last_stored($s) > $before }, 3);
    ok($j->{matched} && last_stored($s) > $before,
        'a session of each worker is stored after the fault')
        or diag("stored up to $before, then " . last_stored($s));
}

$t->stop();
