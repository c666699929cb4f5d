#!/usr/bin/perl

# read: settle_ms for a TUI that redraws, the cursor, highlighted cells;
# start's screen; list's filters; the facts error answers carry; the
# screen after a controller's resize, reflowed as xterm.js reflows it.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Time::HiRes qw(time);
use Test::More;
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::PtyAgent;

my $t = pty_nginx(extra_loc => 'pty_closed_linger 1s;');
$t->plan(30)->run();

# --- settle_ms: top, read once it is done redrawing -------------------------

my $s = agent_start($t, 'top -d 2', cols => 100, rows => 30, wait_ms => 0);
my $t0 = time;
my $r = agent($t, 'read', { id => $s->{id}, settle_ms => 500,
    wait_ms => 8000 });
my $took = time - $t0;
ok(!$r->{timed_out}, sprintf('settled (%.2fs)', $took));
ok($took >= 0.5, 'not before settle_ms');
like($r->{screen}, qr/^top - .*\nTasks:.*\n.*PID USER/s,
    'a whole screen: the header and the process list');
like($r->{screen}, qr/PID USER.*\n\s*\d+ /s, 'with a process under it');
agent($t, 'write', { id => $s->{id}, input => 'q', wait_ms => 2000 });

# --- the cursor: vi ----------------------------------------------------------

$s = agent_start($t, 'vi', cols => 80, rows => 24, wait_ms => 0);
agent($t, 'read', { id => $s->{id}, wait_for => '~' });
agent($t, 'write', { id => $s->{id}, input => 'ihello\rworld\e',
    wait_ms => 0 });
$r = agent($t, 'read', { id => $s->{id}, wait_for => 'world',
    settle_ms => 300 });
is_deeply([ @{$r->{cursor}}{qw(row col)} ], [ 1, 4 ],
    'vi: the cursor on the "d" of "world" after Escape');
ok($r->{cursor}{visible}, 'and visible');
agent($t, 'write', { id => $s->{id}, input => 'k0', wait_ms => 0 });
$r = agent($t, 'read', { id => $s->{id}, settle_ms => 300 });
is_deeply([ @{$r->{cursor}}{qw(row col)} ], [ 0, 0 ],
    'k0: the first line, first column');
agent($t, 'write', { id => $s->{id}, input => '\e:q!', submit => 1,
    wait_ms => 2000 });

# --- highlighted cells: a menu's selected entry ------------------------------

$s = agent_start($t, 'printf "  one\n\e[7m> two  \e[0m\n  \e[44mthree\e[0m\n";'
    . ' sleep 30', wait_ms => 2000);
like($s->{screen}, qr/^  one\n> two\n  three$/, 'start: the screen');
is_deeply([ @{$s->{cursor}}{qw(row col)} ], [ 3, 0 ],
    'and the cursor');
$r = agent($t, 'read', { id => $s->{id}, highlights => 1 });
is_deeply($r->{highlights}, [
    { row => 1, col => 0, cols => 7, text => '> two  ' },
    { row => 2, col => 2, cols => 5, text => 'three' } ],
    'read: the reverse-video entry and the coloured one');
$r = agent($t, 'read', { id => $s->{id} });
ok(!exists $r->{highlights}, 'not asked for: not there');
agent($t, 'kill', { id => $s->{id} });

# --- list: filters, a small answer -----------------------------------------

my @ids = map { agent_start($t, "sleep 3$_", wait_ms => 0)->{id} } 1 .. 3;
$r = agent($t, 'list', { command => 'sleep 3', running => 1 });
is($r->{total}, 3, 'list: by command, running');
is($r->{sessions}[0]{id}, $ids[2], 'newest first');
ok(!exists $r->{sessions}[0]{attach_path}, 'small by default');
$r = agent($t, 'list', { command => 'sleep 3', limit => 1, full => 1 });
ok(@{$r->{sessions}} == 1 && $r->{more}, 'limit 1: one, and more');
ok($r->{sessions}[0]{attach_path}, 'full: the attach path');
agent($t, 'kill', { id => $_ }) for @ids;

# --- errors carry what an agent needs to recover -----------------------------

$s = agent_start($t, 'cat', wait_ms => 0);
$r = agent($t, 'write', { id => $s->{id}, offset => 12345 });
ok($r->{error}{code} eq 'cursor_mismatch' && defined $r->{error}{offset},
    'cursor_mismatch: the current offset');
$r = agent($t, 'write', { id => $s->{id}, wait_ms => 99999999 });
is($r->{error}{limit_ms}, 30000, 'wait_too_long: the limit');

$s = agent_start($t, 'exit 3', wait_ms => 2000);
$t->wait_until(sub {
    agent($t, 'write', { id => $s->{id} })->{_status} == 404 }, 20);
