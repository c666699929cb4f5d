#!/usr/bin/perl

# pty_redact's list of which WebSocket clients are shown masked output,
# and the pty:reveal scope: with "observers replay" the controller sees
# a secret live while observers and replay see the mask, and so does the
# agent API (always masked: its reader feeds A2A tasks, which are stored
# and sent to every task follower); a principal holding pty:reveal sees
# it live and in replay from the ring even where pty_redact is "on", one
# without it sees the mask; Keyframes stay masked for all.  The ledger of what was
# masked is bounded: its oldest spans go back to the mask.  A bad list
# is refused by nginx -t.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Test::More;
use MIME::Base64 qw(decode_base64);
use Test::Nginx;
use Test::Nginx::Pty;
use Test::Nginx::PtyAPI qw(api_call);
use Test::Nginx::PtyWS qw(session_frame_kind decode_output);
use Test::Nginx::PtyA2A qw(send_message task_output);
use JSON::PP ();

my $key = 'AKIAIOSFODNN7EXAMPLE';

my $t = pty_nginx(
    extra_loc => 'pty_redact observers replay;',
    extra_server => <<'SERVER');
        location /masked/ {
            pty_api;
            pty_redact on;
            # Keyframes of the session's own in what a late joiner replays
            pty_keyframe_interval_frames 1;
        }

        location /admin/agents/ {
            pty_attach;
            pty_auth on;
            pty_principal alice;
            pty_scopes "pty:admin pty:reveal";
        }

        location /plain/agents/ {
            pty_attach;
            pty_auth on;
            pty_principal bob;
            pty_scopes pty:admin;
        }
SERVER

$t->plan(26)->run();

my $port = $t->port(8080);

# the key goes out once a line comes in; the command line does not hold it
$t->write_file('show.sh', "read x\nprintf 'key %s\\n' '$key'\n"
    . "echo after-secret\nexec cat\n");
my $show = 'bash ' . $t->testdir . '/show.sh';

sub via {
    my ($s, $prefix) = @_;
    return { %$s, attach_path => $prefix . $s->{attach_path} };
}

