#!/usr/bin/perl

# What write's wait_for means: output that answers this call's input,
# not text from before it and not the terminal's echo of the input.
# wait_for_regex, a wait_for that can never match, unknown members, and
# paging that answers at once while "more" is true.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Time::HiRes qw(time);
use Test::More;
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::PtyAgent;

my $t = pty_nginx(extra_loc => 'pty_input_max 1m; client_body_buffer_size 2m;');
$t->plan(29)->run();

# --- node's REPL: a stale prompt, and "> " inside the echo ------------------

SKIP: {
    skip 'node is not installed', 3 unless `node --version 2>/dev/null`;

    # node prints its banner, "> ", a history warning and "> " again; start
    # answers at the first quiet moment, maybe between the two prompts
    my $s = agent_start($t, 'node', wait_for => '> ');
    my $r = agent($t, 'write', { id => $s->{id},
        input => "[1,2,3].map(x => x * 2).join('-')", submit => 1,
        wait_for => '> ' });
    ok($r->{matched}, 'node: wait_for "> " matched');
    like($r->{output}, qr/'2-4-6'\n> $/,
        'node: the answer is in, after the echo with its "x => "');
    $r = agent($t, 'write', { id => $s->{id}, input => '6*7', submit => 1,
        wait_for => '> ' });
    like($r->{output}, qr/^6\*7\n42\n> $/, 'node: the next one as well');
    agent($t, 'kill', { id => $s->{id} });
}

# --- the echo and old text never satisfy the wait ---------------------------

my $sh = 'PS1="ready\$ " exec bash --norc --noprofile -i';
my $s = agent_start($t, $sh, wait_for => 'ready$ ');
my $id = $s->{id};

# the unread "MARK" from before the call stays in the answer, unmatched
# (printed a moment after the call that types it has answered: on a
# loaded machine bash could print it before that answer, which took it)
agent($t, 'write', { id => $id, input => 'sleep 0.5; echo MARK', submit => 1,
    wait_ms => 0 });
$t->wait_until(sub { agent($t, 'read', { id => $id })->{screen}
    =~ /^MARK$/m }, 5);
my $t0 = time;
my $r = agent($t, 'write', { id => $id, input => 'sleep 1; echo done',
    submit => 1, wait_for => 'MARK' , wait_ms => 1500 });
ok(!$r->{matched} && $r->{timed_out}, 'text from before the input: no match');
like($r->{output}, qr/MARK\nready\$ sleep 1; echo done\n/,
    'and it is still in the answer');
$r = agent($t, 'write', { id => $id, wait_for => 'ready$ ' });

# wait_for that is only in the echo of the input times out
$r = agent($t, 'write', { id => $id, input => 'true ECHO-ONLY', submit => 1,
    wait_for => 'ECHO-ONLY', wait_ms => 800 });
ok(!$r->{matched} && $r->{timed_out}, 'wait_for in the echo: no match');
like($r->{output}, qr/^true ECHO-ONLY\nready\$ $/, 'the echo is returned');

# the same text in the program's output does match
$r = agent($t, 'write', { id => $id, input => 'echo ECHO-ONLY', submit => 1,
    wait_for => 'ECHO-ONLY' });
ok($r->{matched}, 'the same string in the output matches');
like($r->{output}, qr/^echo ECHO-ONLY\nECHO-ONLY\n/, 'after the echo');
agent($t, 'write', { id => $id, wait_for => 'ready$ ' });

# a line edited with DEL and the arrows is still known as the echo
$r = agent($t, 'write', { id => $id,
    input => 'echo ab\x7fc\e[DX', submit => 1, wait_for => 'aXc' });
ok($r->{matched}, 'an edited line: its echo known, the output matched');
like($r->{output}, qr/^echo aXc\naXc\n/, 'edited line and output');
agent($t, 'write', { id => $id, wait_for => 'ready$ ' });

# a poll (no input) in a session never typed into: all unread output counts
my $q = agent_start($t, 'echo READY-X; sleep 30', wait_ms => 0);
$t->wait_until(sub { agent($t, 'read', { id => $q->{id} })->{screen}
    =~ /READY-X/ }, 5);
$r = agent($t, 'write', { id => $q->{id}, wait_for => 'READY-X',
    wait_ms => 1000 });
ok($r->{matched}, 'a poll matches output already there when nothing was typed');
agent($t, 'kill', { id => $q->{id} });

# --- wait_for_regex ---------------------------------------------------------