$r = agent($t, 'write', { id => $s->{id} });
is($r->{error}{code}, 'unknown_session', 'a forgotten session: 404');
ok($r->{error}{existed}, 'which existed');
like($r->{error}{ended_at} // '', qr/^\d{4}-\d\d-\d\dT/, 'ended then');
is($r->{error}{exit_code}, 3, 'with its exit code');
$r = agent($t, 'write', { id => 'pty-999999' });
ok($r->{error}{code} eq 'unknown_session' && !$r->{error}{existed},
    'one that never was: existed false');

# --- the screen after a resize: wrapped lines joined and wrapped again --------

$s = start_session($t, q{printf 'x%.0s' $(seq 1 30); printf '\n$ '; }
    . 'exec sleep 100', cols => 20, rows => 5);
$t->wait_until(sub { agent($t, 'read', { id => $s->{id} })->{screen}
    =~ /^\$/m }, 5);
my ($ws) = attach_join($t, $s);

$ws->send_op('pty.session_resize', { cols => 40, rows => 5 });
wait_kind($ws, 'Resize', 5);
$r = agent($t, 'read', { id => $s->{id} });
like($r->{screen}, qr/^x{30}\n\$/, 'wider: the wrapped line is one again');
is($r->{cursor}{row}, 1, 'and the cursor moved up with it');

$ws->send_op('pty.session_resize', { cols => 12, rows => 5 });
wait_kind($ws, 'Resize', 5);
$r = agent($t, 'read', { id => $s->{id} });
like($r->{screen}, qr/^x{12}\nx{12}\nx{6}\n\$/,
    'narrower: wrapped again at the new width');
$ws->close;

# --- wide glyphs cut by erases and ICH, as a web IDE's xterm.js shows them ---

$s = start_session($t, q{printf 'ab\344\270\255cd\033[4G\033[K\n'; }
    . q{printf 'ab\344\270\255cd\033[4G\033[X\n'; }
    . q{printf 'ab\344\270\255cd\033[4G\033[@\n'; printf 'done'; }
    . 'exec sleep 100', cols => 20, rows => 5);
$t->wait_until(sub { agent($t, 'read', { id => $s->{id} })->{screen}
    =~ /done/ }, 5);
$r = agent($t, 'read', { id => $s->{id} });
like($r->{screen}, qr/^ab\nab  cd\nab   cd\ndone/,
    'EL, ECH and ICH on a right half blank its glyph, as xterm.js');

# autowrap off: a glyph after a wide glyph at the edge goes to the last
# column and cuts it, which keeps its width (libvterm wrote over its left)
$s = start_session($t, q{printf '\033[?7lxxxxxxxx\344\270\255y\033[?7h\n'; }
    . q{printf 'done'; exec sleep 100}, cols => 10, rows => 5);
$t->wait_until(sub { agent($t, 'read', { id => $s->{id} })->{screen}
    =~ /done/ }, 5);
$r = agent($t, 'read', { id => $s->{id} });
like($r->{screen}, qr/^xxxxxxxx\x{4e2d}y\n/,
    'autowrap off: the glyph after a wide glyph at the edge cuts it')
    or diag(explain [ $r->{screen} ]);

# a narrowing with the cursor above the text: xterm.js wraps the lines
# its reflow popped, losing only their first rows; the agent reads that
$s = start_session($t, q{printf '\033[12d'; printf 'x%.0s' $(seq 1 60); }
    . q{printf '\033[10;37Habcd\033[3;39H'; exec sleep 100},
    cols => 62, rows => 21);
$t->wait_until(sub { agent($t, 'read', { id => $s->{id} })->{screen}
    =~ /abcd/ }, 5);
($ws) = attach_join($t, $s);
$ws->send_op('pty.session_resize', { cols => 6, rows => 17 });
wait_kind($ws, 'Resize', 5);
$r = agent($t, 'read', { id => $s->{id} });
like($r->{screen}, qr/^\n{7}abcd(?:\nx{6}){9}\n*$/,
    'narrower, the cursor above the text: the popped lines wrapped')
    or diag(explain [ $r->{screen} ]);
$ws->close;

# a flood of combining marks on one glyph: five kept, the worker answers
$s = start_session($t, q{printf a; head -c 4000000 /dev/zero | }
    . q{tr '\0' x | sed 's/x/\xcc\x81/g'; printf ' done'; exec sleep 100},
    cols => 20, rows => 5);
$t->wait_until(sub { agent($t, 'read', { id => $s->{id} })->{screen}
    =~ /done/ }, 20);
$r = agent($t, 'read', { id => $s->{id} });
like($r->{screen}, qr/^a(?:\x{301}){5} done/,
    '4 MB of marks on one glyph: five kept, the worker served on')
    or diag(explain [ substr($r->{screen} // '', 0, 40) ]);
