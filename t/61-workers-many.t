#!/usr/bin/perl

# More workers than one machine word has bits: the worker table and the
# sessions' worker masks span several words.  72 workers; a client on
# every one of them watches one session, and each sees what the program
# prints after the controller's input, whichever worker owns the terminal
# and whichever slot of the table a client's worker took.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Test::More;
use Test::Nginx;
use Test::Nginx::Pty;

my $workers = 72;
my $t = pty_nginx(workers => $workers, reuseport => 1,
    extra_loc => 'pty_max_observers 128;');
$t->run();

is(scalar $t->worker_pids, $workers, "$workers workers");

my $s = start_session($t, 'stty -echo; while read l; do echo "got $l"; done');

# one client per worker: reuseport picks the worker, so try until all came
my %by;
for (1 .. 3000) {
    last if keys %by == $workers;
    my $ws = attach($t, $s);
    my $pid = worker_of($ws);
    if ($by{$pid}) {
        $ws->close;
        next;
    }
    $ws->recv_json(5);
    $by{$pid} = $ws;
}
is(scalar keys %by, $workers, 'a client on every worker');

my ($ctl, @obs) = map { $by{$_} } sort keys %by;
join_session($ctl, role => 'controller');
join_session($_, role => 'observer') for @obs;

for my $line (qw(one two)) {
    send_input($ctl, "$line\r");
    my $missing = 0;
    for my $ws ($ctl, @obs) {
        $missing++ unless read_output($ws, qr/got $line\r\n/, 10)
            =~ /got $line/;
    }
    is($missing, 0, "every worker's client got \"got $line\"");
}

unlike($t->read_file('error.log'), qr/more than \d+ workers/,
    'every worker took a slot of the table');

$t->stop();
done_testing();
