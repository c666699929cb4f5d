#!/usr/bin/perl

# Input sent right after a start that did not wait, while the session
# still waits for its keeper to be forked (the spare went to the session
# before): it waits for the terminal, in order, as it does once the keeper
# is there. It was refused with 409 not_running, which a busy machine made
# happen by itself (t/93, in a loop beside other work); stopping the
# worker's keeper forker makes the same order every time.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use JSON::PP ();
use Test::More;
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::Procs qw(wait_forker wait_spare);
use Test::Nginx::PtyAPI qw(api_call);
use Test::Nginx::PtyExt;

# the worker's own keeper forker holds the spare (t/19)
my $t = pty_nginx(workers => 1, extra_http => 'pty_user off;');
$t->skip_all_if(Test::Nginx::valgrind(), 'process titles under valgrind');
$t->plan(10)->run();

my $port = $t->port(8080);
my ($worker) = $t->worker_pids;
my $forker = wait_forker($t, $worker);
my $spare = $forker ? wait_spare($t, $forker) : undef;
ok($spare, 'the worker has a spare keeper');

sub start {
    my (undef, $s) = api_call($port, '/pty/start',
        { command => 'exec cat', wait_ms => 0 });
    return $s;
}

sub write_input {
    my ($s, $input, %opts) = @_;
    my ($st, $j) = api_call($port, '/pty/write',
        { id => $s->{id}, input => $input, %opts });
    diag(($st // 'no answer') . ' '
        . substr(JSON::PP->new->canonical->encode($j // {}), 0, 300))
        unless defined $st && $st == 200;
    return ($st, $j);
}

# no keeper can be forked: the first start takes the spare, the second
# waits for the forker
kill 'STOP', $forker;
my $first = start();
my $second = start();
ok($first && $second, 'both starts are answered with the forker stopped');

my ($st) = write_input($second, "early\n", wait_ms => 0);
is($st, 200, 'input before the keeper is forked is taken');
($st) = write_input($second, "later\n", wait_ms => 0);
is($st, 200, 'and more after it');

# a controller joins the session on its way and resizes it: the size is
# the terminal's once it is there
my (undef, $third) = api_call($port, '/pty/start',
    { command => 'read x; stty size', wait_ms => 0 });
my $ws = attach($t, $third);
$ws->recv_json(5);
join_flush($ws, role => 'controller');
$ws->send_op('pty.session_resize', { cols => 77, rows => 21 });
my $r = wait_kind($ws, 'Resize', 5);
is($r && "$r->{payload}{cols}x$r->{payload}{rows}", '77x21',
    'a resize before the keeper is forked is taken');
send_input($ws, "go\r");

kill 'CONT', $forker;

sub screen_shows {
    my ($s, $re) = @_;
    return $t->wait_until(sub {
        my (undef, $j) = api_call($port, '/pty/read', { id => $s->{id} });
        $j && ($j->{screen} // '') =~ $re ? $j->{screen} : undef;
    }, 10);
}

my $screen = screen_shows($second, qr/later\n.*later/s);
ok($screen, 'the program reads it once its terminal is there');
# both lines echoed as the terminal takes them, then cat's copy of each
# (or each echoed and copied in turn): in order either way
like($screen // '',
    qr/\A(?:early\nlater\nearly\nlater|early\nearly\nlater\nlater)\s*\z/,
    'in order, echoed');

like(read_output($ws, qr/21 77\r\n/), qr/21 77/,
    'the program sees that size');
ok(!grep({ ($_->{op} // '') eq 'Error' } $ws->json_seen), 'no Error frame');

write_input($first, "spare\n", wait_ms => 0);
ok(screen_shows($first, qr/spare\nspare/), 'the session on the spare works');

$t->stop();