$r = agent($t, 'write', { id => $id, input => 'echo -n "Password: "; read x',
    submit => 1, wait_for_regex => '(\$ |Password: )$' });
ok($r->{matched}, 'regex: one of two outcomes');
like($r->{output}, qr/Password: $/, 'the prompt at the end of the text');
$r = agent($t, 'write', { id => $id, input => 'x', submit => 1,
    wait_for_regex => '^ready\$ $' });
ok($r->{matched}, 'regex: ^ anchors where the text after the echo starts');
$r = agent($t, 'write', { id => $id, input => 'echo ok', submit => 1,
    wait_for_regex => 'ok\nready\$ $' });
ok($r->{matched}, 'regex: the prompt anchored at the end');

$r = agent($t, 'write', { id => $id, wait_for_regex => '(' });
is($r->{error}{code}, 'bad_regex', 'a bad regex: 400 bad_regex');

# --- bad waits are refused at once ------------------------------------------

$t0 = time;
$r = agent($t, 'write', { id => $id, wait_for => "ready\$ \r" });
ok($r->{_status} == 400 && $r->{error}{code} eq 'never_matches'
    && time - $t0 < 2, 'wait_for with a CR: 400 never_matches at once');
like($r->{error}{message}, qr/carriage return/, 'saying why');
$r = agent($t, 'write', { id => $id, wait_for => "a \nb" });
is($r->{error}{code}, 'never_matches', 'a blank before \n: never_matches');

# --- unknown members ---------------------------------------------------------

$r = agent($t, 'write', { id => $id, waitfor => 'zzz' });
is($r->{_status}, 400, 'a typo: 400');
like($r->{error}{message}, qr/unknown member "waitfor"/,
    'naming the member');
is($r->{error}{member}, 'waitfor', 'and in its own field');

# --- paging: full pages, no wait while "more" ------------------------------

my $p = agent_start($t, 'seq 1 40000; echo END; sleep 30', wait_ms => 0);
$t->wait_until(sub { agent($t, 'read', { id => $p->{id} })->{screen}
    =~ /^END$/m }, 10);
my @sizes;
my $slow = 0;
my $more = 1;
while ($more) {
    $t0 = time;
    $r = agent($t, 'write', { id => $p->{id} });
    last unless $r->{_status} == 200;
    $slow++ if time - $t0 > 0.5;
    push @sizes, length $r->{output};
    $more = $r->{more};
}
pop @sizes;
ok(@sizes >= 3 && !grep({ $_ != 65536 } @sizes),
    'every page but the last is full (' . join(',', @sizes) . ')');
is($slow, 0, 'no wait on a call made while "more" was true');

# --- a regex that backtracks without end does not stall the worker ---------

my $bt = agent_start($t, q{sh -c 'printf "%s" aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa; }
    . q{sleep 30'}, wait_for => 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa');
my $best = 9;
for (1 .. 3) {
    $t0 = time;
    $r = agent($t, 'read', { id => $bt->{id}, wait_for_regex => '(a+)+[^a ]',
        wait_ms => 0 });
    $best = time - $t0 if time - $t0 < $best;
}
ok(!$r->{matched}, 'an exponential regex: no match');
# PCRE2's own limit let one look take a third of a second
ok($best < 0.1, sprintf('and one look costs little (%.3f s)', $best));
agent($t, 'kill', { id => $bt->{id} });

# --- the echo of a long line edited in its middle is not replayed at n^2 ----

# (raw before the write: a canonical line holds only 4 kB, and the rest
# would queue; a session each try: what one has not read yet counts
# against the 1 MiB a session queues)
$best = 99;
my $ok = 0;
for (1 .. 3) {
    my $ed = agent_start($t,
        q{sh -c 'stty raw -echo; echo RE""ADY; cat > /dev/null'},
        wait_for => 'READY', wait_ms => 10000);
    $t0 = time;
    $r = agent($t, 'write', { id => $ed->{id}, input => ('a' x 250000)
        . '\x01' . ('a' x 250000), wait_for => 'zz', wait_ms => 0 });
    $best = time - $t0 if time - $t0 < $best;
    $ok++ if $r->{_status} == 200;
    agent($t, 'kill', { id => $ed->{id} });
}
is($ok, 3, 'a 500 kB line typed half at its start, three times');
# replayed byte by byte it took 3 s of the worker
ok($best < 1, sprintf('answered at once (%.3f s)', $best));
