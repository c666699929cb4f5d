#!/usr/bin/perl

# Output and resizes that libvterm 0.1.4 alone cannot take, through a real
# session: a REP that would loop forever in the worker, a shrink that
# would leave the cursor above the screen, and one below a scroll region
# (docs/SNAPSHOT.md, "Limitations").  The worker serves on, and Keyframes
# hold only the screen.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use MIME::Base64 qw(decode_base64);
use Test::More;
use Time::HiRes qw(time);
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::PtyAPI qw(api_call);
use Test::Nginx::PtyExt;

my $t = pty_nginx(workers => 1);
$t->plan(8)->run();

my $port = $t->port(8080);

# REP on the double width row of a 1-column screen
my ($st, $r) = api_call($port, '/pty/start', { cols => 1, rows => 1,
    command => q{printf '\033#4c\033[m\314\201\033[b'; echo rep-$((6*7)); }
        . 'exec sleep 100', wait_for => 'rep-42', wait_ms => 5000 });
ok($st == 200 && $r->{matched}, 'a 1-column session prints a REP');
my $t0 = time;
($st, $r) = api_call($port, '/pty/read', { id => $r->{id} }, timeout => 5);
ok(defined $st && $st == 200 && time - $t0 < 3,
    'its screen model answers: the worker did not hang');

# a shrink with the cursor above rows that are not blank (once the
# screen holds them: a resize before the program's output is another case)
my $s = start_session($t, q{printf '\033[6;1Hbottom\033[H'; read x; }
    . q{printf 'top'; exec sleep 100}, cols => 20, rows => 6,
    wait_for => 'bottom', wait_ms => 5000);
my $c = attach($t, $s);
$c->recv_json(5);
join_flush($c, role => 'controller');
$c->send_op('pty.session_resize', { cols => 20, rows => 2 });
wait_kind($c, 'Resize', 5);
send_input($c, "\r");
read_output($c, qr/top/);
my $snap = late_keyframe($s);
ok(defined $snap && $snap !~ /\e\[-/, 'the Keyframe has no cursor above '
    . 'the screen');
# as in xterm.js: the rows below the cursor went first, "bottom" with
# them; the echoed return takes the cursor one down
ok(defined $snap && $snap =~ /top/ && $snap !~ /bottom/, 'what follows the '
    . 'shrink is written on the screen, the rows below the cursor dropped');

# a shrink below the scroll region's top, then scrolling
$s = start_session($t, q{printf '\033[6;9r\033[9;1Hx'; read x; }
    . q{printf '\033[S\033[T\033[L\033[Ma\nb\nc\nd\ne\033M\033M'; }
    . 'echo; echo scrolled-$((6*7)); exec sleep 100', cols => 20, rows => 10);
$c = attach($t, $s);
$c->recv_json(5);
join_flush($c, role => 'controller');
$c->send_op('pty.session_resize', { cols => 20, rows => 4 });
wait_kind($c, 'Resize', 5);
send_input($c, "\r");
ok(read_output($c, qr/scrolled-42/), 'the program scrolls after the shrink');
$snap = late_keyframe($s);
ok(defined $snap && $snap !~ /\e\[6;/, 'the region off the screen is reset');
like($snap // '', qr/scrolled-42/, 'and the Keyframe has the screen');

($st, $r) = api_call($port, '/pty/list', {});
is($st, 200, 'the worker serves on');

# the snapshot of a joiner that comes now
sub late_keyframe {
    my ($s) = @_;
    my $w = attach($t, $s);
    $w->recv_json(5);
    my @f = join_flush($w, role => 'observer');
    return @f ? decode_base64($f[-1]{payload}{snapshot} // '') : undef;
}