sub keyframe_of {
    my $kf = (grep { (session_frame_kind($_) // '') eq 'Keyframe' } @_)[0];
    return $kf ? decode_base64($kf->{payload}{snapshot}) : '';
}

sub replayed {
    my ($t, $s) = @_;
    my ($ws, undef, @flush) = attach_join($t, $s, role => 'observer',
        replay_from => 0);
    my $out = join '', map { decode_output($_) } @flush;
    return ($out, keyframe_of(@flush), $ws);
}

# --- "observers replay": the controller and the API see it raw ---

my $s = start_session($t, $show);
my ($c) = attach_join($t, $s);
my ($o) = attach_join($t, $s, role => 'observer');
send_input($c, "go\n");

my $live_c = read_output($c, qr/after-secret/);
my $live_o = read_output($o, qr/after-secret/);
like($live_c, qr/key \Q$key\E/, 'the controller sees the secret');
like($live_o, qr/key \[REDACTED\]\*{10}/, 'an observer sees the mask');
unlike($live_o, qr/\Q$key\E/, 'and not the secret');

my ($out, $kf) = replayed($t, $s);
like($out, qr/after-secret/, 'a late joiner replays it all');
unlike($out, qr/\Q$key\E/, 'replay shows the mask');
unlike($kf, qr/\Q$key\E/, 'so does its Keyframe');

($out, $kf) = replayed($t, via($s, '/admin'));
like($out, qr/key \Q$key\E/, 'pty:reveal replays the secret');
unlike($kf, qr/\Q$key\E/, 'its Keyframe is masked still');

my ($st, $j) = api_call($port, '/pty/write', { id => $s->{id},
    input => '', wait_for => 'after-secret', wait_ms => 5000 });
like($j->{output} // '', qr/key \[REDACTED\]/,
    'the agent API is always masked') or diag explain $j;
unlike($j->{output} // '', qr/\Q$key\E/, 'its text holds no secret');

# A2A tasks read the agent API's text, and their updates are frames:
# stored, and sent to every task follower.  The controller that sent the
# message sees the secret live, its task does not.
my $cat = start_session($t, 'cat');
my ($cc) = attach_join($t, $cat);
my $r = send_message($cc, "key $key", submit => 1,
    wait_for => 'key [REDACTED]', timeout => 10);
my $task = $r->{payload}{task} // {};
like(task_output($task), qr/key \[REDACTED\]/, 'an A2A task shows the mask')
    or diag explain $r;
unlike(JSON::PP->new->canonical->encode($task), qr/\Q$key\E/,
    'nowhere in the task');

# --- "on": only pty:reveal sees it ---

($st, $j) = api_call($port, '/masked/start',
    { command => $show, wait_ms => 0 });
is($st, 200, 'a session started where pty_redact is on');
my $m = $j;

($c) = attach_join($t, $m);
my ($alice) = attach_join($t, via($m, '/admin'), role => 'observer');
my ($bob) = attach_join($t, via($m, '/plain'), role => 'observer');
send_input($c, "go\n");

$live_c = read_output($c, qr/after-secret/);
my $live_a = read_output($alice, qr/after-secret/);
my $live_b = read_output($bob, qr/after-secret/);
unlike($live_c, qr/\Q$key\E/, 'the controller sees the mask');
like($live_c, qr/key \[REDACTED\]/, 'where the secret was');
like($live_a, qr/key \Q$key\E/, 'pty:reveal sees the secret live');
unlike($live_b, qr/\Q$key\E/, 'pty:admin alone does not');

($st, $j) = api_call($port, '/pty/write', { id => $m->{id},
    input => '', wait_for => 'after-secret', wait_ms => 5000 });
like($j->{output} // '', qr/key \[REDACTED\]/, 'the agent API sees the mask')
    or diag explain $j;
unlike($j->{output} // '', qr/\Q$key\E/, 'and not the secret');

# --- the ledger is bounded: the oldest spans go back to the mask ---

$t->write_file('many.sh', "read x\n"
    . "for i in \$(seq 100 249); do echo \"k AKIAMANYKEYS00000\$i\"; done\n"
    . "echo after-many\nexec cat\n");
($st, $j) = api_call($port, '/masked/start',
    { command => 'bash ' . $t->testdir . '/many.sh', wait_ms => 0 });
my $many = $j;
($c) = attach_join($t, $many);
send_input($c, "go\n");
read_output($c, qr/after-many/);
($out) = replayed($t, via($many, '/admin'));
like($out, qr/k AKIAMANYKEYS00000249/, 'the last secrets are kept');
like($out, qr/k \[REDACTED\]\*{10}\r?\n/,
    'the first ones, pushed out of the ledger, stay masked');
unlike($out, qr/AKIAMANYKEYS00000100/, 'not shown');

# --- nginx -t ---

my $conf = $t->read_file('nginx.conf');
sub check {
    my ($from, $to) = @_;
    (my $c = $conf) =~ s/\Q$from\E/$to/;
    $t->write_file('check.conf', $c);
    return ($t->test_config('check.conf'))[1];
}
like(check('pty_redact observers replay;', 'pty_redact observers everyone;'),
    qr/invalid value "everyone"/,
    'nginx -t names the bad word');
like(check('pty_redact observers replay;', 'pty_redact off live;'),
    qr/"pty_redact off" takes no other value/, '"off" stands alone');
like(check('pty_redact observers replay;', 'pty_redact live api;'),
    qr/invalid value "api"/, 'the agent API cannot be shown secrets');

# the ledger is in the zone: it goes with the session
($st) = api_call($port, '/pty/kill', { id => $s->{id} });
is($st, 200, 'killed');
